"""Overlapping tiles over a large image, and their blend back into one.

The UNet's cost per pixel is fixed only while the image is no larger than what it was trained
and evaluated on (its self-attention grows with the square of the positions), so an image larger
than a tile is cut into tiles of `tiles.size` px overlapping by `tiles.overlap`, each restored as
an evaluation crop is, and blended with a raised-cosine window: inside the overlap a tile's
weight falls smoothly to zero at its edge while its neighbour's rises, so no seam shows, and
time and memory grow with the pixel count.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def starts(length: int, tile: int, overlap: int) -> list[int]:
    """Tile origins along one axis: every `tile - overlap` px, the last flush with the end."""
    if length <= tile:
        return [0]
    return [*range(0, length - tile, tile - overlap), length - tile]


def window(length: int, overlap: int, taper_start: bool, taper_end: bool) -> np.ndarray:
    """1 in the middle, sin^2 ramps over `overlap` px at the ends that meet another tile (an
    image border is not tapered: nothing else covers it)."""
    weights = np.ones(length, np.float64)
    ramp = np.sin(0.5 * np.pi * (np.arange(overlap) + 0.5) / overlap) ** 2 if overlap else []
    if taper_start and overlap:
        weights[:overlap] = ramp
    if taper_end and overlap:
        weights[-overlap:] = ramp[::-1]
    return weights


def boxes(height: int, width: int, tile: int, overlap: int) -> list[tuple[int, int, int, int]]:
    """(y, x, h, w) of every tile, row by row; all the same size."""
    h, w = min(tile, height), min(tile, width)
    return [
        (y, x, h, w) for y in starts(height, tile, overlap) for x in starts(width, tile, overlap)
    ]


def restore_tiled(
    image: np.ndarray,
    restore_batch: Callable[[np.ndarray], np.ndarray],
    tile: int,
    overlap: int,
    batch_size: int,
    progress: Callable[[int], object] | None = None,
) -> np.ndarray:
    """`image` uint8 (H, W, 3) restored tile by tile: `restore_batch` maps a uint8 (B, h, w, 3)
    stack of tiles to restored ones; the tiles are blended by their windows. `progress(n)` is
    told after each batch how many tiles it restored (a progress bar's update)."""
    height, width, _ = image.shape
    total = np.zeros(image.shape, np.float64)
    weight = np.zeros((height, width, 1), np.float64)
    placed = boxes(height, width, tile, overlap)
    for first in range(0, len(placed), batch_size):
        chunk = placed[first : first + batch_size]
        restored = restore_batch(np.stack([image[y : y + h, x : x + w] for y, x, h, w in chunk]))
        for (y, x, h, w), out in zip(chunk, restored, strict=True):
            wy = window(h, overlap, y > 0, y + h < height)
            wx = window(w, overlap, x > 0, x + w < width)
            mask = (wy[:, None] * wx[None, :])[..., None]
            total[y : y + h, x : x + w] += out * mask
            weight[y : y + h, x : x + w] += mask
        if progress is not None:
            progress(len(chunk))
    return np.clip(np.rint(total / weight), 0, 255).astype(np.uint8)
