"""The series inside the plot box: told apart by colour, each followed column by column.

Inside the box, what is neither the plot area's background nor a straight line of the frame
(spines, grid) is the series' ink, and some text (a legend, an annotation). Its colours cluster:
each series is one colour, its anti-aliased edges blends of that colour with the background.
Each cluster is then read by digitize/curves.py's line follower (the cheapest continuous path of
runs, one a column, through crossings, dash gaps and markers), as it reads a chart's main series
given its sidecar; here the colour, width and dash come from the pixels. A cluster whose path
covers little of the box is text or a legend's swatch, not a series.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from linefuse.digitize.axes import INK, Frame, distance
from linefuse.digitize.curves import follow_line, plot_background, series_ink

SPINE_INSET_PX = 2  # box rows and columns this close to its edge hold the spines
FAR_LABELS = 1.5  # label heights: tick labels farther out than this have no spine beside them
CORE = 50.0  # RGB distance from the plot background beyond which a pixel is a series' core
BIN = 24  # colour quantum of the first clustering pass
SAME_COLOUR = 60.0  # clusters nearer than this are one colour
MIN_PIXELS = 0.1  # of the box's width: core pixels a colour needs to be a series candidate
MIN_SPAN = 0.15  # of the box's width: columns a path must cover to be a series
SOLID_COVER = 0.9  # share of its span a solid line's path covers; less is dashed (or dotted)
MAX_SERIES = 8
EDGE_SHARE = 0.6  # of a colour's core pixels beside a stronger colour's: it is that one's edge
MAX_WIDTH_PX = 10.0  # a line is thinner than this and than MAX_WIDTH_SHARE of the box's height:
MAX_WIDTH_SHARE = 0.08  # wider ink in most columns is a bar or a filled area
LINE_TINT = INK  # a grid line differs from the plot background by this much


@dataclass(frozen=True)
class Trace:
    """One series as read: its colour (0-255 RGB), line width and style, and its path: the
    columns' centres and the line's centre row in each (continuous image pixels)."""

    colour: tuple[float, float, float]
    linewidth_px: float
    dashed: bool
    columns: np.ndarray
    rows: np.ndarray


def inner_box(frame: Frame, shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The pixels where series may be: the box clear of its spines, (first row, end row, first
    col, end col). Where the tick labels lie far outside the box (a frame found from grid lines
    that stop at the outer ticks, no spine beside the labels), out to the labels."""
    left, top, right, bottom = frame.box
    words = frame.x_words + frame.y_words
    size = float(np.median([w.box[3] - w.box[1] for w in words])) if words else 0.0
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
        for index in lines[(lines >= 0) & (lines < box.shape[axis])]:
            pixels = box[index] if axis == 0 else box[:, index]
            if distance(np.median(pixels, axis=0), background) > LINE_TINT:
                if axis == 0:
                    mask[index, :] = True
                else:
                    mask[:, index] = True
    return mask


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
    """A line's width in px: the usual summed coverage of the columns it is in."""
    sums = ink.sum(axis=0)
    return float(max(np.median(sums[sums > 0.5]), 1.0)) if (sums > 0.5).any() else 1.0


def trace_series(image: np.ndarray, frame: Frame) -> tuple[list[Trace], int]:
    """Every series in the frame's box, as read from its pixels, and how many colours fill
    areas (bars) instead of drawing lines."""
    first_row, end_row, first_col, end_col = inner_box(frame, image.shape)
    if end_row - first_row < 4 or end_col - first_col < 4:
        return [], 0
    box = image[first_row:end_row, first_col:end_col, :3].copy()
    background = plot_background(box)
    lines = _line_mask(frame, box, background, first_row, first_col)
    box[lines] = background.astype(np.uint8)  # the grid is no series' ink
    rows = np.arange(first_row, end_row) + 0.5
    cols = np.arange(first_col, end_col) + 0.5
    traces, filled = [], 0
    for colour in colours(box, background, lines)[:MAX_SERIES]:
        ink = series_ink(box, background, colour)[0]
        width = _width(ink)
        if width > max(MAX_WIDTH_PX, MAX_WIDTH_SHARE * len(rows)):
            filled += 1  # a bar or a filled area, not a line
            continue
        found, centres, _ = follow_line(box, rows, cols, colour, width, dashed=False)
        if len(found) and len(found) < SOLID_COVER * (found[-1] - found[0] + 1):
            found, centres, _ = follow_line(box, rows, cols, colour, width, dashed=True)
        if len(found) < MIN_SPAN * len(cols):
            continue
        colour_rgb = tuple(float(round(v)) for v in colour)
        dashed = bool(len(found) < SOLID_COVER * (np.ptp(found) + 1))
        traces.append(Trace(colour_rgb, width, dashed, cols[found], centres))
    return traces, filled
