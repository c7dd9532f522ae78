"""`linefuse base` (make base): train the base LineFuse ships (base/card.py scores it and
writes its card).

The base is the pretrained backbone the curriculum adapts with LoRA (model.unet names it): LoRA
adapts a pretrained model, and LineFuse cannot download one (docs/model_zoo.md). Its loop reads
the chart bank (linefuse.base.bank: sharp crops drawn once, degraded here on the training device
with their tick labels, base/batches.py), and adds the text terms base.text names; it is
resumable from .linefuse/state/base, shares train/run.py's set-up and finish with pretrain and
the adapters, and lands in linefuse/zoo/<base.name> as a diffusers folder with a model card
(README.md with YAML front matter, as on the Hugging Face Hub). The GPU windows that grow it
further have their own loop (base/window.py) around the same draw and loss.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

from linefuse import paths
from linefuse.base.bank import BankCrops
from linefuse.base.batches import device_pairs, step_generator
from linefuse.train.job import Job
from linefuse.train.model import save_base, zero_prompt
from linefuse.train.pretrain import pretrain_model
from linefuse.train.run import TrainingRun
from linefuse.train.step import label_reader
from linefuse.train.trainset import BatchStream

if TYPE_CHECKING:
    from linefuse.params.full import Params


def base_run_params(params: Params) -> Params:
    """params with the base's batch, warmup, checkpoint interval and loader workers in the
    optim and loader blocks the training loop reads."""
    base = params.base
    optim = params.optim.model_copy(
        update={
            "batch_size": base.batch_size,
            "warmup_steps": base.warmup_steps,
            "checkpoint_every": base.checkpoint_every,
        }
    )
    loader = params.loader.model_copy(update={"workers": base.workers, "cache_gb": 0})
    return params.model_copy(update={"optim": optim, "loader": loader})


def base_job(params: Params) -> Job:
    """The shipped base; `params` as `base_run_params` makes them."""
    return Job(
        name="base",
        steps=params.base.steps,
        lr=params.base.lr,
        lr_key="base.lr",
        levels=list(params.degrade.levels),
        out_dir=paths.zoo_model(params.base.name),
        metrics_path=paths.train_metrics("base"),
        log_dir=paths.train_logs("base"),
        unet=params.base.init or params.base.unet,
        settings=params.model_dump(include={"data", "degrade", "shards", "model", "optim", "base"}),
    )


def train_base(params: Params) -> tuple[Path, dict]:
    """Trains (or resumes) the base into linefuse/zoo/<base.name>; returns (folder, metrics)."""
    params = base_run_params(params)
    job = base_job(params)
    optim = params.optim
    run = TrainingRun(params, job, validates=False)  # its score set is the model card's
    crops = BankCrops(params)
    stream = BatchStream(
        run.accelerator, params.loader, optim.batch_size, optim.seed, dataset=crops, shuffle=False
    )
    trainer = run.start(pretrain_model(params, job, 3), zero_prompt(job.unet), [])
    device, rank = run.accelerator.device, run.accelerator.process_index
    if params.base.text.ctc > 0:  # the CTC term reads the restored labels
        trainer.reader = label_reader(params.base.text.reader, device)
    batches = stream.batches(skip=run.start_step * optim.grad_accum)
    for step in range(run.start_step, job.steps):
        for micro in range(optim.grad_accum):
            batch, waited = run.next_batch(batches)
            generator = step_generator(params, step, micro, rank)
            blurred, sharp, labels = device_pairs(params, batch, device, generator)
            prompts = run.prompt_table[torch.zeros(len(blurred), dtype=torch.long)]
            run.micro_step(blurred, sharp, prompts, step, micro, waited, labels=labels)
        run.end_step(step + 1, stream)
    return job.out_dir, run.finish(
        lambda model, folder: save_base(model, folder, zero_prompt(job.unet))
    )
