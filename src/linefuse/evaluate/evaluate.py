"""evaluate: PSNR/SSIM per blur domain and level, against the input and classical baselines.

On the test split of every level (whole images unless shards.test_crop crops them): the blurred
input, Wiener and Richardson-Lucy (with the kernel the degradation used), unsharp masking, and the
final curriculum adapter at `eval.steps` DDIM steps; with per-domain adapters (train_domains), also
each domain's own adapter and their weighted merge. Each cell (domain x level) gets its sample
count and a bootstrap interval of the model's mean gain over the input. A centred tile of a few
images per cell is also restored at every step count of `eval.sweep`, timed per megapixel.
Charts also get LineFuse's peak-position and integral errors, and the first `eval.ocr.max_images`
of each cell the legibility of their tick labels: Tesseract's character error rate on the input,
the model and the sharp chart (evaluate/ocr.py), pooled per level (ocr_cer) and per cell (the
chart block's ocr_cer). Writes metrics/eval.json (keys such as psnr.gaussian.hard.model_s4 and
psnr_gain_s4.gaussian.hard.low), plots/*.csv and reports/samples.png.
"""

from __future__ import annotations

import csv
import json
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import polars as pl
import torch
from PIL import Image
from tqdm import tqdm

from linefuse import paths
from linefuse.data.readers import LmdbPairs
from linefuse.evaluate import ocr
from linefuse.evaluate.baselines import CLASSICAL, baselines
from linefuse.evaluate.chart_metrics import chart_errors
from linefuse.evaluate.curves import ChartTruth, curve_errors, read_truth, shown_columns
from linefuse.evaluate.intervals import mean_interval, mean_of_means_interval
from linefuse.evaluate.metrics import psnr, ssim
from linefuse.hardware import Choice, cpu_model
from linefuse.params import Params
from linefuse.paths import BY_DOMAIN_CSV, BY_STEPS_CSV, EVAL_JSON, SAMPLES_PNG
from linefuse.serve.restorer import Restorer
from linefuse.stage import atomic_files
from linefuse.train.domains import domain_adapters

log = logging.getLogger("linefuse")
PLOTS = [BY_DOMAIN_CSV, BY_STEPS_CSV]
EVALUATED = ("test", "held_out")  # the splits scored; held_out: chart families never trained on


def _first_per_domain(metas: list[dict], count: int | None) -> list[int]:
    """Positions of the first `count` samples of each domain (all of them when count is None)."""
    taken: dict[str, int] = defaultdict(int)
    chosen = []
    for position, meta in enumerate(metas):
        if count is None or taken[meta["domain"]] < count:
            taken[meta["domain"]] += 1
            chosen.append(position)
    return chosen


def _split_pairs(level: str, split: str, max_samples: int | None) -> list[tuple]:
    """(blurred, sharp, meta) of the level's split, at most max_samples per domain."""
    dataset = LmdbPairs(paths.shards(level), split)
    pairs = [dataset[i] for i in _first_per_domain(dataset.metas, max_samples)]
    dataset.close()
    return pairs


def _mean(values: list[float]) -> float:
    return round(float(np.mean(values)), 4)


def _finite_mean(values: list[float]) -> float | None:
    """The mean of the finite values (a chart whose line could not be read back gives NaN);
    None when there is none."""
    finite = [value for value in values if np.isfinite(value)]
    return _mean(finite) if finite else None


def _rounded(interval: dict) -> dict:
    return {k: v if v is None or isinstance(v, int) else round(v, 4) for k, v in interval.items()}


class _TimedRestorer:
    """A Restorer that adds up, per step count, the seconds it ran and the pixels it restored,
    and moves a progress bar by the images done."""

    def __init__(self, restorer: Restorer, params: Params, progress: tqdm | None = None):
        self.restorer, self.params, self.progress = restorer, params, progress
        self.seconds: dict[int, float] = defaultdict(float)
        self.pixels: dict[int, int] = defaultdict(int)

    def __call__(self, images: list[np.ndarray], steps: int) -> list[np.ndarray]:
        started, restored = time.perf_counter(), []
        batch = self.params.eval.batch_size
        for first in range(0, len(images), batch):
            chunk = images[first : first + batch]
            restored += self.restorer.restore_images(chunk, steps, self.params.eval.seed, batch)
            if self.progress is not None:
                self.progress.update(len(chunk))
        self.seconds[steps] += time.perf_counter() - started
        self.pixels[steps] += sum(image.shape[0] * image.shape[1] for image in images)
        return restored

    def seconds_per_megapixel(self, steps: int) -> float:
        return round(1e6 * self.seconds[steps] / max(self.pixels[steps], 1), 3)


def _nested(depth: int):
    return defaultdict(list) if depth == 1 else defaultdict(lambda: _nested(depth - 1))


@dataclass
class _Scores:
    """Per-image scores of one split: psnr/ssim[domain][level][method], chart[...][figure]."""

    psnr: dict = field(default_factory=lambda: _nested(3))
    ssim: dict = field(default_factory=lambda: _nested(3))
    chart: dict = field(default_factory=lambda: _nested(4))
    showcase: dict = field(default_factory=dict)  # (domain, level) -> (blurred, restored, sharp)
    sharp: dict = field(default_factory=dict)  # image_id -> its sharp image, for the sharp row
    sharp_psnr: list = field(default_factory=list)  # PSNR of the model's output on each of them
    sharp_figures: dict = field(default_factory=dict)  # image_id -> its sharp image's _figures
    sharp_shown: dict = field(default_factory=dict)  # image_id -> where it shows the curve
    # tick labels: ocr[domain][level][method] -> (edits, characters, labels) of each image read
    # (edits None where Tesseract is missing); each sharp image's, read once, by image_id
    ocr: dict = field(default_factory=lambda: _nested(3))
    sharp_ocr: dict = field(default_factory=dict)


def evaluate(params: Params, device: Choice, workers: int = 1) -> dict:
    """Runs the whole evaluation on `device` and writes its outputs; returns metrics/eval.json's
    content: the test split's tables, the sweep, and a `held_out` block with the same tables for
    the held-out chart families when there are any. `workers` processes score the restorations."""
    with _scoring_map(workers) as scoring_map:
        return _evaluate(params, device, scoring_map)


def _evaluate(params: Params, device: Choice, scoring_map: Callable) -> dict:
    final = params.train.order()[-1]
    restorer = Restorer(params, paths.adapter(final), device.value)
    progress = tqdm(desc="evaluate", unit="image", disable=None)
    restore = _TimedRestorer(restorer, params, progress)
    sweep_restore = _TimedRestorer(restorer, params)
    extra = domain_adapters()
    by_domain = {
        domain: Restorer(params, path, device.value) for domain, path in extra["adapters"].items()
    }
    combined = Restorer(params, extra["combined"], device.value) if extra["combined"] else None
    swept = _nested(3)  # as _Scores.psnr, on the sweep's tiles
    truths = _chart_truths(params)
    scored = {split: _Scores() for split in EVALUATED}
    reading = _ocr_ready(params, truths)
    for level in params.degrade.levels:
        for split, scores in scored.items():
            pairs = _split_pairs(level, split, params.eval.max_samples)
            if not pairs:
                if split == "test":
                    log.warning("evaluate: level %s has no test samples; skipped", level)
                continue
            progress.total = (progress.total or 0) + len(pairs)
            progress.set_postfix_str(f"{split}@{level}")
            outputs = {
                f"model_s{params.eval.steps}": restore([p[0] for p in pairs], params.eval.steps)
            }
            outputs |= _adapter_outputs(pairs, by_domain, combined, params.eval.steps, params)
            _score_level(pairs, level, outputs, params, scores, truths, scoring_map, reading)
            for _, sharp, meta in pairs:
                scores.sharp.setdefault(meta["image_id"], sharp)
            if split == "test":
                _sweep_level(pairs, level, sweep_restore, params, swept)
    for scores in scored.values():  # do no harm: the model on inputs that are already sharp
        sharp_images = list(scores.sharp.values())
        progress.total = (progress.total or 0) + len(sharp_images)
        progress.set_postfix_str("sharp")
        restored = restore(sharp_images, params.eval.steps) if sharp_images else []
        scores.sharp_psnr = [
            psnr(out, image, params.eval.metric)
            for out, image in zip(restored, sharp_images, strict=True)
        ]
    progress.close()

    test = scored["test"]
    report = _tables(test, params)
    report["sweep"] = _sweep(swept, sweep_restore, params.eval.sweep.steps)
    if few := _few_step(report["sweep"], params.eval.sweep.steps):
        report["few_step"] = few
    if scored["held_out"].psnr:
        report["held_out"] = _tables(scored["held_out"], params)
    # the timings above are this machine's: name it beside them
    report["machine"] = {
        f"seconds_per_megapixel_s{params.eval.steps}": restore.seconds_per_megapixel(
            params.eval.steps
        ),  # whole images, tiled: what `linefuse restore` costs here
        "device": device.value,
        "device_reason": device.reason,
        "cpu_model": cpu_model(),
    }
    levels = params.degrade.levels
    with atomic_files([*PLOTS, SAMPLES_PNG, EVAL_JSON]) as tmp:
        _write_plots(report, params.eval.sweep.steps, levels, tmp)
        _write_samples(test.showcase, params.degrade.domains, levels, tmp[SAMPLES_PNG])
        tmp[EVAL_JSON].write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return report


def _chart_truths(params: Params) -> dict[str, ChartTruth]:
    """image_id -> the ground truth curve and pixel mapping of each scored chart that has them
    (generate writes a CSV and a sidecar beside each PNG; a user's photos have neither)."""
    index = pl.read_parquet(paths.IMAGES_PARQUET, columns=["id", "path", "split"])
    scored = index.filter(pl.col("split").is_in(EVALUATED))
    root = Path(params.data.source_dir)
    found = {row["id"]: read_truth(root / row["path"]) for row in scored.iter_rows(named=True)}
    return {image_id: truth for image_id, truth in found.items() if truth is not None}


def _ocr_ready(params: Params, truths: dict[str, ChartTruth]) -> bool:
    """Whether tick labels are read: some are to be, and Tesseract is here. Without it the
    error rates are null, and one warning names the fix."""
    wanted = params.eval.ocr.max_images != 0 and any(t.labels for t in truths.values())
    reason = ocr.missing() if wanted else None
    if reason is not None:
        log.warning("evaluate: tick labels not read, their error rates are null: %s", reason)
    return wanted and reason is None


def _labels_in(image: np.ndarray, truth: ChartTruth | None) -> list[ocr.Label]:
    """The chart's tick labels that lie whole inside `image` (the chart or a centred crop of it),
    their boxes in its pixels."""
    if truth is None:
        return []
    top, left = _offset(image, truth)
    height, width = image.shape[:2]
    inside = []
    for label in truth.labels:
        x0, y0, x1, y1 = label.box
        box = (x0 - left, y0 - top, x1 - left, y1 - top)
        if box[0] >= 0 and box[1] >= 0 and box[2] <= width and box[3] <= height:
            inside.append(ocr.Label(label.text, box))
    return inside


def _offset(image: np.ndarray, truth: ChartTruth) -> tuple[int, int]:
    """Where a sample, its chart's centred crop or the whole chart, lies in the chart."""
    return (truth.height - image.shape[0]) // 2, (truth.width - image.shape[1]) // 2


def _figures(
    image: np.ndarray, sharp: np.ndarray, truth: ChartTruth | None, shown: np.ndarray | None
) -> dict:
    """The line-fidelity errors of one image: in pixels from the column profile, and with the
    chart's ground truth in its own units, judged where the sharp sample shows the curve
    (`shown`, from curves.shown_columns)."""
    figures = chart_errors(image, sharp)
    if truth is not None:
        errors = curve_errors(image, truth, _offset(image, truth), shown)
        # charts plot counts, percent or a.u.: a mean over charts needs each chart's own scale
        span = float(np.ptp(truth.intensity)) or 1.0
        figures |= errors | {
            f"{name}_pct_of_range": 100 * errors[name] / span
            for name in ("peak_height_error", "curve_rmse")
        }
    return figures


def _one_thread() -> None:
    """A scoring worker's start: it shares the cores with its siblings."""
    torch.set_num_threads(1)


def _map_in_one_thread(function: Callable, tasks: list) -> list:
    """The builtin map with torch on one thread, as in a scoring worker: torch's FFT (in
    Richardson-Lucy) rounds differently on 1 and 2 threads, by up to 0.0003 dB in a cell mean on
    the default run, and the scores must not depend on the worker count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return [function(task) for task in tasks]
    finally:
        torch.set_num_threads(threads)


@contextmanager
def _scoring_map(workers: int) -> Iterator[Callable]:
    """An ordered map for scoring: forked workers when workers > 1, else one thread here.

    Scoring (baselines, SSIM, reading the curve back) runs on one core while the model runs on
    all of them: two scorers took evaluate from 244 to 203-213 s on the default run (2-core AMD
    EPYC held to AVX2 kernels), the same scores. The workers are forked when evaluate starts,
    before the model is built, and results come back in task order.
    """
    if workers <= 1:
        yield _map_in_one_thread
        return
    with get_context("fork").Pool(workers, initializer=_one_thread) as pool:
        yield lambda function, tasks: pool.imap(function, tasks, chunksize=2)


def _score_pair(task: tuple) -> tuple[dict, dict, dict, dict]:
    """PSNR and SSIM of the input, the classical baselines and every model output of one pair
    against its sharp image, the line-fidelity errors of the input and the model, and the tick
    labels' reading errors of the input, the model and (when asked) the sharp image."""
    blurred, sharp, meta, outputs, truth, shown, settings, labels, read_sharp = task
    methods = {
        "input": blurred,
        **baselines(blurred, meta["domain"], meta["params"], settings.baselines),
    }
    methods |= {name: image for name, image in outputs.items() if image is not None}
    model = f"model_s{settings.steps}"
    return (
        {name: psnr(image, sharp, settings.metric) for name, image in methods.items()},
        {name: ssim(image, sharp, settings.metric) for name, image in methods.items()},
        {
            "input": _figures(blurred, sharp, truth, shown),
            model: _figures(methods[model], sharp, truth, shown),
        },
        _tick_errors(
            {"input": blurred, model: methods[model]} | ({"sharp": sharp} if read_sharp else {}),
            labels,
        ),
    )


def _tick_errors(images: dict[str, np.ndarray], labels: list[ocr.Label]) -> dict:
    """name -> (edits, characters, labels) of Tesseract's reading of the tick labels in each
    image, all in one call; empty without labels."""
    if not labels:
        return {}
    errors = ocr.label_errors(list(images.values()), labels)
    return {name: (*error, len(labels)) for name, error in zip(images, errors, strict=True)}


def _score_level(
    pairs: list[tuple],
    level: str,
    outputs: dict[str, list],
    params: Params,
    scores: _Scores,
    truths: dict[str, ChartTruth],
    scoring_map: Callable,
    reading: bool,
) -> None:
    """Scores the input, the classical baselines and every model output of one level's pairs;
    the line-fidelity errors for the input, the model and the sharp image itself (the floor of
    reading the line back); and on the first eval.ocr.max_images pairs of each domain, the tick
    labels' reading errors (`reading`: Tesseract is here; else recorded as not read)."""
    tasks, ticks = [], []
    chosen = set(_first_per_domain([pair[2] for pair in pairs], params.eval.ocr.max_images))
    asked = set()  # images whose sharp labels a task reads
    for index, (blurred, sharp, meta) in enumerate(pairs):
        image_id, truth = meta["image_id"], truths.get(meta["image_id"])
        if image_id not in scores.sharp_figures:  # the same sharp image in every cell
            shown = shown_columns(sharp, truth, _offset(sharp, truth)) if truth else None
            scores.sharp_shown[image_id] = shown
            scores.sharp_figures[image_id] = _figures(sharp, sharp, truth, shown)
        own = {name: images[index] for name, images in outputs.items()}
        labels = _labels_in(sharp, truth) if index in chosen else []
        read_sharp = bool(labels) and image_id not in scores.sharp_ocr and image_id not in asked
        if read_sharp:
            asked.add(image_id)
        shown = scores.sharp_shown[image_id]
        read = labels if reading else []
        tasks.append((blurred, sharp, meta, own, truth, shown, params.eval, read, read_sharp))
        ticks.append(labels)
    model = f"model_s{params.eval.steps}"
    results = scoring_map(_score_pair, tasks)
    for task, labels, (psnrs, ssims, figures, errors) in zip(tasks, ticks, results, strict=True):
        blurred, sharp, meta, own = task[:4]
        domain = meta["domain"]
        for name, value in psnrs.items():
            scores.psnr[domain][level][name].append(value)
            scores.ssim[domain][level][name].append(ssims[name])
        figures["sharp"] = scores.sharp_figures[meta["image_id"]]
        for name, by_figure in figures.items():
            for figure, value in by_figure.items():
                scores.chart[domain][level][name][figure].append(value)
        _record_ticks(scores.ocr[domain][level], scores.sharp_ocr, meta, labels, errors, model)
        scores.showcase.setdefault((domain, level), (blurred, own[model], sharp))


def _record_ticks(
    cell: dict, sharp_ocr: dict, meta: dict, labels: list, errors: dict, model: str
) -> None:
    """Adds one pair's tick-label errors to its cell, with its sharp image's (read by the first
    pair that shows it). Labels not read (no Tesseract) count as (None, characters, labels)."""
    if not labels:
        return
    if not errors:
        drawn = sum(len(ocr.normalise(label.text)) for label in labels)
        errors = {name: (None, drawn, len(labels)) for name in ("input", model, "sharp")}
    if "sharp" in errors:
        sharp_ocr[meta["image_id"]] = errors["sharp"]
    errors = errors | {"sharp": sharp_ocr[meta["image_id"]]}
    for name in ("input", model, "sharp"):
        cell[name].append(errors[name])


def _tables(scores: _Scores, params: Params) -> dict:
    """One split's blocks: psnr, ssim and chart means per cell, psnr_gain_sN (each cell's sample
    count and interval), the summary and psnr_by_domain_sN."""
    steps = params.eval.steps
    model = f"model_s{steps}"
    report = {
        metric: {
            domain: {
                level: {name: _mean(values) for name, values in by_name.items()}
                for level, by_name in by_level.items()
            }
            for domain, by_level in table.items()
        }
        for metric, table in (("psnr", scores.psnr), ("ssim", scores.ssim))
    }
    gains = {
        domain: {
            level: np.subtract(by_name[model], by_name["input"]).tolist()
            for level, by_name in by_level.items()
        }
        for domain, by_level in scores.psnr.items()
    }
    interval, seed = params.eval.interval, params.eval.seed
    report[f"psnr_gain_s{steps}"] = {
        domain: {
            level: _rounded(mean_interval(values, interval, seed))
            for level, values in by_level.items()
        }
        for domain, by_level in gains.items()
    }
    report["chart"] = {
        domain: {
            level: {
                name: {figure: _finite_mean(values) for figure, values in figures.items()}
                for name, figures in by_name.items()
            }
            for level, by_name in by_level.items()
        }
        for domain, by_level in scores.chart.items()
    }
    report["chart_summary"] = _chart_summary(scores.chart, model)
    if any(cell for by_level in scores.ocr.values() for cell in by_level.values()):
        report["ocr_cer"] = _ocr_by_level(scores.ocr)
        for domain, by_level in scores.ocr.items():
            for level, by_name in by_level.items():
                for name, errors in by_name.items():
                    report["chart"][domain][level][name]["ocr_cer"] = _pooled_cer(errors)
    cell_gains = [values for by_level in gains.values() for values in by_level.values()]
    report["summary"] = _summary(report, params.degrade.levels, steps) | _headline_interval(
        cell_gains, report[f"psnr_gain_s{steps}"], steps, params
    )
    report[f"psnr_by_domain_s{steps}"] = {
        domain: _mean([cell[model] for cell in by_level.values()])
        for domain, by_level in report["psnr"].items()
    }
    if scores.sharp_psnr:  # PSNR of the model's output against its own sharp input
        report["sharp"] = {
            "samples": len(scores.sharp_psnr),
            f"psnr_s{steps}": _mean(scores.sharp_psnr),
            f"min_psnr_s{steps}": round(min(scores.sharp_psnr), 4),
        }
    return report


def _pooled_cer(errors: list[tuple]) -> float | None:
    """The character error rate over many images' labels: their edits over their characters;
    None when any was not read (no Tesseract) or nothing was drawn."""
    edits, drawn = [e[0] for e in errors], sum(e[1] for e in errors)
    if not drawn or None in edits:
        return None
    return round(sum(edits) / drawn, 4)


def _ocr_by_level(table: dict) -> dict:
    """Per level, over its read images of every domain: the pooled character error rate of the
    tick labels of the input, the model and the sharp chart, and how many labels each read."""
    pooled = defaultdict(lambda: defaultdict(list))  # level -> name -> errors
    for by_level in table.values():
        for level, by_name in by_level.items():
            for name, errors in by_name.items():
                pooled[level][name] += errors
    return {
        level: {name: _pooled_cer(errors) for name, errors in by_name.items()}
        | {"labels": sum(e[2] for e in by_name["input"])}
        for level, by_name in pooled.items()
    }


def _chart_summary(chart: dict, model: str) -> dict:
    """Each chart figure over every image of the split: mean and median of the input, the model
    and the sharp image, and the share of images where the model's figure is below or above the
    input's. A few charts whose blurred or restored peak falls below another one move a mean of
    peak positions by tens of nm; the median and the paired shares say what a typical chart gets."""
    pooled = defaultdict(lambda: defaultdict(list))  # figure -> method -> values, image-aligned
    for by_level in chart.values():
        for by_name in by_level.values():
            for name in ("input", model, "sharp"):
                for figure, values in by_name[name].items():
                    pooled[figure][name] += values
    summary = {}
    for figure, by_name in sorted(pooled.items()):
        entry = {}
        for name, values in by_name.items():
            finite = [value for value in values if np.isfinite(value)]
            entry[name] = {
                "mean": _finite_mean(values),
                "median": round(float(np.median(finite)), 4) if finite else None,
            }
        restored, blurred = (np.asarray(by_name[n], dtype=np.float64) for n in (model, "input"))
        both = np.isfinite(restored) & np.isfinite(blurred)
        entry["images"] = int(both.sum())
        if both.any():
            entry[f"{model}_below_input"] = round(float(np.mean(restored[both] < blurred[both])), 4)
            entry[f"{model}_above_input"] = round(float(np.mean(restored[both] > blurred[both])), 4)
        summary[figure] = entry
    return summary


def _headline_interval(
    cell_gains: list[list[float]], by_cell: dict, steps: int, params: Params
) -> dict:
    """The headline gain's interval (resampled within each cell), the sample count and the widest
    cell interval: how far the figures above could move with other test images."""
    if not cell_gains:
        return {}
    overall = _rounded(mean_of_means_interval(cell_gains, params.eval.interval, params.eval.seed))
    cells = [cell for by_level in by_cell.values() for cell in by_level.values()]
    widths = [(c["high"] - c["low"]) / 2 for c in cells if c["low"] is not None]
    return {
        f"psnr_gain_s{steps}_low": overall["low"],
        f"psnr_gain_s{steps}_high": overall["high"],
        "interval_confidence": params.eval.interval.confidence,
        "samples": overall["samples"],
        "min_cell_samples": min(c["samples"] for c in cells),
        f"max_interval_half_width_s{steps}": round(max(widths), 4) if widths else None,
    }


def _adapter_outputs(
    pairs: list[tuple], by_domain: dict, combined, steps: int, params: Params
) -> dict[str, list]:
    """With per-domain adapters (train_domains): each domain's own adapter on its samples
    (model_domain_sN) and the weighted merge on all (model_combined_sN); None where not run."""
    outputs: dict[str, list] = {}
    blurred = [pair[0] for pair in pairs]
    if by_domain:
        own: list = [None] * len(pairs)
        for domain, restorer in by_domain.items():
            mine = [i for i, pair in enumerate(pairs) if pair[2]["domain"] == domain]
            restored = restorer.restore_images(
                [blurred[i] for i in mine], steps, params.eval.seed, params.eval.batch_size
            )
            for i, image in zip(mine, restored, strict=True):
                own[i] = image
        outputs[f"model_domain_s{steps}"] = own
    if combined is not None:
        outputs[f"model_combined_s{steps}"] = combined.restore_images(
            blurred, steps, params.eval.seed, params.eval.batch_size
        )
    return outputs


def _summary(report: dict, levels: list[str], steps: int) -> dict:
    """The headline: mean PSNR gain of the model over the input, its smallest cell, and the
    margin over the best classical baseline, per cell and per domain (means over its levels)."""
    model, classical = f"model_s{steps}", CLASSICAL
    gains, margins, domain_margins = [], [], []
    for by_level in report["psnr"].values():
        cells = [by_level[level] for level in levels if level in by_level]
        if not cells:
            continue
        gains += [cell[model] - cell["input"] for cell in cells]
        margins += [
            cell[model] - max(v for k, v in cell.items() if k in classical) for cell in cells
        ]
        best_baseline = max(
            np.mean([cell[name] for cell in cells])
            for name in classical
            if all(name in cell for cell in cells)
        )
        domain_margins.append(np.mean([cell[model] for cell in cells]) - best_baseline)
    if not gains:
        return {}
    summary = {
        f"psnr_gain_s{steps}": _mean(gains),
        f"min_psnr_gain_s{steps}": round(min(gains), 4),
        f"min_margin_over_best_baseline_s{steps}": round(min(margins), 4),
        f"min_domain_margin_over_best_baseline_s{steps}": round(float(min(domain_margins)), 4),
    }
    for kind in ("domain", "combined"):
        name = f"model_{kind}_s{steps}"
        extra = [
            cell[name] - cell["input"]
            for by_level in report["psnr"].values()
            for cell in by_level.values()
            if name in cell
        ]
        if extra:
            summary[f"psnr_gain_{kind}_s{steps}"] = _mean(extra)
    return summary


def _centre(image: np.ndarray, size: int) -> np.ndarray:
    height, width = image.shape[:2]
    top, left = max(0, (height - size) // 2), max(0, (width - size) // 2)
    return image[top : top + size, left : left + size]


def _sweep_level(
    pairs: list[tuple], level: str, restore: _TimedRestorer, params: Params, swept: dict
) -> None:
    """The first `eval.sweep.samples` test images of each domain, cut to one centred tile (so a
    step count costs one batched model call): PSNR of the input, the classical baselines and the
    model at every step count of the sweep, into swept[domain][level][method]."""
    chosen = _first_per_domain([meta for _, _, meta in pairs], params.eval.sweep.samples)
    size = params.tiles.size
    crops = [(_centre(pairs[i][0], size), _centre(pairs[i][1], size), pairs[i][2]) for i in chosen]
    restored = {count: restore([c[0] for c in crops], count) for count in params.eval.sweep.steps}
    for position, (blurred, sharp, meta) in enumerate(crops):
        methods = {
            "input": blurred,
            **baselines(blurred, meta["domain"], meta["params"], params.eval.baselines),
        }
        methods |= {f"model_s{count}": images[position] for count, images in restored.items()}
        for name, image in methods.items():
            swept[meta["domain"]][level][name].append(psnr(image, sharp, params.eval.metric))


def _sweep(swept: dict, restore: _TimedRestorer, counts: list[int]) -> dict:
    """On the sweep's tiles, means over cells: the input's PSNR, the best classical baseline's
    (per cell) and the model's at each step count, with its seconds per megapixel."""
    cells = [
        {name: float(np.mean(values)) for name, values in cell.items()}
        for by_level in swept.values()
        for cell in by_level.values()
    ]
    if not cells:
        return {}
    best = [max(v for n, v in cell.items() if n in CLASSICAL) for cell in cells]
    out = {
        "samples": sum(
            len(cell["input"]) for by_level in swept.values() for cell in by_level.values()
        ),
        "input_psnr": _mean([cell["input"] for cell in cells]),
        "best_classical_psnr": _mean(best),
    }
    for count in counts:
        out[f"s{count}"] = {
            "psnr": _mean([cell[f"model_s{count}"] for cell in cells]),
            "seconds_per_megapixel": restore.seconds_per_megapixel(count),
        }
    return out


def _few_step(sweep: dict, counts: list[int]) -> dict:
    """How close the fewest-step sampler (at most 4 DDIM steps) comes to the most steps swept,
    on the sweep's images: the PSNR shortfall (positive = few steps worse) and the speed-up."""
    few_steps = [count for count in counts if count <= 4]
    if not sweep or not few_steps or max(counts) <= max(few_steps):
        return {}
    few, reference = sweep[f"s{max(few_steps)}"], sweep[f"s{max(counts)}"]
    return {
        "steps": max(few_steps),
        "reference_steps": max(counts),
        "psnr_shortfall_db": round(reference["psnr"] - few["psnr"], 4),
        "speedup": round(
            reference["seconds_per_megapixel"] / max(few["seconds_per_megapixel"], 1e-9), 2
        ),
    }


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _write_plots(report: dict, counts: list[int], levels: list[str], tmp: dict[Path, Path]) -> None:
    rows = [
        [domain, level, name, value, report["ssim"][domain][level][name]]
        for domain, by_level in report["psnr"].items()
        for level in levels
        if level in by_level
        for name, value in by_level[level].items()
    ]
    _write_csv(tmp[BY_DOMAIN_CSV], ["domain", "level", "method", "psnr", "ssim"], rows)
    sweep = report["sweep"]
    by_steps = [
        [
            count,
            sweep[f"s{count}"]["psnr"],
            round(sweep[f"s{count}"]["psnr"] - sweep["input_psnr"], 4),
            round(sweep[f"s{count}"]["psnr"] - sweep["best_classical_psnr"], 4),
            sweep[f"s{count}"]["seconds_per_megapixel"],
        ]
        for count in counts
        if sweep
    ]
    header = ["steps", "psnr", "gain", "margin", "seconds_per_megapixel"]
    _write_csv(tmp[BY_STEPS_CSV], header, by_steps)


def _write_samples(showcase: dict, domains: list[str], levels: list[str], path: Path) -> None:
    """One row per domain and level: blurred | restored | sharp, at a common height."""
    rows = []
    for domain in domains:
        for level in levels:
            if (domain, level) in showcase:
                rows.append(np.concatenate(showcase[(domain, level)], axis=1))
    if not rows:  # no test samples: a blank sheet, as the declared output must exist
        rows = [np.full((1, 1, 3), 255, np.uint8)]
    width = max(row.shape[1] for row in rows)
    rows = [
        np.pad(row, ((0, 2), (0, width - row.shape[1]), (0, 0)), constant_values=255)
        for row in rows
    ]
    Image.fromarray(np.concatenate(rows, axis=0)).save(path, format="PNG")
