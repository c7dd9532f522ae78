"""The plot area and the tick-label words around it, from the pixels alone.

A chart's plot area is framed by long straight lines: spines, grid lines, or the edges of a
panel drawn in its own colour. A row (column) whose ink runs, but for short gaps (dashed grid
lines, a grid line of the background's colour across a panel), over a large share of the
image's width (height) is one of them; the plot box spans them all. Tick labels are the words
just below the box (x) and just left of it, right-aligned (y).

Coordinates are continuous image pixels: pixel (r, c) covers [c, c + 1) x [r, r + 1), so its
centre is (c + 0.5, r + 0.5), as in the sidecars.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np
from scipy import ndimage

INK = 14.0  # RGB distance from the background beyond which a pixel is drawn (a light panel too)
TEXT_INK = 60.0  # ... beyond which it is part of a glyph
LINE_SHARE = 0.35  # of the image's width (height): the shortest run that is an axis or grid line
LINE_SPAN = 0.8  # of the longest line: grid lines and spines span the plot, a curve's flat part not
LINE_GAP = 3  # px: gaps a line's run may have (dashes, crossing grid lines of background colour)
LINE_FILL = 0.85  # share of a line's run that is ink: text and curves, bridged, fill less
LINE_HUE = 0.7  # share of a line's ink within LINE_TINT of its median colour: one colour
LINE_TINT = 45.0
MIN_GLYPH_PX = 3  # a digit is at least this tall; tick marks beside the axis are shorter
WORD_GAP = 0.4  # of a digit's height: digits of one x label are closer than this
TICK_PAD = 2  # px between the box's edge and a label: what starts nearer is a tick mark
THIN = 2  # px: a tick mark's width at most
WIDEST_MARK = 6  # px: a run of tick marks (a log axis's minors beside a major) is no wider
MAX_GLYPH_PX = 20  # a tick label's glyph is no taller (titles' may be)
MAX_GLYPHS = 1500  # more blobs than a chart's text has: a photo or noise
EVEN = 0.25  # of the mean step: how much tick labels' steps may differ (rounding, text widths)
POINT_SHARE = 0.4  # of a word's height: a decimal point is no taller nor wider
RAISED = 0.7  # of a word's height from its top: an exponent's glyphs end above this
LABEL_REACH = 3.5  # glyph heights from the box: farther text is an axis title, not a tick label
OFFSET_REACH = 5  # glyph heights right of the box's left edge within which its offset text starts
TICK_ROWS = 2  # px under the box's bottom edge that an outward x tick mark fills at least
TICK_SHARE = 0.5  # of the box's width: more columns inked under it are a line, not tick marks
MAJOR = 0.75  # of the longest tick mark's length: a shorter one is a minor tick, unlabelled
CRISP = 0.8  # of a tick mark's ink in one column: it was snapped to the pixel grid
CUT_PX = 2  # columns of a glyph cut at a crowded label's edge: fewer are no piece of the label
LABEL_SPACING = 2.0  # of their height: y labels stand at least this far apart, centre to centre
ALIGNED_PX = 2  # right-aligned y labels' right edges lie this close (anti-aliasing, a narrow 1)


@dataclass(frozen=True)
class Word:
    """A group of glyphs on one line: its box (left, top, right, bottom), continuous pixels,
    its glyphs' boxes (left, top, right, bottom; integer pixels, ends exclusive), left to
    right, and the centre of the tick mark it labels (x for an x label, y for a y label),
    where one was found level with it."""

    box: tuple[float, float, float, float]
    glyphs: tuple[tuple[int, int, int, int], ...] = ()
    tick: float | None = None

    @property
    def point(self) -> int | None:
        """How many glyphs precede its decimal point (a glyph far smaller than the digits, at
        their foot, between two of them), or None when it has none."""
        height = self.box[3] - self.box[1]
        for index, (left, top, right, bottom) in enumerate(self.glyphs):
            small = bottom - top <= POINT_SHARE * height and right - left <= POINT_SHARE * height
            if small and bottom >= self.box[3] - 1 and 0 < index < len(self.glyphs) - 1:
                return index
        return None

    @property
    def exponent(self) -> tuple[float, float, float, float] | None:
        """The box of its exponent, as in 10² (matplotlib's log labels): the glyphs after a
        full-height one that all end in the word's upper part (RAISED), or None."""
        left, top, _, bottom = self.box
        raised = [g[3] <= top + RAISED * (bottom - top) for g in self.glyphs]
        first = raised.index(True) if True in raised else 0
        if first == 0 or not all(raised[first:]):
            return None
        exponent = self.glyphs[first:]
        return (
            float(min(g[0] for g in exponent)),
            float(top),
            float(max(g[2] for g in exponent)),
            float(max(g[3] for g in exponent)),
        )

    @property
    def minus(self) -> bool:
        """Whether a minus sign's bar stands between two of its glyphs (1e−6)."""
        return any(_bar(g) for g in self.glyphs[1:-1])

    @property
    def centre(self) -> tuple[float, float]:
        left, top, right, bottom = self.box
        return (left + right) / 2, (top + bottom) / 2

    def position(self, axis: int) -> float:
        """Where along the axis (0: x, 1: y) its value lies: its centre, averaged with its tick
        mark's where one was found. Each is off by up to a pixel in its own way (a label's
        glyphs are not symmetric: matplotlib centres a y label's baseline, and 10 with a raised
        exponent is taller above; a tick mark is snapped to the pixel grid), and their mean is
        nearer than either (docs/experiments.md)."""
        centre = self.centre[axis]
        return centre if self.tick is None else (centre + self.tick) / 2


@dataclass(frozen=True)
class Frame:
    """What axes.find_frame reads: the figure's background (RGB), the plot box (left, top, right,
    bottom), the rows and columns of straight lines inside it (spines, grid), and the words that
    may be tick labels below (x) and left of (y) the box."""

    background: np.ndarray
    box: tuple[float, float, float, float]
    line_rows: np.ndarray
    line_cols: np.ndarray
    x_words: list[Word]
    y_words: list[Word]
    y_offset: Word | None = None  # the word where a y axis's multiplier is written (1e6)
    x_offset: Word | None = None  # ... and an x axis's (1e8, under the labels' right end)


def background(image: np.ndarray) -> np.ndarray:
    """The figure's background: the most common colour of the image's border pixels."""
    border = np.concatenate([image[0], image[-1], image[:, 0], image[:, -1]], axis=0).astype(
        np.int64
    )
    keys = (border[:, 0] << 16) | (border[:, 1] << 8) | border[:, 2]
    values, counts = np.unique(keys, return_counts=True)
    key = values[counts.argmax()]
    return np.array([(key >> 16) & 255, (key >> 8) & 255, key & 255], dtype=np.float32)


def distance(image: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """(H, W) RGB distance of each pixel from `colour`."""
    return np.sqrt(((image[..., :3].astype(np.float32) - colour) ** 2).sum(axis=-1))


def runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends (exclusive) of the runs of True in a 1-D mask."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return edges[::2], edges[1::2]


def _line_runs(
    image: np.ndarray, ink: np.ndarray, shortest: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For each row of `ink`: the length, start and end (exclusive) of its longest run of ink
    (the leftmost of equals), gaps of at most LINE_GAP bridged, and the start and end of its
    part in the line's own colour (_in_colour); all are 0 unless the run is at least `shortest`
    px and a straight line, mostly ink (LINE_FILL) of one colour (LINE_HUE), as a spine, a grid
    line or a panel is and a line of text or a curve is not. Every row's runs are found at
    once; only the rows whose longest run is long enough are looked at one by one."""
    bridged = ndimage.binary_closing(ink, structure=np.ones((1, 2 * LINE_GAP + 1))) | ink
    edges = np.diff(np.pad(bridged, ((0, 0), (1, 1))).astype(np.int8), axis=1)
    run_rows, run_starts = np.nonzero(edges == 1)
    run_ends = np.nonzero(edges == -1)[1]  # row by row, as the starts: a run ends in its row
    by_row = np.lexsort((run_starts, run_starts - run_ends, run_rows))  # longest first, then left
    firsts = by_row[np.diff(run_rows[by_row], prepend=-1) != 0]
    lengths, starts, ends, own_starts, own_ends = (np.zeros(len(ink), dtype=int) for _ in range(5))
    longest = zip(run_rows[firsts], run_starts[firsts], run_ends[firsts], strict=True)
    for row, start, end in longest:
        if end - start < shortest:
            continue
        inked = ink[row, start:end]
        colours = image[row, start:end][inked].astype(np.float32)
        if inked.mean() < LINE_FILL or len(colours) == 0:
            continue
        colour = np.median(colours, axis=0)
        if (distance(colours, colour) <= LINE_TINT).mean() >= LINE_HUE:
            starts[row], ends[row], lengths[row] = start, end, end - start
            first, last = _in_colour(image[row, start:end], inked, colour)
            own_starts[row], own_ends[row] = start + first, start + last
    return lengths, starts, ends, own_starts, own_ends


def _in_colour(pixels: np.ndarray, inked: np.ndarray, colour: np.ndarray) -> tuple[int, int]:
    """Where a line's run (`pixels`, `inked` its ink) starts and ends (exclusive; 0 and 0 where
    it has no such part) without the ends where it goes on in other colours: the tick marks and
    labels the bridging joined to a grid line, the labels under a panel. That part starts
    (ends) at the first (last) pixel of its colour (LINE_TINT) where, of the ink within
    LINE_GAP px onward (backward), a LINE_HUE share is; a curve crossing the line within does
    not cut it."""
    near = inked & (distance(pixels, colour) <= LINE_TINT)
    span = 2 * LINE_GAP + 1
    window = np.ones(span)
    ahead = np.convolve(near, window)[span - 1 :]  # of near[i : i + span]
    ahead_ink = np.convolve(inked, window)[span - 1 :]
    behind = np.convolve(near, window)[: len(near)]  # of near[i - span + 1 : i + 1]
    behind_ink = np.convolve(inked, window)[: len(near)]
    first = np.flatnonzero(near & (ahead >= LINE_HUE * ahead_ink))
    last = np.flatnonzero(near & (behind >= LINE_HUE * behind_ink))
    if not len(first) or not len(last) or last[-1] < first[0]:
        return 0, 0
    return int(first[0]), int(last[-1]) + 1


def _box_from_lines(
    image: np.ndarray, ink: np.ndarray
) -> tuple[tuple[float, float, float, float] | None, ...]:
    """The box spanned by the long horizontal and vertical lines, and their rows and columns;
    None for the box when there are none either way."""
    height, width = ink.shape
    h_len, h_start, h_end, h_first, h_last = _line_runs(image, ink, LINE_SHARE * width)
    v_len, _, v_end, v_first, v_last = _line_runs(
        image.transpose(1, 0, 2), ink.T, LINE_SHARE * height
    )
    h_own, v_own = h_last - h_first, v_last - v_first
    # the longest line measured in its own colour: a grid line run on, bridged, through its
    # tick mark into its label (or a panel's column into the labels under it) is longer than
    # the frame, which would then fall short of LINE_SPAN of it
    rows = np.flatnonzero(h_len >= max(LINE_SHARE * width, LINE_SPAN * h_own.max()))
    cols = np.flatnonzero(v_len >= max(LINE_SHARE * height, LINE_SPAN * v_own.max()))
    # a line drawn over several pixels (anti-aliased, thick) is one line: count groups
    # no pair of lines one way: the other way's lines' usual extent, and where one line crosses
    # them (an L-shaped frame: two spines hidden), that line at the end it is nearer; a run's
    # ends reach over the tick marks and labels beyond that spine, and a y spine's top, bridged,
    # into the offset text written above it (1e7): it ends where it does in its own colour
    if _groups(cols) >= 2:
        left, right = cols.min(), cols.max() + 1
        if len(rows):
            right = _reach(right, h_last[rows])
    elif len(rows):
        left, right = _extent(h_start[rows], h_end[rows], cols)
    else:
        return None, rows, cols
    if _groups(rows) >= 2:
        top, bottom = rows.min(), rows.max() + 1
        if len(cols):
            top = -_reach(-top, -v_first[cols])
    elif len(cols):
        top, bottom = _extent(v_first[cols], v_end[cols], rows)
    else:
        return None, rows, cols
    if right - left < LINE_SHARE * width or bottom - top < LINE_SHARE * height:
        return None, rows, cols  # no plot area: a curve's spike, drawn straight and long
    box = (float(left), float(top), float(right), float(bottom))
    return box, rows, cols


def _reach(end: int, lasts: np.ndarray) -> int:
    """The last line one way (the right or top edge: `end`, as a coordinate growing outward)
    moved out to where the lines the other way end in their own colour, where most of them
    (over half, within LINE_GAP px of their median) agree and end beyond LINE_GAP px past it: a
    frame of grid lines alone (theme_minimal), or one whose far spine lies on the image's edge,
    stops at its last grid line, short of the panel that the other lines span and the curves
    fill; a legend drawn over some of those lines ends them early. Not the left or bottom edge:
    the tick labels stand there, and lines bridged into them end in their anti-aliased
    glyphs."""
    shared = lasts[np.abs(lasts - np.median(lasts)) <= LINE_GAP]
    if 2 * len(shared) <= len(lasts) or shared.min() <= end + LINE_GAP:
        return end
    return int(np.median(shared))


def _extent(starts: np.ndarray, ends: np.ndarray, crossing: np.ndarray) -> tuple[float, float]:
    """The lines' usual start and end (median), the crossing line (one group of indices, if
    any) taken for the end it is nearer."""
    start, end = float(np.median(starts)), float(np.median(ends))
    if len(crossing):
        if abs(crossing.min() - start) <= abs(crossing.max() + 1 - end):
            start = float(crossing.min())
        else:
            end = float(crossing.max() + 1)
    return start, end


def _groups(indices: np.ndarray) -> int:
    """How many runs of consecutive numbers the ascending `indices` hold."""
    return int(len(indices) > 0) + int((np.diff(indices) > 1).sum())


def _glyphs(text: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Boxes (left, top, right, bottom; exclusive ends) of the connected blobs of `text`."""
    labelled, _ = ndimage.label(text, structure=np.ones((3, 3)))
    found = []
    for rows, cols in ndimage.find_objects(labelled):
        found.append((cols.start, rows.start, cols.stop, rows.stop))
    return found


def _glyphs_below(
    text: np.ndarray, bottom: int, glyphs: list[tuple[int, int, int, int]]
) -> list[tuple[int, int, int, int]]:
    """Boxes of the blobs of `text` under row `bottom` (the box's bottom edge), but the tick
    marks (starting within TICK_PAD of the edge, no row wider than THIN px), each without the
    tick mark it touches (small labels touch theirs: plotnine's): its leading rows at most THIN
    px wide within TICK_PAD of the edge. A blob joined to what is above the edge counts where
    it is joined by a tick mark (no wider than THIN at the edge) and its pieces are no taller
    than MAX_GLYPH_PX (not a curve under a grid line taken for the edge), and not the foot of a
    glyph (of `glyphs`, the image's) that crosses the edge (a y label's)."""
    if bottom >= len(text):  # the box reaches the image's bottom edge: nothing under it
        return []
    crossing = [g for g in glyphs if g[1] < bottom < g[3] and g[3] - g[1] <= MAX_GLYPH_PX]
    labelled, _ = ndimage.label(text[bottom:], structure=np.ones((3, 3)))
    found = []
    for index, (rows, cols) in enumerate(ndimage.find_objects(labelled), 1):
        mine = labelled[rows, cols] == index
        widths = mine.sum(axis=1)
        if rows.start < TICK_PAD and widths.max() <= THIN:
            continue  # a tick mark
        joined = rows.start == 0
        if joined and (
            widths[0] > THIN or any(g[0] <= cols.start and cols.stop <= g[2] for g in crossing)
        ):
            continue
        cut = 0
        while cut < len(widths) - 1 and widths[cut] <= THIN and rows.start + cut < TICK_PAD:
            cut += 1
        top = bottom + rows.start + cut
        found += [
            (cols.start + c.start, top + r.start, cols.start + c.stop, top + r.stop)
            for r, c in ndimage.find_objects(ndimage.label(mine[cut:], np.ones((3, 3)))[0])
            if not joined or r.stop - r.start <= MAX_GLYPH_PX
        ]
    return found


def _speck(glyph: tuple[int, int, int, int]) -> bool:
    """Whether a blob is at most 2 x 2 px and no wider than tall: noise, or a decimal point in a
    small font (a minus sign that small is wider than tall: a glyph)."""
    width, height = glyph[2] - glyph[0], glyph[3] - glyph[1]
    return width <= min(height, 2) and height <= 2


def _with_points(
    line: list[tuple[int, int, int, int]], specks: list[tuple[int, int, int, int]]
) -> list[tuple[int, int, int, int]]:
    """A line's glyphs with the specks in a gap between two of them at the foot of both: a
    decimal point in a small font (1.5 at 6 px), without which its digits are a word's gap
    apart. A speck under a glyph's columns is a broken piece of it (a 5's foot), no point."""
    points = []
    for speck in specks:
        before = [g for g in line if g[2] <= speck[0]]
        after = [g for g in line if g[0] >= speck[2]]
        if before and after and len(before) + len(after) == len(line):
            foot = max(max(before, key=lambda g: g[2])[3], min(after, key=lambda g: g[0])[3])
            if foot - 1 <= speck[3] <= foot:
                points.append(speck)
    return sorted(line + points)


def _lines_of(glyphs: list[tuple[int, int, int, int]]) -> list[list[tuple[int, int, int, int]]]:
    """Glyphs grouped into lines of text, each ordered left to right: a glyph joins the line
    (seeded by the tallest glyphs) whose seed's rows hold its centre, of two or more the one
    with a glyph nearest it (a rotated axis title beside a y label is as tall as a line)."""
    lines: list[tuple[tuple[int, int], list[tuple[int, int, int, int]]]] = []
    for glyph in sorted(glyphs, key=lambda g: g[3] - g[1], reverse=True):
        centre = (glyph[1] + glyph[3]) / 2
        holding = [line for (top, bottom), line in lines if top <= centre <= bottom]
        if holding:
            min(holding, key=lambda line: _gap(glyph, line)).append(glyph)
        else:
            lines.append(((glyph[1], glyph[3]), [glyph]))
    return [sorted(line) for _, line in lines]


def _gap(glyph: tuple[int, int, int, int], line: list[tuple[int, int, int, int]]) -> int:
    """Columns between a glyph and the nearest glyph of a line (0 where they overlap)."""
    return min(max(g[0] - glyph[2], glyph[0] - g[2], 0) for g in line)


def _words(line: list[tuple[int, int, int, int]], gap: float) -> list[Word]:
    """A line's glyphs split into words where they are more than `gap` px apart; a speck
    (_with_points) at a word's start or end is none of its glyphs."""
    groups = [[line[0]]]
    for glyph in line[1:]:
        if glyph[0] - max(g[2] for g in groups[-1]) <= gap:
            groups[-1].append(glyph)
        else:
            groups.append([glyph])
    words = []
    for glyphs in groups:
        while glyphs and _speck(glyphs[0]):
            glyphs = glyphs[1:]
        while glyphs and _speck(glyphs[-1]):
            glyphs = glyphs[:-1]
        if not glyphs:
            continue
        box = (
            float(min(g[0] for g in glyphs)),
            float(min(g[1] for g in glyphs)),
            float(max(g[2] for g in glyphs)),
            float(max(g[3] for g in glyphs)),
        )
        words.append(Word(box, tuple(tuple(int(v) for v in g) for g in glyphs)))
    return words


def _right_word(line: list[tuple[int, int, int, int]], gap: float) -> Word:
    """The rightmost word of a line: its glyphs up to the first gap wider than `gap`."""
    return _words(line, gap)[-1]


def _x_tick_marks(far: np.ndarray, box: tuple[float, ...]) -> np.ndarray:
    """Centres of the x axis's labelled (major) tick marks (`far`: each pixel's distance from
    the background): pointing out of the box, else into it (the classic styles' ticks), else
    across its edge, a row or two each way (a small figure's in-and-out ticks, no longer than
    the spine's anti-aliasing is wide); none unless three or more are evenly spaced, and those
    gone on at their step to the box's edges (_to_edges)."""
    left, _, right, bottom = (int(round(v)) for v in box)
    start = max(left - 1, 0)
    columns = far[:, start : right + 1]
    return _to_edges(_tick_marks(columns[bottom:], columns[:bottom][::-1]) + start, left, right)


def _y_tick_marks(far: np.ndarray, box: tuple[float, ...]) -> np.ndarray:
    """Centres of the y axis's labelled tick marks, as _x_tick_marks finds the x axis's: out of
    the box's left edge (from the edge's own column, as the x axis's from its row: the spine's
    anti-aliased column that a mark crosses), else into it, else across it."""
    left, top, _, bottom = (int(round(v)) for v in box)
    start = max(top - 1, 0)
    rows = far[start : bottom + 1].T  # the image's columns as rows, from its left edge
    return _to_edges(_tick_marks(rows[: left + 1][::-1], rows[left:]) + start, top, bottom)


def _to_edges(ticks: np.ndarray, start: float, end: float) -> np.ndarray:
    """Evenly spaced tick marks gone on at their step to the box's edges (`start`, `end`, a
    pixel's slack each way): a mark on the box's corner is hidden in the other axis' spine."""
    if not len(ticks):
        return ticks
    step = float(np.median(np.diff(ticks)))
    before = np.arange(ticks[0] - step, start - 1, -step)[::-1]
    return np.concatenate([before, ticks, np.arange(ticks[-1] + step, end + 1, step)])


def _tick_marks(out: np.ndarray, into: np.ndarray) -> np.ndarray:
    """Centres (in the bands' columns) of the major tick marks in the band out of the box's
    edge, else in the band into it, else across it (each band's rows going away from the edge,
    `far` values)."""
    (out_lengths, out_weights), (in_lengths, in_weights) = _lengths(out), _lengths(into)
    for lengths, weights in (
        (out_lengths, out_weights),
        (in_lengths, in_weights),
        (out_lengths + in_lengths, out_weights + in_weights),
    ):
        centres = _marks(lengths, weights)
        if len(centres):
            return centres
    return np.zeros(0)


def _at_ticks(words: list[Word], ticks: np.ndarray, axis: int) -> list[Word]:
    """The words with the tick mark each labels (Word.position): the one within half the
    word's extent along the axis (0: x, its width; 1: y, its height) of its centre."""
    if not len(ticks):
        return words
    placed = []
    for word in words:
        centre, half = word.centre[axis], (word.box[axis + 2] - word.box[axis]) / 2
        nearest = float(ticks[np.abs(ticks - centre).argmin()])
        placed.append(replace(word, tick=nearest) if abs(nearest - centre) <= half else word)
    return placed


def _lengths(band: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each column of `band` (`far` values, rows going away from the box's edge), how many
    rows from the first beyond the spine's are inked (one more where the mark crosses the
    spine's last anti-aliased row, darker than that row), and how dark its first TICK_ROWS of
    them are (summed `far`); no length where TICK_ROWS rows of most columns are inked (a line), nor
    in a column inked over half the band (a vertical spine or grid line). Ink is measured from
    the band's own ground, its median: the inward band of a coloured panel is the panel's
    colour, which is all ink against the page (a classic style's ticks point into it)."""
    if not len(band):  # the box's edge on the image's
        return np.zeros(band.shape[1], dtype=int), np.zeros(band.shape[1])
    band = np.abs(band - np.median(band))
    ink = band > INK
    if len(ink) > 1 and ink[0].mean() <= TICK_SHARE < ink[1].mean():
        ink, band = ink[1:], band[1:]  # the box's edge a row short of its spine (a panel's edge)
    rim = np.zeros(ink.shape[1], dtype=int)
    while len(ink) and ink[0].mean() > TICK_SHARE:  # the spine's anti-aliased rows
        rim = np.abs(band[0] - np.median(band[0])) > INK  # a mark darker than the rim crosses it
        ink, band = ink[1:], band[1:]
    weights = band[:TICK_ROWS].sum(axis=0)
    if ink.shape[0] < TICK_ROWS or ink[:TICK_ROWS].all(axis=0).mean() > TICK_SHARE:
        return np.zeros(ink.shape[1], dtype=int), weights
    lengths = np.argmin(np.vstack([ink, np.zeros((1, ink.shape[1]), bool)]), axis=0)
    lengths = np.where(lengths > 0, lengths + rim, 0)
    return np.where(lengths > ink.shape[0] / 2, 0, lengths), weights


def _marks(lengths: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Centres of the runs of columns whose `lengths` are TICK_ROWS or more, the longest
    (MAJOR), when three or more are evenly spaced; else none. Ticks are as long as one another:
    the longest is the longest length that three runs share (within a pixel), and a longer run,
    or one wider than WIDEST_MARK, is a curve or a line meeting the edge, no tick. A run's
    centre is that of its longest columns (a log axis's minor ticks crowd its majors), weighted
    by their darkness (`weights`): an anti-aliased mark's shades say where in its pixels it
    lies."""
    marks = [
        (a, b) for a, b in zip(*runs(lengths >= TICK_ROWS), strict=True) if b - a <= WIDEST_MARK
    ]
    if not marks:
        return np.zeros(0)
    longest = np.array([lengths[a:b].max() for a, b in marks])
    shared = [n for n in longest if np.sum(np.abs(longest - n) <= 1) >= 3]
    if not shared:
        return np.zeros(0)
    reference = max(shared)
    centres = [
        _mark_centre(np.where(lengths[a:b] >= MAJOR * n, weights[a:b], 0.0)) + a
        for (a, b), n in zip(marks, longest, strict=True)
        if MAJOR * reference <= n <= reference + 1
    ]
    return np.array(centres) if _evenly_spaced(centres) else np.zeros(0)


def _mark_centre(shades: np.ndarray) -> float:
    """Where the value a tick mark stands for lies, in its columns (`shades`: each one's
    darkness). An anti-aliased mark's shades say where in its pixels it lies: their centroid.
    A crisp one (a column holding CRISP of its ink) was snapped to a pixel, as matplotlib's Agg
    snaps a tick to floor(x + 0.5) + 0.5: its value lies within half a pixel of its column's
    left edge."""
    columns = np.arange(len(shades)) + 0.5
    darkest = int(shades.argmax())
    if shades[darkest] >= CRISP * shades.sum():
        return float(darkest)
    return float(np.average(columns, weights=shades + 1e-9))


def _split_at_ticks(words: list[Word], ticks: np.ndarray) -> list[Word]:
    """Words that span two or more tick marks (crowded labels whose gaps are as narrow as their
    digits', or none: labels drawn over each other) split into one word per tick, at the
    midpoints between the ticks: a glyph joins the tick whose span holds it, and a glyph across
    a midpoint (two labels' digits touching) is cut there, each piece CUT_PX wide at least."""
    split = []
    for word in words:
        inside = ticks[(ticks >= word.box[0]) & (ticks <= word.box[2])]
        if len(inside) < 2:
            split.append(word)
            continue
        inside = _beyond(inside, word.box)
        edges = [word.box[0], *((inside[1:] + inside[:-1]) / 2), word.box[2] + 1]
        groups: list[list] = [[] for _ in inside]
        for left, top, right, bottom in word.glyphs:
            for index, (start, end) in enumerate(itertools.pairwise(edges)):
                piece = (max(left, round(start)), top, min(right, round(end)), bottom)
                if piece[2] - piece[0] >= min(CUT_PX, right - left):
                    groups[index].append(piece)
        # a tick's share of specks alone (a cut-off edge, a point) is no word
        split += [word for glyphs in groups if glyphs for word in _words(sorted(glyphs), np.inf)]
    return split


def _beyond(ticks: np.ndarray, box: tuple[float, ...]) -> np.ndarray:
    """Evenly spaced ticks with more at their spacing where a word spans a quarter of a step
    beyond the span of the outermost (a tick mark on the box's left or right spine is hidden
    in it, and its label crowds the next one's)."""
    step = float(np.median(np.diff(ticks)))
    first, last = [ticks[0]], [ticks[-1]]
    while first[0] - 0.75 * step > box[0]:
        first.insert(0, first[0] - step)
    while last[-1] + 0.75 * step < box[2]:
        last.append(last[-1] + step)
    return np.array(first[:-1] + list(ticks) + last[1:])


def _label_words(
    text: np.ndarray, box: tuple[float, ...], ticks: tuple[np.ndarray, np.ndarray]
) -> tuple[list[Word], list[Word]]:
    """Words below the box (x tick labels: the first line of text under it, split at the tick
    marks where labels crowd) and left of it (y tick labels: right-aligned, the column of words
    nearest the box), each at the tick mark it labels where one is found (`ticks`: the x and y
    axes' marks)."""
    left, top, right, bottom = (int(round(v)) for v in box)
    found = _glyphs(text)
    glyphs = [g for g in found if not _speck(g)]
    specks = [g for g in found if _speck(g)]
    # the text's size is the size of what lies around the box, not of the curves' dots in it
    glyphs = [g for g in glyphs if g[2] <= left or g[0] >= right or g[3] <= top or g[1] >= bottom]
    tall = [g[3] - g[1] for g in glyphs if g[3] - g[1] >= MIN_GLYPH_PX]
    size = float(np.median(tall)) if tall else 8.0
    reach = LABEL_REACH * size
    # tick marks start at the box's edge, thin; a label keeps a pad from it, or is wider
    below = [
        g
        for g in _glyphs_below(text, bottom, found)
        if not _speck(g) and g[0] >= left - reach and not _tick_mark(g, (left, top, right, bottom))
    ]
    x_words: list[Word] = []
    lines = sorted(_lines_of(below), key=lambda line: min(g[1] for g in line))
    # a line of text holds a glyph a digit tall (not the specks at the box's corner) and one
    # wider than a tick mark (not a row of tick marks that stand off the box's edge)
    lines = [
        line
        for line in lines
        if max(g[3] - g[1] for g in line) >= MIN_GLYPH_PX and max(g[2] - g[0] for g in line) > THIN
    ]
    if lines and min(g[1] for g in lines[0]) <= bottom + reach:
        # the first line under the box; its labels are farther apart than their digits
        line = _with_points(lines[0], specks)
        words = _split_at_ticks(_words(line, WORD_GAP * size), ticks[0])
        x_words = _at_ticks(words, ticks[0], 0)
    # y labels: one a line, right-aligned near the box; the axis title beside them is farther
    # than a word's gap, and a flat glyph at a line's end is a tick mark; a y label is level
    # with a tick inside the box's rows, so it starts above the box's bottom (an x label that
    # hangs out left of the box, under it, does not)
    beside = [g for g in glyphs if g[2] <= left - TICK_PAD and g[1] < bottom]
    beside = [g for g in beside if g[1] >= top - reach / 2 and g[3] <= bottom + reach / 2]
    beside = [g for g in beside if g[3] - g[1] <= 1.5 * size]  # no rotated axis title's word
    y_words = []
    for line in _lines_of(beside):
        if len(line) > 1 and line[-1][3] - line[-1][1] <= 2:
            line = line[:-1]
        word = _right_word(_with_points(line, specks), WORD_GAP * 1.5 * size)
        if word.box[2] >= left - reach and word.box[3] - word.box[1] >= MIN_GLYPH_PX:
            y_words.append(word)
    if y_words:  # right-aligned: the words whose right edge is near the rightmost one's
        edge = max(w.box[2] for w in y_words)
        y_words = [w for w in y_words if w.box[2] >= edge - size / 2]
    return x_words, _at_ticks(y_words, ticks[1], 1)


def _tick_mark(glyph: tuple[int, int, int, int], box: tuple[int, ...]) -> bool:
    """Whether a glyph under the box is an x tick mark, starting within the labels' pad from
    the box's edge: at most THIN px wide (a "1" that close to the edge is misjudged), no taller
    than MIN_GLYPH_PX (ggplot's thick, short marks, three pixels square; such a mark may start
    a row farther, its first row too faint for text), or across the box's left or right edge
    (the x and y axes' tick marks meeting at a corner)."""
    left, _, right, bottom = box
    thin, short = glyph[2] - glyph[0] <= THIN, glyph[3] - glyph[1] <= MIN_GLYPH_PX
    if glyph[1] >= bottom + TICK_PAD + short:
        return False
    return thin or short or any(glyph[0] <= edge < glyph[2] for edge in (left, right))


def _offset_word(text: np.ndarray, box: tuple[float, ...]) -> Word | None:
    """The word just above the box that starts at its left edge, where matplotlib writes a y
    axis's multiplier (1e6): in the line of text nearest above the box, the word starting
    within a glyph's height of the box's left edge; None when there is none. The multiplier is
    one token, so its glyphs join across gaps up to a glyph's height (a serif font spaces its 1
    from the e: 1 e7); the classic style writes it on the box's top line, so the glyphs are
    those above that line (touching it, they would be part of the frame)."""
    left, top = int(round(box[0])), int(round(box[1]))
    if top - 1 < MIN_GLYPH_PX:  # the box reaches the image's top: no room for text above it
        return None
    found = _glyphs(text[: top - 1])
    glyphs = [
        g
        for g in found
        if MIN_GLYPH_PX <= g[3] - g[1] <= MAX_GLYPH_PX and not _line_above(g, text, top)
    ]
    if not glyphs:
        return None
    size = float(np.median([g[3] - g[1] for g in glyphs]))
    # a short token at the left edge: a title centred over the box lies farther right
    near = [
        g
        for g in glyphs
        if g[3] >= top - LABEL_REACH * size and left - size <= g[0] <= left + OFFSET_REACH * size
    ]
    if not near:
        return None
    line = max(_lines_of(near), key=lambda line: max(g[3] for g in line))  # nearest the box
    word = min(_words(_with_bars(line, found), size), key=lambda w: abs(w.box[0] - left))
    return word if abs(word.box[0] - left) <= size else None


def _x_offset_word(text: np.ndarray, box: tuple[float, ...], x_words: list[Word]) -> Word | None:
    """The word under the x labels that ends at the box's right edge, where matplotlib writes an
    x axis's multiplier (1e8): in the line of text nearest under the labels, within LABEL_REACH
    of their heights, the word ending within a glyph's height of the box's right edge, its
    glyphs joined across gaps up to a glyph's height (1 e8 in a serif font); None when there
    is none. An axis title centred under the box ends farther left, but for a long one; its
    last word is then read, and is no multiplier (calibrate._multiplier)."""
    right = box[2]
    foot = int(max(w.box[3] for w in x_words))
    size = float(np.median([w.box[3] - w.box[1] for w in x_words]))
    found = [
        (left, top + foot, end, bottom + foot) for left, top, end, bottom in _glyphs(text[foot:])
    ]
    near = [
        g
        for g in found
        if MIN_GLYPH_PX <= g[3] - g[1] <= MAX_GLYPH_PX
        and g[1] - foot <= LABEL_REACH * size
        and right - OFFSET_REACH * size <= g[2] <= right + size
    ]
    if not near:
        return None
    line = min(_lines_of(near), key=lambda line: min(g[1] for g in line))  # nearest the labels
    word = min(_words(_with_bars(line, found), size), key=lambda w: abs(w.box[2] - right))
    return word if abs(word.box[2] - right) <= size else None


def _bar(glyph: tuple[int, int, int, int]) -> bool:
    """Whether a blob is a minus sign's bar: shorter than a digit, at least 3 px long and twice
    as long as it is tall."""
    width, height = glyph[2] - glyph[0], glyph[3] - glyph[1]
    return height < MIN_GLYPH_PX and width >= max(3, 2 * height)


def _with_bars(
    line: list[tuple[int, int, int, int]], glyphs: list[tuple[int, int, int, int]]
) -> list[tuple[int, int, int, int]]:
    """A line's glyphs with the bars (_bar, of `glyphs`) between its first and last glyph at
    its middle third's height: an offset text's minus (1e−6), too flat to be a glyph, without
    which the exponent is a word apart from its 1e and its sign is lost."""
    top, bottom = min(g[1] for g in line), max(g[3] for g in line)
    left, right = min(g[0] for g in line), max(g[2] for g in line)
    third = (bottom - top) / 3
    bars = [
        g
        for g in glyphs
        if _bar(g)
        and left < g[0]
        and g[2] < right
        and top + third <= (g[1] + g[3]) / 2 <= bottom - third
    ]
    return sorted(line + bars)


def _line_above(glyph: tuple[int, int, int, int], text: np.ndarray, top: int) -> bool:
    """Whether a glyph above the box's top line is a vertical line going on above it (the
    spine, grid lines: a box whose top is a grid line under the axes' own top): at most
    THIN + 1 px wide, down to that top line with no bare row between (a serif 1 standing a row
    above the line is a glyph)."""
    x0, _, x1, bottom = glyph
    return bottom >= top - 1 and x1 - x0 <= THIN + 1 and bool(text[top - 1, x0:x1].any())


def _evenly_spaced(centres: list[float]) -> bool:
    """Whether three or more positions are evenly spaced, as ticks are."""
    steps = np.diff(np.sort(centres))
    return len(steps) >= 2 and steps.min() > 0 and np.ptp(steps) <= EVEN * steps.mean()


def _labels_alone(text: np.ndarray) -> tuple[list[Word], list[Word]]:
    """With no line framing the plot: the x labels are the lowest line of three or more evenly
    spaced words, the y labels the largest right-aligned column (right edges ALIGNED_PX apart
    at most) of evenly spaced words (_apart) left of the first x label's centre (or of two
    aligned to the pixel, nearest the x labels' start); either empty when there is none."""
    found = _glyphs(text)
    glyphs = [g for g in found if MIN_GLYPH_PX <= g[3] - g[1] <= MAX_GLYPH_PX]
    if not glyphs or len(glyphs) > MAX_GLYPHS:  # none, or speckle (a photo, noise): no labels
        return [], []
    size = float(np.median([g[3] - g[1] for g in glyphs]))
    specks = [g for g in found if _speck(g)]
    lines = [_words(_with_points(line, specks), WORD_GAP * size) for line in _lines_of(glyphs)]
    # a row of tick marks standing off the plot steps evenly too: a row of labels holds a word
    # wider than a tick mark
    rows = [
        words
        for words in lines
        if _evenly_spaced([w.centre[0] for w in words])
        and max(w.box[2] - w.box[0] for w in words) > THIN
    ]
    x_words = max(rows, key=lambda words: words[0].box[1], default=[])
    # y labels stand left of the plot, so left of the first x label's tick; a curve's dots or
    # a peak's bits stacked evenly inside the plot are no column of labels
    end = x_words[0].centre[0] if x_words else text.shape[1] / 2
    beside = sorted(
        (w for words in lines for w in words if w.box[2] < end and w not in x_words),
        key=lambda w: w.box[2],
    )
    columns: list[list[Word]] = []  # right-aligned: right edges within ALIGNED_PX of the first
    for word in beside:
        if columns and word.box[2] - columns[-1][0].box[2] <= ALIGNED_PX:
            columns[-1].append(word)
        else:
            columns.append([word])
    stacks = [c for c in columns if _evenly_spaced([w.centre[1] for w in c]) and _apart(c)]
    if not stacks and x_words:  # two labels show no spacing: the pair above the x labels
        # nearest their start, where an axis's labels stand (a legend's stand farther in),
        # right-aligned to the pixel (no spacing tells a curve's two bits from labels)
        start, top = x_words[0].box[0], min(w.box[1] for w in x_words)
        aligned: dict[float, list[Word]] = {}
        for word in beside:
            aligned.setdefault(word.box[2], []).append(word)
        pairs = [c for c in aligned.values() if len(c) == 2 and max(w.box[3] for w in c) < top]
        stacks = sorted(pairs, key=lambda c: abs(c[0].box[2] - start))[:1]
    y_words = max(stacks, key=len, default=[])
    return x_words, y_words


def _apart(column: list[Word]) -> bool:
    """Whether a column's words stand LABEL_SPACING of their heights apart or more, as labels
    do: a rotated title's letters, a dotted line's dots and a peak's bits stack closer."""
    steps = np.diff(np.sort([w.centre[1] for w in column]))
    heights = [w.box[3] - w.box[1] for w in column]
    return float(np.median(steps)) >= LABEL_SPACING * float(np.median(heights))


def _labels_farther_left(box: tuple[float, ...], y_words: list[Word]) -> bool:
    """Whether the y labels found alone (`y_words`, evenly spaced) are a column of three or more
    standing left of the lines' box. A frame of grid lines alone (theme_minimal) starts at its
    first vertical grid line, right of the panel's left edge, and what stands beside that line
    is a curve's bits."""
    return len(y_words) > 2 and all(w.box[2] < box[0] for w in y_words)


def _beside(box: tuple[float, ...], x_words: list[Word], y_words: list[Word]) -> bool:
    """Whether x labels stand under the box and y labels left of it, within LABEL_REACH glyph
    heights of its edges, as a box's tick labels do."""
    left, _, _, bottom = box
    reach = LABEL_REACH * float(np.median([w.box[3] - w.box[1] for w in x_words + y_words]))
    under = all(bottom <= w.box[1] <= bottom + reach for w in x_words)
    return under and all(left - reach <= w.box[2] <= left for w in y_words)


def _box_from_labels(x_words: list[Word], y_words: list[Word], shape) -> tuple[float, ...]:
    """The plot box the tick labels imply: right of the y labels, above the x labels, up to the
    top y label and the last x label's reach."""
    size = float(np.median([w.box[3] - w.box[1] for w in x_words + y_words]))
    left = max(w.box[2] for w in y_words) + size
    bottom = min(w.box[1] for w in x_words) - size / 2
    top = max(min(w.box[1] for w in y_words) - 2 * size, 0.0)
    right = min(max(w.box[2] for w in x_words) + size, float(shape[1]))
    return (float(left), float(top), float(right), float(bottom))


def find_frame(image: np.ndarray) -> Frame | None:
    """The plot box and the tick-label words around it; None when neither a line (axis, grid,
    panel edge) nor a row and a column of tick labels frame a plot area. The box the lines
    span, with the words found under and beside it; where those are not a row and a column of
    labels, the labels found alone (_labels_alone), with that box where they stand beside it
    (_beside), else with the box they imply, reaching as far right and up as the lines' box
    (inner grid lines run on to the panel's edges past the last labels: theme_minimal)."""
    bg = background(image)
    far = distance(image, bg)
    text = far > TEXT_INK
    box, rows, cols = _box_from_lines(image[..., :3], far > INK)
    lined, alone = None, None
    if box is not None:
        ticks = (_x_tick_marks(far, box), _y_tick_marks(far, box))
        x_words, y_words = _label_words(text, box, ticks)
        offset = _offset_word(text, box) if x_words and y_words else None
        x_offset = _x_offset_word(text, box, x_words) if x_words and y_words else None
        lined = Frame(bg, box, rows, cols, x_words, y_words, offset, x_offset)
        # three words or more under the box that do not step evenly are no tick labels: the
        # lines found were inner grid lines (the outer ones hidden under curves), and the
        # labels stand farther out
        centres = [w.centre[0] for w in x_words]
        if x_words and y_words and (len(centres) < 3 or _evenly_spaced(centres)):
            if len(y_words) > 2:  # spaced: they are the y labels
                return lined
            alone = _labels_alone(text)  # two words or fewer beside it: no spacing proves them
            if not _labels_farther_left(box, alone[1]):
                return lined
    x_words, y_words = alone if alone is not None else _labels_alone(text)
    if not x_words or not y_words:
        return lined
    if lined is not None and _beside(lined.box, x_words, y_words):
        # the lines frame the plot, and their tick marks the labels; the words under it were
        # split where they are not
        x_words, y_words = _at_ticks(x_words, ticks[0], 0), _at_ticks(y_words, ticks[1], 1)
        return replace(lined, x_words=x_words, y_words=y_words)
    box = _box_from_labels(x_words, y_words, image.shape)
    if lined is not None:
        box = (box[0], min(box[1], lined.box[1]), max(box[2], lined.box[2]), box[3])
    none = np.zeros(0, dtype=int)
    return Frame(bg, box, none, none, x_words, y_words)
