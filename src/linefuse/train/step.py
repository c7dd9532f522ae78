"""One training step, shared by pretrain, train@LEVEL, the base and its GPU windows: what a
micro-batch trains on (`step_draw`, from a seeded generator), the model's loss on it
(`draw_loss`), and, for the loops of pretrain, the adapters and the base (train/run.py's
`TrainingRun.micro_step`), the profiler and the benchmarks, the step itself under accelerate
(`training_step`). base/window.py steps its own compiled model around the
same draw and loss."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from accelerate import Accelerator
from torch import Tensor

from linefuse import paths
from linefuse.digitize.label_reader import LabelReader, ctc_loss
from linefuse.hardware import host_to_device
from linefuse.inference.model import predict
from linefuse.inference.sampler import restored_from
from linefuse.stage import UserError
from linefuse.train.diffusion import clean_signal, noisy_and_target, start_noise, weighted_loss

if TYPE_CHECKING:
    from linefuse.params.full import Params


@dataclass
class TextTargets:
    """A batch's tick labels: `mask` (B, 1, H, W) is 1 on their pixels; `boxes` (N, 5) holds
    (sample, left, top, right, bottom) of each readable label, `targets` (N, T) and `lengths`
    (N,) its CTC encoding (data/labels.encode)."""

    mask: Tensor
    boxes: Tensor
    targets: Tensor
    lengths: Tensor


def label_pixel_weights(mask: Tensor, label_weight: float) -> Tensor:
    """1 off the labels and 1 + label_weight on them, scaled to a mean of 1 in each sample: the
    weight moves the loss onto the labels without changing its scale."""
    weights = 1.0 + label_weight * mask
    return weights / weights.mean(dim=(1, 2, 3), keepdim=True)


@dataclass
class StepDraw:
    """What one micro-batch trains on: the condition, the clean signal, noise and timesteps."""

    condition: torch.Tensor
    x0: torch.Tensor
    noise: torch.Tensor
    timesteps: torch.Tensor


def step_draw(params: Params, blurred, sharp, step: int, micro: int, rank: int) -> StepDraw:
    """Noise, timesteps and identity pairs come from (seed, step, micro-batch, rank): a resumed
    run draws the same.

    An `optim.start_fraction` of the samples is drawn where the sampler starts (the last
    timestep, x_t at the prior's mean): what a 1-step restoration sees, and nothing else. The
    rest draw t from `optim.timestep_range` (diffusers' "range" timestep bias): a few-step
    sampler from the prior's mean visits only the noisiest. An `optim.identity_fraction` of the
    samples gets the sharp image as its own condition, so the model learns to leave a sharp
    input alone.
    """
    generator = torch.Generator().manual_seed(
        ((params.optim.seed * 1_000_003 + step) * 64 + micro) * 1024 + rank
    )
    batch, device = blurred.shape[0], blurred.device
    identity = torch.rand(batch, generator=generator) < params.optim.identity_fraction
    condition = torch.where(host_to_device(identity, device)[:, None, None, None], sharp, blurred)
    x0 = clean_signal(condition, sharp, params.model)
    noise = _noise(x0, generator)
    low, high = params.optim.timestep_range
    timesteps = host_to_device(torch.randint(low, high, (batch,), generator=generator), device)
    start = torch.rand(batch, generator=generator) < params.optim.start_fraction
    if start.any():  # a host tensor: no wait for the device
        timesteps = timesteps.masked_fill(
            host_to_device(start, device), params.model.train_timesteps - 1
        )
        at_start = start_noise(x0, noise, params.model)
        noise = torch.where(host_to_device(start, device)[:, None, None, None], at_start, noise)
    return StepDraw(condition, x0, noise, timesteps)


def _noise(x0: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Gaussian noise like x0: from the CPU `generator` on a CPU; on a GPU from a generator there,
    seeded from it (a batch of noise drawn on the host and copied would hold the GPU up)."""
    if x0.device.type == "cpu":
        return torch.randn(x0.shape, generator=generator).to(x0.dtype)
    seed = int(torch.randint(2**62, (1,), generator=generator))
    device_generator = torch.Generator(device=x0.device).manual_seed(seed)
    return torch.randn(x0.shape, generator=device_generator, device=x0.device, dtype=x0.dtype)


def draw_loss(
    params: Params,
    scheduler,
    model,
    draw: StepDraw,
    prompt_embeds,
    labels: TextTargets | None = None,
    reader: LabelReader | None = None,
) -> tuple[torch.Tensor, dict]:
    """The model's weighted loss on one draw; with `labels`, the tick labels' pixels weigh
    base.text.label_weight more and, with a `reader`, its CTC loss on the restored labels adds
    base.text.ctc times itself."""
    noisy, target = noisy_and_target(scheduler, draw.x0, draw.noise, draw.timesteps)
    prediction = predict(model, noisy, draw.condition, draw.timesteps, prompt_embeds)
    weights = None  # only the base's draws carry labels: only they read base.text
    if labels is not None and params.base.text.label_weight > 0:
        weights = label_pixel_weights(labels.mask, params.base.text.label_weight)
    loss, terms = weighted_loss(prediction, target, params.optim.loss, weights)
    if labels is not None and reader is not None and len(labels.boxes):
        restored = restored_from(prediction.float(), draw.condition.float(), params.model.target)
        ctc = ctc_loss(reader, restored, labels.boxes, labels.targets, labels.lengths)
        loss = loss + params.base.text.ctc * ctc
        terms["ctc"] = ctc.detach()
    return loss, terms


def label_reader(spec: str, device) -> LabelReader:
    """The frozen label reader base.text.reader names (shipped, or a local folder)."""
    folder = paths.unet_folder(spec)
    if not (folder / "config.json").is_file():
        raise UserError(
            f"base.text.reader: {spec} is neither a shipped label reader nor a folder with "
            f"config.json; run `linefuse label-reader` or set base.text.ctc: 0"
        )
    reader = LabelReader.from_pretrained(str(folder)).to(device).eval()
    reader.requires_grad_(False)
    return reader


class LossNotFinite(ArithmeticError):
    """The loss stopped being finite (at 0-based `step`): training diverged."""

    def __init__(self, loss: float, step: int):
        super().__init__(f"loss became {loss} at step {step + 1}")
        self.loss, self.step = loss, step


def _untimed(name: str):
    return contextlib.nullcontext()


@dataclass
class Trainer:
    """What a step needs: the prepared model, optimizer and schedule, the noise scheduler, the
    parameters that train and, for the base's CTC term, the frozen label reader."""

    params: Params
    accelerator: Accelerator
    noise: object  # the diffusers noise scheduler
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    schedule: object  # the learning-rate schedule
    trainable: list[torch.nn.Parameter]
    reader: LabelReader | None = None


def _untimed(name: str):
    return contextlib.nullcontext()


def training_step(
    trainer: Trainer,
    blurred,
    sharp,
    prompt_embeds,
    step: int,
    micro: int,
    phase=_untimed,
    labels: TextTargets | None = None,
) -> tuple[torch.Tensor, dict]:
    """One micro-batch, as the training loop, the profiler and the benchmarks step it: loss,
    backward and, on the last micro-batch, the optimizer step. `phase(name)` wraps forward,
    backward and optimizer step (the profiler times them); a loss that is not finite raises
    LossNotFinite before its backward pass."""
    params, accelerator, optimizer = trainer.params, trainer.accelerator, trainer.optimizer
    with accelerator.accumulate(trainer.model):
        with phase("forward"):
            draw = step_draw(params, blurred, sharp, step, micro, accelerator.process_index)
            loss, terms = draw_loss(
                params, trainer.noise, trainer.model, draw, prompt_embeds, labels, trainer.reader
            )
        if not torch.isfinite(loss):
            raise LossNotFinite(float(loss.detach()), step)
        with phase("backward"):
            accelerator.backward(loss)
        with phase("optimizer step"):
            if accelerator.sync_gradients and params.optim.clip_grad_norm:
                accelerator.clip_grad_norm_(trainer.trainable, params.optim.clip_grad_norm)
            optimizer.step()
            trainer.schedule.step()
            optimizer.zero_grad(set_to_none=True)
    return loss.detach(), terms  # for the log: no graph kept, no warning on float()
