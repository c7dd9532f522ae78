"""A base UNet's own scores, with no adapter: what the model card and the scaling benchmark report.

The charts are the score set: `base.score_charts` charts drawn as the default data is
(data.charts: they look like the user's charts) but with a seed of their own (base.score_seed),
so none is a chart the default run trains on or reports (tests/base/test_selection.py proves
it by content hash), nor one the base trains on (base.chart_seed). They are scored whole, in
every domain and level, degraded as the shard stage degrades (degrade.seed). The trained
families score as `test`, the held-out families and libraries as `held_out` (named as the
default run's splits, which they are drawn like but never hold); the sharp charts themselves
score as `sharp` (what a restoration must not harm), over the set and per split. Each split's
mean gain is the mean over the domain x level cells of each cell's mean, with a stratified
bootstrap interval, as evaluate's headline. Each split also keeps every image's gain by cell,
in chart order, so two models scored on one chart set can be compared image by image
(base/land.py's paired rule). Where Tesseract is installed, each split also gets the
tick labels' character error rate per level, pooled over the domains, for the input, the model
and the sharp chart (digitize/ocr.py), all of one chart read in one go.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tqdm import tqdm

from linefuse.data.charts import draw_chart
from linefuse.data.degrade import degrade, item_rng
from linefuse.digitize import ocr
from linefuse.evaluate.intervals import mean_of_means_interval
from linefuse.evaluate.metrics import psnr
from linefuse.inference.restorer import Restorer
from linefuse.stage import ordered_map

if TYPE_CHECKING:
    from linefuse.params.data import ChartParams
    from linefuse.params.full import Params


@dataclass
class ScoringChart:
    """A chart of a score set, sharp and degraded in every domain and level."""

    chart_id: str
    split: str  # test or held_out
    sharp: np.ndarray
    labels: list[ocr.Label]
    blurred: list[tuple[str, str, np.ndarray]]  # (domain, level, image)


def score_chart_params(params: Params) -> ChartParams:
    """The score set's recipe: the default data's (data.charts, its axis knobs off), drawn with
    base.score_seed."""
    return params.data.charts.without_axis_knobs().model_copy(
        update={"seed": params.base.score_seed}
    )


def _scoring_chart(params: Params, charts: ChartParams, index: int) -> ScoringChart:
    sharp, _, sidecar = draw_chart(charts, index)
    chart_id = f"chart_{index:05d}"
    blurred = []
    for domain in params.degrade.domains:
        for level in params.degrade.levels:
            rng = item_rng(params.degrade.seed, chart_id, domain, level)
            image, _ = degrade(sharp, domain, params.degrade.level(domain, level), rng)
            blurred.append((domain, level, image))
    held = {sidecar["family"], sidecar["library"]} & set(charts.held_out)  # as the index splits
    return ScoringChart(
        chart_id,
        "held_out" if held else "test",
        sharp,
        [ocr.Label(label["text"], tuple(label["box"])) for label in sidecar["tick_labels"]],
        blurred,
    )


def scoring_charts(
    params: Params, workers: int = 1, charts: ChartParams | None = None, count: int | None = None
) -> list[ScoringChart]:
    """The score set's charts (or the first `count` of `charts`: base_window's drawn set), drawn
    and degraded on `workers` processes, each from a fresh interpreter as generate's are: both
    sets hold Vega-Lite charts, which a worker forked from a process that drew one cannot draw."""
    charts = charts if charts is not None else score_chart_params(params)
    tasks = list(range(count if count is not None else params.base.score_charts))
    job = partial(_scoring_chart, params, charts)
    return list(ordered_map(job, tasks, workers, "score set", "chart", start="forkserver"))


def score_base(
    params: Params, folder: Path, device: str, charts=None, read_labels: bool = True
) -> dict:
    """{test, held_out: {mean, low, high, samples, by_domain, worst_cell, gains, cer, sharp},
    sharp: {mean, worst}} of the base in `folder` (a split's sharp: its own charts'), restoring
    in eval.steps DDIM steps on `device`, inputs as drawn (no deskew: the scores compare
    weights); cer is {level: {input, model, sharp}}, or None where Tesseract is missing or
    `read_labels` is off."""
    charts = charts if charts is not None else scoring_charts(params)
    restorer = Restorer.from_params(params, None, device, base_dir=folder)
    read = read_labels and ocr.missing() is None
    cells: dict[str, dict[tuple[str, str], list[float]]] = {"test": {}, "held_out": {}}
    errors: dict[str, dict[str, np.ndarray]] = {"test": {}, "held_out": {}}
    sharp_psnr: dict[str, list[float]] = {"test": [], "held_out": []}
    metric = params.eval.metric
    bar = tqdm(charts, desc=f"scoring {folder.name}", unit="chart", disable=None)
    for chart in bar:  # a chart's images share its size: one batch, on a GPU one launch
        images = [chart.sharp, *(blurred for _, _, blurred in chart.blurred)]
        restored_sharp, *restored_all = restorer.restore_images(
            images, params.eval.steps, batch_size=len(images)
        )
        sharp_psnr[chart.split].append(psnr(restored_sharp, chart.sharp, metric))
        units = []
        for (domain, level, blurred), restored in zip(chart.blurred, restored_all, strict=True):
            gain = psnr(restored, chart.sharp, metric) - psnr(blurred, chart.sharp, metric)
            cells[chart.split].setdefault((domain, level), []).append(gain)
            units.append((level, blurred, restored))
        if read and chart.labels:
            _add_label_errors(errors[chart.split], units, chart.sharp, chart.labels)
    report = {split: _split_summary(params, split_cells) for split, split_cells in cells.items()}
    for split in cells:
        if report[split]:
            report[split]["cer"] = _rates(errors[split]) if read else None
            report[split]["sharp"] = _sharp(sharp_psnr[split])
    report["sharp"] = _sharp([value for values in sharp_psnr.values() for value in values])
    return report


def _sharp(values: list[float]) -> dict:
    """The sharp charts through the model, in dB: their mean and the worst."""
    return {"mean": float(np.mean(values)), "worst": float(np.min(values))}


def _add_label_errors(errors: dict, units: list, sharp: np.ndarray, labels: list) -> None:
    """Adds one chart's (edits, characters) of the input, the model and the sharp chart to each
    level's running sums in `errors` ({level: [[edits, chars] x input, model, sharp]})."""
    images = [image for _, blurred, restored in units for image in (blurred, restored)]
    found = ocr.label_errors([(image, labels) for image in [*images, sharp]])
    for k, (level, _, _) in enumerate(units):
        sums = errors.setdefault(level, np.zeros((3, 2)))
        sums += np.array([found[2 * k], found[2 * k + 1], found[-1]])


def _rates(errors: dict[str, np.ndarray]) -> dict:
    return {
        level: {
            name: float(sums[k, 0] / max(sums[k, 1], 1))
            for k, name in enumerate(("input", "model", "sharp"))
        }
        for level, sums in errors.items()
    }


def _split_summary(params: Params, cells: dict[tuple[str, str], list[float]]) -> dict:
    if not cells:
        return {}
    summary = mean_of_means_interval(list(cells.values()), params.eval.interval, params.eval.seed)
    summary["by_domain"] = {
        domain: float(np.mean([np.mean(g) for (d, _), g in cells.items() if d == domain]))
        for domain in params.degrade.domains
    }
    summary["worst_cell"] = float(min(np.mean(gains) for gains in cells.values()))
    summary["gains"] = {f"{domain}/{level}": gains for (domain, level), gains in cells.items()}
    return summary
