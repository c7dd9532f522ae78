"""train@LEVEL: one curriculum level's LoRA adapter on the base, starting from the previous
level's adapter (and train_domains' per-domain adapters, through the same loop).

The loop reads as diffusers' LoRA training example does: the data, the base with its adapter,
the steps (train/step.py's `training_step` under `accelerator.accumulate`), then the adapter
saved. What every loop shares around its steps is train/run.py's `TrainingRun`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from peft import set_peft_model_state_dict

from linefuse import paths
from linefuse.inference.model import load_base
from linefuse.train.job import Job
from linefuse.train.model import (
    ADAPTER_WEIGHTS,
    adapter_start,
    add_lora,
    quantize_frozen,
    save_adapter,
)
from linefuse.train.run import TrainingRun
from linefuse.train.trainset import shard_data

if TYPE_CHECKING:
    import torch

    from linefuse.params.full import Params

BASE_WEIGHTS = paths.BASE_DIR / paths.WEIGHTS_FILE


def train_job(params: Params, level: str) -> Job:
    order = params.train.order()
    before = params.train.predecessor(level)
    unfreeze = params.train.unfreeze
    hybrid = unfreeze.level is not None and order.index(level) >= order.index(unfreeze.level)
    return Job(
        name=f"train@{level}",
        steps=params.train.curriculum[level].steps,
        lr=params.train.curriculum[level].lr,
        lr_key=f"train.curriculum.{level}.lr",
        levels=params.train.training_levels(level),
        out_dir=paths.adapter(level),
        metrics_path=paths.train_metrics(level),
        log_dir=paths.train_logs(level),
        init_adapter=paths.adapter(before) if before else None,
        unfreeze_blocks=list(unfreeze.blocks) if hybrid else [],
        settings={
            **params.model_dump(include={"model", "optim"}),
            "lora": params.train.lora.model_dump(),
            "level": level,
            "replay": params.train.replay,
            "ordered": params.train.ordered,
            "curriculum": params.train.curriculum[level].model_dump(),
        },
    )


def adapter_model(params: Params, job: Job) -> torch.nn.Module:
    """The base (models/base) with a LoRA adapter, started from the previous level's."""
    unet = load_base(paths.BASE_DIR)
    if params.optim.gradient_checkpointing:
        unet.enable_gradient_checkpointing()
    model = add_lora(unet, params.train.lora, job.unfreeze_blocks)
    if job.init_adapter is not None:
        set_peft_model_state_dict(model, adapter_start(model, paths.BASE_DIR, job.init_adapter))
    quantize_frozen(model, params.model.quantize_base)  # after LoRA: trainable parts stay exact
    return model


def train_adapter(params: Params, job: Job) -> dict:
    """Trains `job`'s adapter, resuming from its last matching checkpoint (one made from the same
    data, base and starting adapter); returns the final metrics."""
    run = TrainingRun(params, job)
    stream, prompt_table, _, input_files = shard_data(params, job, run.accelerator)
    starts_from = [job.init_adapter / ADAPTER_WEIGHTS] if job.init_adapter else []
    run.start(adapter_model(params, job), prompt_table, input_files + starts_from + [BASE_WEIGHTS])
    batches = stream.batches(skip=run.start_step * params.optim.grad_accum)
    for step in range(run.start_step, job.steps):
        for micro in range(params.optim.grad_accum):
            (blurred, sharp, prompt_index), waited = run.next_batch(batches)
            run.micro_step(blurred, sharp, run.prompt_table[prompt_index], step, micro, waited)
        run.end_step(step + 1, stream)
    return run.finish(save_adapter)
