"""The embedded default data set: synthetic spectra drawn as line charts by matplotlib.

Each chart is a table (CSV: the wavelength grid and every plotted series, the ground truth), its
rendering (PNG, the sharp target that later stages degrade) and a sidecar (JSON: the style family
and style sheet, the pixel size, the plot box and axis limits that map any pixel to data, and each
tick label's text and box). A figure of several panels (data/chart_style.py) keeps the table,
plot box, limits, series and furniture of its first panel, lists every panel's tick labels and
adds `panels`, each panel's plot box.

Every choice comes from one generator per chart index (`chart_rng`), so chart i is byte-identical
for a given `data.charts` block whatever the worker count or chart count. Bytes are stable because
the figure is drawn with the object-oriented API on an Agg canvas (no pyplot state), the rcParams
start from matplotlib's defaults before the style sheet (a user's matplotlibrc changes nothing,
nor what the process drew before; plotnine's and Vega-Lite's charts start from them too), text
uses fonts bundled with matplotlib, the pixel size is exact, and the PNG carries no metadata.
"""

from __future__ import annotations

import importlib.util
import json
import warnings
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from linefuse.data.chart_style import (
    Background,
    GridStyle,
    draw_grid,
    plan_background,
    plan_grid,
    plan_layout,
)
from linefuse.params.data import LIBRARY_PACKAGES, ChartParams, chart_pixels
from linefuse.stage import UserError, ordered_map

if TYPE_CHECKING:
    from linefuse.params.full import Params

# What varies between real spectrum figures beyond the style sheet: content, not knobs.
X_LABELS = ("Wavelength (nm)", "Wavelength [nm]", "wavelength / nm", "λ (nm)")
Y_LABELS = (
    "Intensity (a.u.)",
    "Intensity",
    "Counts",
    "Absorbance",
    "Normalized intensity",
    "Signal (arb. units)",
)
TITLES = ("Spectrum", "Emission spectrum", "Absorption spectrum", "Sample A", "Raw data")
SERIES_NAMES = (
    ("Sample A", "Sample B", "Sample C", "Sample D"),
    ("measured", "reference", "fit", "background"),
    ("25 °C", "50 °C", "75 °C", "100 °C"),
    ("t = 0 s", "t = 10 s", "t = 20 s", "t = 30 s"),
)
Y_SCALES = (1.0, 1.0, 100.0, 1000.0, 20000.0)  # a.u., percent, counts
DASHES = ("--", ":", "-.")
COLORMAPS = ("viridis", "plasma", "cividis", "tab10", "Dark2", "Set1")
LEGEND_PLACES = ("best", "upper right", "upper left")
TICK_DIRECTIONS = ("in", "out", "inout")
MATHTEXT = {"DejaVu Sans": "dejavusans", "DejaVu Serif": "dejavuserif", "STIXGeneral": "stix"}
DECIMALS = 6  # CSV values; the figure plots the rounded values, so the CSV is what was drawn


def make_spectrum(
    rng: np.random.Generator, cfg: ChartParams, x: np.ndarray | None = None
) -> np.ndarray:
    """(cfg.points, 2) wavelength/intensity: Gaussian and Lorentzian peaks on a sloping baseline;
    on the given wavelength grid `x` (a further series of the same chart) or a new one."""
    if x is None:
        start, span = rng.uniform(380.0, 450.0), rng.uniform(300.0, 400.0)
        x = np.linspace(start, start + span, cfg.points)
    start, span = x[0], x[-1] - x[0]
    n = int(rng.integers(cfg.peaks[0], cfg.peaks[1] + 1))
    centres = rng.uniform(start + 0.05 * span, start + 0.95 * span, n)
    widths = span * rng.uniform(0.005, 0.04, n)
    heights = rng.uniform(0.2, 1.0, n)
    gaussian = rng.random(n) < 0.5
    z = (x[:, None] - centres) / widths
    profiles = np.where(gaussian, np.exp(-0.5 * z**2), 1.0 / (1.0 + z**2))
    baseline = rng.uniform(0.05, 0.25) + rng.uniform(-0.1, 0.1) * (x - start) / span
    noise = rng.normal(0.0, cfg.noise * heights.max(), cfg.points)
    return np.column_stack([x, profiles @ heights + baseline + noise])


def chart_rng(cfg: ChartParams, index: int) -> np.random.Generator:
    """Chart `index`'s own generator, independent of how many charts or workers there are."""
    return np.random.default_rng(np.random.SeedSequence([cfg.seed % 2**64, index]))


def family_weights(cfg: ChartParams) -> dict[str, float]:
    """{family: probability}: the held-out families share `held_out_fraction` evenly, the trained
    ones the rest (all families alike when none is held out)."""
    held = [name for name in cfg.families if name in cfg.held_out]
    trained = [name for name in cfg.families if name not in cfg.held_out]
    if not held:
        return {name: 1.0 / len(trained) for name in cfg.families}
    return {
        name: cfg.held_out_fraction / len(held)
        if name in held
        else (1.0 - cfg.held_out_fraction) / len(trained)
        for name in cfg.families
    }


def choose_style(rng: np.random.Generator, cfg: ChartParams) -> tuple[str, str]:
    """(family, style sheet): the family by `family_weights`, then a style of it evenly."""
    names = list(cfg.families)
    cumulative = np.cumsum([family_weights(cfg)[name] for name in names])
    family = names[
        min(int(np.searchsorted(cumulative, rng.random(), side="right")), len(names) - 1)
    ]
    styles = cfg.families[family]
    return family, styles[int(rng.integers(len(styles)))]


def choose_library(cfg: ChartParams, index: int) -> tuple[str, str]:
    """(library, its theme; "" for matplotlib, whose looks are the style sheets) of chart `index`,
    by the shares of data.charts.libraries, from a generator of its own: the chart's other draws
    stay those of its index whatever the libraries (the bank's matplotlib charts stay as drawn)."""
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed % 2**64, index, 1]))
    names = list(cfg.libraries)
    cumulative = np.cumsum(list(cfg.libraries.values()))
    place = np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right")
    library = names[min(int(place), len(names) - 1)]
    themes = library_themes(library)
    return library, themes[int(rng.integers(len(themes)))] if themes else ""


def require_libraries(libraries: dict[str, float], key: str) -> None:
    """Every library with a share must be importable where its charts are drawn; one line names
    any that is not, before a worker starts (a GPU machine gets plotnine from `make wheels`)."""
    missing = [
        f"{name} (package {LIBRARY_PACKAGES[name]})"
        for name, share in libraries.items()
        if share > 0 and importlib.util.find_spec(LIBRARY_PACKAGES[name]) is None
    ]
    if missing:
        raise UserError(
            f"{key}: {', '.join(missing)} is not installed on this machine; install the project "
            "here (make install), carry its wheels to a GPU machine (make wheels), or drop it"
        )


def library_themes(library: str) -> tuple[str, ...]:
    """The themes a library draws in (none for matplotlib: its style sheets are the families)."""
    if library == "plotnine":
        from linefuse.data import plotnine_charts

        return plotnine_charts.THEMES
    if library == "vegalite":
        from linefuse.data import vega_charts

        return vega_charts.THEMES
    return ()


@dataclass(frozen=True)
class SeriesPlan:
    column: str
    label: str
    color: tuple[float, float, float] | None  # None: the style sheet's colour cycle
    linestyle: str
    marker: str | None
    markevery: int
    markersize: float
    hollow: bool


@dataclass(frozen=True)
class PanelPlan:
    """A further panel's curves: its own table and series, dressed like the first panel."""

    table: np.ndarray
    series: tuple[SeriesPlan, ...]


@dataclass(frozen=True)
class ChartPlan:
    """Every random choice of one chart, drawn before any drawing (cheap to make in bulk)."""

    family: str
    style: str
    font: str
    width: int  # px
    height: int  # px
    dpi: float
    table: np.ndarray  # (points, 1 + series): wavelength, then each series as plotted
    series: tuple[SeriesPlan, ...]
    line_width_pt: float
    font_pt: float
    grid_flip: bool  # the style sheet's grid switched (on <-> off)
    ticks: tuple[str, float] | None  # (direction, length pt); None: the style sheet's own
    minor_ticks: bool
    despine: bool
    x_label: str | None
    y_label: str | None
    title: str | None
    legend: tuple[str, bool] | None  # (place, frame)
    annotate: bool
    axes_color: tuple[float, float, float] | None  # None: the style sheet's
    pad: float
    layout: tuple[int, int] = (1, 1)  # (rows, columns) of panels; the first is table and series
    panels: tuple[PanelPlan, ...] = ()  # the panels after the first
    background: Background | None = None  # None: the style sheet's faces
    grid: GridStyle | None = None  # None: the style sheet's grid line style
    library: str = "matplotlib"  # who draws it (data.charts.libraries); style is then its theme
    extra: dict = field(default_factory=dict)  # rcParams a test may add


def plan_chart(cfg: ChartParams, index: int, size_px: tuple[int, int] | None = None) -> ChartPlan:
    """Chart `index`'s choices. `size_px` = (width, height) overrides the drawn pixel size (the dpi
    scales so the figure keeps its drawn width in inches: a larger chart is a sharper export).
    The draws run in a fixed order from the chart's own generator: the style and figure size,
    the curves, the series' looks, the axes' dressing, then (chart_style) the further panels,
    the background and the grid's style, each only when its knob is on."""
    rng = chart_rng(cfg, index)
    family, style = choose_style(rng, cfg)
    font = cfg.fonts[int(rng.integers(len(cfg.fonts)))]
    inches = (rng.uniform(*cfg.width_in), rng.uniform(*cfg.height_in))
    dpi = float(rng.integers(cfg.dpi[0], cfg.dpi[1] + 1))
    table = _spectra_table(rng, cfg)
    series = _series_plans(rng, cfg, count=table.shape[1] - 1)
    dressing = _dressing(rng, cfg, len(series))
    layout = plan_layout(rng, cfg)
    panels = []
    for _ in range(layout[0] * layout[1] - 1):
        more = _spectra_table(rng, cfg)
        panels.append(PanelPlan(more, _series_plans(rng, cfg, count=more.shape[1] - 1)))
    width, height, dpi = _canvas(cfg, inches, dpi, layout, size_px)
    library, theme = choose_library(cfg, index)
    if library != "matplotlib":  # its family is the library, its style the library's theme
        family, style, layout, panels = library, theme, (1, 1), []
    return ChartPlan(
        family=family,
        style=style,
        library=library,
        font=font,
        width=width,
        height=height,
        dpi=dpi,
        table=table,
        series=series,
        **dressing,
        layout=layout,
        panels=tuple(panels),
        background=plan_background(rng, cfg),
        grid=plan_grid(rng, cfg),
    )


def _canvas(
    cfg: ChartParams,
    inches: tuple[float, float],
    dpi: float,
    layout: tuple[int, int],
    size_px: tuple[int, int] | None,
) -> tuple[int, int, float]:
    """(width px, height px, dpi) of the figure: the drawn inches (widened by the square root of
    the panel columns, heightened by that of the rows) at the drawn dpi, lowered where the long
    side would pass cfg.max_px (never below the dpi range's low); or `size_px` at the dpi that
    keeps the width in inches."""
    width_in, height_in = inches
    if layout != (1, 1):
        width_in, height_in = width_in * layout[1] ** 0.5, height_in * layout[0] ** 0.5
    dpi = max(min(dpi, cfg.max_px / max(width_in, height_in)), float(cfg.dpi[0]))
    width, height = chart_pixels(width_in, dpi), chart_pixels(height_in, dpi)
    if size_px is not None:
        width, height = (int(v) for v in size_px)
        dpi = width / width_in
    return width, height, dpi


def _spectra_table(rng: np.random.Generator, cfg: ChartParams) -> np.ndarray:
    """(points, 1 + series), rounded to DECIMALS: one wavelength grid and each series'
    spectrum on it, in one unit scale, optionally stacked (each series lifted above the last)."""
    count = int(rng.integers(cfg.series[0], cfg.series[1] + 1))
    first = make_spectrum(rng, cfg)
    x, curves = first[:, 0], [first[:, 1]]
    curves += [make_spectrum(rng, cfg, x)[:, 1] for _ in range(count - 1)]
    scale = Y_SCALES[int(rng.integers(len(Y_SCALES)))]
    step = rng.uniform(0.3, 0.8) if rng.random() < cfg.stack_prob else 0.0
    curves = [(curve + k * step) * scale for k, curve in enumerate(curves)]
    return np.round(np.column_stack([x, *curves]), DECIMALS)


def _series_plans(rng: np.random.Generator, cfg: ChartParams, count: int) -> tuple[SeriesPlan, ...]:
    """How each of `count` series is drawn: its colour (a colormap's, black for the first, or
    the style's cycle), its legend name, dashes and markers."""
    colour_draw = rng.random()
    cmap = COLORMAPS[int(rng.integers(len(COLORMAPS)))]
    names = SERIES_NAMES[int(rng.integers(len(SERIES_NAMES)))]
    colours: list = [None] * count
    if colour_draw < cfg.colormap_prob:
        from matplotlib import colormaps

        stops = np.linspace(0.0, 0.85, count) if count > 1 else [0.0]
        colours = [tuple(float(c) for c in colormaps[cmap](s)[:3]) for s in stops]
    elif colour_draw < cfg.colormap_prob + cfg.black_prob:
        colours[0] = (0.0, 0.0, 0.0)
    series = []
    for k in range(count):
        dashed, marked = rng.random(2) < (cfg.dash_prob, cfg.marker_prob)
        dash, marker = (
            DASHES[int(rng.integers(len(DASHES)))],
            cfg.markers[int(rng.integers(len(cfg.markers)))],
        )
        markers_shown = int(rng.integers(8, 21))
        series.append(
            SeriesPlan(
                column="intensity" if count == 1 else f"intensity_{k}",
                label=names[k],
                color=colours[k],
                linestyle=dash if dashed else "-",
                marker=marker if marked else None,
                markevery=max(1, cfg.points // markers_shown),
                markersize=float(rng.uniform(2.5, 4.5)),
                hollow=bool(rng.random() < 0.3),
            )
        )
    return tuple(series)


def _dressing(rng: np.random.Generator, cfg: ChartParams, count: int) -> dict:
    """ChartPlan's remaining fields: line width, font size, and what the axes show beyond the
    curves (grid, ticks, spines, labels, title, legend, a peak note, a tinted face, padding)."""
    line_width_pt = float(rng.uniform(*cfg.line_width_pt))
    font_pt = float(rng.uniform(*cfg.font_pt))
    grid_flip, tick_set, minor, despine, labels, title, legend, annotate, tint = rng.random(9) < (
        cfg.grid_toggle_prob,
        cfg.tick_prob,
        cfg.minor_ticks_prob,
        cfg.despine_prob,
        cfg.labels_prob,
        cfg.title_prob,
        cfg.legend_prob,
        cfg.annotate_prob,
        cfg.tint_prob,
    )
    direction = TICK_DIRECTIONS[int(rng.integers(len(TICK_DIRECTIONS)))]
    tick_length = float(rng.uniform(2.0, 5.0))
    x_label = X_LABELS[int(rng.integers(len(X_LABELS)))]
    y_label = Y_LABELS[int(rng.integers(len(Y_LABELS)))]
    title_text = TITLES[int(rng.integers(len(TITLES)))]
    place, frame = LEGEND_PLACES[int(rng.integers(len(LEGEND_PLACES)))], bool(rng.random() < 0.7)
    hue, strength = rng.random(3), rng.uniform(0.04, 0.12)
    pad = float(rng.uniform(0.2, 0.6))
    return {
        "line_width_pt": line_width_pt,
        "font_pt": font_pt,
        "grid_flip": bool(grid_flip),
        "ticks": (direction, tick_length) if tick_set else None,
        "minor_ticks": bool(minor),
        "despine": bool(despine),
        "x_label": x_label if labels else None,
        "y_label": y_label if labels else None,
        "title": title_text if title else None,
        "legend": (place, frame) if legend and count > 1 else None,
        "annotate": bool(annotate),
        "axes_color": tuple(float(1.0 - strength * (1.0 - h)) for h in hue) if tint else None,
        "pad": pad,
    }


@lru_cache
def _bundled_file(font: str) -> str:
    """The file matplotlib draws `font` from, which must be its own copy: a same-named system
    font would make the PNGs differ between machines."""
    import matplotlib
    from matplotlib import font_manager

    path = font_manager.findfont(
        font_manager.FontProperties(family=[font]), fallback_to_default=False
    )
    if Path(matplotlib.get_data_path()).resolve() not in Path(path).resolve().parents:
        raise RuntimeError(f"font {font!r} resolves to {path}, not to the copy inside matplotlib")
    return path


def _rgb255(color) -> list[int]:
    from matplotlib.colors import to_rgb

    return [round(255 * c) for c in to_rgb(color)]


def _style_rc(plan: ChartPlan) -> dict:
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


def render_plan(plan: ChartPlan) -> tuple[np.ndarray, dict]:
    """(height, width, 3) uint8 RGB image and the sidecar dict of one planned chart: the style
    set up, the series plotted, the axes dressed, the figure laid out and drawn, and what it
    drew measured back from the canvas. Another library's chart is drawn by its adapter.

    Every library draws from matplotlib's own defaults, whatever rcParams the process holds (a
    user's matplotlibrc, a caller's changes): plotnine's themes leave some unset (cap styles,
    snapping, text antialiasing) that would otherwise reach its pixels. Restored after."""
    import matplotlib
    import matplotlib.style

    _bundled_file(plan.font)
    with matplotlib.rc_context():
        matplotlib.style.use("default")
        if plan.library == "plotnine":
            from linefuse.data.plotnine_charts import render

            return render(plan)
        if plan.library == "vegalite":
            from linefuse.data.vega_charts import render

            return render(plan)
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
        sidecar = _sidecar(plan, axes, renderer, lines, note, height=rgba.shape[0])
    if rgba.shape[:2] != (plan.height, plan.width):
        raise AssertionError(
            f"drew {rgba.shape[1]}x{rgba.shape[0]}, not {plan.width}x{plan.height}"
        )
    return _on_white(rgba), sidecar


def _blank_figure(plan: ChartPlan, rc):
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


def _plot_series(ax, table: np.ndarray, series: tuple[SeriesPlan, ...], rc) -> list:
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


def _dress_axes(ax, plan: ChartPlan, rc, table: np.ndarray):
    """Grid, ticks, spines, axis labels, title, legend and the peak note of one panel (the
    note on its `table`), as planned; returns the note's annotation (None without one)."""
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
    return _annotate_peak(ax, table, plan.font_pt, rc) if plan.annotate else None


def _annotate_peak(ax, table: np.ndarray, font_pt: float, rc):
    """The main series' highest point labelled with its wavelength and an arrow, the text on
    the side of the peak with more room."""
    x, main = table[:, 0], table[:, 1]
    peak = int(np.argmax(main))
    right_half = x[peak] > (x[0] + x[-1]) / 2
    return ax.annotate(
        f"{x[peak]:.0f} nm",
        xy=(x[peak], main[peak]),
        xytext=(-30 if right_half else 12, -12),
        textcoords="offset points",
        ha="right" if right_half else "left",
        fontsize=font_pt,
        arrowprops={"arrowstyle": "->", "lw": 0.8, "color": rc["text.color"]},
    )


def _sidecar(plan: ChartPlan, axes: list, renderer, lines: list, note, height: int) -> dict:
    """The drawn chart measured from its canvas: the first panel's plot box and limits that map
    pixels to data, each of its series' drawn colour and width and its furniture; every panel's
    tick labels, and with several panels each one's plot box (`panels`, the first's first)."""
    ax = axes[0]
    furniture = plot_furniture(ax, renderer, note)
    labels = [label for panel in axes for label in tick_labels(panel, renderer)]
    xlim, ylim = ax.get_xlim(), ax.get_ylim()
    series = [
        {
            "column": s.column,
            "color": _rgb255(line.get_color()),
            "linewidth_px": round(line.get_linewidth() * plan.dpi / 72.0, 4),
            "linestyle": s.linestyle,
            "marker": s.marker,
        }
        for s, line in zip(plan.series, lines, strict=True)
    ]
    sidecar = {
        "library": plan.library,
        "family": plan.family,
        "style": plan.style,
        "font": plan.font,
        "width": plan.width,
        "height": plan.height,
        "dpi": round(plan.dpi, 4),
        "plot_box": _plot_box(ax, height),
        "xlim": [round(float(v), 6) for v in xlim],
        "ylim": [round(float(v), 6) for v in ylim],
        "series": series,
        "furniture": furniture,
        "tick_labels": labels,
    }
    if len(axes) > 1:
        sidecar["panels"] = [_plot_box(panel, height) for panel in axes]
    return sidecar


def _plot_box(ax, height: int) -> list[float]:
    """The axes' box in image pixels (left, top, right, bottom): display y runs up from the
    bottom edge, image rows run down."""
    box = ax.get_window_extent()
    return [round(float(v), 4) for v in (box.x0, height - box.y1, box.x1, height - box.y0)]


def _on_white(rgba: np.ndarray) -> np.ndarray:
    """RGB uint8 of the canvas composited over white (opaque in every style; white if not)."""
    alpha = rgba[..., 3:].astype(np.float64) / 255.0
    return np.rint(rgba[..., :3] * alpha + 255.0 * (1.0 - alpha)).astype(np.uint8)


def _series_colour(series: tuple[SeriesPlan, ...], k: int, rc) -> tuple[float, float, float]:
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
            "color": _rgb255(shown),
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


def _write_chart(cfg: ChartParams, out_dir: Path, index: int) -> None:
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
    job = partial(_write_chart, cfg, Path(out_dir))
    tasks = list(range(cfg.count))
    for _ in ordered_map(job, tasks, workers, "generate", "chart", start="forkserver"):
        pass
    return cfg.count


def base_chart_params(params: Params) -> ChartParams:
    """The charts the base trains on: data.charts with base.chart_overrides (its wider ranges),
    the base's seed, its own libraries (base.libraries, in equal shares) and only the families
    the default data trains on."""
    charts = params.data.charts.with_overrides(params.base.chart_overrides)
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
