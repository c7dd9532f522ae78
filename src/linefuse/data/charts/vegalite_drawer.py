"""A planned chart drawn by Vega-Lite: a spec compiled and rendered without a browser by
vl-convert (Vega's own layout, resvg's rasteriser), in one of Vega's themes, over the same
ChartPlan as matplotlib's drawer (matplotlib_drawer.py).

Sizes are in pixels (a point is dpi / 72 px) and the whole view, axes and padding included, is
fitted to the planned pixel size. The sidecar's facts come from Vega itself: the scenegraph gives
the plot area, each line's drawn stroke and width, the grid rules, the legend's box and every
tick label's text and anchor; the SVG gives the view's origin; the axis limits are the scale
domains the spec fixes. A tick label's box is the ink it leaves: the chart is rendered a second
time with the labels transparent (the same layout), and each label owns the changed pixels nearest
its anchor along its axis (facts.label_boxes).
"""

from __future__ import annotations

import io
import os
import re
from functools import lru_cache
from pathlib import Path

import numpy as np

from linefuse.data.charts.facts import (
    bundled_file,
    chart_sidecar,
    hex_colour,
    label_boxes,
    rgb255,
)

THEMES = (
    "default",
    "excel",
    "ggplot2",
    "googlecharts",
    "latimes",
    "powerbi",
    "quartz",
    "urbaninstitute",
    "vox",
    "carbonwhite",
    "dark",
)
LEGEND_PLACES = {"best": "top-right", "upper right": "right", "upper left": "top-left"}
DASHES = {"-": [1, 0], "--": [6, 3], ":": [1.5, 2.5], "-.": [6, 2.5, 1.5, 2.5]}  # in line widths
SHAPES = {
    "o": "circle",
    "s": "square",
    "^": "triangle-up",
    "v": "triangle-down",
    "D": "diamond",
    "x": "cross",
    "+": "cross",
    "*": "triangle",
}
Y_MARGIN = 0.05  # of the data's range above and below, as matplotlib's default margins
# Vega's number format without its thousands separator: tick labels hold what a reader of
# labels reads (data/labels.py's alphabet)
LOCALE = {"decimal": ".", "thousands": "", "grouping": [3], "currency": ["$", ""]}
ORIGIN = re.compile(r'transform="translate\(([-0-9.e]+),([-0-9.e]+)\)"')
_RUNTIME = {"pid": None}  # the process whose vl-convert runtime drew (one per process)


def _runtime_is_this_process() -> None:
    """vl-convert draws on a runtime thread of the process that first called it, which a fork
    does not copy: a process forked after its parent drew would wait on it forever. Such a
    process gets one line instead (start its workers with forkserver, as generate does)."""
    started = _RUNTIME["pid"]
    if started is not None and started != os.getpid():
        raise RuntimeError(
            f"vl-convert's runtime runs in process {started}, which this one was forked from; "
            "it cannot draw here: start the workers with forkserver (ordered_map's start)"
        )
    _RUNTIME["pid"] = os.getpid()


@lru_cache
def _fonts() -> None:
    """vl-convert draws with matplotlib's bundled fonts (the plan's), the same on every machine."""
    import matplotlib
    import vl_convert

    vl_convert.register_font_directory(str(Path(matplotlib.get_data_path()) / "fonts" / "ttf"))


def spec(plan) -> dict:
    """The Vega-Lite spec of one planned chart: its lines (and sparse markers), axes fixed to the
    data's x range and a margin around its y range, labels, title and legend in plan.font."""
    px = plan.dpi / 72.0
    font_px = plan.font_pt * px
    width = plan.line_width_pt * px
    x = plan.table[:, 0]
    (x_left, x_right), (y_bottom, y_top) = _limits(plan)
    labels = [s.label for s in plan.series]
    rows = []
    for k, s in enumerate(plan.series):
        start = k * s.markevery // len(plan.series)
        for i, (wavelength, value) in enumerate(zip(x, plan.table[:, k + 1], strict=True)):
            marked = s.marker is not None and i >= start and (i - start) % s.markevery == 0
            rows.append({"x": float(wavelength), "y": float(value), "s": s.label, "m": marked})
    colour = {"field": "s", "type": "nominal", "sort": labels}
    if all(s.color is not None for s in plan.series):
        colour["scale"] = {"domain": labels, "range": [hex_colour(s.color) for s in plan.series]}
    if plan.legend is None:
        colour["legend"] = None
    else:
        colour["legend"] = {"orient": LEGEND_PLACES[plan.legend[0]], "title": None}
    encoding = {
        "x": {
            "field": "x",
            "type": "quantitative",
            "scale": {
                "domain": sorted([x_left, x_right]),
                "reverse": plan.x_descending,
                "nice": False,
                "zero": False,
            },
            "axis": {"title": plan.x_label, "grid": plan.grid_flip},
        },
        "y": {
            "field": "y",
            "type": "quantitative",
            "scale": {
                "type": "log" if plan.y_log else "linear",
                "domain": [y_bottom, y_top],
                "nice": False,
                "zero": False,
            },
            "axis": {"title": plan.y_label, "grid": not plan.grid_flip},
        },
        "color": colour,
    }
    dashes = {s.label: [d * width for d in DASHES[s.linestyle]] for s in plan.series}
    layers = [
        {
            "mark": {"type": "line", "strokeWidth": width, "clip": True},
            "encoding": {
                "strokeDash": {
                    "field": "s",
                    "type": "nominal",
                    "scale": {"domain": labels, "range": list(dashes.values())},
                    "legend": None,
                }
            },
        }
    ]
    for s in (s for s in plan.series if s.marker is not None):
        layers.append(
            {
                "transform": [{"filter": {"and": [{"field": "m", "equal": True}]}}],
                "mark": {
                    "type": "point",
                    "shape": SHAPES.get(s.marker, "circle"),
                    "size": (s.markersize * px) ** 2,
                    "filled": not s.hollow,
                    "clip": True,
                },
                "encoding": {
                    "opacity": {
                        "condition": {"test": f"datum.s == {s.label!r}", "value": 1},
                        "value": 0,
                    }
                },
            }
        )
    text = {"font": plan.font}
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "width": plan.width,
        "height": plan.height,
        "autosize": {"type": "fit", "contains": "padding"},
        "padding": round(plan.pad * font_px, 2),
        "data": {"values": rows},
        "encoding": encoding,
        "layer": layers,
        **({"title": plan.title} if plan.title else {}),
        "config": {
            **text,
            "axis": {
                "labelFont": plan.font,
                "titleFont": plan.font,
                "labelFontSize": font_px,
                "titleFontSize": font_px + px,
            },
            "legend": {"labelFont": plan.font, "labelFontSize": font_px - 0.5 * px},
            "title": {"font": plan.font, "fontSize": font_px + 1.5 * px},
        },
    }


def render(plan) -> tuple[np.ndarray, dict]:
    """(height, width, 3) uint8 RGB image and the sidecar of one planned chart, drawn by
    Vega-Lite in the theme plan.style."""
    import vl_convert

    bundled_file(plan.font)
    _runtime_is_this_process()
    _fonts()
    chart = spec(plan)
    theme = None if plan.style == "default" else plan.style
    svg = vl_convert.vegalite_to_svg(chart, theme=theme, format_locale=LOCALE)
    scene = vl_convert.vegalite_to_scenegraph(chart, theme=theme, format_locale=LOCALE)[
        "scenegraph"
    ]
    bare = dict(
        chart, config=chart["config"] | {"axis": chart["config"]["axis"] | {"labelOpacity": 0}}
    )
    image = _raster(svg)
    unlabelled = _raster(vl_convert.vegalite_to_svg(bare, theme=theme, format_locale=LOCALE))
    if image.shape[:2] != (plan.height, plan.width):
        raise AssertionError(f"Vega-Lite drew {image.shape[1]}x{image.shape[0]}, not {plan.width}")
    found = ORIGIN.search(svg)
    origin = (float(found.group(1)), float(found.group(2)))
    return image, _sidecar(plan, scene, origin, image, unlabelled)


def _raster(svg: str) -> np.ndarray:
    import vl_convert
    from PIL import Image

    rgba = Image.open(io.BytesIO(vl_convert.svg_to_png(svg))).convert("RGBA")
    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return np.asarray(Image.alpha_composite(white, rgba).convert("RGB"))


def _items(node: dict, role: str) -> list[tuple[dict, tuple[float, float]]]:
    """Every mark of `role` under node, with the offset of the groups that hold it."""
    found = []

    def walk(mark: dict, offset: tuple[float, float]) -> None:
        for item in mark.get("items", []):
            if mark.get("role") == role:
                found.append((mark, item, offset))
            if "items" in item:  # a group: its marks are placed from its corner
                inner = (offset[0] + item.get("x", 0.0), offset[1] + item.get("y", 0.0))
                for child in item["items"]:
                    walk(child, inner)

    walk(node, (0.0, 0.0))
    return [(item, offset) for _, item, offset in found]


def _sidecar(plan, scene: dict, origin, image: np.ndarray, unlabelled: np.ndarray) -> dict:
    view = scene["items"][0]
    top_left = (origin[0] + view.get("x", 0.0), origin[1] + view.get("y", 0.0))
    box = [top_left[0], top_left[1], top_left[0] + view["width"], top_left[1] + view["height"]]
    lines = {}
    for item, _ in _items(scene, "mark"):
        if "stroke" in item and "description" in item and "strokeWidth" in item:
            label = item["description"].split("s: ", 1)[1]
            lines.setdefault(label, item)
    xlim, ylim = _limits(plan)
    return chart_sidecar(
        plan,
        plot_box=box,
        xlim=xlim,
        ylim=ylim,
        y_scale="log" if plan.y_log else "linear",
        drawn=[
            (rgb255(lines[s.label]["stroke"]), float(lines[s.label]["strokeWidth"]))
            for s in plan.series
        ],
        furniture=_furniture(scene, origin, image),
        tick_labels=_tick_labels(scene, origin, box, image, unlabelled),
    )


def _limits(plan) -> tuple[tuple[float, float], tuple[float, float]]:
    """((x at the plot's left, at its right), (y at its bottom, at its top)): x the data's
    range, reversed on a descending axis; y the data's range and Y_MARGIN of it above and
    below, in log10 on a log axis."""
    x0, x1 = float(plan.table[:, 0].min()), float(plan.table[:, 0].max())
    values = np.log10(plan.table[:, 1:]) if plan.y_log else plan.table[:, 1:]
    low, high = float(values.min()), float(values.max())
    margin = Y_MARGIN * ((high - low) or 1.0)
    y = (low - margin, high + margin)
    if plan.y_log:
        y = (10.0 ** y[0], 10.0 ** y[1])
    return ((x1, x0) if plan.x_descending else (x0, x1)), y


def _furniture(scene: dict, origin, image: np.ndarray) -> dict:
    """The legend's box and the grid rules as polylines, with the colour they show."""
    boxes = []
    for item, offset in _items(scene, "legend"):
        if "width" in item:
            left, top = origin[0] + offset[0] + item["x"], origin[1] + offset[1] + item["y"]
            boxes.append(
                [round(v, 2) for v in (left, top, left + item["width"], top + item["height"])]
            )
    lines = []
    for item, offset in _items(scene, "axis-grid"):
        if item.get("opacity", 1) == 0 or not item.get("strokeWidth", 1):
            continue
        x, y = (
            origin[0] + offset[0] + item.get("x", 0.0),
            origin[1] + offset[1] + item.get("y", 0.0),
        )
        end = (
            origin[0] + offset[0] + item.get("x2", item.get("x", 0.0)),
            origin[1] + offset[1] + item.get("y2", item.get("y", 0.0)),
        )
        lines.append(
            {
                "points": [[round(x, 2), round(y, 2)], [round(end[0], 2), round(end[1], 2)]],
                "width_px": float(item.get("strokeWidth", 1)),
                "color": rgb255(item.get("stroke", "#000")),
            }
        )
    return {"boxes": boxes, "lines": lines}


def _tick_labels(scene: dict, origin, box: list[float], image, unlabelled) -> list[dict]:
    """Each drawn tick label's text and its ink's box (left, top, right, bottom; y down), from
    the scenegraph's label anchors and the ink the labels left (facts.label_boxes)."""
    anchors = [
        (
            "x" if item.get("baseline") == "top" else "y",
            str(item["text"]),
            origin[0] + dx + item["x"],
            origin[1] + dy + item["y"],
        )
        for item, (dx, dy) in _items(scene, "axis-label")
        if item.get("opacity", 1) > 0 and str(item.get("text", "")).strip()
    ]
    return label_boxes(image, unlabelled, box, anchors)
