"""A baseline JPEG encode-decode in torch, batched with a quality per image, as libjpeg does it.

kornia's `jpeg_codec_differentiable` rounds the quantised coefficients softly (r + (x - r)^3, so
gradients flow), which leaves less error than a real JPEG; the compression domain must match
PIL's. This codec keeps kornia's standard tables but rounds hard, as libjpeg: JFIF colours,
4:2:0 chroma (2x2 means, as PIL's subsampling=2), an orthonormal 8x8 DCT, libjpeg's quality
scaling of the tables with baseline clamping to [1, 255], and triangular ("fancy") chroma
upsampling on decode. No gradients are needed: it makes training inputs.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor

# JFIF's RGB -> YCbCr (rows Y, Cb, Cr), on 0..255 with the chroma offset 128
_TO_YCC = torch.tensor(
    [[0.299, 0.587, 0.114], [-0.168736, -0.331264, 0.5], [0.5, -0.418688, -0.081312]]
)
_CHROMA_OFFSET = torch.tensor([0.0, 128.0, 128.0])


def _dct_matrix(device) -> Tensor:
    """The orthonormal 8-point DCT-II: JPEG's 2-D DCT is D @ block @ D.T."""
    k = torch.arange(8, dtype=torch.float32, device=device)
    d = torch.cos((2 * k[None, :] + 1) * k[:, None] * math.pi / 16) * math.sqrt(2 / 8)
    d[0] /= math.sqrt(2)
    return d


@functools.cache
def _constants(device: torch.device) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(RGB to YCbCr, its inverse, the chroma offset, the 64 x 64 block DCT, the (2, 64) luma
    and chroma quantisation tables) on `device`, made once per device: copying them there on
    every batch would make the host wait for the device."""
    import kornia  # here, not at the top: it is slow to import (see degrade_torch)

    codec = kornia.enhance.JPEGCodecDifferentiable()
    tables = torch.stack(
        [t.reshape(64).float() for t in (codec.quantization_table_y, codec.quantization_table_c)]
    )
    dct = _dct_matrix("cpu")
    made = (_TO_YCC, torch.linalg.inv(_TO_YCC), _CHROMA_OFFSET, torch.kron(dct, dct), tables)
    return tuple(t.to(device) for t in made)


def _tables(quality: Tensor, base: Tensor) -> tuple[Tensor, Tensor]:
    """(B, 64) luma and chroma steps: libjpeg's jpeg_quality_scaling, force_baseline."""
    quality = quality.clamp(1, 100)
    scale = torch.where(quality < 50, torch.floor(5000 / quality), 200 - 2 * quality)
    steps = torch.floor((base[:, None] * scale[None, :, None] + 50) / 100).clamp(1, 255)
    return steps[0], steps[1]


def _quantise_blocks(plane: Tensor, step: Tensor, transform: Tensor) -> Tensor:
    """(B, H, W) plane, H and W multiples of 8: DCT per 8x8 block, hard rounding, inverse. The
    2-D DCT of a flattened block is one product with kron(D, D): one large matrix product
    instead of thousands of 8x8 ones."""
    b, h, w = plane.shape
    blocks = (plane - 128).view(b, h // 8, 8, w // 8, 8).transpose(2, 3).reshape(b, -1, 64)
    coefficients = blocks @ transform.T
    steps = step.reshape(b, 1, 64)
    restored = (torch.round(coefficients / steps) * steps) @ transform
    return restored.view(b, h // 8, w // 8, 8, 8).transpose(2, 3).reshape(b, h, w) + 128


def jpeg(image: Tensor, quality: Tensor) -> Tensor:
    """Encode and decode a (B, 3, H, W) RGB batch in [0, 1] at qualities (B,) in 1..100."""
    b, _, height, width = image.shape
    to_ycc, from_ycc, offset, transform, tables = _constants(image.device)
    pad_y, pad_x = -height % 16, -width % 16  # whole 16 px MCUs, edges repeated as libjpeg does
    rgb = F.pad(image.float() * 255, (0, pad_x, 0, pad_y), mode="replicate")
    ycc = torch.einsum("ij,bjhw->bihw", to_ycc, rgb) + offset[:, None, None]
    luma_step, chroma_step = _tables(quality.float().to(image.device), tables)
    luma = _quantise_blocks(ycc[:, 0], luma_step, transform)
    chroma = F.avg_pool2d(ycc[:, 1:], 2)  # 4:2:0
    chroma = torch.stack(
        [_quantise_blocks(chroma[:, c], chroma_step, transform) for c in (0, 1)], 1
    )
    chroma = F.interpolate(chroma, scale_factor=2, mode="bilinear", align_corners=False)
    ycc = torch.cat([luma[:, None], chroma], dim=1) - offset[:, None, None]
    rgb = torch.einsum("ij,bjhw->bihw", from_ycc, ycc)
    return (rgb[..., :height, :width] / 255).clamp(0.0, 1.0)
