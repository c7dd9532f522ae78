"""`linefuse profile`: where a training step's time goes, UNet block by block.

It runs a few steps of pretrain or train@LEVEL with the stage's own pieces (accelerator, batch
stream, model, optimizer, schedule, draw and loss), so the shares are those of the real loop, and
saves nothing: no checkpoint, log, model or metric. Look here before changing depths or window
sizes. It runs the loop's own step (train/step.py's `training_step`) with its phases timed.

Forward times come from hooks around each block. Backward times come from identity autograd
functions on each block's inputs and outputs whose backward notes the time: autograd runs the
nodes in reverse creation order, so a block's backward starts when the gradient reaches its
outputs and ends when it reaches its inputs.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

import peft
import torch
from accelerate.utils import set_seed

from linefuse import paths
from linefuse.stage import UserError
from linefuse.train.curriculum import adapter_model, train_job
from linefuse.train.diffusion import noise_scheduler
from linefuse.train.job import Job
from linefuse.train.pretrain import pretrain_job, pretrain_model
from linefuse.train.run import make_accelerator, make_optimizer, make_schedule
from linefuse.train.step import Trainer, training_step
from linefuse.train.trainset import shard_data

if TYPE_CHECKING:
    from linefuse.params.full import Params

WARMUP_STEPS = 2  # untimed: the first steps pay for allocation and one-off setup
STEM = "stem/head"  # the rest of the UNet (time embedding, conv_in, conv_out), noising and the loss


def profile_job(params: Params, level: str | None, full: bool) -> Job:
    """pretrain's full fine-tune, or train@LEVEL (the first curriculum level by default).

    A LoRA level starts from a fresh adapter: a step costs the same whatever the adapter's
    weights, so profiling a later level does not need the earlier levels trained.
    """
    if full:
        return pretrain_job(params)
    order = params.train.order()
    level = level or order[0]
    if level not in params.train.curriculum:
        raise UserError(
            f"--level {level}: not in train.curriculum ({', '.join(order)}); "
            f"use --full for the full fine-tune"
        )
    if not paths.BASE_DIR.is_dir():
        raise UserError(
            f"{paths.BASE_DIR} is missing; run `linefuse pretrain` first, or profile the "
            f"full fine-tune with --full"
        )
    return replace(train_job(params, level), init_adapter=None)


def training_model(params: Params, job: Job, channels: int) -> torch.nn.Module:
    """The job's model as its loop builds it: pretrain's fresh UNet, or the base with an
    adapter."""
    if job.name == pretrain_job(params).name:
        return pretrain_model(params, job, channels)
    return adapter_model(params, job)


class _Marker(torch.autograd.Function):
    """Identity whose backward tells the profiler that the gradient has reached these tensors."""

    @staticmethod
    def forward(ctx, profiler: StepProfiler, label: str, *tensors: torch.Tensor):
        ctx.profiler, ctx.label = profiler, label
        return tuple(tensor.view_as(tensor) for tensor in tensors)

    @staticmethod
    def backward(ctx, *grads):
        ctx.profiler.mark(ctx.label)
        return (None, None, *grads)


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [tensor for item in value for tensor in _tensors(item)]
    if isinstance(value, dict):
        return _tensors(list(value.values()))
    return []


def _rebuilt(value, replacements: dict[int, torch.Tensor]):
    if isinstance(value, torch.Tensor):
        return replacements.get(id(value), value)
    if isinstance(value, (tuple, list)):
        return type(value)(_rebuilt(item, replacements) for item in value)
    if isinstance(value, dict):
        return {key: _rebuilt(item, replacements) for key, item in value.items()}
    return value


class StepProfiler:
    """Seconds per phase of a training step and per UNet block, forward and backward."""

    def __init__(self, unet: torch.nn.Module, device: torch.device):
        names = [f"down_blocks.{i}" for i in range(len(unet.down_blocks))]
        names += ["mid_block"] if unet.mid_block is not None else []
        names += [f"up_blocks.{i}" for i in range(len(unet.up_blocks))]
        self.blocks = names
        self.on_cuda = device.type == "cuda"
        self.started: dict[str, float] = {}
        self.marks: list[tuple[float, str]] = []
        self.seconds: dict[str, float] = defaultdict(float)
        for name in names:
            block = unet.get_submodule(name)
            block.register_forward_pre_hook(self._entering(name), with_kwargs=True)
            block.register_forward_hook(self._leaving(name))

    def now(self) -> float:
        if self.on_cuda:  # kernels run asynchronously: wait for them before reading the clock
            torch.cuda.synchronize()
        return time.perf_counter()

    def reset(self) -> None:
        self.seconds.clear()

    @contextmanager
    def phase(self, name: str):
        started = self.now()
        yield
        self.seconds[name] += self.now() - started

    def step_phase(self, name: str):
        """training_step's phases: the backward pass is split between the blocks."""
        return self.backward() if name == "backward" else self.phase(name)

    @contextmanager
    def backward(self):
        """Splits the backward pass between the blocks at the times their markers fire."""
        self.marks = [(self.now(), STEM)]  # the loss and the head come first
        yield
        ended = self.now()
        for (at, label), (until, _) in zip(self.marks, self.marks[1:] + [(ended, "")], strict=True):
            self.seconds[f"backward {label}"] += until - at

    def mark(self, label: str) -> None:
        self.marks.append((self.now(), label))

    def _marked(self, value, label: str):
        """`value` with its gradient-carrying tensors passed through one _Marker."""
        tensors = {id(t): t for t in _tensors(value) if t.requires_grad}
        if not tensors:
            return value
        marked = _Marker.apply(self, label, *tensors.values())
        return _rebuilt(value, dict(zip(tensors, marked, strict=True)))

    def _entering(self, name: str):
        def hook(module, args, kwargs):
            # the block's backward ends when the gradient reaches its inputs: the stem's from then
            args, kwargs = self._marked((args, kwargs), STEM)
            self.started[name] = self.now()
            return args, kwargs

        return hook

    def _leaving(self, name: str):
        def hook(module, args, output):
            self.seconds[f"forward {name}"] += self.now() - self.started.pop(name)
            return self._marked(output, name)

        return hook

    def rows(self) -> dict[str, float]:
        """Seconds per table row, in pipeline order; they add up to the steps' wall time."""
        seconds = self.seconds
        in_blocks = sum(seconds[f"forward {name}"] for name in self.blocks)
        rows = {
            "data loading": seconds["data loading"],
            f"forward {STEM}": seconds["forward"] - in_blocks,
            **{f"forward {name}": seconds[f"forward {name}"] for name in self.blocks},
            **{f"backward {name}": seconds[f"backward {name}"] for name in reversed(self.blocks)},
            f"backward {STEM}": seconds[f"backward {STEM}"],
            "optimizer step": seconds["optimizer step"],
        }
        rows["other"] = seconds["step"] - sum(rows.values())
        return rows


def profile(params: Params, job: Job, steps: int) -> dict:
    """Times `steps` training steps of `job` after WARMUP_STEPS untimed ones; writes nothing."""
    if steps < 1:
        raise UserError(f"--steps {steps}: needs at least 1")
    accelerator, _, precision = make_accelerator(params, paths.STATE_ROOT)  # never saves there
    set_seed(params.optim.seed)
    stream, prompt_table, channels, _ = shard_data(params, job, accelerator)
    model = training_model(params, job, channels)
    lora = isinstance(model, peft.PeftModel)
    unet = model.get_base_model() if lora else model
    profiler = StepProfiler(unet, accelerator.device)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(params, trainable, job.lr)
    schedule = make_schedule(params, job, optimizer, accelerator.num_processes)
    # eager even with optim.compile: a compiled graph has no block boundaries to time
    model, optimizer, schedule = accelerator.prepare(model, optimizer, schedule)
    if accelerator.device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    trainer = Trainer(
        params, accelerator, noise_scheduler(params.model), model, optimizer, schedule, trainable
    )
    prompt_table = prompt_table.to(accelerator.device)
    batches = stream.batches()
    model.train()
    for step in range(WARMUP_STEPS + steps):
        if step == WARMUP_STEPS:
            profiler.reset()
        with profiler.phase("step"):
            for micro in range(params.optim.grad_accum):
                with profiler.phase("data loading"):
                    blurred, sharp, prompt_index = next(batches)
                prompts = prompt_table[prompt_index]
                training_step(trainer, blurred, sharp, prompts, step, micro, profiler.step_phase)
    rows = profiler.rows()
    total = sum(rows.values())
    return {
        "job": job.name,
        "lora": lora,
        "steps": steps,
        "warmup_steps": WARMUP_STEPS,
        "batch_size": params.optim.batch_size,
        "grad_accum": params.optim.grad_accum,
        "precision": precision.value,
        "device": str(accelerator.device),
        "compile_ignored": params.optim.compile,
        "step_ms": 1000 * total / steps,
        "rows": [
            {"name": name, "ms_per_step": 1000 * seconds / steps, "percent": 100 * seconds / total}
            for name, seconds in rows.items()
        ],
    }


def format_report(report: dict) -> str:
    """The table `linefuse profile` prints: ms per step and share of the step, row by row."""
    kind = "LoRA" if report["lora"] else "full fine-tune"
    batch = f"batch {report['batch_size']}"
    if report["grad_accum"] > 1:
        batch += f" x {report['grad_accum']} accumulated"
    eager = ", eager (optim.compile ignored)" if report["compile_ignored"] else ""
    lines = [
        f"profile {report['job']} ({kind}): {report['steps']} steps timed after "
        f"{report['warmup_steps']} untimed warm-up steps, {batch}, {report['precision']}, "
        f"{report['device']}{eager}",
        f"{'':<26}{'ms/step':>10}{'%':>8}",
    ]
    lines += [
        f"{row['name']:<26}{row['ms_per_step']:>10.1f}{row['percent']:>8.1f}"
        for row in report["rows"]
    ]
    lines.append(f"{'total':<26}{report['step_ms']:>10.1f}{100:>8.1f}")
    return "\n".join(lines)
