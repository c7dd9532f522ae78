"""A planned chart drawn by Lets-Plot: JetBrains' grammar of graphics, laid out and rasterised by
its own native exporter (Kotlin/Native, no browser and no system library), in one of its
themes and flavors, over the same ChartPlan as matplotlib's drawer.

Sizes are pixels (a point is dpi / 72 px) and the chart is exported at exactly the planned
pixel size. The facts come from Lets-Plot itself: its SVG of the same plot (the same layout as
the PNG) gives the panel's box, each tick label's text and anchor and each line's stroke; the
axis limits are the scale limits the plot fixes (no expansion). A tick label's box is the ink it
leaves: the chart is exported a second time with the axis labels in another colour, and each
label owns the changed pixels nearest its anchor along its axis (facts.label_boxes).
"""

from __future__ import annotations

import functools
import io
import os
import re
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from linefuse.data.charts.facts import chart_sidecar, hex_colour, label_boxes, on_white

# theme, or theme + flavor (Lets-Plot's colour schemes over a theme)
THEMES = (
    "minimal2",
    "grey",
    "light",
    "classic",
    "bw",
    "minimal",
    "minimal2+darcula",
    "light+solarized_light",
    "bw+high_contrast_light",
)
LEGEND_PLACES = {"best": "right", "upper right": "bottom", "upper left": "top"}
LINETYPES = {"-": "solid", "--": "dashed", ":": "dotted", "-.": "dotdash"}
# matplotlib's marker as Lets-Plot's shape (R's pch): (filled, hollow)
SHAPES = {"o": (16, 1), "s": (15, 0), "^": (17, 2), "v": (25, 6), "D": (18, 5), "x": (4, 4)}
SHAPES |= {"+": (3, 3), "*": (8, 8)}
FAMILIES = {"Serif": "serif", "Mono": "monospace", "STIX": "serif"}  # else sans
SIZE_PER_PX = 1 / 2.2  # Lets-Plot strokes a line of size s at 2.2 * s px
PALETTE = ("#e41a1c", "#377eb8", "#4daf4a", "#984ea3", "#ff7f00", "#a65628")  # its default hues
Y_MARGIN = 0.05  # of the data's range above and below, as matplotlib's default margins
# its own number format without the thousands separator: tick labels hold what a reader of
# labels reads (data/labels.py's alphabet)
NUMBERS = "~g"
MARKED = "#ff00ff"  # the tick labels' colour in the second export, whose changed pixels are labels
TRANSLATE = re.compile(r"translate\(\s*([-0-9.e]+)[ ,]+([-0-9.e]+)")
# matplotlib's own fonts by generic family: the fonts Lets-Plot draws with on every machine
FONT_ALIASES = {
    "sans": "DejaVu Sans",
    "sans-serif": "DejaVu Sans",
    "serif": "DejaVu Serif",
    "monospace": "DejaVu Sans Mono",
}


def render(plan) -> tuple[np.ndarray, dict]:
    """(height, width, 3) uint8 RGB image and the sidecar of one planned chart, drawn by
    Lets-Plot in the theme plan.style."""
    import lets_plot as lp

    _ensure_fonts()
    chart, limits = _chart(plan)
    image = _export(chart)
    marked = _export(chart + lp.theme(axis_text=lp.element_text(color=MARKED)))
    if image.shape[:2] != (plan.height, plan.width):
        raise AssertionError(f"Lets-Plot drew {image.shape[1]}x{image.shape[0]}, not {plan.width}")
    svg = ET.fromstring(chart.to_svg())
    box, strokes, anchors = _read_svg(svg)
    by_label = dict(zip([s.label for s in plan.series], strokes, strict=False))
    return image, chart_sidecar(
        plan,
        plot_box=box,
        xlim=limits[0],
        ylim=limits[1],
        y_scale="linear",
        drawn=[by_label.get(s.label, (None, 0)) for s in plan.series],
        # the legend sits outside the panel; the grid lines are not listed (a curve reader
        # masks furniture only where the sidecar names it)
        furniture={"boxes": [], "lines": []},
        tick_labels=label_boxes(image, marked, box, anchors),
    )


def _chart(plan):
    """The Lets-Plot plot of `plan` and its fixed (x, y) limits."""
    import lets_plot as lp
    import pandas as pd

    labels = [s.label for s in plan.series]
    rows = pd.DataFrame(
        {
            "wavelength": np.tile(plan.table[:, 0], len(labels)),
            "value": plan.table[:, 1:].T.reshape(-1),
            "series": np.repeat(labels, len(plan.table)),
        }
    )
    px = plan.dpi / 72.0
    colours = [
        hex_colour(s.color) if s.color is not None else PALETTE[k % len(PALETTE)]
        for k, s in enumerate(plan.series)
    ]
    x0, x1 = float(plan.table[:, 0].min()), float(plan.table[:, 0].max())
    low, high = float(plan.table[:, 1:].min()), float(plan.table[:, 1:].max())
    margin = Y_MARGIN * ((high - low) or 1.0)
    limits = ((x0, x1), (low - margin, high + margin))
    chart = (
        lp.ggplot(rows, lp.aes("wavelength", "value", color="series", linetype="series"))
        + lp.geom_line(size=plan.line_width_pt * px * SIZE_PER_PX)
        + lp.scale_color_manual(values=colours, breaks=labels, limits=labels)
        + lp.scale_linetype_manual(
            values=[LINETYPES[s.linestyle] for s in plan.series], breaks=labels, limits=labels
        )
        + lp.scale_x_continuous(limits=list(limits[0]), expand=[0, 0], format=NUMBERS)
        + lp.scale_y_continuous(limits=list(limits[1]), expand=[0, 0], format=NUMBERS)
        + lp.labs(x=plan.x_label or "", y=plan.y_label or "", title=plan.title)
        + lp.ggsize(plan.width, plan.height)
    )
    for k, s in enumerate(plan.series):
        if s.marker is not None:
            start = k * s.markevery // len(plan.series)
            marked = rows[rows["series"] == s.label].iloc[start :: s.markevery]
            filled, hollow = SHAPES.get(s.marker, (16, 1))
            chart += lp.geom_point(
                data=marked,
                shape=hollow if s.hollow else filled,
                size=s.markersize * px * SIZE_PER_PX,
                show_legend=False,
            )
    theme, _, flavor = plan.style.partition("+")
    family = next((v for k, v in FAMILIES.items() if k in plan.font), "sans")
    chart += getattr(lp, f"theme_{theme}")()
    if flavor:
        chart += getattr(lp, f"flavor_{flavor}")()
    chart += lp.theme(
        text=lp.element_text(family=family, size=plan.font_pt * px),
        legend_position=LEGEND_PLACES[plan.legend[0]] if plan.legend is not None else "none",
    )
    if not plan.x_label:
        chart += lp.theme(axis_title=lp.element_blank())
    if plan.grid_flip:  # the theme's grid switched off
        chart += lp.theme(panel_grid=lp.element_blank())
    return chart, limits


@functools.cache
def _ensure_fonts() -> None:
    """Lets-Plot's rasteriser carries its own fontconfig, which reads no system config: it takes
    whatever fonts lie in the default folders, and fails where there are none (the lent GPU
    image). So, unless FONTCONFIG_FILE says otherwise, fontconfig is pointed at matplotlib's
    bundled DejaVu fonts, which every machine that draws charts has: the same fonts, and so the
    same charts, wherever they are drawn."""
    if os.environ.get("FONTCONFIG_FILE"):
        return
    import matplotlib

    fonts = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    cache = Path(tempfile.gettempdir()) / "linefuse-fontconfig"
    aliases = "".join(
        f"<alias><family>{generic}</family><prefer><family>{name}</family></prefer></alias>"
        for generic, name in FONT_ALIASES.items()
    )
    config = (
        '<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd">'
        f"<fontconfig><dir>{fonts}</dir><cachedir>{cache}</cachedir>{aliases}</fontconfig>"
    )
    cache.mkdir(exist_ok=True)
    # a partial named by the process, not stage.atomic_file: the bank's workers write this file
    # at once, and atomic_file would clear the temporaries of the others
    path = cache / "fonts.conf"
    partial = cache / f"fonts.conf.{os.getpid()}"
    partial.write_text(config)
    partial.replace(path)
    os.environ["FONTCONFIG_FILE"] = str(path)


def _export(chart) -> np.ndarray:
    """The chart as (H, W, 3) uint8 RGB through Lets-Plot's native exporter, at 1 px a px."""
    from PIL import Image

    buffer = io.BytesIO()
    chart.to_png(buffer, scale=1)
    return on_white(np.asarray(Image.open(buffer).convert("RGBA")))


def _read_svg(root: ET.Element) -> tuple[list[float], list, list]:
    """(the panel's box (left, top, right, bottom) px, each series' ([r, g, b], width px) in
    legend order, tick label anchors [(axis, text, x, y)]), from the plot's SVG: every element
    placed by the translations of the groups that hold it."""
    clips = {
        clip.get("id"): clip.find("{*}rect")
        for clip in root.iter("{http://www.w3.org/2000/svg}clipPath")
    }
    box, strokes, anchors = None, [], []

    def walk(node: ET.Element, dx: float, dy: float, in_panel: bool) -> None:
        nonlocal box
        found = TRANSLATE.search(node.get("transform", ""))
        if found:
            dx, dy = dx + float(found.group(1)), dy + float(found.group(2))
        clip = re.search(r"#([^)]+)", node.get("clip-path", ""))
        if clip and clips.get(clip.group(1)) is not None:
            rect = clips[clip.group(1)]
            x, y = dx + float(rect.get("x")), dy + float(rect.get("y"))
            area = [x, y, x + float(rect.get("width")), y + float(rect.get("height"))]
            if box is None or _area(area) > _area(box):
                box, in_panel = area, True
        tag = node.tag.rsplit("}", 1)[-1]
        if tag == "path" and in_panel and node.get("fill") == "none" and node.get("stroke"):
            stroke = [int(v) for v in re.findall(r"\d+", node.get("stroke"))[:3]]
            if all(stroke != seen for seen, _ in strokes):
                strokes.append((stroke, float(node.get("stroke-width", 1.0))))
        if tag == "text" and node.get("class") in ("axis-text-x", "axis-text-y"):
            text = "".join(node.itertext()).strip()
            if text:
                anchors.append((node.get("class")[-1], text, dx, dy))
        for child in node:
            walk(child, dx, dy, in_panel)

    walk(root, 0.0, 0.0, False)
    if box is None:
        raise AssertionError("Lets-Plot's SVG has no clipped panel")
    return box, strokes, anchors


def _area(box: list[float]) -> float:
    return (box[2] - box[0]) * (box[3] - box[1])
