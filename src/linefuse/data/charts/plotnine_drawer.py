"""A planned chart drawn by plotnine: ggplot2's grammar and themes (grey, bw, minimal, classic,
light, dark) over the same ChartPlan as matplotlib's drawer (matplotlib_drawer.py).

plotnine lays out and draws through matplotlib, so what it drew is measured from its own figure
with the matplotlib drawer's functions: the plot box and limits of its panel, each series' drawn
colour and width, the grid lines, and every tick label's text and box. Its legend sits outside
the panel (ggplot2's places), and it draws no peak note.
"""

from __future__ import annotations

import numpy as np

from linefuse.data.charts.facts import bundled_file, hex_colour, on_white
from linefuse.data.charts.matplotlib_drawer import sidecar

THEMES = ("grey", "bw", "minimal", "classic", "light", "dark")
# the plan's (matplotlib's) legend place as one of ggplot2's, outside the panel
LEGEND_PLACES = {"best": "right", "upper right": "bottom", "upper left": "top"}
LINETYPES = {"-": "solid", "--": "dashed", ":": "dotted", "-.": "dashdot"}
SIZE_PER_POINT = 1.0 / np.sqrt(np.pi)  # plotnine draws a size of s as s * sqrt(pi) points


def render(plan) -> tuple[np.ndarray, dict]:
    """(height, width, 3) uint8 RGB image and the sidecar of one planned chart, drawn by
    plotnine in the theme plan.style."""
    import pandas as pd
    import plotnine as p9
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from mizani.palettes import hue_pal

    bundled_file(plan.font)
    labels = [s.label for s in plan.series]
    rows = pd.DataFrame(
        {
            "wavelength": np.tile(plan.table[:, 0], len(labels)),
            "value": plan.table[:, 1:].T.reshape(-1),
            "series": pd.Categorical(np.repeat(labels, len(plan.table)), categories=labels),
        }
    )
    palette = hue_pal()(len(labels))  # ggplot2's own colours where the plan names none
    colours = {
        s.label: palette[k] if s.color is None else hex_colour(s.color)
        for k, s in enumerate(plan.series)
    }
    chart = (
        p9.ggplot(rows, p9.aes("wavelength", "value", color="series", linetype="series"))
        + p9.geom_line(size=plan.line_width_pt * SIZE_PER_POINT)
        + p9.scale_color_manual(values=colours, breaks=labels)
        + p9.scale_linetype_manual(
            values={s.label: LINETYPES[s.linestyle] for s in plan.series}, breaks=labels
        )
        + p9.labs(x=plan.x_label or "", y=plan.y_label or "", title=plan.title or "")
    )
    for k, s in enumerate(plan.series):
        if s.marker is not None:
            start = k * s.markevery // len(plan.series)
            marked = rows[rows["series"] == s.label].iloc[start :: s.markevery]
            fill = "none" if s.hollow else colours[s.label]
            chart += p9.geom_point(
                marked, shape=s.marker, size=s.markersize * SIZE_PER_POINT, fill=fill
            )
    theme = getattr(p9, f"theme_{plan.style}")(base_size=plan.font_pt, base_family=plan.font)
    chart += theme + p9.theme(
        figure_size=(plan.width / plan.dpi, plan.height / plan.dpi),
        dpi=plan.dpi,
        legend_position=LEGEND_PLACES[plan.legend[0]] if plan.legend is not None else "none",
    )
    if plan.grid_flip:  # the theme's grid switched: classic draws none, the others do
        chart += p9.theme(
            panel_grid_major=p9.element_line(color="#d9d9d9", size=0.5)
            if plan.style == "classic"
            else p9.element_blank(),
            panel_grid_minor=p9.element_blank(),
        )
    if not plan.x_label:
        chart += p9.theme(axis_title=p9.element_blank())
    if plan.x_descending:
        chart += p9.scale_x_reverse()
    if plan.y_log:
        chart += p9.scale_y_log10()
    figure = chart.draw()
    try:
        canvas = FigureCanvasAgg(figure)
        canvas.draw()
        rgba = np.asarray(canvas.buffer_rgba()).copy()
        axes = figure.axes[:1]
        lines = axes[0].get_lines()[: len(plan.series)]
        measured = sidecar(
            plan, axes, canvas.get_renderer(), lines, None, rgba.shape[0], _limits(plan, axes[0])
        )
    finally:
        import matplotlib.pyplot as plt

        plt.close(figure)
    if rgba.shape[:2] != (plan.height, plan.width):
        raise AssertionError(f"plotnine drew {rgba.shape[1]}x{rgba.shape[0]}, not {plan.width}")
    return on_white(rgba), measured


def _limits(plan, ax) -> tuple:
    """(xlim, ylim, y scale) in data units: plotnine hands matplotlib its scales' transformed
    values (a reversed x negated, a log y's log10)."""
    xlim = tuple(-v for v in ax.get_xlim()) if plan.x_descending else ax.get_xlim()
    ylim = tuple(10.0**v for v in ax.get_ylim()) if plan.y_log else ax.get_ylim()
    return xlim, ylim, "log" if plan.y_log else "linear"
