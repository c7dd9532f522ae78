"""The diffusion formulation in one place: what the model learns to produce, and how it samples.

The clean signal x0 is the residual (sharp - blurred) or the sharp image itself (`model.target`).
With the residual and x0 prediction (`prediction_type: sample`), a model whose output is still
zero restores the blurred input unchanged, and a handful of DDIM steps already give a usable
result, which is what lets a small UNet beat its input after a short training on a CPU
(docs/experiments.md).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from diffusers import DDPMScheduler

from linefuse.params.model import ModelParams
from linefuse.params.training import LossWeights

CHARBONNIER_EPS = 1e-3
BALANCE_FLOOR = (
    0.01  # of the [-1, 1] pixel range: a sample with no residual is not weighed infinitely
)


def noise_scheduler(model: ModelParams) -> DDPMScheduler:
    return DDPMScheduler(
        num_train_timesteps=model.train_timesteps,
        beta_schedule=model.beta_schedule,
        prediction_type=model.prediction_type,
        clip_sample=False,
    )


def clean_signal(blurred: torch.Tensor, sharp: torch.Tensor, model: ModelParams) -> torch.Tensor:
    return sharp - blurred if model.target == "residual" else sharp


def noisy_and_target(
    scheduler: DDPMScheduler, x0: torch.Tensor, noise: torch.Tensor, timesteps: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's input at `timesteps` and what it should predict there."""
    noisy = scheduler.add_noise(x0, noise, timesteps)
    kind = scheduler.config.prediction_type
    if kind == "sample":
        return noisy, x0
    if kind == "epsilon":
        return noisy, noise
    return noisy, scheduler.get_velocity(x0, noise, timesteps)


def start_noise(x0: torch.Tensor, noise: torch.Tensor, model: ModelParams) -> torch.Tensor:
    """The noise that puts x0 at the last timestep where `sample` starts: the prior's mean (zero)
    for `model.sample_start: mean`, the seeded draw itself for `noise`. DDIM's "trailing"
    spacing makes the last timestep the first step of every run, and all of a 1-step one."""
    if model.sample_start == "noise":
        return noise
    return -x0 * _signal_to_noise_at_start(model.train_timesteps, model.beta_schedule)


@functools.cache
def _signal_to_noise_at_start(train_timesteps: int, beta_schedule: str) -> float:
    """sqrt(alpha_bar / (1 - alpha_bar)) at the last timestep (float32, as the scheduler holds
    it); computed once, not on every training step."""
    scheduler = DDPMScheduler(num_train_timesteps=train_timesteps, beta_schedule=beta_schedule)
    alpha_bar = scheduler.alphas_cumprod[-1]
    return float(alpha_bar.sqrt() / (1 - alpha_bar).sqrt())


def weighted_loss(
    prediction: torch.Tensor,
    target: torch.Tensor,
    weights: LossWeights,
    pixel_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Weighted sum of MSE, L1, Charbonnier and the Laplacian term; returns the total and each
    term for the logs (detached 0-d tensors: reading one waits for the device, so the caller
    decides when).

    With `weights.balance` > 0 each sample counts (mean |target| + BALANCE_FLOOR) ** -balance,
    normalised to a mean of 1 over the batch: a JPEG crop's residual is far smaller than a heavy
    blur's, so in a plain mean the model learns to leave it alone. `pixel_weights` (B, 1, H, W),
    where given, weighs each pixel's error within its sample (the tick labels' pixels up, say).
    `weights.laplacian` adds the L1 of the error's Laplacian (NAF-DPM's and DocDiff's
    high-frequency term): the edges of thin glyphs are where a blurry guess costs little L1 and
    much legibility. The logged terms stay plain means.
    """
    error = prediction.float() - target.float()
    per_pixel = {
        "mse": error.square(),
        "l1": error.abs(),
        "charbonnier": torch.sqrt(error.square() + CHARBONNIER_EPS**2),
    }
    if weights.laplacian > 0:
        per_pixel["laplacian"] = _laplacian(error).abs()
    plain = {name: value.detach().mean() for name, value in per_pixel.items()}
    if pixel_weights is not None:
        per_pixel = {name: value * pixel_weights for name, value in per_pixel.items()}
    per_sample = {name: value.flatten(1).mean(1) for name, value in per_pixel.items()}
    sample_weights = torch.ones_like(per_sample["l1"])
    if weights.balance > 0:
        scale = target.detach().float().abs().flatten(1).mean(1) + BALANCE_FLOOR
        sample_weights = scale.pow(-weights.balance)
        sample_weights = sample_weights / sample_weights.mean()
    total = sum(
        getattr(weights, name) * (sample_weights * value).mean()
        for name, value in per_sample.items()
        if getattr(weights, name) > 0
    )
    return total, plain


def _laplacian(image: torch.Tensor) -> torch.Tensor:
    """The 3x3 Laplacian of each channel (8-neighbour, normalised as kornia's), reflected at the
    border. Our own: kornia is slow to import, and every stage process that loads this would
    pay for it."""
    kernel = torch.ones(3, 3, dtype=image.dtype, device=image.device)
    kernel[1, 1] = -8.0
    kernel = (kernel / 16.0).expand(image.shape[1], 1, 3, 3)
    padded = F.pad(image, (1, 1, 1, 1), mode="reflect")
    return F.conv2d(padded, kernel, groups=image.shape[1])
