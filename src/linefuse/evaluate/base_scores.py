"""A base UNet's own scores, with no adapter: what the model card and the scaling benchmark report.

The charts are the first `base.score_charts` of the default data (data.charts, its seed: charts
the base never trains on, drawn with base.chart_seed), whole, in every domain and level, degraded
as the shard stage degrades (degrade.seed). The trained families score as `test`, the held-out
ones as `held_out`; the sharp charts themselves score as `sharp` (what a restoration must not
harm). Each split's mean gain is the mean over the domain x level cells of each cell's mean, with
a stratified bootstrap interval, as evaluate's headline.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from linefuse.data.charts import draw_chart
from linefuse.data.degrade import degrade, item_rng
from linefuse.evaluate.intervals import mean_of_means_interval
from linefuse.evaluate.metrics import psnr
from linefuse.params import Params
from linefuse.serve.restorer import Restorer


def scoring_charts(params: Params) -> list[tuple[str, str, np.ndarray]]:
    """(chart id, split, sharp image) of the default charts the scores use."""
    charts = params.data.charts
    out = []
    for index in range(params.base.score_charts):
        image, _, sidecar = draw_chart(charts, index)
        split = "held_out" if sidecar["family"] in charts.held_out else "test"
        out.append((f"chart_{index:05d}", split, image))
    return out


def score_base(params: Params, folder: Path, device: str, charts=None) -> dict:
    """{test, held_out: {mean, low, high, samples, by_domain}, sharp: {mean, worst}} of the base
    in `folder`, restoring in eval.steps DDIM steps on `device`."""
    charts = charts if charts is not None else scoring_charts(params)
    restorer = Restorer(params, None, device, base_dir=folder)
    cells: dict[str, dict[tuple[str, str], list[float]]] = {"test": {}, "held_out": {}}
    sharp_psnr = []
    for chart_id, split, sharp in charts:
        restored = restorer.restore_image(sharp, params.eval.steps)
        sharp_psnr.append(psnr(restored, sharp, params.eval.metric))
        for domain in params.degrade.domains:
            for level in params.degrade.levels:
                rng = item_rng(params.degrade.seed, chart_id, domain, level)
                blurred, _ = degrade(sharp, domain, params.degrade.level(domain, level), rng)
                restored = restorer.restore_image(blurred, params.eval.steps)
                gain = psnr(restored, sharp, params.eval.metric) - psnr(
                    blurred, sharp, params.eval.metric
                )
                cells[split].setdefault((domain, level), []).append(gain)
    report = {split: _split_summary(params, split_cells) for split, split_cells in cells.items()}
    report["sharp"] = {"mean": float(np.mean(sharp_psnr)), "worst": float(np.min(sharp_psnr))}
    return report


def _split_summary(params: Params, cells: dict[tuple[str, str], list[float]]) -> dict:
    if not cells:
        return {}
    summary = mean_of_means_interval(list(cells.values()), params.eval.interval, params.eval.seed)
    summary["by_domain"] = {
        domain: float(np.mean([np.mean(g) for (d, _), g in cells.items() if d == domain]))
        for domain in params.degrade.domains
    }
    summary["worst_cell"] = float(min(np.mean(gains) for gains in cells.values()))
    return summary
