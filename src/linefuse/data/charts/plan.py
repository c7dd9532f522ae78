"""A chart's plan: every random choice of one chart (its style, size, curves, series' looks and
the axes' dressing), drawn from the chart's own generator before any drawing, so planning is
cheap in bulk and chart i is the same whatever draws it (registry.render_plan).

Every choice comes from one generator per chart index (`chart_rng`), so chart i is byte-identical
for a given `data.charts` block whatever the worker count or chart count; the library that draws
it comes from a generator of its own (`choose_library`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from linefuse.data.charts.registry import library_themes
from linefuse.data.charts.style import (
    Background,
    GridStyle,
    plan_background,
    plan_grid,
    plan_layout,
)
from linefuse.params.data import ChartParams, chart_pixels

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
# ASCII: STIXGeneral has no superscript minus
WAVENUMBER_LABELS = ("Wavenumber (cm-1)", "Wavenumber / cm-1", "Wavenumber [cm-1]")
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
DECIMALS = 6  # CSV values; the figure plots the rounded values, so the CSV is what was drawn
WAVENUMBERS = ((400.0, 800.0), (3000.0, 4000.0))  # a descending x's low and high ends, cm-1
DECADES = (2.0, 5.0)  # a log y's span
LOG_LOWEST = (-1, 2)  # the power of ten a log y starts at: 6 decimals keep 5 digits at 0.1
OFFSET_POWERS = (6, 7)  # an offset y's tallest intensity is one of these powers of ten
# an offset x's grid (380-850) in hertz: a radio spectrum from MHz or GHz, which matplotlib
# labels 4 ... 8 with "1e8" (or "1e11") under the axis's right end; each power's unit, in which
# the peak note writes its position
X_OFFSET_UNITS = {6: "MHz", 9: "GHz"}
HERTZ_LABELS = ("Frequency (Hz)", "Frequency [Hz]", "f / Hz")


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
    x_descending: bool = False  # x runs from high (left) to low (right)
    y_log: bool = False  # y on a log scale
    x_power: int = 0  # x in hertz, its grid times 10**x_power (0: in nm or cm-1)
    x_unit: str = "nm"  # the unit the peak note writes x in (x / 10**x_power)
    extra: dict = field(default_factory=dict)  # rcParams a test may add


def plan_chart(cfg: ChartParams, index: int, size_px: tuple[int, int] | None = None) -> ChartPlan:
    """Chart `index`'s choices. `size_px` = (width, height) overrides the drawn pixel size (the dpi
    scales so the figure keeps its drawn width in inches: a larger chart is a sharper export).
    The draws run in a fixed order from the chart's own generator: the style and figure size,
    the curves, the series' looks, the axes' dressing, then (style.py) the further panels,
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
    axes = plan_axes(cfg, index)
    if axes.x_descending and dressing["x_label"]:
        dressing["x_label"] = axes.x_label
    elif axes.x_power and dressing["x_label"]:
        dressing["x_label"] = axes.hertz_label
    return ChartPlan(
        family=family,
        style=style,
        library=library,
        font=font,
        width=width,
        height=height,
        dpi=dpi,
        table=axes.on_axes(table),
        series=series,
        **dressing,
        layout=layout,
        panels=tuple(PanelPlan(axes.on_axes(p.table), p.series) for p in panels),
        x_descending=axes.x_descending,
        y_log=axes.y_log,
        x_power=axes.x_power,
        x_unit="cm-1" if axes.x_descending else X_OFFSET_UNITS.get(axes.x_power, "nm"),
        background=plan_background(rng, cfg),
        grid=plan_grid(rng, cfg),
    )


@dataclass(frozen=True)
class AxesPlan:
    """How a chart's axes run, and its tables redrawn for them."""

    x_descending: bool  # wavenumbers from high to low
    y_log: bool
    x_label: str  # the x axis' title when it runs in wavenumbers
    wavenumbers: tuple[float, float]  # (low, high) cm⁻¹ a descending x spans
    decades: float  # a log y's span ...
    lowest: int  # ... from this power of ten
    power: int  # an offset y's intensities are times 10**power (0: no offset)
    x_power: int = 0  # an offset x's grid is times 10**x_power, in hertz (0: no offset)
    hertz_label: str = HERTZ_LABELS[0]  # the x axis' title when it runs in hertz

    def on_axes(self, table: np.ndarray) -> np.ndarray:
        """`table` as these axes draw it: a descending x's wavelength grid stretched onto its
        wavenumbers; a log y's intensities exponentiated over its decades (the spectrum's
        shape kept, its lowest point at 10**lowest); an offset y's scaled to a power of ten;
        an offset x's grid times 10**x_power. Rounded to DECIMALS."""
        if not (self.x_descending or self.y_log or self.power or self.x_power):
            return table
        x, curves = table[:, 0], table[:, 1:]
        if self.x_descending:
            low, high = self.wavenumbers
            x = low + (x - x[0]) / (x[-1] - x[0]) * (high - low)
        x = x * 10.0**self.x_power
        if self.y_log:
            bottom, top = curves.min(), curves.max()
            curves = 10.0 ** (self.lowest + self.decades * (curves - bottom) / (top - bottom))
        elif self.power:  # its tallest point at 10**power: matplotlib writes 1e6 above the axis
            curves = curves / np.abs(curves).max() * 10.0**self.power
        return np.round(np.column_stack([x, curves]), DECIMALS)


def plan_axes(cfg: ChartParams, index: int) -> AxesPlan:
    """Chart `index`'s axes (data.charts' descending_x_prob, log_y_prob, offset_y_prob and
    offset_x_prob; a log y has no offset, a descending x none either), from a generator of its
    own (offset_x_prob's from one more, so the knobs before it draw as they did): with those
    knobs off, or where a chart draws none of them, it is drawn as it always was."""
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed % 2**64, index, 2]))
    descending, log_y, offset = rng.random(3) < (
        cfg.descending_x_prob,
        cfg.log_y_prob,
        cfg.offset_y_prob,
    )
    (low, high) = (float(rng.uniform(*ends)) for ends in WAVENUMBERS)
    hertz = np.random.default_rng(np.random.SeedSequence([cfg.seed % 2**64, index, 3]))
    offset_x, hertz_label = hertz.random() < cfg.offset_x_prob, hertz.integers(len(HERTZ_LABELS))
    return AxesPlan(
        x_descending=bool(descending),
        y_log=bool(log_y),
        x_label=WAVENUMBER_LABELS[int(rng.integers(len(WAVENUMBER_LABELS)))],
        wavenumbers=(low, high),
        decades=float(rng.uniform(*DECADES)),
        lowest=int(rng.integers(LOG_LOWEST[0], LOG_LOWEST[1] + 1)),
        power=int(rng.choice(OFFSET_POWERS)) if offset and not log_y else 0,
        x_power=int(hertz.choice(list(X_OFFSET_UNITS))) if offset_x and not descending else 0,
        hertz_label=HERTZ_LABELS[int(hertz_label)],
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
