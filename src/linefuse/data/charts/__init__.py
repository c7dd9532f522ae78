"""The embedded default data set: synthetic spectra drawn as line charts by matplotlib (and,
by their shares in data.charts.libraries, by plotnine and Vega-Lite).

Each chart is a table (CSV: the wavelength grid and every plotted series, the ground truth), its
rendering (PNG, the sharp target that later stages degrade) and a sidecar (JSON: the style family
and style sheet, the pixel size, the plot box and axis limits that map any pixel to data, and each
tick label's text and box). A figure of several panels (style.py) keeps the table, plot box,
limits, series and furniture of its first panel, lists every panel's tick labels and adds
`panels`, each panel's plot box.

A chart is planned (plan.py: every random choice, from the chart's own generator, so chart i is
byte-identical for a given `data.charts` block whatever the worker count or chart count), then
drawn by its library's drawer (registry.py names them: matplotlib_drawer.py, plotnine_drawer.py,
vegalite_drawer.py, and the bank's letsplot_drawer.py and reportlab_drawer.py, whose libraries
pyproject's `bank` extra installs; facts.py holds what they share). Bytes are stable because every
drawer starts from matplotlib's default rcParams (a user's matplotlibrc changes nothing, nor what
the process drew before), text uses fonts bundled with matplotlib, the pixel size is exact, and the
PNG carries no metadata.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from linefuse.data.charts.matplotlib_drawer import plot_furniture
from linefuse.data.charts.plan import DECIMALS, plan_chart
from linefuse.data.charts.registry import render_plan, require_libraries
from linefuse.params.data import ChartParams
from linefuse.stage import ordered_map

if TYPE_CHECKING:
    from linefuse.params.full import Params

__all__ = [
    "base_chart_params",
    "draw_chart",
    "generate",
    "plan_chart",
    "plot_furniture",
    "require_libraries",
    "sidecar_json",
    "write_chart",
]


def draw_chart(
    cfg: ChartParams, index: int, size_px: tuple[int, int] | None = None
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Chart `index` as (RGB uint8 image, table, sidecar): what `generate` writes as its PNG, CSV
    and JSON. `size_px` = (width, height) draws it at that pixel size instead."""
    plan = plan_chart(cfg, index, size_px)
    image, sidecar = render_plan(plan)
    return image, plan.table, sidecar


def sidecar_json(sidecar: dict) -> str:
    return json.dumps(sidecar, sort_keys=True) + "\n"


def write_chart(cfg: ChartParams, out_dir: Path, index: int) -> None:
    """Chart `index`'s PNG, CSV and JSON, as `generate` writes each, into out_dir."""
    image, table, sidecar = draw_chart(cfg, index)
    stem = out_dir / f"chart_{index:05d}"
    columns = ["wavelength"] + [s["column"] for s in sidecar["series"]]
    np.savetxt(
        stem.with_suffix(".csv"),
        table,
        fmt=f"%.{DECIMALS}f",
        delimiter=",",
        header=",".join(columns),
        comments="",
    )
    stem.with_suffix(".json").write_text(sidecar_json(sidecar), encoding="utf-8")
    Image.fromarray(image).save(
        stem.with_suffix(".png"), format="PNG", optimize=False, compress_level=6
    )


def generate(cfg: ChartParams, out_dir: Path, workers: int = 1) -> int:
    """Write chart_{i:05d}.png/.csv/.json for every index into out_dir; returns the count. The
    workers start from a fresh interpreter: forked from a process that has drawn a Vega-Lite
    chart, they would wait forever on vl-convert's runtime, whose thread a fork does not copy."""
    require_libraries(cfg.libraries, "data.charts.libraries")
    job = partial(write_chart, cfg, Path(out_dir))
    tasks = list(range(cfg.count))
    for _ in ordered_map(job, tasks, workers, "generate", "chart", start="forkserver"):
        pass
    return cfg.count


def base_chart_params(params: Params) -> ChartParams:
    """The charts the base trains on: data.charts with base.chart_overrides (its wider ranges),
    the base's seed, its own libraries (base.libraries, in equal shares), only the families
    the default data trains on, and its axis knobs off (ChartParams.without_axis_knobs)."""
    charts = params.data.charts.with_overrides(params.base.chart_overrides).without_axis_knobs()
    families = {k: v for k, v in charts.families.items() if k not in charts.held_out}
    libraries = {name: 1.0 / len(params.base.libraries) for name in params.base.libraries}
    return charts.model_copy(
        update={
            "seed": params.base.chart_seed,
            "families": families,
            "held_out": [],
            "libraries": libraries,
        }
    )
