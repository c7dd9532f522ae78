"""What every drawer shares: the bundled font's file, colours as the sidecar writes them, the
canvas on white, and tick label boxes found from the ink the labels leave.

A drawer imports from here and from nothing above it in the package (not the plan, not the
registry): it draws a plan it is handed, whatever made it.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np


@lru_cache
def bundled_file(font: str) -> str:
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


def rgb255(colour) -> list[int]:
    """[r, g, b] in 0-255 of any colour matplotlib reads: an RGB tuple in 0-1, a name, "#rrggbb"."""
    from matplotlib.colors import to_rgb

    return [round(255 * c) for c in to_rgb(colour)]


def hex_colour(colour: tuple[float, float, float]) -> str:
    """The "#rrggbb" of an RGB tuple in 0-1."""
    return "#" + "".join(f"{round(255 * c):02x}" for c in colour)


def on_white(rgba: np.ndarray) -> np.ndarray:
    """RGB uint8 of the canvas composited over white (opaque in every style; white if not)."""
    alpha = rgba[..., 3:].astype(np.float64) / 255.0
    return np.rint(rgba[..., :3] * alpha + 255.0 * (1.0 - alpha)).astype(np.uint8)


def label_boxes(
    image: np.ndarray,
    unlabelled: np.ndarray,
    plot_box: list[float],
    anchors: list[tuple[str, str, float, float]],
) -> list[dict]:
    """Each tick label's text and its ink's box, for a drawer that cannot measure its text: the
    chart drawn with (`image`) and without (`unlabelled`) its tick labels, in the same layout,
    the plot box (left, top, right, bottom px) and each label's anchor (axis "x" or "y", text,
    x px, y px). The pixels the labels changed, in pieces: a piece centred below the plot box is
    an x label's, one that ends left of it a y label's, each given to its axis' label whose
    anchor is nearest along it. Returns {"axis", "text", "box": [left, top, right, bottom]}
    (y down) for each label that owns ink, in the anchors' order."""
    from scipy import ndimage

    ink = np.abs(image.astype(np.int16) - unlabelled.astype(np.int16)).max(axis=2) > 0
    pieces, _ = ndimage.label(ink, structure=np.ones((3, 3)))
    owned: dict[int, list] = {k: [] for k in range(len(anchors))}
    for rows, cols in ndimage.find_objects(pieces):
        below = (rows.start + rows.stop) / 2 > plot_box[3] + 2
        left_of = cols.stop <= plot_box[0] + 1
        axis = "x" if below else "y" if left_of else None
        along = (cols.start + cols.stop) / 2 if axis == "x" else (rows.start + rows.stop) / 2
        near = [
            (abs(along - (ax if a == "x" else ay)), k)
            for k, (a, _, ax, ay) in enumerate(anchors)
            if a == axis
        ]
        if near:
            owned[min(near)[1]].append((rows, cols))
    labels = []
    for k, (axis, text, _, _) in enumerate(anchors):
        if owned[k]:
            left, right = min(c.start for _, c in owned[k]), max(c.stop for _, c in owned[k])
            top, bottom = min(r.start for r, _ in owned[k]), max(r.stop for r, _ in owned[k])
            labels.append(
                {"axis": axis, "text": text, "box": [float(v) for v in (left, top, right, bottom)]}
            )
    return labels


def chart_sidecar(
    plan,
    *,
    plot_box: list[float],
    xlim: tuple[float, float],
    ylim: tuple[float, float],
    y_scale: str,
    drawn: list[tuple[list[int], float]],
    furniture: dict,
    tick_labels: list[dict],
) -> dict:
    """The sidecar every drawer writes for one drawn chart: the plan's style and size, the plot
    box (left, top, right, bottom px, y down), the data values at its left and right edges
    (`xlim`) and at its bottom and top (`ylim`), so a descending axis' limits run high to low,
    each axis' direction and scale ("log": pixels run linearly in log10 of the value), each
    planned series' drawn colour and width (`drawn`: ([r, g, b] 0-255, width px) in the plan's
    order), the furniture a curve reader masks and every tick label's text and box."""
    ends = {"x": xlim, "y": ylim}
    axes = {
        name: {
            "direction": "ascending" if low < high else "descending",
            "scale": y_scale if name == "y" else "linear",
        }
        for name, (low, high) in ends.items()
    }
    series = [
        {
            "column": s.column,
            "color": colour,
            "linewidth_px": round(float(width), 4),
            "linestyle": s.linestyle,
            "marker": s.marker,
        }
        for s, (colour, width) in zip(plan.series, drawn, strict=True)
    ]
    return {
        "library": plan.library,
        "family": plan.family,
        "style": plan.style,
        "font": plan.font,
        "width": plan.width,
        "height": plan.height,
        "dpi": round(plan.dpi, 4),
        "plot_box": [round(float(v), 4) for v in plot_box],
        "xlim": [round(float(v), 6) for v in xlim],
        "ylim": [round(float(v), 6) for v in ylim],
        "axes": axes,
        "series": series,
        "furniture": furniture,
        "tick_labels": tick_labels,
    }
