"""A legend inside the plot box, from its pixels: its entries' line samples and the boxes of
their texts.

A legend entry is a short horizontal stroke of a series' colour (its sample: solid, dashed,
dotted, or with a marker in its middle) and, level with it and a little to its right, its
text. A curve's flat stretch is no sample: the curve goes on beyond the stretch's ends, a row or
two up or down, while a sample's ends are bare. A legend stacks its entries, their samples
starting at one column. The entries are found for each colour of ink before the series are
followed, so that the legend can be taken out of the series' ink: the follower would take a
sample, or letters in a series' colour, for part of a curve. Two entries at least make a
legend: one stroke with a word beside it may be an annotation, and one series needs no name.
Where a legend lies over the curves, one may run on beside a sample, whose ends are then not
bare: once two entries make a legend, its columns alone are searched again for the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from linefuse.digitize.axes import distance, runs
from linefuse.digitize.curves import DASH_GAP, series_ink

SAMPLE_INK = 0.5  # coverage of a series' colour that a sample's pixel has
MIN_SAMPLE = 1.5  # text heights (a digit's): the shortest sample (matplotlib's is 2 em, 2.7)
MAX_SAMPLE = 6.0  # ... and the longest
END_CLEAR = 2  # px beyond a sample's ends (and rows above and below it) that are bare
MIN_GAP = 2  # px: the least gap bridged in a sample's strokes
TEXT_CONTRAST = 120.0  # RGB distance from the background: letters (a curve seen through a
# legend's translucent face is fainter)
TEXT_BAND = 0.9  # text heights above and below a sample's row that its text lies within
TEXT_REACH = 2.0  # text heights from a sample's end within which its text starts
TEXT_GAP = 1.2  # text heights of bare columns that end an entry's text
ALIGN_PX = 2  # one legend's samples start this close
SPACING = 4.0  # text heights: the most that one entry's row lies below the one above it
MARKED = 2.5  # a sample's tallest column, in its usual column's heights: a marker on it
PAD = 1.0  # text heights around the entries that the legend's frame and padding fill


@dataclass(frozen=True)
class Entry:
    """One legend entry: its sample's colour (0-255 RGB), the share of the sample's columns that
    are inked (1 solid, less dashed or dotted), whether a marker sits on it, and the boxes of the
    sample and of its text (left, top, right, bottom; continuous image pixels)."""

    colour: tuple[float, float, float]
    fill: float
    marked: bool
    sample: tuple[float, float, float, float]
    text: tuple[float, float, float, float]


def _strokes(ink: np.ndarray, gap: int, size: float) -> list[tuple[int, int, int, int]]:
    """(top, bottom, start, end; ends exclusive) of the horizontal strokes of `ink`, gaps of at
    most `gap` px bridged, a sample's length, rows of one stroke merged."""
    bridged = ndimage.binary_closing(ink, structure=np.ones((1, gap + 1))) | ink
    strokes: list[list[int]] = []
    for row in np.flatnonzero(bridged.any(axis=1)):
        for start, end in zip(*runs(bridged[row]), strict=True):
            if not MIN_SAMPLE * size <= end - start <= MAX_SAMPLE * size:
                continue
            above = [s for s in strokes if s[1] == row and abs(s[2] - start) + abs(s[3] - end) <= 2]
            if above:
                above[0][1] = row + 1
            else:
                strokes.append([row, row + 1, start, end])
    return [tuple(s) for s in strokes]


def _bare_ends(ink: np.ndarray, stroke: tuple[int, int, int, int], gap: int) -> bool:
    """Whether nothing of the stroke's colour lies just beyond either end, a row or two up or
    down included (where a curve's flat stretch goes on)."""
    top, bottom, start, end = stroke
    rows = slice(max(top - END_CLEAR, 0), bottom + END_CLEAR)
    reach = gap + END_CLEAR
    return (
        not ink[rows, max(start - reach, 0) : start].any()
        and not ink[rows, end : end + reach].any()
    )


def _text_right(
    text: np.ndarray, stroke: tuple[int, int, int, int], size: float
) -> tuple[int, int, int, int] | None:
    """(top, bottom, start, end; ends exclusive) of the letters level with a stroke and starting
    a little right of it, up to a gap wider than a word's; None where there are none. A letter
    reaches above or below the stroke's rows, where the stroke's last dash or dot, cut short,
    does not."""
    top, bottom, start, end = stroke
    centre = (top + bottom) / 2
    rows = slice(max(round(centre - TEXT_BAND * size), 0), round(centre + TEXT_BAND * size) + 1)
    letters = text[rows, end:].copy()
    letters[max(top - 1 - rows.start, 0) : bottom + 1 - rows.start] = False
    columns = letters.any(axis=0)
    inked = np.flatnonzero(columns[: round(TEXT_REACH * size)])
    if not len(inked) or inked[0] == 0:
        return None
    first = last = int(inked[0])
    gap = round(TEXT_GAP * size)
    while last + 1 < len(columns) and columns[last + 1 : last + 1 + gap].any():
        last += 1 + int(np.argmax(columns[last + 1 : last + 1 + gap]))
    lines = np.flatnonzero(text[rows, end + first : end + last + 1].any(axis=1)) + rows.start
    if lines[-1] + 1 - lines[0] < size / 2:
        return None
    return int(lines[0]), int(lines[-1]) + 1, end + first, end + last + 1


def _entries_of(
    box: np.ndarray,
    background: np.ndarray,
    colour: np.ndarray,
    width: float,
    size: float,
    text: np.ndarray,
    origin: tuple[int, int],
) -> list[Entry]:
    """Every stroke of `colour` in the box that looks like a legend sample with text beside it."""
    ink = series_ink(box, background, colour)[0] >= SAMPLE_INK
    entries = []
    # a dashed sample's gaps are bridged (a thick line's are as wide as the pad between a
    # sample and its text, so the bridge can reach the text), and a solid one is also taken
    # as drawn, unbridged
    strokes = [(stroke, gap) for gap in _gaps(width) for stroke in _strokes(ink, gap, size)]
    for stroke, gap in strokes:
        words = _text_right(text, stroke, size) if _bare_ends(ink, stroke, gap) else None
        if words is None:
            continue
        top, bottom, start, end = stroke
        inked = ink[max(top - 1, 0) : bottom + 1, start:end].any(axis=0)
        centre = (top + bottom) // 2
        band = slice(max(round(centre - TEXT_BAND * size), 0), round(centre + TEXT_BAND * size) + 1)
        heights = ink[band, start:end].sum(axis=0)
        usual = max(float(np.median(heights[heights > 0])), 1.0)
        row, col = origin
        entries.append(
            Entry(
                tuple(float(round(v)) for v in colour),
                float(inked.mean()),
                bool(heights.max() >= MARKED * usual),
                (col + start, row + top, col + end, row + bottom),
                (col + words[2], row + words[0], col + words[3], row + words[1]),
            )
        )
    return entries


def _gaps(width: float) -> list[int]:
    """The gaps (px) bridged in a sample of a line `width` px wide: its dash gaps, then none
    but a pixel's (anti-aliasing)."""
    return sorted({max(round(DASH_GAP * width), MIN_GAP), MIN_GAP}, reverse=True)


def find_legend(
    box: np.ndarray,
    background: np.ndarray,
    colours: list[np.ndarray],
    widths: list[float],
    size: float,
    origin: tuple[int, int],
) -> list[Entry]:
    """The legend's entries, top to bottom, in the box (uint8 RGB, whose pixel (0, 0) is the
    image's pixel `origin`), for the candidate series' colours and line widths; none where no two
    entries stack as a legend's do. `size` is the height of the chart's text (a digit's)."""

    def entries(image: np.ndarray) -> list[Entry]:  # every colour's
        text = distance(image, background) > TEXT_CONTRAST
        return [
            entry
            for colour, width in zip(colours, widths, strict=True)
            for entry in _entries_of(image, background, colour, width, size, text, origin)
        ]

    found: list[Entry] = []
    for entry in entries(box):
        if all(abs(entry.sample[1] - e.sample[1]) > ALIGN_PX for e in found):
            found.append(entry)  # a sample seen in two colours (its edges') is one entry
    legends: list[list[Entry]] = []
    for entry in sorted(found, key=_row):
        for legend in legends:
            below = entry.sample[1] - legend[-1].sample[1]
            if abs(entry.sample[0] - legend[0].sample[0]) <= ALIGN_PX and below <= SPACING * size:
                legend.append(entry)
                break
        else:
            legends.append([entry])
    legend = max([legend for legend in legends if len(legend) >= 2], key=len, default=[])
    if not legend:
        return []
    # the legend's columns alone, from its samples' column to its texts' end: a curve running on
    # beside a sample, under or through the legend, left its ends not bare in the whole box
    col = origin[1]
    left = max(round(min(e.sample[0] for e in legend)) - col - ALIGN_PX - 1, 0)
    right = round(max(e.text[2] for e in legend)) - col + 1
    banded = box.copy()
    banded[:, :left] = banded[:, right:] = background.astype(np.uint8)
    return _completed(legend, entries(banded), col + left, size)


def _completed(legend: list[Entry], entries: list[Entry], left: int, size: float) -> list[Entry]:
    """The legend and those of `entries` (found in its columns alone, which start at image
    column `left`) that it stacks: a sample starting where the legend's samples start
    (ALIGN_PX), not cut off at the columns' left edge (a curve's), and stacked on an entry
    already in (SPACING)."""
    aligned = [
        e
        for e in entries
        if abs(e.sample[0] - legend[0].sample[0]) <= ALIGN_PX and e.sample[0] > left
    ]
    found = list(legend)
    for entry in sorted(aligned, key=lambda e: min(abs(e.sample[1] - f.sample[1]) for f in legend)):
        rows_apart = [abs(entry.sample[1] - e.sample[1]) for e in found]
        if min(rows_apart) > ALIGN_PX and min(rows_apart) <= SPACING * size:
            found.append(entry)
    return sorted(found, key=_row)


def _row(entry: Entry) -> float:
    """An entry's sample's top row."""
    return entry.sample[1]


def area(entries: list[Entry], size: float) -> tuple[float, float, float, float]:
    """The legend's box (left, top, right, bottom; continuous image pixels): its entries and the
    frame and padding around them."""
    boxes = np.array([e.sample for e in entries] + [e.text for e in entries])
    pad = PAD * size
    return (
        float(boxes[:, 0].min() - pad),
        float(boxes[:, 1].min() - pad),
        float(boxes[:, 2].max() + pad),
        float(boxes[:, 3].max() + pad),
    )
