"""PSNR and SSIM with BasicSR's conventions, computed by scikit-image.

What makes two papers' numbers comparable is written down in `eval.metric`: the data range
(uint8 images, 255), the colour handling (all RGB channels, or BasicSR's Y of YCbCr) and the
border crop. SSIM is Wang et al.'s: Gaussian weights, sigma 1.5, population covariance.
"""

from __future__ import annotations

import numpy as np
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from linefuse.params.evaluation import MetricParams

PSNR_CAP_DB = 100.0  # identical images have infinite PSNR; a cap keeps means finite


def _prepare(image: np.ndarray, settings: MetricParams) -> np.ndarray:
    """uint8 (H, W, 3) -> float64 in [0, 255]: Y (ITU-R BT.601, as BasicSR) or RGB, border cut."""
    pixels = image.astype(np.float64)
    if settings.color == "y":
        pixels = (
            16.0
            + (65.481 * pixels[..., 0] + 128.553 * pixels[..., 1] + 24.966 * pixels[..., 2]) / 255.0
        )
    border = settings.crop_border
    if border:
        pixels = pixels[border:-border, border:-border]
    return pixels


def psnr(restored: np.ndarray, sharp: np.ndarray, settings: MetricParams) -> float:
    with np.errstate(divide="ignore"):  # identical images: inf, capped below
        value = peak_signal_noise_ratio(
            _prepare(sharp, settings), _prepare(restored, settings), data_range=255.0
        )
    return float(min(value, PSNR_CAP_DB))


def ssim(restored: np.ndarray, sharp: np.ndarray, settings: MetricParams) -> float:
    reference, test = _prepare(sharp, settings), _prepare(restored, settings)
    return float(
        structural_similarity(
            reference,
            test,
            data_range=255.0,
            gaussian_weights=True,
            sigma=1.5,
            use_sample_covariance=False,
            channel_axis=None if settings.color == "y" else 2,
        )
    )
