"""Where a base window's step spends its time (`linefuse base-window --trace STEPS`): a few of the
window's own training steps under torch.profiler, and what a step of the UNet twice as wide
(train/configs/wide_unet.json) costs on the same device, both recorded in the window's record.

What bounds a step shows in three numbers: the device's busy share of the step's wall time (low:
the host or the launches bound it), the kernels launched per step, and the top kernels by device
time with their share (convolutions and matrix products: arithmetic; normalisations,
element-wise ops and copies: memory). The wide UNet runs eager beside the base's own eager step,
so the ratio is the price of its channels, not of compiling.
"""

from __future__ import annotations

import logging
import time

import torch
from torch.profiler import ProfilerActivity, profile

from linefuse.train.model import build_unet
from linefuse.train.step import draw_loss, step_draw

log = logging.getLogger("linefuse")

TOP_KERNELS = 15
WIDE_UNET = "wide"  # train/configs/wide_unet.json: the base's blocks at twice the channels


def trace_steps(trainer, steps: int) -> dict:
    """The profile of `steps` training steps of the window's `trainer` (a base/window.py
    Trainer; they train: the state moves on) and the eager step time of the base's UNet against
    the wide one's."""
    cuda = trainer.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as profiler:
        done = trainer.run("trace", steps=steps)
    events = [e for e in profiler.key_averages() if _device_us(e, cuda) > 0]
    busy_us = sum(_device_us(e, cuda) for e in events)
    top = sorted(events, key=lambda e: _device_us(e, cuda), reverse=True)[:TOP_KERNELS]
    step_ms = 1000 * done["seconds"] / steps
    found = {
        "steps": steps,
        "batch": trainer.setting.batch,
        "step_ms": step_ms,
        "device_busy_share": busy_us / 1000 / steps / step_ms,
        "kernels_per_step": sum(e.count for e in events) / steps if cuda else None,
        "top": [
            {
                "name": e.key[:120],
                "calls_per_step": e.count / steps,
                "ms_per_step": _device_us(e, cuda) / 1000 / steps,
                "share": _device_us(e, cuda) / busy_us,
            }
            for e in top
        ],
        "eager_ms": {
            "base": _eager_step_ms(trainer, trainer.model),
            WIDE_UNET: _eager_step_ms(trainer, build_unet(WIDE_UNET, 3).to(trainer.device)),
        },
    }
    log.info(
        "base-window: traced %d steps: %.1f ms a step, device busy %.0f%%; eager step: base "
        "%.1f ms, wide %.1f ms",
        steps,
        step_ms,
        100 * found["device_busy_share"],
        found["eager_ms"]["base"],
        found["eager_ms"][WIDE_UNET],
    )
    return found


def _device_us(event, cuda: bool) -> float:
    return event.self_device_time_total if cuda else event.self_cpu_time_total


def _eager_step_ms(trainer, model: torch.nn.Module, steps: int = 3) -> float:
    """ms of a forward and backward of `model` (no optimizer step: the weights stay) on the
    window's batch and precision, eager, after one untimed step."""
    params, batch = trainer.params, trainer.setting.batch
    blurred, sharp = trainer.pairs(trainer.state.step, batch, torch.contiguous_format)
    prompts = trainer.prompts.expand(batch, -1, -1)
    draw = step_draw(params, blurred, sharp, trainer.state.step, 0, 0)
    autocast = torch.autocast(trainer.device.type, torch.bfloat16, enabled=trainer.setting.bf16)
    for k in range(steps + 1):
        if k == 1:
            trainer.sync()
            started = time.perf_counter()
        with autocast:
            loss, _ = draw_loss(params, trainer.noise, model, draw, prompts)
        loss.backward()
        model.zero_grad(set_to_none=True)
    trainer.sync()
    return 1000 * (time.perf_counter() - started) / steps
