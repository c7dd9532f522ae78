"""A base UNet's own scores, with no adapter: what the model card and the scaling benchmark report.

The charts are the first `base.score_charts` of the default data (data.charts, its seed: charts
the base never trains on, drawn with base.chart_seed), whole, in every domain and level, degraded
as the shard stage degrades (degrade.seed). The trained families score as `test`, the held-out
ones as `held_out`; the sharp charts themselves score as `sharp` (what a restoration must not
harm). Each split's mean gain is the mean over the domain x level cells of each cell's mean, with
a stratified bootstrap interval, as evaluate's headline. Each split also keeps every image's gain
by cell, in chart order, so two models scored on one chart set can be compared image by image
(evaluate/base_window.py's paired rule). Where Tesseract is installed, each
split also gets the tick labels' character error rate per level, pooled over the domains, for
the input, the model and the sharp chart (evaluate/ocr.py), all of one chart read in one go.
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
from linefuse.evaluate import ocr
from linefuse.evaluate.intervals import mean_of_means_interval
from linefuse.evaluate.metrics import psnr
from linefuse.inference.restorer import Restorer
from linefuse.stage import ordered_map

if TYPE_CHECKING:
    from linefuse.params.full import Params


@dataclass
class ScoringChart:
    """A default chart of the score set, sharp and degraded in every domain and level."""

    chart_id: str
    split: str  # test or held_out
    sharp: np.ndarray
    labels: list[ocr.Label]
    blurred: list[tuple[str, str, np.ndarray]]  # (domain, level, image)


def _scoring_chart(params: Params, index: int) -> ScoringChart:
    charts = params.data.charts
    sharp, _, sidecar = draw_chart(charts, index)
    chart_id = f"chart_{index:05d}"
    blurred = []
    for domain in params.degrade.domains:
        for level in params.degrade.levels:
            rng = item_rng(params.degrade.seed, chart_id, domain, level)
            image, _ = degrade(sharp, domain, params.degrade.level(domain, level), rng)
            blurred.append((domain, level, image))
    return ScoringChart(
        chart_id,
        "held_out" if sidecar["family"] in charts.held_out else "test",
        sharp,
        [ocr.Label(label["text"], tuple(label["box"])) for label in sidecar["tick_labels"]],
        blurred,
    )


def scoring_charts(params: Params, workers: int = 1) -> list[ScoringChart]:
    """The first base.score_charts default charts, drawn and degraded on `workers` processes."""
    tasks = list(range(params.base.score_charts))
    return list(ordered_map(partial(_scoring_chart, params), tasks, workers, "score set", "chart"))


def score_base(
    params: Params, folder: Path, device: str, charts=None, read_labels: bool = True
) -> dict:
    """{test, held_out: {mean, low, high, samples, by_domain, worst_cell, gains, cer}, sharp: {mean,
    worst}} of the base in `folder`, restoring in eval.steps DDIM steps on `device`, inputs as
    drawn (no deskew: the scores compare weights); cer is {level: {input, model, sharp}}, or
    None where Tesseract is missing or `read_labels` is off."""
    charts = charts if charts is not None else scoring_charts(params)
    restorer = Restorer.from_params(params, None, device, base_dir=folder)
    read = read_labels and ocr.missing() is None
    cells: dict[str, dict[tuple[str, str], list[float]]] = {"test": {}, "held_out": {}}
    errors: dict[str, dict[str, np.ndarray]] = {"test": {}, "held_out": {}}
    sharp_psnr = []
    metric = params.eval.metric
    bar = tqdm(charts, desc=f"scoring {folder.name}", unit="chart", disable=None)
    for chart in bar:  # a chart's images share its size: one batch, on a GPU one launch
        images = [chart.sharp, *(blurred for _, _, blurred in chart.blurred)]
        restored_sharp, *restored_all = restorer.restore_images(
            images, params.eval.steps, batch_size=len(images)
        )
        sharp_psnr.append(psnr(restored_sharp, chart.sharp, metric))
        units = []
        for (domain, level, blurred), restored in zip(chart.blurred, restored_all, strict=True):
            gain = psnr(restored, chart.sharp, metric) - psnr(blurred, chart.sharp, metric)
            cells[chart.split].setdefault((domain, level), []).append(gain)
            units.append((level, blurred, restored))
        if read and chart.labels:
            _add_label_errors(errors[chart.split], units, chart.sharp, chart.labels)
    report = {split: _split_summary(params, split_cells) for split, split_cells in cells.items()}
    for split, by_level in errors.items():
        if report[split]:
            report[split]["cer"] = _rates(by_level) if read else None
    report["sharp"] = {"mean": float(np.mean(sharp_psnr)), "worst": float(np.min(sharp_psnr))}
    return report


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
