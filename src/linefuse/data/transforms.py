"""Pixel normalisation: the one mapping between uint8 images and the model's [-1, 1] pixels.

In torch for training (the embed stage, training's pixel readers) and in numpy, to the bit, for
what runs without torch: the restorer on ONNX Runtime and digitize's label reader. torch is
imported only by the torch functions, so the numpy ones load no torch, and the HTTP service
normalises without the data stages' libraries (lmdb, webdataset, polars).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


def normalise(pixels_uint8_bhwc: torch.Tensor) -> torch.Tensor:
    """uint8 (B, H, W, 3) -> float32 (B, 3, H, W) in [-1, 1]: x / 127.5 - 1."""
    import torch

    return pixels_uint8_bhwc.permute(0, 3, 1, 2).to(torch.float32) / 127.5 - 1.0


def normalise_pair(blurred: np.ndarray, sharp: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 (H, W, 3) arrays -> float32 (3, H, W) tensors in [-1, 1], as the embed stage stores."""
    import torch

    return normalise(torch.from_numpy(blurred)[None])[0], normalise(torch.from_numpy(sharp)[None])[
        0
    ]


def to_uint8(pixels: torch.Tensor) -> torch.Tensor:
    """float (B, 3, H, W) in [-1, 1] -> uint8 (B, H, W, 3): the inverse of normalise, clamped."""
    import torch

    return ((pixels.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).permute(0, 2, 3, 1)


def normalise_array(pixels: np.ndarray) -> np.ndarray:
    """uint8 (B, H, W, 3) -> float32 (B, 3, H, W) in [-1, 1], contiguous: normalise in numpy,
    to the bit."""
    channels_first = np.ascontiguousarray(pixels.transpose(0, 3, 1, 2), np.float32)
    return channels_first / np.float32(127.5) - np.float32(1.0)


def to_uint8_array(pixels: np.ndarray) -> np.ndarray:
    """float32 (B, 3, H, W) in [-1, 1] -> uint8 (B, H, W, 3), clamped: to_uint8 in numpy (rint
    rounds half to even, as torch.round does)."""
    scaled = (np.clip(pixels, -1.0, 1.0) + np.float32(1.0)) * np.float32(127.5)
    return np.ascontiguousarray(np.rint(scaled).astype(np.uint8).transpose(0, 2, 3, 1))
