"""The series inside the plot box: told apart by colour, each followed column by column.

Inside the box, what is neither the plot area's background nor a straight line of the frame
(spines, grid) is the series' ink, and some text (a legend, an annotation). Its colours cluster:
each series is one colour, its anti-aliased edges blends of that colour with the background.
Each cluster is then read by digitize/curves.py's line follower (the cheapest continuous path of
runs, one a column, through crossings, dash gaps and markers), as it reads a chart's main series
given its sidecar; here the colour, width and dash come from the pixels. One colour may draw
several series, told apart by their lines' style (_paths). A path that covers little of the box
is text or a swatch, not a series. A legend inside the box (digitize/legend.py) is taken out of
the ink before the series are followed, and each series is matched to the entry whose sample
it is drawn like, whose text names it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import ndimage

from linefuse.digitize.axes import INK, Frame, distance, runs
from linefuse.digitize.curves import follow_line, plot_background, series_ink
from linefuse.digitize.legend import Entry, find_legend
from linefuse.digitize.legend import area as legend_area

SPINE_INSET_PX = 2  # box rows and columns this close to its edge hold the spines
FAR_LABELS = 1.5  # label heights: tick labels farther out than this have no spine beside them
CORE = 50.0  # RGB distance from the plot background beyond which a pixel is a series' core
BIN = 24  # colour quantum of the first clustering pass
SAME_COLOUR = 60.0  # clusters nearer than this are one colour
MIN_PIXELS = 0.1  # of the box's width: core pixels a colour needs to be a series candidate
MIN_SPAN = 0.15  # of the box's width: columns a path must cover to be a series
SOLID_COVER = 0.9  # share of its span a solid line's path covers; less is dashed (or dotted)
MAX_SERIES = 8
# text heights: the least dash gap bridged in a colour's first path. matplotlib's classic style
# draws its dashes in points, not line widths (gaps of 6, 5 and 3 pt dashed, dash-dot and
# dotted; DASH_GAP bridges the line-width ones), about a digit's height at its label sizes.
# Not in grey or black, nor in a colour's further paths: bridged this far, the bits of text,
# ticks and frames, and a line's fringes left once it is erased, chain into paths long enough
# to pass for series (docs/experiments.md)
DASH_TEXT = 1.0
EDGE_SHARE = 0.6  # of a colour's core pixels beside a stronger colour's: it is that one's edge
MIN_WIDTH_PX = 1.0  # the least width a line is given: a stroke's summed coverage in a column
MAX_WIDTH_PX = 10.0  # a line is thinner than this and than MAX_WIDTH_SHARE of the box's height:
MAX_WIDTH_SHARE = 0.08  # wider ink in most columns is a bar or a filled area
LINE_TINT = INK  # a grid line differs from the plot background by this much
DOT_SPAN = 0.8  # of the box's width: a dotted grid line spans it ...
DOT_GAP = 6  # ... with gaps of at most this many px between its dots ...
DOT_PERIOD = 20  # ... and one at least every this many px (matplotlib's dashes repeat sooner)
EDGE_INK = 0.25  # coverage beyond which a pixel belongs to a stroke when strokes are counted
PER_COLOUR = 3  # series of one colour, told apart by style: solid, dashed, dotted or marked
ERASE_INK = 0.1  # coverage down to which a path taken is painted over: its anti-aliased edges
# a further path of a colour lies farther than APART line widths and APART_PX from the paths
# taken in APART_SHARE of its columns at least
APART = 3.0
APART_PX = 2.0
APART_SHARE = 0.5
FURTHER_SPAN = 0.3  # of the box's width: columns a further path of a colour covers (a dotted
# line over the whole plot, 0.4); a noisy line's edges, painted over in part, leave less
MARK_EXCESS = 2.0  # line widths: a column's ink this much taller than the line's slope is a marker
MIN_MARKS = 4  # markers that make a line marked (two lines of one colour cross only a few times)
MARK_COST = 0.5  # of matching a legend sample to a series: a marker on one and not the other
UNLIKE = 1e6  # the cost of matching a legend sample to a series of another colour
# RGB distance off the segment between two colours of a blend of them: a mean of blends of two
# colours lies on the segment, a series in a colour of its own farther (docs/experiments.md)
BLEND_TINT = 28.0
# of a stronger line's width: a paler trace this thin is its edge's (an anti-aliased rim, or
# bits of it) and lies within APART line widths of it; a thicker one is a stroke of its own
# and only its shadow within one line width (matplotlib's grayscale style draws a 0.4 grey
# series beside a black one)
THIN_SHADOW = 0.5
# of the way from the plot background to a stronger trace's colour: a trace a pixel thin
# (MIN_WIDTH_PX) and paler than this, in a blend of the two, is a stroke's anti-aliased fringe
# wherever it runs (a legend frame's edge beyond the legend taken out, a rim left of a line)
FAINT = 0.3
SHADOW_SHARE = 0.5  # of a pale trace's columns along a stronger line: that line's shadow
RIM_SHARE = 0.9  # of a colour's further path's columns on another colour's line: that line's rim
# of a marked, broken path's columns on other colours' lines: their markers' dark edges, followed
# from marker to marker (matplotlib's classic style edges markers in black)
MARKS_SHARE = 0.8
GRID_SPAN = 0.35  # of the box's width (height): a row (column) this much in a grid line's colour
GRID_TINT = 12.0  # RGB distance from a grid line's colour of the pixels that hold that line
# a path is its colour's when pixels of that colour (within SAME_COLOUR) lie on it in this share
# of its columns at least; a dark colour's blend covers any darker line's pixels in part, so its
# follower can walk along another colour's line
OWN_SHARE = 0.5
FRAME_SHARE = 0.8  # of a legend's side inked: the frame drawn round the legend
# a ruled line (a grid line, a legend's or an annotation's frame) is grey or black, and its path
# keeps its centre row (within STILL_PX) from one point to the next in STRAIGHT of its steps,
# moving only in jumps of RULED_JUMP steps at most (from one edge to another); measured data's
# noise moves its centre in most columns, and a smooth curve without noise moves in longer runs
GREY_SPREAD = 24.0  # RGB channels' spread of a grey
STRAIGHT = 0.75
STILL_PX = 0.05
RULED_JUMP = 6
MAX_RULED = 8  # ruled lines of one colour followed and erased before its series are given up
# a grey or black path across at most NOTE_SPAN of the box's width whose rows keep within
# NOTE_ROWS text heights is a line of text (an annotation and its arrow, a legend's names)
NOTE_SPAN = 0.6
NOTE_ROWS = 3.0


@dataclass(frozen=True)
class Trace:
    """One series as read: its colour (0-255 RGB), line width and style (the share of its span
    that it covers: 1 solid, less dashed or dotted; whether markers sit on it), its path: the
    columns' centres and the line's centre row in each (continuous image pixels), and which of
    the legend's entries it is drawn like (None: no legend, or no entry like it)."""

    colour: tuple[float, float, float]
    linewidth_px: float
    fill: float
    marked: bool
    columns: np.ndarray
    rows: np.ndarray
    entry: int | None = None

    @property
    def dashed(self) -> bool:
        return self.fill < SOLID_COVER


def inner_box(frame: Frame, shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The pixels where series may be: the box clear of its spines, (first row, end row, first
    col, end col). Where the tick labels lie far outside the box (a frame found from grid lines
    that stop at the outer ticks, no spine beside the labels), out to the labels."""
    left, top, right, bottom = frame.box
    size = _text_size(frame)
    if frame.y_words:
        labels = max(w.box[2] for w in frame.y_words)
        left = labels + size if left - labels > FAR_LABELS * size else left
    if frame.x_words:
        labels = min(w.box[1] for w in frame.x_words)
        bottom = labels - size / 2 if labels - bottom > FAR_LABELS * size else bottom
        reach = max(w.box[2] for w in frame.x_words)
        right = max(right, reach) if reach - right > FAR_LABELS * size else right
    first_row = max(math.ceil(top) + SPINE_INSET_PX, 0)
    end_row = min(math.floor(bottom) - SPINE_INSET_PX, shape[0])
    first_col = max(math.ceil(left) + SPINE_INSET_PX, 0)
    end_col = min(math.floor(right) - SPINE_INSET_PX, shape[1])
    return first_row, end_row, first_col, end_col


def _line_mask(
    frame: Frame, box: np.ndarray, background: np.ndarray, first_row: int, first_col: int
) -> np.ndarray:
    """(rows, cols) of the box: True on the frame's straight lines (grid lines) drawn in a colour
    of their own; a panel's rows, in the plot background's colour, are not lines here."""
    mask = np.zeros(box.shape[:2], dtype=bool)
    for lines, axis in ((frame.line_rows - first_row, 0), (frame.line_cols - first_col, 1)):
        tinted = []
        for index in lines[(lines >= 0) & (lines < box.shape[axis])]:
            pixels = box[index] if axis == 0 else box[:, index]
            if distance(colour := np.median(pixels, axis=0), background) > LINE_TINT:
                tinted.append((index, colour))
        view = mask if axis == 0 else mask.T
        view[[index for index, _ in tinted]] = True
        view[_missed_grid(box if axis == 0 else box.transpose(1, 0, 2), tinted)] = True
    ink = distance(box, background) > LINE_TINT
    mask[_dotted(ink), :] = True
    mask[:, _dotted(ink.T)] = True
    return mask


def _missed_grid(box: np.ndarray, lines: list[tuple[int, np.ndarray]]) -> list[int]:
    """The rows of `box` that hold grid lines the frame missed (a series along one, a legend
    across it): on the even spacing of the grid lines found inside the box (`lines`: their rows
    and colours; two at least), in a found line's colour (within GRID_TINT) across GRID_SPAN of
    the box. Grid lines are snapped to whole pixels, so their spacing varies by a pixel: beyond
    the found lines it is stepped one spacing at a time from the last line found, measured
    between the lines' centres."""
    inside = np.array(sorted(index for index, _ in lines if 0 < index < len(box) - 1))
    starts, ends = runs(np.isin(np.arange(len(box)), inside))  # a line over rows is one line
    if len(starts) < 2:
        return []
    steps = np.diff(starts)
    # the spacing over all the lines found: one step, a pixel off at most, rounds between them
    multiples = np.round(steps / steps.min())
    step = (starts[-1] - starts[0]) / multiples.sum()
    if np.any(np.abs(steps - multiples * step) > 1.5):
        return []  # not one grid's spacing
    near = np.min([distance(box, colour) for _, colour in lines], axis=0) <= GRID_TINT
    tinted = near.sum(axis=1) >= GRID_SPAN * box.shape[1]

    def at(row: float) -> list[int]:  # the tinted rows within a pixel of `row`
        return [
            r for r in range(max(round(row) - 1, 0), min(round(row) + 2, len(box))) if tinted[r]
        ]

    # a pixel either side of the first rows of the found lines and of those between them
    found = [r for k in range(int(multiples.sum()) + 1) for r in at(starts[0] + step * k)]
    centres = (starts + ends - 1) / 2
    spacing = (centres[-1] - centres[0]) / multiples.sum()
    for centre, direction in ((centres[0], -1), (centres[-1], 1)):
        while 0 <= (centre := centre + direction * spacing) < len(box):
            rows = at(centre)
            found += rows
            if rows:  # the line found, within half a spacing: each step moves on
                centre += float(np.clip(np.mean(rows) - centre, -spacing / 2, spacing / 2))
    return sorted(set(found))


def _dotted(ink: np.ndarray) -> np.ndarray:
    """The rows of `ink` that hold a dotted or dashed grid line, which the frame's lines (solid
    runs) miss: inked across DOT_SPAN of the box with no gap wider than DOT_GAP px, broken at
    least every DOT_PERIOD px. A curve leaves any one row for its peaks; a steep stretch of it,
    across a column, is unbroken."""
    width = ink.shape[1]
    found = []
    for row in np.flatnonzero(ink.sum(axis=1) >= DOT_SPAN * width / (DOT_GAP + 1)):
        inked = np.flatnonzero(ink[row])
        gaps = np.diff(inked) - 1
        span = inked[-1] - inked[0]
        broken = (gaps > 0).sum() >= span / DOT_PERIOD
        if span >= DOT_SPAN * width and gaps.max(initial=0) <= DOT_GAP and broken:
            found.append(row)
    return np.array(found, dtype=int)


def colours(box: np.ndarray, background: np.ndarray, lines: np.ndarray) -> list[np.ndarray]:
    """The series' candidate colours: clusters of the core pixels' colours, most common first,
    without the ones that are only another's anti-aliased edges."""
    far = distance(box, background)
    core_mask = (far > CORE) & ~lines
    core = box[core_mask].astype(np.float32)
    if len(core) == 0:
        return []
    bins = (core // BIN).astype(np.int64)
    keys, counts = np.unique(bins, axis=0, return_counts=True)
    centres: list[np.ndarray] = []
    enough = MIN_PIXELS * box.shape[1]
    for key in keys[np.argsort(-counts)][: 4 * MAX_SERIES]:
        members = core[(bins == key).all(axis=1)]
        if len(members) < enough:
            break
        centre = members.mean(axis=0)
        if all(np.linalg.norm(centre - c) > SAME_COLOUR for c in centres):
            centres.append(centre)
    if not centres:
        return []
    # each core pixel to its nearest centre; a centre's colour is its farthest half's mean
    nearest = np.argmin([np.linalg.norm(core - c, axis=1) for c in centres], axis=0)
    labels = np.full(box.shape[:2], -1)
    labels[core_mask] = nearest
    refined = []
    for index in range(len(centres)):
        members = core[nearest == index]
        reach = distance(members, background)
        refined.append(members[reach >= np.median(reach)].mean(axis=0))
    strength = [distance(c, background) for c in refined]
    return [
        c
        for i, c in enumerate(refined)
        if not any(
            strength[j] > strength[i] and _edges_of(labels == i, labels == j)
            for j in range(len(refined))
        )
    ]


def _edges_of(mine: np.ndarray, other: np.ndarray) -> bool:
    """Whether most of `mine` touches `other`: a stronger colour's anti-aliased edges, not a
    series of its own (a grey line beside a black one has pixels of its own far from it)."""
    near = ndimage.binary_dilation(other, structure=np.ones((3, 3)))
    return bool(mine.any() and (mine & near).sum() > EDGE_SHARE * mine.sum())


def _width(ink: np.ndarray) -> float:
    """A line's width in px: the usual summed coverage of a column's stroke (a column's
    coverage over its separate strokes: several series of one colour cross a column)."""
    strokes = np.diff(ink > EDGE_INK, axis=0, prepend=False).sum(axis=0) / 2
    sums = ink.sum(axis=0)
    inked = (sums > 0.5) & (strokes > 0)
    if not inked.any():
        return MIN_WIDTH_PX
    return float(max(np.median(sums[inked] / np.ceil(strokes[inked])), MIN_WIDTH_PX))


def _text_size(frame: Frame) -> float:
    """The chart's text height in px: its tick labels' median (0 with none)."""
    words = frame.x_words + frame.y_words
    return float(np.median([w.box[3] - w.box[1] for w in words])) if words else 0.0


def _fill(found: np.ndarray, hidden: np.ndarray) -> float:
    """The share of a path's span that it covers (1 for a solid line), the columns where the
    legend hid it left out."""
    if not len(found):
        return 0.0
    span = np.zeros(len(hidden), dtype=bool)
    span[found[0] : found[-1] + 1] = True
    span[hidden] = False
    span[found] = True
    return float(len(found) / span.sum())


def _follow(
    box: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    colour: np.ndarray,
    width: float,
    hidden: np.ndarray,
    least_gap_px: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The most continuous path of `colour` (column indices and centre rows): followed as a
    solid line, and as a dashed one where it covers less than SOLID_COVER of its span, its
    gaps bridged up to DASH_GAP line widths or `least_gap_px`."""
    found, centres, _ = follow_line(box, rows, cols, colour, width, dashed=False)
    if len(found) and _fill(found, hidden) < SOLID_COVER:
        found, centres, _ = follow_line(
            box, rows, cols, colour, width, dashed=True, least_gap_px=least_gap_px
        )
    return found, centres


def _erase(
    box: np.ndarray,
    background: np.ndarray,
    colour: np.ndarray,
    path: tuple[np.ndarray, np.ndarray],
    first_row: float,
) -> np.ndarray:
    """Paint a path's ink in the box over with the background: in each of its columns, the run
    of the colour's ink (down to ERASE_INK: its edges, a marker on it) that holds its centre,
    and a pixel either side. Returns each column's run height in px."""
    ink = series_ink(box, background, colour)[0] > ERASE_INK
    heights = np.zeros(len(path[0]))
    for index, (col, centre) in enumerate(zip(*path, strict=True)):
        row = min(int(centre - first_row), len(ink) - 1)
        up, down = np.flatnonzero(~ink[:row, col]), np.flatnonzero(~ink[row + 1 :, col])
        top = up[-1] + 1 if len(up) else 0
        bottom = row + 1 + down[0] if len(down) else len(ink)
        box[max(top - 1, 0) : bottom + 1, col] = background
        heights[index] = bottom - top
    return heights


def _apart(
    path: tuple[np.ndarray, np.ndarray], taken: list[tuple[np.ndarray, np.ndarray]], width: float
) -> bool:
    """Whether a path lies clear of the paths already taken in its colour in most of its
    columns: nearer, it is what erasing them left behind (a hollow marker's rim, an edge)."""
    clear = np.ones(len(path[0]), dtype=bool)
    for cols, centres in taken:
        inside = (path[0] >= cols[0]) & (path[0] <= cols[-1])
        gap = np.abs(path[1] - np.interp(path[0], cols, centres))
        clear &= ~inside | (gap > APART * width + APART_PX)
    return bool(clear.mean() >= APART_SHARE)


def _marked(
    path: tuple[np.ndarray, np.ndarray],
    heights: np.ndarray,
    width: float,
    others: list[tuple[np.ndarray, np.ndarray]],
) -> bool:
    """Whether markers sit on a path: MIN_MARKS places at least where its ink is MARK_EXCESS
    line widths taller than its slope makes it, none where another path of its colour passes."""
    cols, centres = path
    steps = np.abs(np.diff(centres, prepend=centres[:1], append=centres[-1:]))
    tall = heights - width - np.maximum(steps[:-1], steps[1:]) >= MARK_EXCESS * width
    for other_cols, other_centres in others:
        near = np.abs(np.interp(cols, other_cols, other_centres) - centres) <= heights + width
        tall &= ~(near & (cols >= other_cols[0]) & (cols <= other_cols[-1]))
    return len(runs(tall)[0]) >= MIN_MARKS


def _paths(
    box: np.ndarray,
    background: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    colour: np.ndarray,
    width: float,
    hidden: np.ndarray,
    size: float,
) -> list[tuple[np.ndarray, np.ndarray, bool]]:
    """Each series of one colour (its columns, centre rows and whether it is marked); `hidden`:
    the columns the legend covers (True), where a line may be missing; `size`: the chart's text
    height (DASH_TEXT).

    Series of one colour differ in their lines' style (solid, dashed, dotted, with markers), so
    pixels alone cannot say whose a pixel is; their paths can. The most continuous path is
    followed, its ink painted over, and the next followed in what is left, until none is both
    long and clear of the ones taken; a ruled line followed (_ruled) is painted over and not
    taken. A solid line is the most continuous, so it goes first,
    whole, and a dashed or dotted one follows in its gaps; where two cross, the follower's cost
    of a vertical jump keeps each on the line it came along. Dash patterns need not be measured,
    nor markers be told from dashes, and a chart of one line per colour costs one more follow.
    """
    left = box.copy()
    taken: list[tuple[np.ndarray, np.ndarray]] = []
    heights = []
    ruled = 0
    grey = float(np.ptp(colour)) <= GREY_SPREAD
    while len(taken) < PER_COLOUR and ruled <= MAX_RULED:
        path = _follow(
            left, rows, cols, colour, width, hidden, 0.0 if taken or grey else DASH_TEXT * size
        )
        # a further one, after a series or a ruled line: not a noisy edge's bits
        least = FURTHER_SPAN if taken or ruled else MIN_SPAN
        if len(path[0]) < least * len(cols) or not _apart(path, taken, width):
            break
        height = _erase(left, background, colour, path, rows[0] - 0.5)
        if _ruled(colour, path[1]):  # a grid line or a frame in the series' colour: no series
            ruled += 1
            continue
        heights.append(height)
        taken.append(path)
    return [
        (*path, _marked(path, height, width, taken[:index] + taken[index + 1 :]))
        for index, (path, height) in enumerate(zip(taken, heights, strict=True))
    ]


def _names(traces: list[Trace], entries: list[Entry]) -> list[Trace]:
    """The traces, each with the legend entry whose sample it is drawn like: colours within
    SAME_COLOUR, then styles as near as can be, one entry a trace (_pairs); a trace no entry is
    like keeps none."""
    if not traces or not entries:
        return traces
    cost = np.full((len(traces), len(entries)), UNLIKE)
    for i, trace in enumerate(traces):
        for j, entry in enumerate(entries):
            far = float(np.linalg.norm(np.subtract(trace.colour, entry.colour)))
            if far <= SAME_COLOUR:
                style = abs(trace.fill - entry.fill) + MARK_COST * (trace.marked != entry.marked)
                cost[i, j] = far / SAME_COLOUR + style
    named = list(traces)
    for i, j in _pairs(cost):
        named[i] = replace(traces[i], entry=j)
    return named


def _pairs(cost: np.ndarray) -> list[tuple[int, int]]:
    """The (row, column) pairs, one a row and a column at most, of the least total cost, the most
    pairs below UNLIKE first: scipy's linear_sum_assignment, less its import of scipy.optimize,
    a tenth of a fresh `linefuse digitize`'s start-up (docs/benchmarks.md, digitize_start). A
    trace is like only the entries of its colour, so the rows and columns linked below UNLIKE
    fall into a few small groups (a colour's up to PER_COLOUR traces and its entries), and each
    group's pairings are all tried."""
    linked = cost < UNLIKE
    unseen = np.ones(cost.shape[0], bool)
    pairs = []
    while unseen.any():
        rows = np.arange(cost.shape[0]) == np.argmax(unseen)
        while True:  # the group: the rows and columns linked to it, until none is added
            cols = linked[rows].any(axis=0)
            grown = rows | linked[:, cols].any(axis=1)
            if (grown == rows).all():
                break
            rows = grown
        unseen &= ~rows
        rows, cols = np.flatnonzero(rows), np.flatnonzero(cols)
        group = cost[np.ix_(rows, cols)]
        flip = len(rows) > len(cols)  # permute the longer side
        group = group.T if flip else group
        best = min(
            itertools.permutations(range(group.shape[1]), group.shape[0]),
            key=lambda taken: group[range(group.shape[0]), taken].sum(),
            default=(),
        )
        for a, b in enumerate(best):
            i, j = (rows[b], cols[a]) if flip else (rows[a], cols[b])
            if linked[i, j]:
                pairs.append((int(i), int(j)))
    return pairs


def trace_series(image: np.ndarray, frame: Frame) -> tuple[list[Trace], int, list[Entry]]:
    """Every series in the frame's box, as read from its pixels, how many colours fill areas
    (bars) instead of drawing lines, and the legend's entries (none without a legend), each
    trace naming the entry it is drawn like."""
    first_row, end_row, first_col, end_col = inner_box(frame, image.shape)
    if end_row - first_row < 4 or end_col - first_col < 4:
        return [], 0, []
    box = image[first_row:end_row, first_col:end_col, :3].copy()
    background = plot_background(box)
    lines = _line_mask(frame, box, background, first_row, first_col)
    box[lines] = background.astype(np.uint8)  # the grid is no series' ink
    found = colours(box, background, lines)[:MAX_SERIES]
    widths = [_width(series_ink(box, background, colour)[0]) for colour in found]
    size = _text_size(frame)
    entries = find_legend(box, background, found, widths, size, (first_row, first_col))
    hidden = np.zeros(box.shape[1], dtype=bool)
    if entries:  # the legend is no series' ink: its samples, letters and frame are taken out
        left, top, right, bottom = legend_area(entries, size)
        rows_in = slice(max(math.floor(top) - first_row, 0), max(math.ceil(bottom) - first_row, 0))
        columns = slice(max(math.floor(left) - first_col, 0), max(math.ceil(right) - first_col, 0))
        rows_in, columns = _framed(box, background, rows_in, columns, math.ceil(size))
        box[rows_in, columns] = background.astype(np.uint8)
        hidden[columns] = True
        found = colours(box, background, lines)[:MAX_SERIES]
        widths = [_width(series_ink(box, background, colour)[0]) for colour in found]
    rows = np.arange(first_row, end_row) + 0.5
    cols = np.arange(first_col, end_col) + 0.5
    traces, further, filled = [], [], 0
    for colour, width in zip(found, widths, strict=True):
        if width > max(MAX_WIDTH_PX, MAX_WIDTH_SHARE * len(rows)):
            filled += 1  # a bar or a filled area, not a line
            continue
        colour_rgb = tuple(float(round(v)) for v in colour)
        paths = _paths(box, background, rows, cols, colour, width, hidden, size)
        for index, (path, centres, marked) in enumerate(paths):
            owned = _owned(box, colour, width, path, centres - rows[0])
            if owned.mean() < OWN_SHARE:  # another, darker line followed as its blend
                continue
            if _text_line(colour, path[owned], centres[owned], size, len(cols)):
                continue
            fill = _fill(path, hidden)
            traces.append(Trace(colour_rgb, width, fill, marked, cols[path], centres))
            if index:
                further.append(traces[-1])
    rims = [t for t in further if _on(t, [o for o in traces if o.colour != t.colour], RIM_SHARE)]
    traces = _without_shadows([t for t in traces if not any(t is rim for rim in rims)], background)
    for trace in sorted(traces, key=lambda t: len(t.columns)):  # of two alike, the shorter goes
        others = [o for o in traces if o.colour != trace.colour]
        if trace.marked and trace.dashed and _on(trace, others, MARKS_SHARE):
            traces = [t for t in traces if t is not trace]
    return _names(traces[:MAX_SERIES], entries), filled, entries


def _framed(
    box: np.ndarray, background: np.ndarray, rows: slice, columns: slice, reach: int
) -> tuple[slice, slice]:
    """A legend's rows and columns grown, each side by up to `reach` px, to the farthest line
    beside it that is inked along FRAME_SHARE of the legend's side: the frame drawn round it."""
    ink = distance(box, background) > LINE_TINT
    top, bottom, left, right = rows.start, rows.stop, columns.start, columns.stop
    inked_rows = ink[:, left:right].mean(axis=1) >= FRAME_SHARE if right > left else []
    inked_cols = ink[top:bottom].mean(axis=0) >= FRAME_SHARE if bottom > top else []
    for offset in range(1, reach + 1):
        if top - offset >= 0 and inked_rows[top - offset]:
            rows = slice(top - offset, rows.stop)
        if bottom - 1 + offset < len(inked_rows) and inked_rows[bottom - 1 + offset]:
            rows = slice(rows.start, bottom + offset)
        if left - offset >= 0 and inked_cols[left - offset]:
            columns = slice(left - offset, columns.stop)
        if right - 1 + offset < len(inked_cols) and inked_cols[right - 1 + offset]:
            columns = slice(columns.start, right + offset)
    return rows, columns


def _owned(
    box: np.ndarray, colour: np.ndarray, width: float, path: np.ndarray, centres: np.ndarray
) -> np.ndarray:
    """Which of the path's columns hold pixels of `colour` on it (within half its width and a
    pixel of its centre row); `centres` are box rows."""
    reach = width / 2 + 1
    own = distance(box[:, path], colour) <= SAME_COLOUR
    rows = np.arange(len(box))[:, None]
    near = np.abs(rows + 0.5 - centres[None, :]) <= reach
    return (own & near).any(axis=0)


def _text_line(
    colour: np.ndarray, path: np.ndarray, centres: np.ndarray, size: float, width: int
) -> bool:
    """Whether a path, in the columns it holds its colour (_owned), is a line of text followed
    as a series (NOTE_SPAN, NOTE_ROWS): a note written beside a peak, with its arrow (the
    follower may go on along another colour's anti-aliased flank), or a legend's names where no
    legend was found. Text is grey or black (GREY_SPREAD); a grey series this short and this
    flat is a rarer thing than a note (docs/experiments.md)."""
    return (
        float(np.ptp(colour)) <= GREY_SPREAD
        and path[-1] - path[0] <= NOTE_SPAN * width
        and float(np.ptp(centres)) <= NOTE_ROWS * size
    )


def _ruled(colour: np.ndarray, centres: np.ndarray) -> bool:
    """Whether a path of `colour` is a ruled line's (GREY_SPREAD, STRAIGHT, RULED_JUMP)."""
    moving = np.abs(np.diff(centres)) >= STILL_PX
    starts, ends = runs(moving)
    return (
        float(np.ptp(colour)) <= GREY_SPREAD
        and len(centres) > 1
        and float(np.mean(~moving)) >= STRAIGHT
        and int((ends - starts).max(initial=0)) <= RULED_JUMP
    )


def _without_shadows(traces: list[Trace], background: np.ndarray) -> list[Trace]:
    """The traces but those that are another's shadow: a paler colour that is a blend of a
    stronger trace's with the background (its anti-aliased edges) or of two stronger traces'
    (where they overlap), whose path runs along such traces (_along: within APART line widths
    of one where it is thin, one line width where it is as thick as a line; APART_PX at least)
    in SHADOW_SHARE of its columns; and a faint fringe wherever it runs (_faint). The colour
    clusters keep a blend apart from its line where a noisy or thin line has more edge pixels
    than core, or two lines share a stretch; a series of its own runs apart from any line whose
    blend it looks like."""
    strength = [float(distance(np.array(t.colour), background)) for t in traces]
    order = np.argsort(strength)[::-1]  # strongest first: a shadow is paler than its line
    kept: list[Trace] = []
    for index in order:
        trace = traces[index]
        ends = [(background, np.array(k.colour)) for k in kept]
        ends += [(np.array(a.colour), np.array(b.colour)) for a in kept for b in kept if a is not b]
        lines = [k for k in kept if _blend_of(np.array(trace.colour), *(background, k.colour))]
        blended = any(_blend_of(np.array(trace.colour), *pair) for pair in ends)
        if (blended and _along(trace, lines or kept)) or _faint(trace, kept, background):
            continue
        kept.append(trace)
    return [t for t in traces if any(t is k for k in kept)]


def _blend_of(colour: np.ndarray, one: np.ndarray, other) -> bool:
    """Whether `colour` lies between two colours, within BLEND_TINT of the segment joining them."""
    return _blend_share(colour, one, other) is not None


def _blend_share(colour: np.ndarray, one: np.ndarray, other) -> float | None:
    """How far `colour` lies from `one` towards `other` (0 to 1) where it is a blend of the two
    (_blend_of); None where it is not."""
    one, other = np.asarray(one, dtype=float), np.asarray(other, dtype=float)
    span = other - one
    along = float(np.dot(colour - one, span) / max(np.dot(span, span), 1e-9))
    off = np.linalg.norm(colour - (one + np.clip(along, 0.0, 1.0) * span))
    return along if 0.0 <= along <= 1.0 and off <= BLEND_TINT else None


def _on(trace: Trace, lines: list[Trace], share: float) -> bool:
    """Whether `trace`'s path lies on `lines`' strokes (within half a line's width and a pixel
    of its centre row) in `share` of its columns: a colour's further path that only follows
    another colour's line is that line's rim, passing for this colour's blend (a navy line's
    anti-aliased edges for a grey series: _paths follows it once the grey line is erased), and a
    marked, broken path that does is their markers' edges (RIM_SHARE, MARKS_SHARE)."""
    on = np.zeros(len(trace.columns), dtype=bool)
    for line in lines:
        inside = (trace.columns >= line.columns.min()) & (trace.columns <= line.columns.max())
        rows = np.interp(trace.columns[inside], line.columns, line.rows)
        on[inside] |= np.abs(trace.rows[inside] - rows) <= line.linewidth_px / 2 + 1
    return bool(on.mean() >= share)


def _along(trace: Trace, lines: list[Trace]) -> bool:
    """Whether `trace`'s path runs along `lines` (one or another in each column) in
    SHADOW_SHARE of its columns: within APART of a line's widths where the trace is thin beside
    it (THIN_SHADOW), else within one."""
    near = np.zeros(len(trace.columns), dtype=bool)
    for line in lines:
        inside = (trace.columns >= line.columns.min()) & (trace.columns <= line.columns.max())
        at = trace.columns[inside]
        # the rows the line's stroke spans in a column: a steep stretch spans many
        spans = np.stack([np.interp(at + step, line.columns, line.rows) for step in (-1, 0, 1)])
        widths = APART if trace.linewidth_px <= THIN_SHADOW * line.linewidth_px else 1.0
        reach = max(widths * line.linewidth_px, APART_PX)
        rows = trace.rows[inside]
        near[inside] |= (rows >= spans.min(axis=0) - reach) & (rows <= spans.max(axis=0) + reach)
    return bool(near.sum() >= SHADOW_SHARE * len(trace.columns))


def _faint(trace: Trace, lines: list[Trace], background: np.ndarray) -> bool:
    """Whether `trace` is a pixel thin (MIN_WIDTH_PX) and a blend of the background with one
    of `lines`' colours less than FAINT of the way to it: a fringe."""
    shares = [_blend_share(np.array(trace.colour), background, line.colour) for line in lines]
    return trace.linewidth_px <= MIN_WIDTH_PX and any(
        share is not None and share <= FAINT for share in shares
    )
