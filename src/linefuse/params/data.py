"""params.yaml's `data` section: where the images come from, how they split, and the default
charts generate draws."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator, model_validator

from linefuse.params import KeyedError, Probability, Strict, key_and_message, value_range

# data.charts keys that draw the axes real charts use (descending, log, offset), added after
# chart-base was made: the default data draws them, the base's bank and score sets do not
AXIS_KNOBS = ("descending_x_prob", "log_y_prob", "offset_y_prob", "offset_x_prob")
# data.charts keys that set how large a chart and its type are drawn: the base's overrides
# (base.chart_overrides) span a wider range of them than the default data
SIZE_KNOBS = ("fonts", "font_pt", "width_in", "height_in", "dpi")
# data.charts keys the base's overrides may not change: its seed is base.chart_seed, it never
# draws a held-out family's style sheet, and its axes keep chart-base's recipe
BASE_FIXED_CHART_KEYS = (
    "count",
    "seed",
    "families",
    "held_out",
    "held_out_fraction",
    "libraries",
    *AXIS_KNOBS,
)
# The plotting libraries that draw charts, each through its own API (its drawer in data/charts/,
# which data/charts/registry.py names), and the packages each imports where its charts are drawn
LIBRARY_PACKAGES = {
    "matplotlib": ("matplotlib",),
    "plotnine": ("plotnine",),
    "vegalite": ("vl_convert",),
    "letsplot": ("lets_plot",),
    "reportlab": ("reportlab", "pypdfium2"),  # ReportLab draws a PDF; PDFium rasterises it
}
LIBRARIES = tuple(LIBRARY_PACKAGES)


def chart_pixels(inches: float, dpi: float) -> int:
    """A generated chart's side in pixels: the renderer and the crop check both round this way."""
    return max(1, round(inches * dpi))


LAST_RESORT_FONT = "Last Resort High-Efficiency"  # matplotlib's fallback: a box for any character


@lru_cache
def _bundled_fonts() -> list[str]:
    """Font families shipped inside matplotlib (the same glyphs on every machine) that draw a
    tick label's every character: digits, point and matplotlib's minus sign (U+2212, which the
    Computer Modern faces lack)."""
    import matplotlib
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    data = Path(matplotlib.get_data_path()).resolve()
    fonts = font_manager.fontManager.ttflist
    needed = {ord(c) for c in "0123456789.\u2212"}
    return sorted(
        {
            f.name
            for f in fonts
            if data in Path(f.fname).resolve().parents
            and f.name != LAST_RESORT_FONT
            and needed <= set(FT2Font(f.fname).get_charmap())
        }
    )


class ChartParams(Strict):
    """The embedded default data set: synthetic spectra drawn as line charts by matplotlib.

    Ranges are drawn per chart; `*_prob` is the chance a chart has that feature."""

    count: Annotated[int, Field(ge=0)]
    seed: int
    points: Annotated[int, Field(ge=16)]
    peaks: value_range(int, 1, 50)
    noise: Annotated[float, Field(ge=0.0, le=0.2)]
    libraries: dict[str, Annotated[float, Field(gt=0.0, le=1.0)]]  # library: share of charts
    families: dict[str, list[str]]  # family name: matplotlib style sheets
    held_out: list[
        str
    ]  # families and libraries never trained on (the index routes them to held_out)
    held_out_fraction: Annotated[float, Field(ge=0.0, lt=1.0)]  # of matplotlib's charts
    fonts: list[str]
    width_in: value_range(float, 0.5, 40.0)
    height_in: value_range(float, 0.5, 40.0)
    dpi: value_range(int, 36, 600)
    max_px: Annotated[int, Field(ge=64, le=8192)]  # a longer side is drawn at a lower dpi
    multi_panel_prob: Probability
    panels: value_range(int, 2, 4)  # of a multi-panel figure
    font_pt: value_range(float, 3.0, 30.0)
    line_width_pt: value_range(float, 0.1, 10.0)
    series: value_range(int, 1, 4)
    markers: list[str]
    marker_prob: Probability
    dash_prob: Probability
    black_prob: Probability
    colormap_prob: Probability
    stack_prob: Probability
    grid_toggle_prob: Probability
    tick_prob: Probability
    minor_ticks_prob: Probability
    despine_prob: Probability
    labels_prob: Probability
    title_prob: Probability
    legend_prob: Probability
    annotate_prob: Probability
    tint_prob: Probability
    background_prob: Probability
    grid_style_prob: Probability
    descending_x_prob: Probability  # x from high to low, in wavenumbers, as IR spectra are drawn
    log_y_prob: Probability  # y on a log scale over decades, labelled as each library labels one
    offset_y_prob: Probability  # intensities in millions: a library writes an offset or powers
    offset_x_prob: Probability  # wavelengths in metres (4e-7): matplotlib's "1e-7" under the x axis

    @field_validator("families")
    @classmethod
    def _known_styles(cls, families: dict[str, list[str]]) -> dict[str, list[str]]:
        import matplotlib.style

        if not families:
            raise ValueError("needs at least one family, e.g. {plain: [default, classic]}")
        accepted = ["default", *sorted(matplotlib.style.available)]
        seen: dict[str, str] = {}
        for name, styles in families.items():
            if not name.isidentifier():
                raise ValueError(f"family {name!r} must be a plain name (letters, digits, _)")
            if not styles:
                raise ValueError(f"family {name!r} lists no style sheet")
            for style in styles:
                if style not in accepted:
                    raise ValueError(
                        f"family {name!r}: unknown style sheet {style!r}; accepts "
                        f"{', '.join(accepted)}"
                    )
                if style in seen:
                    raise ValueError(
                        f"style sheet {style!r} is in families {seen[style]!r} and {name!r}; "
                        f"each style belongs to one family"
                    )
                seen[style] = name
        return families

    @field_validator("fonts")
    @classmethod
    def _bundled(cls, fonts: list[str]) -> list[str]:
        bundled = _bundled_fonts()
        if not fonts:
            raise ValueError(f"needs at least one font; accepts {', '.join(bundled)}")
        for font in fonts:
            if font not in bundled:
                raise ValueError(
                    f"{font!r} is not a font shipped with matplotlib that draws tick labels "
                    f"(other fonts differ between machines, and so would the PNGs); accepts "
                    f"{', '.join(bundled)}"
                )
        return fonts

    @field_validator("markers")
    @classmethod
    def _known_markers(cls, markers: list[str]) -> list[str]:
        from matplotlib.lines import Line2D

        accepted = [
            m for m in Line2D.markers if isinstance(m, str) and m.strip() and m.lower() != "none"
        ]
        if not markers:
            raise ValueError(f"needs at least one marker; accepts {' '.join(accepted)}")
        for marker in markers:
            if marker not in accepted:
                raise ValueError(f"unknown marker {marker!r}; accepts {' '.join(accepted)}")
        return markers

    @field_validator("libraries")
    @classmethod
    def _known_libraries(cls, libraries: dict[str, float]) -> dict[str, float]:
        unknown = [name for name in libraries if name not in LIBRARIES]
        if not libraries or unknown:
            what = f"{unknown[0]!r} is not a library LineFuse draws with" if unknown else "empty"
            raise ValueError(f"{what}; accepts {', '.join(LIBRARIES)}")
        if abs(sum(libraries.values()) - 1.0) > 1e-6:
            raise ValueError(f"the shares must sum to 1, got {sum(libraries.values()):g}")
        return libraries

    @model_validator(mode="after")
    def _held_out_families(self) -> ChartParams:
        named = [*self.families, *LIBRARIES]
        for name in self.held_out:
            if name not in named:
                raise KeyedError(
                    "data.charts.held_out",
                    f"{name!r} is neither a family in data.charts.families nor a library; "
                    f"accepts {', '.join(named)}",
                )
        if len(set(self.held_out)) != len(self.held_out):
            raise KeyedError("data.charts.held_out", "lists a name twice")
        if not set(self.libraries) - set(self.held_out):
            raise KeyedError(
                "data.charts.held_out",
                "holds out every library of data.charts.libraries; leave one to train on",
            )
        if not set(self.families) - set(self.held_out):
            raise KeyedError(
                "data.charts.held_out",
                "holds out every family; leave at least one of "
                f"{', '.join(self.families)} to train on",
            )
        if self.black_prob + self.colormap_prob > 1.0:
            raise KeyedError(
                "data.charts.black_prob",
                f"black_prob + colormap_prob is {self.black_prob + self.colormap_prob:g}; "
                f"they are exclusive, so their sum must be at most 1",
            )
        return self

    def without_axis_knobs(self) -> ChartParams:
        """These params with AXIS_KNOBS off: the charts the base trains and is scored on keep the
        recipe chart-base was made with, so its ship verdicts stay paired."""
        return self.model_copy(update=dict.fromkeys(AXIS_KNOBS, 0.0))

    def smallest_chart(self) -> tuple[int, int]:
        """(width, height) px of the smallest chart the ranges can give."""
        return (
            chart_pixels(self.width_in[0], self.dpi[0]),
            chart_pixels(self.height_in[0], self.dpi[0]),
        )

    def with_overrides(self, overrides: dict[str, Any]) -> ChartParams:
        """These params with `overrides` (base.chart_overrides: some of these keys) merged in and
        validated again; a bad override is an error naming base.chart_overrides.KEY."""
        accepted = [key for key in type(self).model_fields if key not in BASE_FIXED_CHART_KEYS]
        for key in overrides:
            if key in BASE_FIXED_CHART_KEYS:
                raise KeyedError(
                    f"base.chart_overrides.{key}",
                    "is fixed for the base (its seed is base.chart_seed, its families those of "
                    f"data.charts not held out); accepts {', '.join(accepted)}",
                )
            if key not in accepted:
                raise KeyedError(
                    f"base.chart_overrides.{key}",
                    f"is not a data.charts key; accepts {', '.join(accepted)}",
                )
        try:
            return type(self).model_validate(self.model_dump() | overrides)
        except ValidationError as error:
            key, message = key_and_message(error)
            raise KeyedError(
                f"base.chart_overrides.{key.removeprefix('data.charts.')}", message
            ) from None


class SplitRatios(Strict):
    train: Probability
    val: Probability
    test: Probability

    @model_validator(mode="after")
    def _sums_to_one(self) -> SplitRatios:
        total = self.train + self.val + self.test
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"train + val + test must sum to 1, got {total:g}")
        return self


class DataParams(Strict):
    source_dir: str
    min_side: Annotated[int, Field(ge=1)]
    max_pixels: Annotated[int, Field(ge=1)]
    split: SplitRatios
    charts: ChartParams
