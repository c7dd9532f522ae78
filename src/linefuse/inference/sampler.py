"""Sampling: a restoration in a few deterministic DDIM steps, and the restored image from the
clean signal the model produces (the residual or the sharp image, `model.target`; the
formulation itself is train/diffusion.py's). The scheduler is a diffusers DDIMScheduler built
from params.yaml's `model` section (ddim_scheduler), or the one a saved LineFusePipeline holds.
torch and diffusers load inside the functions that run them: the ONNX Runtime path
(inference/numpy_sampler.py) shares restored_from and SamplingCancelled without them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from linefuse.inference.model import predict
from linefuse.params.model import ModelParams

if TYPE_CHECKING:
    import torch
    from diffusers import DDIMScheduler


class SamplingCancelled(Exception):
    """`should_stop` said to stop: the caller dropped the work (time limit, client gone)."""


def restored_from(x0, blurred, target: str):
    """The restored image from the model's clean signal (torch tensors or numpy arrays):
    `target` is model.target."""
    return blurred + x0 if target == "residual" else x0


def ddim_scheduler(model: ModelParams) -> DDIMScheduler:
    """The sampler's scheduler for params.yaml's `model` section: deterministic DDIM over the
    training schedule, its steps trailing so that the first starts at the last timestep."""
    from diffusers import DDIMScheduler

    return DDIMScheduler(
        num_train_timesteps=model.train_timesteps,
        beta_schedule=model.beta_schedule,
        prediction_type=model.prediction_type,
        clip_sample=False,
        set_alpha_to_one=True,
        timestep_spacing="trailing",
    )


def sample(
    unet,
    condition: torch.Tensor,
    prompt_embeds: torch.Tensor,
    schedule: DDIMScheduler,
    sample_start: str,
    steps: int,
    generator: torch.Generator | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> torch.Tensor:
    """x0 in `steps` deterministic DDIM steps (eta 0) of `schedule` (a copy is stepped, so one
    scheduler serves every call), conditioned on `condition`; raises SamplingCancelled before a
    step once `should_stop()` is true.

    `sample_start` (model.sample_start) `mean` starts from the prior's mean (all zeros: with the
    residual target, the blurred input itself), so a restoration is one deterministic estimate,
    without the leftover noise a random start adds to near-clean inputs (docs/experiments.md).
    `noise` starts from a seeded draw, for varied samples.
    """
    import torch
    from diffusers import DDIMScheduler

    scheduler = DDIMScheduler.from_config(schedule.config)
    scheduler.set_timesteps(steps)
    if sample_start == "mean":
        latents = torch.zeros_like(condition)
    else:
        latents = torch.randn(condition.shape, generator=generator, dtype=condition.dtype)
        latents = latents.to(condition.device)
    with torch.no_grad():
        for timestep in scheduler.timesteps:
            if should_stop is not None and should_stop():
                raise SamplingCancelled()
            batch_t = torch.full((condition.shape[0],), int(timestep), device=condition.device)
            output = predict(unet, latents, condition, batch_t, prompt_embeds)
            latents = scheduler.step(output, timestep, latents, eta=0.0).prev_sample
    return latents
