"""What a chart's figure looks like beyond its style sheet and data: the panel layout, the
background and the grid's line style.

Each feature is planned from the chart's own generator, after every other draw, and only when its
probability is above 0: a knob left off draws nothing, so the default data stays as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from linefuse.params.data import ChartParams

# Pale paper, greys and tints. None is a held-out family's own face (Solarize_Light2's #FDF6E3,
# fivethirtyeight's #F0F0F0): the base never sees those looks.
BACKGROUNDS = (
    "#f7f7f7",
    "#ebebeb",
    "#fffdf4",
    "#faf6ea",
    "#f2f6fb",
    "#f2f8f0",
    "#fbf3f3",
    "#f6f3fa",
)
BACKGROUND_PLACES = ("figure", "axes", "both")  # what the colour paints; the rest keeps the style's
GRID_LINESTYLES = ("--", ":", "-.", "-")


@dataclass(frozen=True)
class Background:
    figure: str | None  # None: the style sheet's
    axes: str | None


@dataclass(frozen=True)
class GridStyle:
    linestyle: str
    width_pt: float
    alpha: float
    minor: bool  # a fainter grid at the minor ticks too


def chance(rng: np.random.Generator, prob: float) -> bool:
    """True with `prob`, drawing nothing when it is 0 (an off knob shifts no later draw)."""
    return prob > 0.0 and bool(rng.random() < prob)


def plan_layout(rng: np.random.Generator, cfg: ChartParams) -> tuple[int, int]:
    """(rows, columns) of panels: one, or with multi_panel_prob a row or a column of 2 or 3, or
    a 2 x 2 grid of 4."""
    if not chance(rng, cfg.multi_panel_prob):
        return (1, 1)
    count = int(rng.integers(cfg.panels[0], cfg.panels[1] + 1))
    if count == 4:
        return (2, 2)
    return (1, count) if rng.random() < 0.5 else (count, 1)


def plan_background(rng: np.random.Generator, cfg: ChartParams) -> Background | None:
    if not chance(rng, cfg.background_prob):
        return None
    colour = BACKGROUNDS[int(rng.integers(len(BACKGROUNDS)))]
    place = BACKGROUND_PLACES[int(rng.integers(len(BACKGROUND_PLACES)))]
    return Background(
        figure=colour if place in ("figure", "both") else None,
        axes=colour if place in ("axes", "both") else None,
    )


def plan_grid(rng: np.random.Generator, cfg: ChartParams) -> GridStyle | None:
    if not chance(rng, cfg.grid_style_prob):
        return None
    return GridStyle(
        linestyle=GRID_LINESTYLES[int(rng.integers(len(GRID_LINESTYLES)))],
        width_pt=float(rng.uniform(0.4, 1.2)),
        alpha=float(rng.uniform(0.3, 1.0)),
        minor=bool(rng.random() < 0.3),
    )


def draw_grid(ax, grid: GridStyle) -> None:
    """The grid switched on in the planned line style (the style sheet's colour)."""
    ax.grid(
        True, which="major", linestyle=grid.linestyle, linewidth=grid.width_pt, alpha=grid.alpha
    )
    if grid.minor:
        ax.minorticks_on()
        ax.grid(
            True,
            which="minor",
            linestyle=":",
            linewidth=grid.width_pt * 0.6,
            alpha=grid.alpha * 0.6,
        )
