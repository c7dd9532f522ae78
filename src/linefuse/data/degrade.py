"""Blur domains x levels: turn a sharp chart into a degraded one, reproducibly.

Every random choice comes from a generator built by `item_rng` from (seed, image id, domain,
level), so an item's degradation never depends on which worker made it or in what order.
`degrade` returns the parameters it drew alongside the image; `blur_kernel` rebuilds the
point-spread function from them for the classical deconvolution baselines.
"""

from __future__ import annotations

import hashlib
import io
import json
import math

import numpy as np
from PIL import Image
from scipy import ndimage

from linefuse.params import DOMAINS
from linefuse.params.degrade import (
    CompressionLevel,
    GaussianLevel,
    LowresLevel,
    MotionLevel,
    ScanLevel,
)

Level = GaussianLevel | MotionLevel | ScanLevel | CompressionLevel | LowresLevel


def item_rng(seed: int, *parts: str) -> np.random.Generator:
    """A generator for one item, from a SHA-256 of (seed, *parts).

    hashlib, not hash(): Python salts str hashes per process, which would make results depend
    on the worker that happened to draw them.
    """
    key = json.dumps([int(seed), *map(str, parts)]).encode()
    entropy = int.from_bytes(hashlib.sha256(key).digest()[:16], "little")
    return np.random.default_rng(np.random.SeedSequence(entropy))


def degrade(
    image: np.ndarray, domain: str, level: Level, rng: np.random.Generator
) -> tuple[np.ndarray, dict]:
    """Degrade an (H, W, 3) uint8 RGB image with one domain; return (image, drawn params)."""
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"expected an (H, W, 3) uint8 image, got {image.shape} {image.dtype}")
    if domain not in _DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; accepts {', '.join(_DOMAINS)}")
    return _DOMAINS[domain](image, level, rng)


def blur_kernel(domain: str, drawn: dict) -> np.ndarray | None:
    """The 2-D PSF (float64, sums to 1) that `degrade` used, or None where there is none.

    Scan gives only its resampling blur: the geometry, contrast, shading and grain are not a
    convolution. Compression and lowres are not convolutions at all.
    """
    if domain == "gaussian":
        return _gaussian_kernel(drawn["sigma"])
    if domain == "motion":
        return _motion_kernel(drawn["length"], drawn["angle"])
    if domain == "scan":
        return _gaussian_kernel(drawn["blur"])
    if domain in ("compression", "lowres"):
        return None
    raise ValueError(f"unknown domain {domain!r}")


# --- kernels ----------------------------------------------------------------------------------


def _gaussian_kernel(sigma: float) -> np.ndarray:
    """The outer product of the 1-D kernel gaussian_filter uses (truncate=4), so they agree."""
    if sigma <= 0:
        return np.ones((1, 1))
    x = np.arange(-int(4 * sigma + 0.5), int(4 * sigma + 0.5) + 1)
    k = np.exp(-0.5 * (x / sigma) ** 2)
    k2 = np.outer(k, k)
    return k2 / k2.sum()


def _motion_kernel(length: int, angle: float) -> np.ndarray:
    """A straight camera path of `length` px at `angle` degrees (counter-clockwise from +x).

    The segment [-L/2, L/2] is sampled densely and each sample spread over its four nearest
    pixels (bilinear), which anti-aliases oblique lines; the kernel is odd-sized and centred,
    so blurring does not shift the image.
    """
    radius = math.ceil(length / 2)
    n = 16 * length
    t = (np.arange(n) + 0.5) / n * length - length / 2
    a = math.radians(angle)
    xs, ys = radius + t * math.cos(a), radius - t * math.sin(a)  # image rows grow downwards
    x0, y0 = np.floor(xs).astype(int), np.floor(ys).astype(int)
    fx, fy = xs - x0, ys - y0
    k = np.zeros((2 * radius + 2, 2 * radius + 2))
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            np.add.at(k, (y0 + dy, x0 + dx), wy * wx)
    k = k[: 2 * radius + 1, : 2 * radius + 1]  # the extra row/col only gets 0
    return k / k.sum()


# --- domains ----------------------------------------------------------------------------------


def _uniform(rng: np.random.Generator, bounds: tuple) -> float:
    return float(rng.uniform(bounds[0], bounds[1]))


def _to_float(image: np.ndarray) -> np.ndarray:
    return image.astype(np.float32) / 255.0


def _to_uint8(image: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(image * 255.0), 0, 255).astype(np.uint8)


def _convolve(image: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    kernel = kernel.astype(np.float32)
    return np.stack(
        [ndimage.convolve(image[..., c], kernel, mode="reflect") for c in range(image.shape[2])],
        axis=-1,
    )


def _gaussian(image, level: GaussianLevel, rng):
    """Defocus: an isotropic Gaussian PSF."""
    sigma = _uniform(rng, level.sigma)
    out = ndimage.gaussian_filter(_to_float(image), (sigma, sigma, 0), mode="reflect", truncate=4)
    return _to_uint8(out), {"sigma": sigma}


def _motion(image, level: MotionLevel, rng):
    """Camera shake: a straight line PSF of random length and direction."""
    length = int(rng.integers(level.length[0], level.length[1], endpoint=True))
    angle = _uniform(rng, level.angle)
    out = _convolve(_to_float(image), _motion_kernel(length, angle))
    return _to_uint8(out), {"length": length, "angle": angle}


def _smooth_field(rng: np.random.Generator, shape: tuple[int, int], cells: int) -> np.ndarray:
    """A low-frequency random field in [-1, 1]: a cells x cells grid, cubically upsampled."""
    coarse = rng.uniform(-1.0, 1.0, (cells, cells))
    zoom = (shape[0] / cells, shape[1] / cells)
    field = ndimage.zoom(coarse, zoom, order=3, mode="nearest", grid_mode=True)
    return np.clip(field, -1.0, 1.0).astype(np.float32)


GRAIN_SIGMA = 0.7  # px: how far the print grain is smoothed (a chart drawn larger: scaled)


def _scan(image, level: ScanLevel, rng, grain_sigma: float = GRAIN_SIGMA):
    """Print and scan, in the order it happens to paper.

    Printing: the line fades in places (strength `line_fade`; 0 disables it). Scanning: a small
    rotation and shear about the centre, a Gaussian resampling blur (sigma `blur`), contrast loss
    toward the paper tone (out = c*img + (1-c)*paper), smooth paper shading (multiplicative,
    amplitude `background`) and print grain: Gaussian noise smoothed at `grain_sigma`, renormalised
    to unit std and scaled by 0.1*`noise`, so noise 0.10 is a std of 1% of the full range.
    """
    h, w = image.shape[:2]
    rotation = _uniform(rng, (-level.rotation_deg, level.rotation_deg))
    shear = _uniform(rng, (-level.shear, level.shear))
    paper = _uniform(rng, (0.9, 1.0))
    img = _to_float(image)

    fade = level.line_fade * np.clip(_smooth_field(rng, (h, w), 6), 0.0, 1.0)
    img = img + (1.0 - img) * fade[..., None]  # lightens dark ink; white stays white

    a = math.radians(rotation)
    matrix = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]) @ np.array(
        [[1.0, 0.0], [shear, 1.0]]
    )  # (row, col): col += shear * row
    centre = np.array([(h - 1) / 2, (w - 1) / 2])
    offset = centre - matrix @ centre
    img = np.stack(
        [
            ndimage.affine_transform(img[..., c], matrix, offset, order=1, mode="nearest")
            for c in range(3)
        ],
        axis=-1,
    )

    img = ndimage.gaussian_filter(img, (level.blur, level.blur, 0), mode="reflect", truncate=4)
    img = level.contrast * img + (1.0 - level.contrast) * paper
    img = img * (1.0 + level.background * _smooth_field(rng, (h, w), 4))[..., None]
    grain = ndimage.gaussian_filter(
        rng.standard_normal((h, w, 3), dtype=np.float32),
        (grain_sigma, grain_sigma, 0),
        mode="reflect",
    )
    img = img + grain / max(float(grain.std()), 1e-12) * (0.1 * level.noise)
    drawn = {
        "rotation": rotation,
        "shear_x": shear,
        "paper": paper,
        "blur": level.blur,
        "contrast": level.contrast,
        "noise": level.noise,
        "background": level.background,
        "line_fade": level.line_fade,
    }
    return _to_uint8(img), drawn


def _compression(image, level: CompressionLevel, rng):
    """JPEG artefacts: blocking and ringing around the thin line, with fixed encoder settings."""
    quality = int(rng.integers(level.quality[0], level.quality[1], endpoint=True))
    buffer = io.BytesIO()
    Image.fromarray(image).save(
        buffer, format="JPEG", quality=quality, subsampling=2, optimize=False, progressive=False
    )
    buffer.seek(0)
    with Image.open(buffer) as decoded:
        out = np.asarray(decoded.convert("RGB"), dtype=np.uint8).copy()
    return out, {"quality": quality}


def _lowres(image, level: LowresLevel, rng):
    """Low resolution: bicubic down-scale by `factor`, then back up to the original size."""
    factor = _uniform(rng, level.factor)
    h, w = image.shape[:2]
    small = (max(1, round(w / factor)), max(1, round(h / factor)))
    out = Image.fromarray(image).resize(small, Image.BICUBIC).resize((w, h), Image.BICUBIC)
    return np.asarray(out, dtype=np.uint8).copy(), {"factor": factor}


# one function per name in params.DOMAINS, named after it: the list of domains lives there only
_DOMAINS = {domain: globals()[f"_{domain}"] for domain in DOMAINS}
