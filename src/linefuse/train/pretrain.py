"""pretrain: the base UNet trained from scratch on every level's shards (the full fine-tune the
adapters are measured against), or the pretrained one model.unet names, copied.

The loop reads as diffusers' training examples do: the data, the model, the steps
(train/step.py's `training_step` under `accelerator.accumulate`), then the model saved. What
every loop shares around its steps (accelerator, checkpoints, log, validation, saving) is
train/run.py's `TrainingRun`. The same command runs on a CPU or under `accelerate launch`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from linefuse import paths
from linefuse.paths import fresh_config
from linefuse.stage import atomic_dir, write_json
from linefuse.train.job import Job
from linefuse.train.model import build_unet, count_parameters, save_base
from linefuse.train.run import TrainingRun
from linefuse.train.trainset import null_prompt, shard_data

if TYPE_CHECKING:
    import torch

    from linefuse.params.full import Params


def pretrain_job(params: Params) -> Job:
    return Job(
        name="pretrain",
        steps=params.pretrain.steps,
        lr=params.pretrain.lr,
        lr_key="pretrain.lr",
        levels=list(params.degrade.levels),
        out_dir=paths.BASE_DIR,
        metrics_path=paths.train_metrics("pretrain"),
        log_dir=paths.train_logs("pretrain"),
        unet=params.model.unet,
        settings=params.model_dump(include={"model", "optim", "pretrain"}),
    )


def pretrain_model(params: Params, job: Job, channels: int) -> torch.nn.Module:
    """A UNet that trains whole: of the size (or from the weights) job.unet names, taking
    `channels` input channels."""
    unet = build_unet(job.unet, channels)
    if params.optim.gradient_checkpointing:
        unet.enable_gradient_checkpointing()
    return unet


def pretrain(params: Params, job: Job) -> dict:
    """Trains the base from scratch, resuming from the last matching checkpoint; returns the
    final metrics."""
    run = TrainingRun(params, job)
    stream, prompt_table, channels, input_files = shard_data(params, job, run.accelerator)
    run.start(pretrain_model(params, job, channels), prompt_table, input_files)
    batches = stream.batches(skip=run.start_step * params.optim.grad_accum)
    for step in range(run.start_step, job.steps):
        for micro in range(params.optim.grad_accum):
            (blurred, sharp, prompt_index), waited = run.next_batch(batches)
            run.micro_step(blurred, sharp, run.prompt_table[prompt_index], step, micro, waited)
        run.end_step(step + 1, stream)
    return run.finish(lambda unet, folder: save_base(unet, folder, null_prompt(params, job.levels)))


def pretrain_or_copy(params: Params) -> dict:
    """pretrain: trains a base from scratch (model.unet: tiny); a pretrained one (a shipped model
    such as chart-base, or a local folder) is only widened where needed and saved."""
    job = pretrain_job(params)
    if fresh_config(params.model.unet):
        return pretrain(params, job)
    manifest = paths.embeddings(job.levels[0]) / "manifest.json"
    channels = json.loads(manifest.read_text())["channels"] if manifest.is_file() else 3
    unet = build_unet(params.model.unet, channels)
    # named as params.yaml names it, not by where this clone keeps it: the same bytes in every
    # clone, so DVC's hash of models/base is the same wherever the project lives
    unet.register_to_config(_name_or_path=params.model.unet)
    trainable, total = count_parameters(unet)
    metrics = {
        "steps": 0,
        "pretrained": params.model.unet,
        "total_params": total,
        "trainable_params": trainable,
    }
    with atomic_dir(job.out_dir) as tmp, atomic_dir(job.log_dir) as log_dir:
        save_base(unet, tmp, null_prompt(params, job.levels))
        write_json(log_dir / "copied.json", metrics)  # no steps to log: the base is pretrained
    write_json(job.metrics_path, metrics)
    return metrics
