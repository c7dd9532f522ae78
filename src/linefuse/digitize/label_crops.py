"""How a tick label is cut out for the label reader: its box widened by MARGIN, in grey, and the
crop in numpy that digitize reads with on ONNX Runtime (digitize/label_onnx.py).

Training cuts its crops with label_reader.crop_labels, in torch, so that the CTC loss reaches the
images; digitize cuts the same crops here, without torch. Both follow the geometry below, and a
test holds them to 1e-4 of each other on real charts.
"""

from __future__ import annotations

import numpy as np

# the box is widened by this fraction of its height on every side: the glyphs' anti-aliasing
# and a little of a blur's spread stay in the crop
MARGIN = 0.15
LUMA = (0.299, 0.587, 0.114)  # ITU-R 601 weights: RGB to grey


def crop_labels(image: np.ndarray, boxes: np.ndarray, height: int, width: int) -> np.ndarray:
    """float32 grey crops (N, 1, height, width) in [-1, 1] of `image` (3, H, W) in [-1, 1] at
    `boxes` (N, 4): (left, top, right, bottom) in image pixels, y down.

    label_reader.crop_labels in numpy: each box, widened by MARGIN of its height, scaled to the
    crop's height (or, if wider than the crop allows, to its width), left-aligned and vertically
    centred, white outside the widened box and beyond the image's edge; bilinear sampling at the
    crop's pixel centres, as grid_sample's with align_corners=False. The box arithmetic is in
    float32 in crop_labels' order, so the same crop pixels fall inside the box.
    """
    grey = np.tensordot(np.asarray(LUMA, np.float32), image, axes=1)  # (H, W)
    left, top, right, bottom = np.asarray(boxes, np.float32).reshape(-1, 4).T
    margin = np.float32(MARGIN) * (bottom - top)
    left, right, top, bottom = left - margin, right + margin, top - margin, bottom + margin
    scale = np.maximum((bottom - top) / height, (right - left) / width)  # image px per crop px
    x0, y0 = left, (top + bottom) / 2 - scale * height / 2
    # each crop pixel's centre in the image's continuous coordinates (pixel c covers [c, c + 1))
    xs = x0[:, None] + scale[:, None] * (np.arange(width, dtype=np.float32) + 0.5)
    ys = y0[:, None] + scale[:, None] * (np.arange(height, dtype=np.float32) + 0.5)
    crops = _bilinear(grey - 1, ys.astype(np.float64) - 0.5, xs.astype(np.float64) - 0.5) + 1
    inside_x = (xs >= left[:, None]) & (xs <= right[:, None])
    inside_y = (ys >= top[:, None]) & (ys <= bottom[:, None])
    inside = inside_y[:, :, None] & inside_x[:, None, :]
    return np.where(inside, crops, np.float32(1))[:, None].astype(np.float32)


def _bilinear(values: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """(N, len rows, len cols): `values` (H, W) interpolated at each crop's grid of rows x cols
    (pixel-centre indices, (N, h) and (N, w)); zero beyond the edge, as grid_sample's padding."""
    padded = np.pad(values, 1)  # index i of values is i + 1 here; 0 and the last are the zeros
    size_h, size_w = values.shape
    below, before = np.floor(rows), np.floor(cols)
    fr, fc = (rows - below)[:, :, None], (cols - before)[:, None, :]
    # neighbours off the image (below -1 or past the edge) all read one of the zeros
    r0, r1 = (np.clip(below.astype(np.int64) + k, -1, size_h)[:, :, None] + 1 for k in (0, 1))
    c0, c1 = (np.clip(before.astype(np.int64) + k, -1, size_w)[:, None, :] + 1 for k in (0, 1))
    top = padded[r0, c0] * (1 - fc) + padded[r0, c1] * fc
    bottom = padded[r1, c0] * (1 - fc) + padded[r1, c1] * fc
    return top * (1 - fr) + bottom * fr
