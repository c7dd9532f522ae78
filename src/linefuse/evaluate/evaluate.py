"""evaluate: PSNR/SSIM per blur domain and level, against the input and classical baselines.

On the test split of every level (whole images unless shards.test_crop crops them): the blurred
input, Wiener and Richardson-Lucy (with the kernel the degradation used), unsharp masking, and the
final curriculum adapter at `eval.steps` DDIM steps, and the base it was adapted from, alone (what
adapting bought: adapt_gain); with per-domain adapters (train_domains), also each domain's own
adapter and their weighted merge. The models restore each input straightened first (eval.deskew,
once for them all, as `linefuse restore` does); the gain is over the input as drawn. Each cell
(domain x level) gets its sample count and a bootstrap interval of the model's mean gain over
the input. A centred tile of a few images per cell is also restored at every step count of
`eval.sweep`, timed per megapixel.
Charts also get LineFuse's peak-position and integral errors, and the first `eval.ocr.max_images`
of each cell the legibility of their tick labels: Tesseract's character error rate on the input,
the model and the sharp chart (digitize/ocr.py), pooled per level (ocr_cer) and per cell (the
chart block's ocr_cer). The held-out chart families get the same tables apart, and so does each
plotting library that drew charts, on the split it is scored on.

This module is the stage: which pairs, which restorers, the loop over levels and splits.
scoring.py scores each pair, tables.py makes the blocks of reports/eval_detail.json (keys such as
psnr.gaussian.hard.model_s4 and psnr_gain_s4.gaussian.hard.low), and outputs.py writes it, its
headline metrics/eval.json, plots/*.csv and reports/samples.png.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
from tqdm import tqdm

from linefuse import paths
from linefuse.data.deskew import straighten
from linefuse.data.readers import LmdbPairs
from linefuse.digitize import ocr
from linefuse.digitize.curves import ChartTruth, read_truth
from linefuse.evaluate.metrics import psnr
from linefuse.evaluate.outputs import write_outputs
from linefuse.evaluate.scoring import Scores, first_per_domain, score_level, scoring_map
from linefuse.evaluate.scoring import sweep_level as score_sweep
from linefuse.evaluate.tables import by_library, few_step, sweep, tables
from linefuse.hardware import Choice, cpu_model
from linefuse.inference.model import domain_adapters
from linefuse.inference.restorer import Restorer

if TYPE_CHECKING:
    from linefuse.params.full import Params

log = logging.getLogger("linefuse")
EVALUATED = ("test", "held_out")  # the splits scored; held_out: chart families never trained on


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


class _Models:
    """The restorers evaluate runs: the final curriculum adapter (timed, moving the progress
    bar), the same for the sweep (timed apart), the base with no adapter, and any per-domain
    adapters and their merge."""

    def __init__(self, params: Params, device: Choice, progress: tqdm):
        restorer = Restorer.from_params(
            params, paths.adapter(params.train.restoring_level()), device.value
        )
        self.restore = _TimedRestorer(restorer, params, progress)
        self.sweep = _TimedRestorer(restorer, params)
        self.base = Restorer.from_params(params, None, device.value)
        extra = domain_adapters()
        self.by_domain = {
            domain: Restorer.from_params(params, path, device.value)
            for domain, path in extra["adapters"].items()
        }
        self.combined = (
            Restorer.from_params(params, extra["combined"], device.value)
            if extra["combined"]
            else None
        )

    def outputs(self, pairs: list[tuple], blurred: list, params: Params) -> dict[str, list]:
        """Every model's restorations of the pairs' inputs `blurred` (straightened): model_sN,
        and the base alone (base_sN); with per-domain adapters (train_domains), each domain's own
        adapter on its samples (model_domain_sN) and the weighted merge on all
        (model_combined_sN); None where not run."""
        steps, seed, batch = params.eval.steps, params.eval.seed, params.eval.batch_size
        outputs = {f"model_s{steps}": self.restore(blurred, steps)}
        outputs[f"base_s{steps}"] = self.base.restore_images(blurred, steps, seed, batch)
        if self.by_domain:
            own: list = [None] * len(pairs)
            for domain, restorer in self.by_domain.items():
                mine = [i for i, pair in enumerate(pairs) if pair[2]["domain"] == domain]
                restored = restorer.restore_images([blurred[i] for i in mine], steps, seed, batch)
                for i, image in zip(mine, restored, strict=True):
                    own[i] = image
            outputs[f"model_domain_s{steps}"] = own
        if self.combined is not None:
            restored = self.combined.restore_images(blurred, steps, seed, batch)
            outputs[f"model_combined_s{steps}"] = restored
        return outputs


def evaluate(params: Params, device: Choice, workers: int = 1) -> dict:
    """Runs the whole evaluation on `device` and writes its outputs; returns
    reports/eval_detail.json's content: the test split's tables, the sweep, and a `held_out`
    block with the same tables for the held-out chart families when there are any. `workers`
    processes score the restorations."""
    with scoring_map(workers) as mapper:
        return _evaluate(params, device, mapper)


def _evaluate(params: Params, device: Choice, mapper: Callable) -> dict:
    progress = tqdm(desc="evaluate", unit="image", disable=None)
    models = _Models(params, device, progress)
    swept = Scores()  # the sweep's tiles, psnr only
    truths = _chart_truths(params)
    scored = {split: Scores() for split in EVALUATED}
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
            inputs = _straightened([pair[0] for pair in pairs], params, mapper, f"{split}@{level}")
            outputs = models.outputs(pairs, inputs, params)
            score_level(pairs, inputs, level, outputs, params, scores, truths, mapper, reading)
            if params.eval.deskew != "never":
                _show_straightened(scores.showcase, pairs, inputs, level)
            for _, sharp, meta in pairs:
                scores.sharp.setdefault(meta["image_id"], sharp)
            if split == "test":
                score_sweep(pairs, level, models.sweep, params, swept)
    for scores in scored.values():
        _score_sharp(scores, models.restore, params, progress, mapper)
    progress.close()
    detail = _detail(scored, swept, models, params, device)
    write_outputs(detail, scored["test"].showcase, params)
    return detail


def _score_sharp(
    scores: Scores, restore: Callable, params: Params, progress: tqdm, mapper: Callable
) -> None:
    """Do no harm: the model's PSNR on each distinct sharp image of the split, already sharp."""
    sharp_images = list(scores.sharp.values())
    progress.total = (progress.total or 0) + len(sharp_images)
    progress.set_postfix_str("sharp")
    inputs = _straightened(sharp_images, params, mapper, "sharp")
    restored = restore(inputs, params.eval.steps) if sharp_images else []
    scores.sharp_psnr = [
        psnr(out, image, params.eval.metric)
        for out, image in zip(restored, sharp_images, strict=True)
    ]


def _straightened(images: list, params: Params, mapper: Callable, name: str) -> list:
    """The images as the models get them: each straightened once (eval.deskew), for them all."""
    if params.eval.deskew == "never":
        return images
    inputs = list(mapper(partial(straighten, mode=params.eval.deskew), images))
    moved = sum(not np.array_equal(a, b) for a, b in zip(images, inputs, strict=True))
    log.info(
        "evaluate: %s: deskew (%s) moved %d of %d inputs",
        name,
        params.eval.deskew,
        moved,
        len(images),
    )
    return inputs


def _show_straightened(showcase: dict, pairs: list[tuple], inputs: list, level: str) -> None:
    """Each of the level's samples (the first pair of its domain) shows, after the input as
    drawn, the input as the models got it: straightened where eval.deskew moved it."""
    for index, (_, _, meta) in enumerate(pairs):
        shown = showcase.get((meta["domain"], level))
        if shown is not None and len(shown) == 3:
            showcase[(meta["domain"], level)] = (shown[0], inputs[index], *shown[1:])


def _detail(
    scored: dict[str, Scores], swept: Scores, models: _Models, params: Params, device: Choice
) -> dict:
    """reports/eval_detail.json: the test split's tables, the sweep and its few-step comparison,
    the held-out split's tables, each plotting library's (`libraries`), and the machine that
    timed it all."""
    steps, counts = params.eval.steps, params.eval.sweep.steps
    detail = tables(scored["test"], params)
    detail["sweep"] = sweep(swept, models.sweep.seconds_per_megapixel, counts)
    if few := few_step(detail["sweep"], counts):
        detail["few_step"] = few
    if scored["held_out"].cells:
        detail["held_out"] = tables(scored["held_out"], params)
    if libraries := by_library(scored, params):
        detail["libraries"] = libraries
    # the timings above are this machine's: name it beside them
    detail["machine"] = {
        # whole images, tiled: what `linefuse restore` costs here
        f"seconds_per_megapixel_s{steps}": models.restore.seconds_per_megapixel(steps),
        "device": device.value,
        "device_reason": device.reason,
        # eval.runtime, onnx or torch: `auto` picks by this machine's untracked timings, and the
        # scores do not hang on it: the two restore within a grey level, PSNR to 0.001 dB
        # (tests/inference/test_onnx.py, test_the_export_restores_as_the_diffusers_pipeline_does)
        "runtime": models.restore.restorer.runtime.value,
        "runtime_reason": models.restore.restorer.runtime.reason,
        "cpu_model": cpu_model(),
    }
    return detail


def _split_pairs(level: str, split: str, max_samples: int | None) -> list[tuple]:
    """(blurred, sharp, meta) of the level's split, at most max_samples per domain."""
    dataset = LmdbPairs(paths.shards(level), split)
    pairs = [dataset[i] for i in first_per_domain(dataset.metas, max_samples)]
    dataset.close()
    return pairs


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
