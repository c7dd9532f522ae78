"""pretrain: the base UNet trained from scratch on every level's shards (the full fine-tune the
adapters are measured against), or the pretrained one model.unet names, copied.

The loop reads as diffusers' training examples do: the data, the model, the steps
(train/step.py's `training_step` under `accelerator.accumulate`), then the model saved. What
every loop shares around its steps (accelerator, checkpoints, log, validation, saving) is
train/run.py's `TrainingRun`. The same command runs on a CPU or under `accelerate launch`.

torch, diffusers and accelerate load inside the functions that train or widen a UNet: a shipped
base that already takes the condition is copied file by file, and the stage that does only that
starts none of them (seconds saved on every run of the default pipeline).
"""

from __future__ import annotations

import json
import math
import shutil
from typing import TYPE_CHECKING

from safetensors import safe_open
from safetensors.numpy import save_file

from linefuse import paths
from linefuse.data.layout import EMBEDDINGS_MANIFEST
from linefuse.inference.model import NULL_PROMPT_FILE
from linefuse.paths import CONFIG_FILE, WEIGHTS_FILE, fresh_config, unet_config, unet_folder
from linefuse.stage import atomic_dir, write_json
from linefuse.train.job import Job
from linefuse.train.null_prompt import null_prompt

if TYPE_CHECKING:
    from pathlib import Path

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
    from linefuse.train.model import build_unet

    unet = build_unet(job.unet, channels)
    if params.optim.gradient_checkpointing:
        unet.enable_gradient_checkpointing()
    return unet


def pretrain(params: Params, job: Job) -> dict:
    """Trains the base from scratch, resuming from the last matching checkpoint; returns the
    final metrics."""
    import torch

    from linefuse.train.model import save_base
    from linefuse.train.run import TrainingRun
    from linefuse.train.trainset import shard_data

    run = TrainingRun(params, job)
    stream, prompt_table, channels, input_files = shard_data(params, job, run.accelerator)
    run.start(pretrain_model(params, job, channels), prompt_table, input_files)
    batches = stream.batches(skip=run.start_step * params.optim.grad_accum)
    for step in range(run.start_step, job.steps):
        for micro in range(params.optim.grad_accum):
            (blurred, sharp, prompt_index), waited = run.next_batch(batches)
            run.micro_step(blurred, sharp, run.prompt_table[prompt_index], step, micro, waited)
        run.end_step(step + 1, stream)
    prompt = torch.from_numpy(null_prompt(params, job.levels))
    return run.finish(lambda unet, folder: save_base(unet, folder, prompt))


def pretrain_or_copy(params: Params) -> dict:
    """pretrain: trains a base from scratch (model.unet: tiny); a pretrained one is copied (a
    shipped model, such as chart-base, that takes the condition already) or, a local folder or
    one to widen, read by diffusers, widened where needed and saved."""
    job = pretrain_job(params)
    if fresh_config(params.model.unet):
        return pretrain(params, job)
    manifest = paths.embeddings(job.levels[0]) / EMBEDDINGS_MANIFEST
    channels = json.loads(manifest.read_text())["channels"] if manifest.is_file() else 3
    with atomic_dir(job.out_dir) as tmp, atomic_dir(job.log_dir) as log_dir:
        if _takes_the_condition(params.model.unet, channels):
            total = copy_base(params, job, tmp)
            trainable = total  # nothing frozen: the counts count_parameters gives a loaded UNet
        else:
            trainable, total = widen_base(params, job, channels, tmp)
        metrics = {
            "steps": 0,
            "pretrained": params.model.unet,
            "total_params": total,
            "trainable_params": trainable,
        }
        write_json(log_dir / "copied.json", metrics)  # no steps to log: the base is pretrained
    write_json(job.metrics_path, metrics)
    return metrics


def _takes_the_condition(spec: str, channels: int) -> bool:
    """A shipped model (in save_base's layout: diffusers wrote it) whose input already holds the
    condition (2 * channels in, channels out): one build_unet would return unchanged."""
    if unet_folder(spec) != paths.zoo_model(spec):
        return False  # a local folder: diffusers reads it, whichever version or files wrote it
    config = unet_config(spec)
    return config["in_channels"] == 2 * channels and config["out_channels"] == channels


def copy_base(params: Params, job: Job, folder: Path) -> int:
    """The shipped base as save_base writes it, without torch: its weights' bytes, its config
    named as params.yaml names it, and the null prompt training sees. Returns its parameter
    count, from the weights' header."""
    shipped = unet_folder(params.model.unet)
    shutil.copyfile(shipped / WEIGHTS_FILE, folder / WEIGHTS_FILE)
    # named as params.yaml names it, not by where this clone keeps it: the same bytes in every
    # clone, so DVC's hash of models/base is the same wherever the project lives. Written as
    # diffusers' save_pretrained writes a config; its _diffusers_version stays the shipped one
    config = {**json.loads((shipped / CONFIG_FILE).read_text()), "_name_or_path": job.unet}
    (folder / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    save_file({"embedding": null_prompt(params, job.levels)}, str(folder / NULL_PROMPT_FILE))
    with safe_open(str(folder / WEIGHTS_FILE), framework="numpy") as weights:
        return sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())


def widen_base(params: Params, job: Job, channels: int, folder: Path) -> tuple[int, int]:
    """A pretrained UNet widened for the condition (or a local folder, read by diffusers), saved
    by save_base; returns its (trainable, total) parameter counts."""
    import torch

    from linefuse.train.model import build_unet, count_parameters, save_base

    unet = build_unet(job.unet, channels)
    unet.register_to_config(_name_or_path=job.unet)  # as copy_base names it, for the same reason
    save_base(unet, folder, torch.from_numpy(null_prompt(params, job.levels)))
    return count_parameters(unet)
