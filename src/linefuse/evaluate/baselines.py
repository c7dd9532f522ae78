"""Classical restorations the model has to beat, on the same images: Wiener and Richardson-Lucy
deconvolution with the kernel the degradation used, and unsharp masking (scikit-image's, but for
Richardson-Lucy: see `richardson_lucy`)."""

from __future__ import annotations

import numpy as np
import torch
from scipy.fft import next_fast_len
from skimage.filters import unsharp_mask
from skimage.restoration import wiener

from linefuse.data.degrade import blur_kernel
from linefuse.params.evaluation import BaselineParams

CLASSICAL = ("wiener", "richardson_lucy", "unsharp")  # the method names in metrics/eval.json


def _padded(blurred: np.ndarray, kernel: np.ndarray) -> tuple[np.ndarray, int]:
    """A reflect-padded float32 copy in [0, 1], and the padding: the deconvolutions treat the
    outside as zeros (Richardson-Lucy) or wrap around (Wiener), which rings at the border. In
    float32, as scikit-image keeps it: Richardson-Lucy runs faster than in float64, for output
    no more than a grey level from it (docs/experiments.md has the trial)."""
    pad = max(kernel.shape) // 2 + 1
    pixels = np.pad(
        blurred.astype(np.float32) / 255.0, ((pad, pad), (pad, pad), (0, 0)), mode="reflect"
    )
    return pixels, pad


def _unpadded_uint8(restored: np.ndarray, pad: int) -> np.ndarray:
    return np.clip(np.rint(restored[pad:-pad, pad:-pad] * 255.0), 0, 255).astype(np.uint8)


def _wiener(blurred: np.ndarray, kernel: np.ndarray, balance: float) -> np.ndarray:
    pixels, pad = _padded(blurred, kernel)
    channels = [wiener(pixels[..., c], kernel, balance, clip=True) for c in range(3)]
    return _unpadded_uint8(np.stack(channels, axis=2), pad)


def richardson_lucy(blurred: np.ndarray, kernel: np.ndarray, iterations: int) -> np.ndarray:
    """scikit-image's `richardson_lucy` (clip=True) on every channel at once, in torch.

    Our own because it is measurably faster: the same iteration, with the kernel's and its
    mirror's transforms computed once per image instead of on every convolution, and the three
    channels in one batch (benchmarks/baselines.py times it against scikit-image's:
    benchmarks/results/baselines.json), no pixel more than one grey level from it (the test).
    """
    pixels, pad = _padded(blurred, kernel)
    image = torch.from_numpy(pixels).permute(2, 0, 1)
    height, width = image.shape[1:]
    rows, cols = kernel.shape
    size = (next_fast_len(height + rows - 1, True), next_fast_len(width + cols - 1, True))
    psf = torch.from_numpy(kernel.astype(np.float32))
    psf_spectrum = torch.fft.rfft2(psf, s=size)
    mirror_spectrum = torch.fft.rfft2(psf.flip(0, 1), s=size)
    top, left = (rows - 1) // 2, (cols - 1) // 2

    def convolve_same(x: torch.Tensor, spectrum: torch.Tensor) -> torch.Tensor:
        """scipy.signal.convolve(x, psf, mode="same") through the transform."""
        full = torch.fft.irfft2(torch.fft.rfft2(x, s=size) * spectrum, s=size)
        return full[:, top : top + height, left : left + width]

    estimate = torch.full_like(image, 0.5)
    for _ in range(iterations):
        relative_blur = image / (convolve_same(estimate, psf_spectrum) + 1e-12)
        estimate = estimate * convolve_same(relative_blur, mirror_spectrum)
    return _unpadded_uint8(estimate.clamp(-1, 1).permute(1, 2, 0).numpy(), pad)


def baselines(blurred: np.ndarray, domain: str, drawn: dict, settings: BaselineParams) -> dict:
    """{method: restored uint8 image}; the deconvolutions only where the domain has a kernel."""
    out = {
        "unsharp": np.clip(
            np.rint(
                unsharp_mask(
                    blurred.astype(np.float64) / 255.0,
                    radius=settings.unsharp_radius,
                    amount=settings.unsharp_amount,
                    channel_axis=2,
                )
                * 255.0
            ),
            0,
            255,
        ).astype(np.uint8)
    }
    kernel = blur_kernel(domain, drawn)
    if kernel is not None:
        kernel = kernel.astype(np.float32)
        out["wiener"] = _wiener(blurred, kernel, settings.wiener_balance)
        out["richardson_lucy"] = richardson_lucy(
            blurred, kernel, settings.richardson_lucy_iterations
        )
    return out
