"""A planned chart drawn by matplotlib: the style sheet and the plan's rcParams, its series
plotted and its axes dressed on an Agg canvas, and what it drew measured back from the canvas
(the plot box and limits that map pixels to data, each series' drawn colour and width, the
furniture a curve reader masks, every tick label's text and box). plotnine, which draws through
matplotlib, is measured with the same `sidecar`.

Bytes are stable because the figure is drawn with the object-oriented API on an Agg canvas (no
pyplot state), the rcParams start from matplotlib's defaults (registry.render_plan) before the
style sheet, text uses fonts bundled with matplotlib, and the pixel size is exact. `plan` is a
plan.ChartPlan, read by its fields alone.
"""

from __future__ import annotations

import warnings

import numpy as np

from linefuse.data.charts.facts import chart_sidecar, on_white, rgb255
from linefuse.data.charts.style import Background, draw_grid

MATHTEXT = {"DejaVu Sans": "dejavusans", "DejaVu Serif": "dejavuserif", "STIXGeneral": "stix"}


def _style_rc(plan) -> dict:
    """rcParams on top of the style sheet: the chart's font (bundled), sizes and line width."""
    return {
        "font.family": [plan.font],
        "mathtext.fontset": MATHTEXT.get(plan.font, "dejavusans"),
        "font.size": plan.font_pt,
        "axes.labelsize": plan.font_pt + 1.0,
        "axes.titlesize": plan.font_pt + 1.5,
        "xtick.labelsize": plan.font_pt,
        "ytick.labelsize": plan.font_pt,
        "legend.fontsize": plan.font_pt - 0.5,
        "lines.linewidth": plan.line_width_pt,
        **plan.extra,
    }


def render(plan) -> tuple[np.ndarray, dict]:
    """(height, width, 3) uint8 RGB image and the sidecar dict of one planned chart: the style
    set up, the series plotted, the axes dressed, the figure laid out and drawn, and what it
    drew measured back from the canvas. Under registry.render_plan's rcParams (the defaults)."""
    import matplotlib
    import matplotlib.style

    matplotlib.style.use(plan.style)
    matplotlib.rcParams.update(_style_rc(plan))
    rc = matplotlib.rcParams
    figure, canvas, axes = _blank_figure(plan, rc)
    curves = [(plan.table, plan.series)] + [(p.table, p.series) for p in plan.panels]
    drawn = []
    for ax, (table, series) in zip(axes, curves, strict=True):
        lines = _plot_series(ax, table, series, rc)
        drawn.append((lines, _dress_axes(ax, plan, rc, table)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "not applied" on a cramped figure: keeps the box
        figure.tight_layout(pad=plan.pad)
    canvas.draw()
    rgba = np.asarray(canvas.buffer_rgba())
    renderer = canvas.get_renderer()
    lines, note = drawn[0]
    measured = sidecar(plan, axes, renderer, lines, note, height=rgba.shape[0])
    if rgba.shape[:2] != (plan.height, plan.width):
        raise AssertionError(
            f"drew {rgba.shape[1]}x{rgba.shape[0]}, not {plan.width}x{plan.height}"
        )
    return on_white(rgba), measured


def _blank_figure(plan, rc):
    """(figure, Agg canvas, [axes] in reading order) of exactly plan.width x plan.height px,
    painted as savefig would paint them under the current style, or in the planned background."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # what savefig would paint: classic-era styles draw a grey figure but save it on white
    face = rc["savefig.facecolor"]
    background = plan.background or Background(figure=None, axes=None)
    figure = Figure(
        # the canvas is int(inches * dpi) px, rounded up within 1e-8 px: exactly width x height
        figsize=(plan.width / plan.dpi, plan.height / plan.dpi),
        dpi=plan.dpi,
        facecolor=background.figure or (rc["figure.facecolor"] if face == "auto" else face),
    )
    canvas = FigureCanvasAgg(figure)
    rows, columns = plan.layout
    axes = [figure.add_subplot(rows, columns, k + 1) for k in range(rows * columns)]
    for ax in axes:
        if plan.axes_color is not None or background.axes is not None:
            ax.set_facecolor(plan.axes_color or background.axes)  # a tint over the background
    return figure, canvas, axes


def _plot_series(ax, table: np.ndarray, series, rc) -> list:
    """Each planned series of one panel drawn as a line (markers staggered between series);
    the Line2Ds."""
    x = table[:, 0]
    lines = []
    for k, s in enumerate(series):
        style = {"color": _series_colour(series, k, rc)}
        if s.marker is not None:
            style |= {
                "marker": s.marker,
                "markevery": (k * s.markevery // max(len(series), 1), s.markevery),
                "markersize": s.markersize,
            }
            if s.hollow:
                style["markerfacecolor"] = "none"
        (line,) = ax.plot(x, table[:, k + 1], linestyle=s.linestyle, label=s.label, **style)
        lines.append(line)
    return lines


def _dress_axes(ax, plan, rc, table: np.ndarray):
    """Grid, ticks, spines, axis labels, title, legend and the peak note of one panel (the
    note on its `table`), as planned; returns the note's annotation (None without one)."""
    if plan.x_descending:
        ax.invert_xaxis()
    if plan.y_log:
        ax.set_yscale("log")
    if plan.grid_flip:
        ax.grid(not rc["axes.grid"])
    if plan.grid is not None:
        draw_grid(ax, plan.grid)
    if plan.ticks is not None:
        direction, length = plan.ticks
        ax.tick_params(which="major", direction=direction, length=length)
        ax.tick_params(which="minor", direction=direction, length=length * 0.6)
    if plan.minor_ticks:
        ax.minorticks_on()
    if plan.despine:
        ax.spines[["top", "right"]].set_visible(False)
    if plan.x_label:
        ax.set_xlabel(plan.x_label)
        ax.set_ylabel(plan.y_label)
    if plan.title:
        ax.set_title(plan.title)
    if plan.legend is not None:
        place, frame = plan.legend
        ax.legend(loc=place, frameon=frame)
    return _annotate_peak(ax, table, plan, rc) if plan.annotate else None


def _annotate_peak(ax, table: np.ndarray, plan, rc):
    """The main series' highest point labelled with its position and an arrow, the text on
    the side of the peak with more room."""
    x, main = table[:, 0], table[:, 1]
    peak = int(np.argmax(main))
    right_half = (x[peak] > (x[0] + x[-1]) / 2) != plan.x_descending  # as drawn
    return ax.annotate(
        f"{x[peak] / 10.0**plan.x_power:.0f} {plan.x_unit}",
        xy=(x[peak], main[peak]),
        xytext=(-30 if right_half else 12, -12),
        textcoords="offset points",
        ha="right" if right_half else "left",
        fontsize=plan.font_pt,
        arrowprops={"arrowstyle": "->", "lw": 0.8, "color": rc["text.color"]},
    )


def sidecar(
    plan, axes: list, renderer, lines: list, note, height: int, limits: tuple | None = None
) -> dict:
    """The drawn chart measured from its canvas (facts.chart_sidecar): the first panel's plot
    box, limits and scale that map pixels to data, each of its series' drawn colour and width
    and its furniture; every panel's tick labels, and with several panels each one's plot box
    (`panels`, the first's first). `limits` = (xlim, ylim, y scale) in data units, for a drawer
    whose axes hold transformed data (plotnine's reversed and log scales); else the axes'."""
    ax = axes[0]
    # left, right and bottom, top: high to low on an inverted axis
    xlim, ylim, y_scale = limits or (ax.get_xlim(), ax.get_ylim(), ax.get_yscale())
    measured = chart_sidecar(
        plan,
        plot_box=_plot_box(ax, height),
        xlim=xlim,
        ylim=ylim,
        y_scale=y_scale,
        drawn=[
            (rgb255(line.get_color()), line.get_linewidth() * plan.dpi / 72.0) for line in lines
        ],
        furniture=plot_furniture(ax, renderer, note),
        tick_labels=[label for panel in axes for label in tick_labels(panel, renderer)],
    )
    if len(axes) > 1:
        measured["panels"] = [_plot_box(panel, height) for panel in axes]
    return measured


def _plot_box(ax, height: int) -> list[float]:
    """The axes' box in image pixels (left, top, right, bottom): display y runs up from the
    bottom edge, image rows run down."""
    box = ax.get_window_extent()
    return [round(float(v), 4) for v in (box.x0, height - box.y1, box.x1, height - box.y0)]


def _series_colour(series, k: int, rc) -> tuple[float, float, float]:
    """Series k's colour: its planned one, else the style's cycle in order, skipping colours
    near a planned one. A style whose cycle starts with black (grayscale) would otherwise draw
    a second series in the forced-black first series' colour: two lines only a dash tells apart,
    which no one draws on purpose and which leaves the main series unreadable by colour."""
    from matplotlib.colors import to_rgb

    if series[k].color is not None:
        return series[k].color
    taken = [np.array(s.color) for s in series if s.color is not None]
    cycle = [to_rgb(c) for c in rc["axes.prop_cycle"].by_key()["color"]]
    free = [c for c in cycle if all(np.abs(np.array(c) - t).max() > 0.2 for t in taken)]
    unplanned = sum(s.color is None for s in series[:k])
    return (free or cycle)[unplanned % len(free or cycle)]


def plot_furniture(ax, renderer, note=None) -> dict:
    """What else the plot box shows, in image pixels (y down): the boxes of the legend and of
    the annotation `note`'s text, and the visible grid lines as polylines with their width and
    the colour they show. A curve reader masks them out: in the series' own colour (a black grid
    or legend frame on a black line) nothing in the pixels tells them from the curve. The
    annotation's arrow is left out: it ends at the peak, whose pixels a mask would hide."""
    from matplotlib.colors import to_rgb
    from matplotlib.text import Text

    height = renderer.height

    def box(e) -> list[float]:
        return [round(float(v), 2) for v in (e.x0, height - e.y1, e.x1, height - e.y0)]

    def line(xy: np.ndarray, width_pt: float, colour, alpha: float | None) -> dict:
        """A polyline and the colour it shows: its own, blended over the axes' face by alpha."""
        shown = np.array(to_rgb(colour))
        if alpha is not None:
            shown = alpha * shown + (1.0 - alpha) * np.array(to_rgb(ax.get_facecolor()))
        return {
            "points": [[round(x, 2), round(height - y, 2)] for x, y in xy.tolist()],
            "width_px": round(float(renderer.points_to_pixels(width_pt)), 4),
            "color": rgb255(shown),
        }

    boxes = (
        [box(ax.get_legend().get_window_extent(renderer))] if ax.get_legend() is not None else []
    )
    lines = []
    for axis in (ax.xaxis, ax.yaxis):
        low, high = sorted(axis.get_view_interval())
        for tick in axis.get_major_ticks() + axis.get_minor_ticks():
            grid = tick.gridline
            if grid.get_visible() and grid.get_linewidth() > 0 and low <= tick.get_loc() <= high:
                xy = grid.get_transform().transform(grid.get_xydata())
                lines.append(line(xy, grid.get_linewidth(), grid.get_color(), grid.get_alpha()))
    if note is not None:
        boxes.append(box(Text.get_window_extent(note, renderer)))  # the text, not the arrow
    return {"boxes": boxes, "lines": lines}


def tick_labels(ax, renderer) -> list[dict]:
    """Every major tick label drawn, for both axes: its axis, its text as drawn (matplotlib's
    minus sign included; the offset text such as "1e3" is not a tick label) and its box in image
    pixels (left, top, right, bottom; y down), the ground truth a text reader is scored on.
    Labels whose tick lies outside the view limits are not drawn, nor empty ones; a box that
    leaves the image is left out, as its text cannot be read whole."""
    height, width = renderer.height, renderer.width
    labels = []
    for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        low, high = sorted(axis.get_view_interval())
        slack = 1e-10 * (high - low)  # matplotlib's own tolerance for a tick on the limit
        for tick in axis.get_major_ticks():
            if not (tick.get_visible() and low - slack <= tick.get_loc() <= high + slack):
                continue
            for label in (tick.label1, tick.label2):
                text = label.get_text()
                if not (label.get_visible() and text.strip()):
                    continue
                e = label.get_window_extent(renderer)
                box = [round(float(v), 2) for v in (e.x0, height - e.y1, e.x1, height - e.y0)]
                if box[0] >= 0 and box[1] >= 0 and box[2] <= width and box[3] <= height:
                    labels.append({"axis": name, "text": text, "box": box})
    return labels
