"""The sampler in numpy, for the ONNX Runtime path: deterministic DDIM (eta 0) from the prior's
mean, step for step what inference/sampler.py runs through diffusers' DDIMScheduler with
ddim_scheduler's settings (trailing steps, the last step to alpha 1, no clipping), in float32,
so that restoring imports neither torch nor diffusers. The noise schedule is computed as
diffusers computes it; tests/inference/test_numpy_sampler.py holds the two to the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from linefuse.inference.sampler import SamplingCancelled
from linefuse.params.model import ModelParams
from linefuse.stage import UserError

MAX_BETA = 0.999  # diffusers' cap on the cosine schedule's betas


def alphas_cumprod(train_timesteps: int, beta_schedule: str) -> np.ndarray:
    """float32 (train_timesteps,): the product of (1 - beta) up to each timestep."""
    if beta_schedule == "squaredcos_cap_v2":  # Nichol & Dhariwal's cosine schedule

        def alpha_bar(t: float) -> float:
            return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2

        steps = range(train_timesteps)
        ratios = [
            alpha_bar((i + 1) / train_timesteps) / alpha_bar(i / train_timesteps) for i in steps
        ]
        betas = np.array([min(1 - ratio, MAX_BETA) for ratio in ratios], np.float32)
    else:  # linear, or linear in sqrt(beta) (scaled_linear), from 1e-4 to 0.02 as diffusers
        start, end = (1e-4, 0.02) if beta_schedule == "linear" else (1e-4**0.5, 0.02**0.5)
        betas = _linspace(start, end, train_timesteps)
        if beta_schedule == "scaled_linear":
            betas = betas**2
    # torch's cumprod on the CPU multiplies float32 in double precision
    return np.cumprod((1.0 - betas).astype(np.float64)).astype(np.float32)


def _linspace(start: float, end: float, count: int) -> np.ndarray:
    """torch.linspace in float32: the first half counted up from `start`, the second down from
    `end`, each value rounded once (its kernel's fused multiply-add; the float32 product is exact
    in float64)."""
    start, end = np.float32(start), np.float32(end)
    step = np.float64((end - start) / np.float32(count - 1))
    index = np.arange(count)
    up = np.float64(start) + step * index
    down = np.float64(end) - step * (count - 1 - index)
    return np.where(index < count // 2, up, down).astype(np.float32)


def timesteps(train_timesteps: int, steps: int) -> np.ndarray:
    """The `steps` timesteps, trailing: the first is the last of training."""
    if steps > train_timesteps:
        raise UserError(
            f"{steps} steps: more than the {train_timesteps} timesteps the model was trained "
            f"over (model.train_timesteps)"
        )
    ratio = train_timesteps / steps
    return np.round(np.arange(train_timesteps, 0, -ratio)).astype(np.int64) - 1


def sample(
    predict: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
    condition: np.ndarray,
    model: ModelParams,
    steps: int,
    should_stop: Callable[[], bool] | None = None,
) -> np.ndarray:
    """x0 in `steps` DDIM steps from the prior's mean (model.sample_start `mean`: zeros),
    conditioned on float32 `condition`; `predict(noisy, condition, timesteps)` is the UNet's
    output. Raises SamplingCancelled before a step once `should_stop()` is true."""
    cumprod = alphas_cumprod(model.train_timesteps, model.beta_schedule)
    latents = np.zeros_like(condition)
    stride = model.train_timesteps // steps
    for timestep in timesteps(model.train_timesteps, steps):
        if should_stop is not None and should_stop():
            raise SamplingCancelled()
        batch_t = np.full((condition.shape[0],), timestep, np.int64)
        output = predict(latents, condition, batch_t)
        before = timestep - stride
        alpha = cumprod[timestep]
        alpha_prev = cumprod[before] if before >= 0 else np.float32(1.0)
        x0, eps = _clean_and_noise(output, latents, alpha, model.prediction_type)
        latents = np.sqrt(alpha_prev) * x0 + np.sqrt(np.float32(1.0) - alpha_prev) * eps
    return latents


def _clean_and_noise(
    output: np.ndarray, latents: np.ndarray, alpha: np.float32, prediction_type: str
) -> tuple[np.ndarray, np.ndarray]:
    """The clean signal and the noise a step's model output stands for (model.prediction_type),
    as DDIMScheduler.step derives them."""
    beta = np.float32(1.0) - alpha
    if prediction_type == "epsilon":
        return (latents - np.sqrt(beta) * output) / np.sqrt(alpha), output
    if prediction_type == "sample":
        return output, (latents - np.sqrt(alpha) * output) / np.sqrt(beta)
    x0 = np.sqrt(alpha) * latents - np.sqrt(beta) * output  # v_prediction
    return x0, np.sqrt(alpha) * output + np.sqrt(beta) * latents
