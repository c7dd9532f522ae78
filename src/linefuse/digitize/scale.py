"""Charts drawn larger than the ones digitize's rules were decided on, read at that scale.

digitize's thresholds are in pixels (a glyph's height, a tick mark's length, a dash's gap),
decided on the dev sets, which draw the default data's recipe: 72 to 100 dpi, tick label digits
4 to 8 px tall. A figure exported for print at 300 dpi draws them three times taller, and its
labels pass for titles, its legend for curves. Such a chart is read shrunk until its text is as
tall as the dev sets' (READ_GLYPH_PX), never below the largest dev chart's size (so no chart
drawn at the dev sets' scale, however its text looks, is shrunk), and what is read is scaled
back to its own pixels (chart.digitize_many).
"""

from __future__ import annotations

import numpy as np
from PIL import Image
from scipy import ndimage

from linefuse.digitize.axes import TEXT_INK, background, distance

# px: the text height (text_height) a chart is read at: within the dev sets' charts' (median 6,
# 95th percentile 11), high in it, so that a shrunk chart keeps as much of its lines' detail
READ_GLYPH_PX = 8.0
LARGEST_SIDE_PX = 360  # the dev sets' largest chart's long side: nothing is shrunk below it
LEAST_FACTOR = 1.5  # a smaller factor is read as drawn
CORE = 0.5  # of the image's strongest ink (its 99.9th percentile): a glyph's core, which blur
# widens less than its fringe (a blurred chart's blobs run together at TEXT_INK)
ROUND = 1.5  # a glyph is at most this many times as wide as it is tall (curves are wider)
TALLEST_SHARE = 1 / 6  # of the image's height: a taller blob is a curve or a frame


def text_height(pixels: np.ndarray) -> float:
    """The height (px) of an RGB image's text, as drawn: the median height of the glyph-like
    blobs of its strong ink, each weighing its pixels (a point or a speck of a curve, a glyph's
    size at a small scale, counts for little); 0 where it has none."""
    far = distance(pixels, background(pixels))
    text = far > max(TEXT_INK, CORE * float(np.percentile(far, 99.9)))
    labelled, count = ndimage.label(text, structure=np.ones((3, 3)))
    sizes = np.bincount(labelled.ravel(), minlength=count + 1)
    heights, weights = [], []
    for index, (rows, cols) in enumerate(ndimage.find_objects(labelled), start=1):
        height = rows.stop - rows.start
        if height <= TALLEST_SHARE * len(pixels) and cols.stop - cols.start <= ROUND * height:
            heights.append(height)
            weights.append(sizes[index])
    if not heights:
        return 0.0
    order = np.argsort(heights)
    cumulative = np.cumsum(np.array(weights)[order])
    return float(np.array(heights)[order][np.searchsorted(cumulative, cumulative[-1] / 2)])


def reading_factor(pixels: np.ndarray) -> float:
    """How many times smaller an RGB chart is read: its text's height over READ_GLYPH_PX, at
    most its long side over LARGEST_SIDE_PX, and 1 below LEAST_FACTOR. An image too small to
    be shrunk is not measured."""
    long_side = max(pixels.shape[:2])
    if long_side < LEAST_FACTOR * LARGEST_SIDE_PX:
        return 1.0
    factor = min(text_height(pixels) / READ_GLYPH_PX, long_side / LARGEST_SIDE_PX)
    return factor if factor >= LEAST_FACTOR else 1.0


def shrunk(pixels: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """An RGB image resized to `size` (height, width), each new pixel the mean of the ones it
    covers (a box filter: a line keeps its ink, and its centre its place)."""
    height, width = size
    image = Image.fromarray(np.ascontiguousarray(pixels[..., :3], dtype=np.uint8))
    return np.asarray(image.resize((width, height), Image.Resampling.BOX))


def size_for(pixels: np.ndarray, factor: float) -> tuple[int, int]:
    """(height, width) of an image shrunk by `factor`."""
    height, width = pixels.shape[:2]
    return max(round(height / factor), 1), max(round(width / factor), 1)
