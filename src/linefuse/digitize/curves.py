"""A chart's errors in the data's own units: its curve read back from the pixels, against the CSV.

Pixel figures say how an image differs; a chemist asks how far a peak moved in nm and how wrong
its height is. Each generated chart has its spectrum (CSV) and a sidecar (JSON) that maps the
plot area's pixels to wavelength and intensity, so a restored chart's main series can be read
back column by column and compared with the spectrum that was drawn.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from linefuse.digitize.ocr import Label

SPINE_INSET_PX = 2.0  # rows and columns this close to the plot box's edge hold the axes' spines
FURNITURE_MARGIN_PX = 1.0  # around the sidecar's boxes and lines: their anti-aliasing

# Pixels. A pixel's distance off the background-to-series blend per unit of its coverage is its
# hue error: up to HUE_KEEP it is the series (tinted a little by JPEG's subsampled chroma), from
# HUE_DROP on something else (grey or black on a coloured line); docs/experiments.md has the
# hue errors they were set against.
HUE_KEEP = 0.2
HUE_DROP = 0.4
FAINT = 0.1  # coverage added before that division: faint pixels' hue is mostly noise
PLAIN = 0.15  # farther than this from the background (a fraction of the blend) a pixel is drawn

# Runs: a column's contiguous strong pixels
RUN_FRACTION = 0.5  # of a column's strongest ink: the weakest pixel that is strong
# a column's strongest ink counts as at least this share of the line's usual strength (the
# median column's), so that where the line is missing (a dash gap) a faint grid is not strong
USUAL_SHARE = 0.8
MIN_INK = 0.5  # line widths of ink a run needs to count as showing the curve
DASH_GAP = 2.0  # line widths: the longest gap in matplotlib's dash patterns, bridged

# Costs of the path that picks one run a column, in px of vertical gap between consecutive runs
JUMP_COST = 10.0  # the most a step costs: landing far from where the path was
MAX_WAIT = 4  # columns with runs a path may skip and still step on from where it was
SKIP_COST = 1.0  # for each column skipped although it has runs (the line hidden or erased)
DASH_SKIP_COST = 0.4  # the same for a dashed line, which is missing from many columns
# for each column, per unit of its run's mean hue error, and per unit its strongest pixel falls
# short of its column's strongest (a lighter grey series beside a black one, on the same blend);
# together below HUE_DROP + (1 - RUN_FRACTION) < SKIP_COST, so that a solid line, even tinted by
# JPEG or faded by blur, is always worth more than skipping it
HUE_COST = 1.0
WEAK_COST = 1.0


@dataclass(frozen=True, eq=False)
class ChartTruth:
    """What one chart drew: its pixel-to-data mapping and its main series.

    plot_box is (left, top, right, bottom) in image pixels; colour is 0-255 RGB; wavelength
    ascends. xlim and ylim are the values at the box's left and right, bottom and top edges
    (high to low on a descending axis); on a log y, ylim and intensity are in log10 (on_axis),
    so its errors are in decades. boxes and lines are the sidecar's furniture (legend and text
    boxes; grid lines as polylines with their width and colour), in image pixels: never the
    curve. A sidecar without
    furniture (a user's own) has none. labels are its tick labels, text and box (digitize/ocr.py).
    """

    width: int
    height: int
    plot_box: tuple[float, float, float, float]
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    colour: tuple[float, float, float]
    linewidth_px: float
    linestyle: str
    wavelength: np.ndarray
    intensity: np.ndarray
    boxes: tuple[tuple[float, float, float, float], ...] = ()
    lines: tuple[tuple[np.ndarray, float, tuple[float, float, float]], ...] = ()
    labels: tuple[Label, ...] = ()
    library: str = ""  # the plotting library that drew it ("" when the sidecar names none)
    source: str = ""  # the chart's image file, beside its sidecar and CSV


def on_axis(sidecar: dict, name: str, values) -> np.ndarray:
    """`values` along axis `name` in the units its pixels run linearly in: log10 of them on a
    log axis (the sidecar's `axes`; a sidecar without them is linear), else themselves. Errors
    are measured in these units, so a log axis' are in decades."""
    values = np.asarray(values, dtype=float)
    if sidecar.get("axes", {}).get(name, {}).get("scale") != "log":
        return values
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log10(values)  # a value <= 0 is nowhere on a log axis: NaN, an error


def read_truth(png_path: Path | str) -> ChartTruth | None:
    """The sidecar and CSV beside a chart image, or None when either is missing or unreadable
    (a user's own images have neither, and a broken one must not stop an evaluation)."""
    png_path = Path(png_path)
    try:
        sidecar = json.loads(png_path.with_suffix(".json").read_text())
        main = sidecar["series"][0]
        with png_path.with_suffix(".csv").open(newline="") as table:
            rows = list(csv.DictReader(table))
        column = next(c for c in (main.get("column"), "intensity", "intensity_0") if c in rows[0])
        wavelength = np.array([float(row["wavelength"]) for row in rows])
        intensity = on_axis(sidecar, "y", [float(row[column]) for row in rows])
        order = np.argsort(wavelength)  # np.interp needs ascending wavelengths
        left, top, right, bottom = (float(v) for v in sidecar["plot_box"])
        x0, x1 = (float(v) for v in sidecar["xlim"])
        y0, y1 = (float(v) for v in on_axis(sidecar, "y", sidecar["ylim"]))
        if right <= left or bottom <= top or x0 == x1 or y0 == y1 or len(wavelength) < 2:
            raise ValueError("degenerate plot box, axis limits or spectrum")
        furniture = sidecar.get("furniture", {})
        boxes = tuple(tuple(float(v) for v in b) for b in furniture.get("boxes", []))
        if any(len(b) != 4 for b in boxes):
            raise ValueError("a furniture box needs four numbers")
        lines = tuple(
            (
                np.array(line["points"], dtype=float).reshape(-1, 2),
                float(line["width_px"]),
                _rgb255(line["color"]),
            )
            for line in furniture.get("lines", [])
        )
        labels = tuple(
            Label(str(label["text"]), tuple(float(v) for v in label["box"]))
            for label in sidecar.get("tick_labels") or []
        )
        if any(len(label.box) != 4 for label in labels):
            raise ValueError("a tick label's box needs four numbers")
        return ChartTruth(
            width=int(sidecar["width"]),
            height=int(sidecar["height"]),
            plot_box=(left, top, right, bottom),
            xlim=(x0, x1),
            ylim=(y0, y1),
            colour=_rgb255(main["color"]),
            linewidth_px=float(main["linewidth_px"]),
            linestyle=str(main.get("linestyle", "-")),
            wavelength=wavelength[order],
            intensity=intensity[order],
            boxes=boxes,
            lines=lines,
            labels=labels,
            library=str(sidecar.get("library", "")),
            source=str(png_path),
        )
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError, StopIteration):
        return None


def _rgb255(colour: list) -> tuple[float, float, float]:
    """0-255 RGB from a sidecar colour, which may be 0-1 floats (matplotlib's own scale); integers
    are always 0-255, so a near-black [0, 0, 1] is not mistaken for blue."""
    rgb = [float(v) for v in colour[:3]]
    if len(rgb) != 3:
        raise ValueError(f"colour needs three channels, got {colour!r}")
    unit_floats = all(v <= 1.0 for v in rgb) and not all(isinstance(v, int) for v in colour[:3])
    return tuple(v * 255.0 for v in rgb) if unit_floats else tuple(rgb)


def plot_background(box: np.ndarray) -> np.ndarray:
    """The plot area's bare colour: each channel's most common value, not its median: a blurred
    grid and curves can tint more than half the plot area, but no single tint of theirs is as
    common as the bare background."""
    pixels = box.reshape(-1, 3)
    return np.array(
        [np.bincount(pixels[:, c], minlength=256).argmax() for c in range(3)], dtype=np.float32
    )


def series_ink(
    box: np.ndarray, background: np.ndarray, colour: np.ndarray
) -> tuple[np.ndarray, ...]:
    """(h, w) amount of series colour in each pixel, 0..1, how far its hue is from the series',
    and whether it is something else drawn over the plot area (a crossing series, a letter).

    An anti-aliased or blurred line pixel is a blend bg + a * (colour - bg), so its projection a
    on that blend is the line's coverage: the coverage-weighted mean row is the line's centre, and
    a column's summed coverage is the line's width whatever the blur. A pixel's distance off the
    blend per unit of coverage is its hue error: a faint grey halo is as far off as a solid grey
    line, while noise is off by about the same small amount at any coverage. Pixels clearly off
    (other series, a grey grid on a coloured line, text in another colour) hold no ink.
    """
    blend = colour - background
    blend_sq = float(blend @ blend)
    if blend_sq < 1.0:  # series drawn in the background's colour: nothing can be read
        nothing = np.zeros(box.shape[:2], dtype=np.float32)
        return nothing, nothing, nothing.astype(bool)
    offset = box.astype(np.float32) - background
    coverage = (offset @ blend) / blend_sq
    distance_sq = np.einsum("...k,...k->...", offset, offset) / blend_sq  # from the background
    # Pythagoras: squared distance off the blend = squared distance - squared length along it
    off_blend_sq = distance_sq - coverage**2
    # beyond the series colour along the blend (black on a grey series' blend) is off it too
    off_sq = np.maximum(off_blend_sq, 0.0) + np.maximum(coverage - 1.0, 0.0) ** 2
    hue_error = np.sqrt(off_sq) / (np.abs(coverage) + FAINT)
    same_hue = np.clip((HUE_DROP - hue_error) / (HUE_DROP - HUE_KEEP), 0.0, 1.0)
    other_ink = (distance_sq > PLAIN**2) & (hue_error > HUE_KEEP)
    return np.clip(coverage, 0.0, 1.0) * same_hue, hue_error, other_ink


def _trace(
    image: np.ndarray, truth: ChartTruth, offset: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every plot-box column in view that the spectrum spans (the rest had nothing to draw): its
    wavelength, whether it shows the curve, and the curve's intensity there, the column's mean
    and at a peak or valley its extreme (meaningless where it does not show the curve)."""
    top_offset, left_offset = offset
    left, top, right, bottom = truth.plot_box
    # crop pixels whose chart-pixel centres lie inside the box, clear of the spines, clipped
    first_col = max(math.ceil(left + SPINE_INSET_PX - 0.5) - left_offset, 0)
    end_col = min(math.floor(right - SPINE_INSET_PX - 0.5) + 1 - left_offset, image.shape[1])
    first_row = max(math.ceil(top + SPINE_INSET_PX - 0.5) - top_offset, 0)
    end_row = min(math.floor(bottom - SPINE_INSET_PX - 0.5) + 1 - top_offset, image.shape[0])
    col_centres = np.arange(first_col, max(end_col, first_col)) + left_offset + 0.5
    (x0, x1), (y0, y1) = truth.xlim, truth.ylim
    wavelengths = x0 + (col_centres - left) / (right - left) * (x1 - x0)
    inked = np.zeros(len(col_centres), dtype=bool)
    centre_row, crest_row = np.zeros(len(col_centres)), np.zeros(len(col_centres))
    if end_row > first_row and len(col_centres) > 0:
        box = image[first_row:end_row, first_col:end_col, :3]
        row_centres = np.arange(first_row, end_row) + top_offset + 0.5
        path_cols, path_centres, path_crests = follow_line(
            box,
            row_centres,
            col_centres,
            truth.colour,
            truth.linewidth_px,
            truth.linestyle not in ("-", "solid"),
            truth.boxes,
            truth.lines,
        )
        inked[path_cols] = True
        centre_row[path_cols], crest_row[path_cols] = path_centres, path_crests
    intensity, crest = (
        y0 + (bottom - rows) / (bottom - top) * (y1 - y0) for rows in (centre_row, crest_row)
    )
    spanned = (wavelengths >= truth.wavelength[0]) & (wavelengths <= truth.wavelength[-1])
    return wavelengths[spanned], inked[spanned], intensity[spanned], crest[spanned]


def _furniture_mask(
    boxes: tuple[tuple[float, float, float, float], ...],
    lines: list[tuple[np.ndarray, float, tuple[float, float, float]]],
    row_centres: np.ndarray,
    col_centres: np.ndarray,
) -> np.ndarray:
    """(rows, cols) True where a pixel's centre is within FURNITURE_MARGIN_PX of a legend or
    text box, or of one of `lines` beyond half its width."""
    y, x = row_centres[:, None], col_centres[None, :]
    mask = np.zeros((len(row_centres), len(col_centres)), dtype=bool)
    m = FURNITURE_MARGIN_PX
    for left, top, right, bottom in boxes:
        mask |= (x >= left - m) & (x <= right + m) & (y >= top - m) & (y <= bottom + m)
    for points, width, _ in lines:
        reach_sq = (width / 2 + m) ** 2
        for (x0, y0), (x1, y1) in zip(points[:-1], points[1:], strict=True):
            dx, dy = x1 - x0, y1 - y0
            along = ((x - x0) * dx + (y - y0) * dy) / max(dx * dx + dy * dy, 1e-12)
            along = np.clip(along, 0.0, 1.0)
            mask |= (x - x0 - along * dx) ** 2 + (y - y0 - along * dy) ** 2 <= reach_sq
    return mask


def follow_line(
    box: np.ndarray,
    row_centres: np.ndarray,
    col_centres: np.ndarray,
    colour,
    linewidth_px: float,
    dashed: bool,
    boxes: tuple[tuple[float, float, float, float], ...] = (),
    lines: tuple[tuple[np.ndarray, float, tuple[float, float, float]], ...] = (),
    least_gap_px: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The box's columns that show the line, and the line's centre row and crest row in each
    (chart pixels; see _crest_rows).

    A column's ink comes in runs of strong pixels, contiguous but for pixels of other ink (where
    another series crosses a steep flank, the flank stays one run): the line, and maybe a grid
    line, a tick, a legend or a letter in the series' own colour. Each column keeps the run on
    the most continuous path across the plot, and its ink-weighted centre. The sidecar's legend
    and text boxes are other ink whatever their colour, and so are its lines (the grid) whose
    colour would be strong ink of the series: a grey grid on a blue line is told apart by hue
    and a pale one on a black line is weak, and masking them would only hide the curve where it
    crosses them (a dashed line then loses its way). boxes and lines are ChartTruth's furniture;
    a chart with no sidecar has none. A dashed line's gaps are bridged up to DASH_GAP line
    widths, or `least_gap_px` where that is more (dashes drawn in points, not line widths).
    """
    colour = np.asarray(colour, dtype=np.float32)
    background = plot_background(box)
    ink, hue_error, other_ink = series_ink(box, background, colour)
    lines = [
        line
        for line in lines
        if series_ink(np.asarray(line[2], dtype=np.float32), background, colour)[0] >= RUN_FRACTION
    ]
    furniture = _furniture_mask(boxes, lines, row_centres, col_centres)
    ink[furniture] = 0.0
    other_ink |= furniture
    column_peak = ink.max(axis=0)
    usual_peak = np.median(column_peak[column_peak > 0]) if column_peak.any() else 0.0
    strong = ink >= RUN_FRACTION * np.maximum(column_peak, USUAL_SHARE * usual_peak)
    solid = strong | other_ink
    dash_gap = max(DASH_GAP * linewidth_px, least_gap_px) if dashed else 0.0
    if dash_gap:  # a steep dashed flank is one run too
        solid |= _between(strong, round(dash_gap))
    padded = np.pad(solid, ((1, 1), (0, 0)))
    cols, starts = np.nonzero((solid & ~padded[:-2]).T)  # ordered by column, then row
    # column-major, from one stretch's first pixel to the next's lie the stretch and then plain
    # pixels; only strong ones count, so sums and extremes over those spans are the runs' own
    starts += cols * ink.shape[0]
    strong_ink = np.where(strong, ink, 0.0)

    def per_run(values: np.ndarray, reduce: np.ufunc = np.add) -> np.ndarray:
        return reduce.reduceat(values.T.ravel(), starts)

    rows = np.arange(ink.shape[0])[:, None]
    tops = per_run(np.where(strong, rows, ink.shape[0]), np.minimum)
    bottoms = per_run(np.where(strong, rows, -1), np.maximum)
    amount = per_run(strong_ink)
    enough = amount >= MIN_INK * linewidth_px
    if not enough.any():
        return cols[enough], np.zeros(0), np.zeros(0)
    amount = amount[enough]
    centres = per_run(strong_ink * row_centres[:, None])[enough] / amount
    costs = HUE_COST * per_run(strong_ink * hue_error)[enough] / amount
    run_peak = per_run(strong_ink, np.maximum)[enough]
    costs += WEAK_COST * (1.0 - run_peak / column_peak[cols[enough]])
    cols, tops, bottoms = cols[enough], tops[enough], bottoms[enough]
    runs = cols.tolist(), tops.tolist(), bottoms.tolist(), costs.tolist()
    skip_cost = DASH_SKIP_COST if dash_gap else SKIP_COST
    on_path = _most_continuous(*runs, free_gap=1.0 + dash_gap, skip_cost=skip_cost)
    cols, tops, bottoms, peaks = cols[on_path], tops[on_path], bottoms[on_path], run_peak[on_path]

    def coverage(rows: np.ndarray) -> np.ndarray:  # of a pixel in each path column, 0..1
        inside = (rows >= 0) & (rows < ink.shape[0])
        rows = np.clip(rows, 0, ink.shape[0] - 1)
        return np.where(inside, np.clip(ink[rows, cols] / peaks, 0.0, 1.0), 0.0)

    # sub-pixel edges: the edge pixel's and its outer neighbour's uncovered share
    top_edges = row_centres[tops] + 0.5 - coverage(tops) - coverage(tops - 1)
    bottom_edges = row_centres[bottoms] - 0.5 + coverage(bottoms) + coverage(bottoms + 1)
    crests = _crest_rows(centres[on_path], top_edges, bottom_edges, linewidth_px)
    return cols, centres[on_path], crests


def _crest_rows(
    centres: np.ndarray, top_edges: np.ndarray, bottom_edges: np.ndarray, linewidth_px: float
) -> np.ndarray:
    """The curve's extreme row at each run on the path: the run's ink-weighted centre, except at
    a peak or a valley. There a column holds both flanks, whose ink centres well below a narrow
    peak's apex; the apex is half a line width in from the run's top (bottom) edge. Peak heights
    read crests; the curve's RMSE reads centres, the column's mean, which is what a sampled
    curve's value at a column centre is closest to (crests fit noise worse). docs/experiments.md
    ("The curve reader") has what each reading measured."""
    rows = centres.copy()
    if len(rows) < 3:
        return rows
    half_width = linewidth_px / 2
    mid = slice(1, -1)
    peak = (top_edges[mid] <= top_edges[:-2]) & (top_edges[mid] <= top_edges[2:])
    valley = (bottom_edges[mid] >= bottom_edges[:-2]) & (bottom_edges[mid] >= bottom_edges[2:])
    crest, trough = top_edges[mid] + half_width, bottom_edges[mid] - half_width
    rows[mid] = np.where(peak, np.minimum(rows[mid], crest), rows[mid])
    rows[mid] = np.where(valley & ~peak, np.maximum(rows[mid], trough), rows[mid])
    return rows


def _between(mask: np.ndarray, reach: int) -> np.ndarray:
    """Pixels with a set pixel at most `reach` rows above and another at most `reach` below."""
    counts = np.pad(np.cumsum(mask, axis=0), ((1, 0), (0, 0)))  # counts[r]: set rows above r
    rows = np.arange(mask.shape[0])
    above = counts[rows] - counts[np.maximum(rows - reach, 0)]
    below = counts[np.minimum(rows + reach + 1, mask.shape[0])] - counts[rows + 1]
    return (above > 0) & (below > 0)


def _most_continuous(
    columns: list[int],
    tops: list[int],
    bottoms: list[int],
    run_costs: list[float],
    free_gap: float,
    skip_cost: float,
) -> list[int]:
    """Indices of the runs, at most one a column, on the cheapest path from left to right.

    Runs are ordered by column. A step between runs costs their vertical gap (0 when they touch
    or are at most free_gap rows apart, and at most JUMP_COST), so the drawn line, which is
    continuous, costs nothing and a detour to a letter or a legend costs its distance twice; each
    run adds its own cost (hue error and weakness), which decides where two lines cross. Passing a
    column that has runs without taking one costs skip_cost (a dash gap, the line hidden under
    another series, or erased), before the first run and after the last too. Dynamic programming
    over columns; a path waits to step on from its last run for at most MAX_WAIT such columns
    (beyond, it may still jump anywhere), and is dropped once it costs a jump more than the
    cheapest, which can always jump instead.
    """
    cost, back = [0.0] * len(columns), [-1] * len(columns)  # back: the path's previous run
    waiting: list[tuple[float, int, int]] = []  # (cost, run, columns passed since) of paths
    lost = (math.inf, -1)  # the cheapest path that waited too long: it may only jump
    unstarted = 0.0  # the path that has taken no run yet: it lands anywhere for free
    start = 0
    while start < len(columns):
        end = start
        while end < len(columns) and columns[end] == columns[start]:
            end += 1
        for j in range(start, end):
            best, via = min((unstarted, -1), (lost[0] + JUMP_COST, lost[1]))
            top, bottom = tops[j], bottoms[j]
            for so_far, k, _ in waiting:
                gap = max(top - bottoms[k], tops[k] - bottom, free_gap) - free_gap
                landing = so_far + min(gap, JUMP_COST)
                if landing < best:
                    best, via = landing, k
            cost[j], back[j] = best + run_costs[j], via
        # the waiting paths pass this column's runs by; the ones that waited too long may only jump
        unstarted += skip_cost
        lost = (lost[0] + skip_cost, lost[1])
        kept = []
        for so_far, k, passed in waiting:
            if passed < MAX_WAIT:
                kept.append((so_far + skip_cost, k, passed + 1))
            elif so_far + skip_cost < lost[0]:
                lost = (so_far + skip_cost, k)
        kept += [(cost[j], j, 0) for j in range(start, end)]
        hopeless = min(entry[0] for entry in kept) + JUMP_COST
        waiting = [entry for entry in kept if entry[0] < hopeless]
        start = end
    so_far, last = min([(so_far, k) for so_far, k, _ in waiting] + [lost], default=(0.0, -1))
    if so_far >= unstarted:  # no run is worth taking
        return []
    path = []
    while last >= 0:
        path.append(last)
        last = back[last]
    return path[::-1]


def extract_curve(
    image: np.ndarray, truth: ChartTruth, offset: tuple[int, int] = (0, 0)
) -> tuple[np.ndarray, np.ndarray]:
    """(wavelength, intensity) of the main series at each plot-box column that shows it.

    image is (H, W, 3) uint8, the whole chart or a crop of it whose pixel (r, c) is the chart's
    pixel (r + offset[0], c + offset[1]).
    """
    wavelengths, inked, intensity, _ = _trace(image, truth, offset)
    return wavelengths[inked], intensity[inked]


def shown_columns(
    image: np.ndarray, truth: ChartTruth, offset: tuple[int, int] = (0, 0)
) -> np.ndarray:
    """Which of the columns curve_errors judges show the curve in `image` (a sharp chart): the
    `shown` that curve_errors takes."""
    return _trace(image, truth, offset)[1]


def curve_errors(
    image: np.ndarray,
    truth: ChartTruth,
    offset: tuple[int, int] = (0, 0),
    shown: np.ndarray | None = None,
) -> dict[str, float]:
    """The main series' errors against the CSV, in nm and intensity units, and how much of it
    is there.

    curve_rmse compares each plot-box column in view that shows the curve (a dashed line is
    judged on its dashes) with the CSV interpolated at its wavelength; curve_coverage is the
    share of the columns in view that the spectrum spans that show it, so a restorer that erases
    part of the line does not score on the columns it left. The peak is the CSV's largest value
    in view (with `shown`, the sharp chart's shown_columns: in those columns; a dashed line's apex
    may fall in a gap that no restoration should fill), against the curve's highest crest, so
    erasing a peak is a height error. Peaks are positioned to the nearest of the points within a
    line width of each maximum: two peaks of nearly one height swap places at the slightest
    change, which says nothing about the restoration. With no column showing the curve the
    errors are NaN and the coverage 0.
    """
    wavelengths, inked, intensity, crest = _trace(image, truth, offset)
    if not inked.any():
        nan = float("nan")
        return {
            "peak_position_error": nan,
            "peak_height_error": nan,
            "curve_rmse": nan,
            "curve_coverage": 0.0,
        }
    left, top, right, bottom = truth.plot_box
    row_height = abs(truth.ylim[1] - truth.ylim[0]) / (bottom - top)
    half_column = abs(truth.xlim[1] - truth.xlim[0]) / (right - left) / 2
    nearest = np.abs(truth.wavelength[:, None] - wavelengths[None, :]).argmin(axis=1)
    in_view = np.abs(truth.wavelength - wavelengths[nearest]) <= half_column
    if shown is not None and shown.any():
        in_view &= shown[nearest]
    drawn, drawn_at = truth.intensity[in_view], truth.wavelength[in_view]
    found, crests, at = intensity[inked], crest[inked], wavelengths[inked]
    tolerance = max(truth.linewidth_px, 1.0) * row_height
    found_peaks = at[crests >= crests.max() - tolerance]
    expected_peaks = drawn_at[drawn >= drawn.max() - tolerance]
    expected = np.interp(at, truth.wavelength, truth.intensity)
    return {
        "peak_position_error": float(np.abs(np.subtract.outer(found_peaks, expected_peaks)).min()),
        "peak_height_error": float(abs(crests.max() - drawn.max())),
        "curve_rmse": float(np.sqrt(np.mean((found - expected) ** 2))),
        "curve_coverage": float(inked.mean()),
    }
