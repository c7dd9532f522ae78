"""Pixel normalisation: the one mapping between uint8 images and the model's [-1, 1] tensors.

The embed stage, training's pixel readers and the restorer all use it; it imports only torch, so
the HTTP service can normalise without the data stages' libraries (lmdb, webdataset, polars).
"""

from __future__ import annotations

import numpy as np
import torch


def normalise(pixels_uint8_bhwc: torch.Tensor) -> torch.Tensor:
    """uint8 (B, H, W, 3) -> float32 (B, 3, H, W) in [-1, 1]: x / 127.5 - 1."""
    return pixels_uint8_bhwc.permute(0, 3, 1, 2).to(torch.float32) / 127.5 - 1.0


def normalise_pair(blurred: np.ndarray, sharp: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 (H, W, 3) arrays -> float32 (3, H, W) tensors in [-1, 1], as the embed stage stores."""
    return normalise(torch.from_numpy(blurred)[None])[0], normalise(torch.from_numpy(sharp)[None])[
        0
    ]


def to_uint8(pixels: torch.Tensor) -> torch.Tensor:
    """float (B, 3, H, W) in [-1, 1] -> uint8 (B, H, W, 3): the inverse of normalise, clamped."""
    return ((pixels.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).permute(0, 2, 3, 1)
