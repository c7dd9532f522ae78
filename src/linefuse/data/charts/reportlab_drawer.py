"""A planned chart drawn by ReportLab: the charts of PDF reports (reportlab.graphics.charts'
LinePlot), written as the PDF ReportLab makes and rasterised by PDFium (pypdfium2: the PDF
engine of Chrome's viewer, with its own fonts for PDF's standard faces), as a reader of the report
sees it, over the same ChartPlan as matplotlib's drawer. (ReportLab's own bitmap renderer,
renderPM, is not byte-stable: a filled path drawn twice differs on its edges.)

ReportLab lays out nothing by itself: the plot area is placed here, inside margins sized from
the label widths the fonts give, in pixels (the page is rendered at 72 dpi so a unit is a pixel;
a point is dpi / 72 px). So every fact is known before drawing: the plot box, the axis
limits the plot fixes, each series' colour and width, the legend's box. The tick values are
ReportLab's own choice, read back from its axes; a tick label's box is the ink it leaves (the
chart drawn a second time with the labels in another colour; facts.label_boxes).
"""

from __future__ import annotations

import numpy as np

from linefuse.data.charts.facts import chart_sidecar, label_boxes

# the plot's dressing: axes alone; a grid; a frame round the plot; a tinted plot with white grid
THEMES = ("plain", "grid", "boxed", "filled")
FONTS = {"Serif": "Times-Roman", "Mono": "Courier", "STIX": "Times-Roman"}  # else Helvetica
DASHES = {"-": None, "--": [6, 3], ":": [1.5, 2.5], "-.": [6, 2.5, 1.5, 2.5]}  # in line widths
MARKERS = {"o": "FilledCircle", "s": "FilledSquare", "^": "FilledTriangle", "D": "FilledDiamond"}
MARKERS |= {"x": "Cross", "+": "Cross", "*": "FilledStarFive", "v": "FilledTriangle"}
HOLLOW = {"FilledCircle": "Circle", "FilledSquare": "Square", "FilledTriangle": "Triangle"}
HOLLOW |= {"FilledDiamond": "Diamond", "FilledStarFive": "StarFive"}
PALETTE = ("#1f3f99", "#cc2929", "#2e8b57", "#b8860b", "#6a3d9a", "#444444")
Y_MARGIN = 0.05  # of the data's range above and below, as matplotlib's default margins
MARKED = (1.0, 0.0, 1.0)  # the tick labels' colour in the second drawing


def render(plan) -> tuple[np.ndarray, dict]:
    """(height, width, 3) uint8 RGB image and the sidecar of one planned chart, drawn by
    ReportLab in the dressing plan.style."""
    drawing, plot, legend, limits = _drawing(plan)
    image = _raster(drawing)
    ticks = {
        axis: [v for v in a._tickValues if lo <= v <= hi]
        for axis, a, (lo, hi) in (
            ("x", plot.xValueAxis, limits[0]),
            ("y", plot.yValueAxis, limits[1]),
        )
    }
    for axis in (plot.xValueAxis, plot.yValueAxis):
        axis.labels.fillColor = _colour(MARKED)
    marked = _raster(drawing)
    if image.shape[:2] != (plan.height, plan.width):
        raise AssertionError(f"ReportLab drew {image.shape[1]}x{image.shape[0]}, not {plan.width}")
    height = plan.height
    box = [plot.x, height - plot.y - plot.height, plot.x + plot.width, height - plot.y]
    anchors = [("x", _label(v), _scale(v, limits[0], box[0], box[2]), box[3]) for v in ticks["x"]]
    anchors += [("y", _label(v), box[0], _scale(v, limits[1], box[3], box[1])) for v in ticks["y"]]
    px = plan.dpi / 72.0
    boxes = []
    if legend is not None:
        x0, y0, x1, y1 = legend.getBounds()
        boxes.append([round(v, 2) for v in (x0, height - y1, x1, height - y0)])
    return image, chart_sidecar(
        plan,
        plot_box=box,
        xlim=limits[0],
        ylim=limits[1],
        y_scale="linear",
        drawn=[
            ([round(255 * c) for c in plot.lines[k].strokeColor.rgb()], plan.line_width_pt * px)
            for k in range(len(plan.series))
        ],
        furniture={"boxes": boxes, "lines": []},  # grid lines are not listed
        tick_labels=label_boxes(image, marked, box, anchors),
    )


def _drawing(plan):
    """(Drawing, its LinePlot, its legend or None, the (x, y) limits) of `plan`."""
    from reportlab.graphics.charts.legends import LineLegend
    from reportlab.graphics.charts.lineplots import LinePlot
    from reportlab.graphics.shapes import Drawing, Group, String
    from reportlab.graphics.widgets.markers import makeMarker
    from reportlab.pdfbase.pdfmetrics import stringWidth

    px = plan.dpi / 72.0
    font = next((v for k, v in FONTS.items() if k in plan.font), "Helvetica")
    size = plan.font_pt * px
    x0, x1 = float(plan.table[:, 0].min()), float(plan.table[:, 0].max())
    low, high = float(plan.table[:, 1:].min()), float(plan.table[:, 1:].max())
    margin = Y_MARGIN * ((high - low) or 1.0)
    limits = ((x0, x1), (low - margin, high + margin))
    widest = max(stringWidth(_label(v), font, size) for v in (*limits[1], (low + high) / 2))
    title = size * 1.6 if plan.title else 0.0
    left = widest + size * (2.2 if plan.y_label else 0.9)
    bottom = size * (3.2 if plan.x_label else 2.0)
    right = size * 1.2 + (_legend_width(plan, font, size) if _legend_outside(plan) else 0.0)
    drawing = Drawing(plan.width, plan.height)
    plot = LinePlot()
    plot.x, plot.y = left, bottom
    plot.width = max(plan.width - left - right, 8.0)
    plot.height = max(plan.height - bottom - size * 0.8 - title, 8.0)
    plot.data = [
        list(zip(plan.table[:, 0].tolist(), plan.table[:, k + 1].tolist(), strict=True))
        for k in range(len(plan.series))
    ]
    for axis, (lo, hi) in ((plot.xValueAxis, limits[0]), (plot.yValueAxis, limits[1])):
        axis.valueMin, axis.valueMax = lo, hi
        axis.labels.fontName, axis.labels.fontSize = font, size
        axis.labelTextFormat = _label
        axis.strokeWidth = max(0.5, 0.8 * px)
    plot.xValueAxis.tickDown = plot.yValueAxis.tickLeft = size * 0.35
    _dress(plot, plan.style, px)
    for k, s in enumerate(plan.series):
        line = plot.lines[k]
        line.strokeColor = _colour(s.color or PALETTE[k % len(PALETTE)])
        line.strokeWidth = plan.line_width_pt * px
        dash = DASHES[s.linestyle]
        line.strokeDashArray = None if dash is None else [d * line.strokeWidth for d in dash]
    drawing.add(plot)
    for k, s in enumerate(plan.series):  # markers on every markevery-th point, as matplotlib's
        if s.marker is None:
            continue
        kind = MARKERS.get(s.marker, "FilledCircle")
        kind = HOLLOW.get(kind, kind) if s.hollow else kind
        for x, y in plot.data[k][k * s.markevery // len(plan.series) :: s.markevery]:
            marker = makeMarker(kind, size=s.markersize * px * 1.6)
            marker.x = plot.x + (x - limits[0][0]) / (limits[0][1] - limits[0][0]) * plot.width
            marker.y = plot.y + (y - limits[1][0]) / (limits[1][1] - limits[1][0]) * plot.height
            marker.strokeColor = marker.fillColor = plot.lines[k].strokeColor
            drawing.add(marker)
    if plan.title:
        drawing.add(
            String(
                plot.x + plot.width / 2,
                plan.height - title,
                plan.title,
                fontName=font,
                fontSize=size * 1.15,
                textAnchor="middle",
            )
        )
    if plan.x_label:
        drawing.add(
            String(
                plot.x + plot.width / 2,
                size * 0.6,
                plan.x_label,
                fontName=font,
                fontSize=size,
                textAnchor="middle",
            )
        )
    if plan.y_label:
        turned = Group(
            String(0, 0, plan.y_label, fontName=font, fontSize=size, textAnchor="middle"),
            transform=(0, 1, -1, 0, size * 1.1, plot.y + plot.height / 2),  # 90 degrees
        )
        drawing.add(turned)
    legend = None
    if plan.legend is not None:
        legend = LineLegend()
        legend.fontName, legend.fontSize = font, size
        legend.colorNamePairs = [
            (plot.lines[k].strokeColor, s.label) for k, s in enumerate(plan.series)
        ]
        legend.alignment, legend.columnMaximum = "right", len(plan.series)
        legend.dx, legend.dy = size * 1.6, max(1.0, plan.line_width_pt * px)
        legend.deltay = size * 1.3
        top = plot.y + plot.height - size * 0.6
        legend.x = plot.x + plot.width + size * 0.8 if _legend_outside(plan) else plot.x + size
        legend.y = top
        drawing.add(legend)
    return drawing, plot, legend, limits


def _dress(plot, style: str, px: float) -> None:
    """The plot's dressing by theme: a grid, a frame, a tinted background."""
    from reportlab.lib import colors

    if style in ("grid", "filled"):
        for axis in (plot.xValueAxis, plot.yValueAxis):
            axis.visibleGrid = True
            axis.gridStrokeWidth = 0.6 * px
            axis.gridStrokeColor = (
                colors.white if style == "filled" else colors.Color(0.8, 0.8, 0.8)
            )
    if style == "boxed":
        plot.strokeColor, plot.strokeWidth = colors.black, 0.8 * px
    if style == "filled":
        plot.fillColor = colors.Color(0.92, 0.92, 0.94)


def _legend_outside(plan) -> bool:
    return plan.legend is not None and plan.legend[0] == "best"


def _legend_width(plan, font: str, size: float) -> float:
    from reportlab.pdfbase.pdfmetrics import stringWidth

    return max(stringWidth(s.label, font, size) for s in plan.series) + size * 3.0


def _raster(drawing) -> np.ndarray:
    """The drawing as (H, W, 3) uint8 RGB on white, one pixel a unit: its PDF through PDFium."""
    import pypdfium2
    from reportlab.graphics import renderPDF

    page = pypdfium2.PdfDocument(renderPDF.drawToString(drawing))[0]
    bitmap = page.render(scale=1, fill_color=(255, 255, 255, 255), rev_byteorder=True)
    return np.ascontiguousarray(bitmap.to_numpy()[..., :3])


def _label(value: float) -> str:
    """A tick label as a report prints it: %g, with no exponent below a million."""
    text = f"{value:.6g}"
    return text if "e" not in text else f"{value:.0f}"


def _scale(value: float, limits: tuple[float, float], start: float, end: float) -> float:
    return start + (value - limits[0]) / (limits[1] - limits[0]) * (end - start)


def _colour(colour):
    from reportlab.lib import colors

    if isinstance(colour, str):
        return colors.HexColor(colour)
    return colors.Color(*colour)
