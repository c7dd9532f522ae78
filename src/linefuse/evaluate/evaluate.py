"""evaluate: PSNR/SSIM per blur domain and level, against the input and classical baselines.

On the test split of every level: the blurred input, Wiener and Richardson-Lucy (with the kernel
the degradation used), unsharp masking, and the final curriculum adapter at every sampler step
count in `eval.steps`, with its latency; with per-domain adapters (train_domains), also each
domain's own adapter and their weighted merge. Charts also get LineFuse's peak-position and integral
errors. Writes metrics/eval.json (keys such as psnr.gaussian.hard.model_s25), plots/*.csv and
reports/samples.png.
"""

from __future__ import annotations

import csv
import json
import logging
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from PIL import Image
from tqdm import tqdm

from linefuse import paths
from linefuse.data.readers import LmdbPairs
from linefuse.evaluate.baselines import CLASSICAL, baselines
from linefuse.evaluate.chart_metrics import chart_errors
from linefuse.evaluate.metrics import psnr, ssim
from linefuse.hardware import Choice, cpu_model
from linefuse.params import Params
from linefuse.paths import BY_DOMAIN_CSV, BY_STEPS_CSV, EVAL_JSON, SAMPLES_PNG
from linefuse.serve.restorer import Restorer
from linefuse.stage import atomic_files
from linefuse.train.domains import domain_adapters

log = logging.getLogger("linefuse")
PLOTS = [BY_DOMAIN_CSV, BY_STEPS_CSV]


def _test_pairs(level: str, max_samples: int | None) -> list[tuple]:
    """(blurred, sharp, meta) of the level's test split, at most max_samples per domain."""
    dataset = LmdbPairs(paths.shards(level), "test")
    taken: dict[str, int] = defaultdict(int)
    pairs = []
    for index in range(len(dataset)):
        blurred, sharp, meta = dataset[index]
        if max_samples is None or taken[meta["domain"]] < max_samples:
            taken[meta["domain"]] += 1
            pairs.append((blurred, sharp, meta))
    dataset.close()
    return pairs


def _mean(values: list[float]) -> float:
    return round(float(np.mean(values)), 4)


def evaluate(params: Params, device: Choice) -> dict:
    """Runs the whole evaluation on `device` and writes its outputs; returns metrics/eval.json's
    content."""
    final = params.train.order()[-1]
    restorer = Restorer(params, paths.adapter(final), device.value)
    steps_list, settings = params.eval.steps, params.eval.metric
    extra = domain_adapters()
    by_domain = {
        domain: Restorer(params, path, device.value) for domain, path in extra["adapters"].items()
    }
    combined = Restorer(params, extra["combined"], device.value) if extra["combined"] else None
    scores = {
        "psnr": defaultdict(lambda: defaultdict(lambda: defaultdict(list))),
        "ssim": defaultdict(lambda: defaultdict(lambda: defaultdict(list))),
    }
    chart = defaultdict(lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list))))
    model_seconds, model_images = defaultdict(float), defaultdict(int)
    showcase: dict[tuple, tuple] = {}
    shown_steps = params.eval.shown_steps()

    levels = params.degrade.levels
    for level in tqdm(levels, desc="evaluate", unit="level", disable=None):
        pairs = _test_pairs(level, params.eval.max_samples)
        if not pairs:
            log.warning("evaluate: level %s has no test samples; skipped", level)
            continue
        blurred_images = [pair[0] for pair in pairs]
        outputs: dict[str, list[np.ndarray]] = {}
        for steps in steps_list:
            started = time.perf_counter()
            outputs[f"model_s{steps}"] = restorer.restore_images(
                blurred_images, steps, params.eval.seed, params.eval.batch_size
            )
            model_seconds[steps] += time.perf_counter() - started
            model_images[steps] += len(pairs)
        outputs |= _adapter_outputs(pairs, by_domain, combined, shown_steps, params)
        for index, (blurred, sharp, meta) in enumerate(pairs):
            domain = meta["domain"]
            methods = {
                "input": blurred,
                **baselines(blurred, domain, meta["params"], params.eval.baselines),
            }
            methods |= {
                name: images[index] for name, images in outputs.items() if images[index] is not None
            }
            for name, image in methods.items():
                scores["psnr"][domain][level][name].append(psnr(image, sharp, settings))
                scores["ssim"][domain][level][name].append(ssim(image, sharp, settings))
            for name in ("input", f"model_s{shown_steps}"):
                for figure, value in chart_errors(methods[name], sharp).items():
                    chart[domain][level][name][figure].append(value)
            showcase.setdefault((domain, level), (blurred, methods[f"model_s{shown_steps}"], sharp))

    report = {
        metric: {
            domain: {
                level: {name: _mean(values) for name, values in by_name.items()}
                for level, by_name in by_level.items()
            }
            for domain, by_level in table.items()
        }
        for metric, table in scores.items()
    }
    report["latency_ms_per_image"] = {
        f"s{steps}": round(1000 * model_seconds[steps] / max(model_images[steps], 1), 2)
        for steps in steps_list
    }
    report["chart"] = {
        domain: {
            level: {
                name: {figure: _mean(values) for figure, values in figures.items()}
                for name, figures in by_name.items()
            }
            for level, by_name in by_level.items()
        }
        for domain, by_level in chart.items()
    }
    report["summary"] = _summary(report, levels, shown_steps)
    report[f"psnr_by_domain_s{shown_steps}"] = {
        domain: _mean([cell[f"model_s{shown_steps}"] for cell in by_level.values()])
        for domain, by_level in report["psnr"].items()
    }
    if few := _few_step(report, steps_list):
        report["few_step"] = few
    # the latencies above are this machine's: name it beside them
    report["machine"] = {
        "device": device.value,
        "device_reason": device.reason,
        "cpu_model": cpu_model(),
    }
    with atomic_files([*PLOTS, SAMPLES_PNG, EVAL_JSON]) as tmp:
        _write_plots(report, steps_list, levels, tmp)
        _write_samples(showcase, params.degrade.domains, levels, tmp[SAMPLES_PNG])
        tmp[EVAL_JSON].write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return report


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


def _few_step(report: dict, steps_list: list[int]) -> dict:
    """How close the fewest-step sampler (at most 4 DDIM steps) comes to the most steps measured:
    the mean and the worst cell's PSNR shortfall (positive = few steps worse) and the speed-up."""
    few_steps = [steps for steps in steps_list if steps <= 4]
    if not few_steps or max(steps_list) <= max(few_steps):
        return {}
    few, reference = max(few_steps), max(steps_list)
    cells = [cell for by_level in report["psnr"].values() for cell in by_level.values()]
    shortfalls = [cell[f"model_s{reference}"] - cell[f"model_s{few}"] for cell in cells]
    latency = report["latency_ms_per_image"]
    return {
        "steps": few,
        "reference_steps": reference,
        "psnr_shortfall_db": _mean(shortfalls),
        "max_cell_shortfall_db": round(max(shortfalls), 4),
        "speedup": round(latency[f"s{reference}"] / max(latency[f"s{few}"], 1e-9), 2),
    }


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _write_plots(
    report: dict, steps_list: list[int], levels: list[str], tmp: dict[Path, Path]
) -> None:
    rows = [
        [domain, level, name, value, report["ssim"][domain][level][name]]
        for domain, by_level in report["psnr"].items()
        for level in levels
        if level in by_level
        for name, value in by_level[level].items()
    ]
    _write_csv(tmp[BY_DOMAIN_CSV], ["domain", "level", "method", "psnr", "ssim"], rows)
    by_steps = []
    for steps in steps_list:
        values = [
            cell[f"model_s{steps}"]
            for by_level in report["psnr"].values()
            for cell in by_level.values()
        ]
        by_steps.append([steps, _mean(values), report["latency_ms_per_image"][f"s{steps}"]])
    _write_csv(tmp[BY_STEPS_CSV], ["steps", "psnr", "latency_ms_per_image"], by_steps)


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
