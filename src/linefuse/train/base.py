"""`linefuse base` (make base): train the base LineFuse ships (evaluate/model_card.py scores it and
writes its card).

The base is the pretrained backbone the curriculum adapts with LoRA (model.unet names it): LoRA
adapts a pretrained model, and LineFuse cannot download one (docs/model_zoo.md). It is trained
once, with far more compute than a pipeline run has, through the same training loop as pretrain
(resumable from .linefuse/state/base), on charts drawn and degraded on the fly
(linefuse.data.stream), and lands in linefuse/zoo/<base.name> as a diffusers folder with a model
card (README.md with YAML front matter, as on the Hugging Face Hub).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from linefuse.train.loop import base_job, train

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


def train_base(params: Params) -> tuple[Path, dict]:
    """Trains (or resumes) the base into linefuse/zoo/<base.name>; returns (folder, metrics)."""
    run_params = base_run_params(params)
    job = base_job(run_params)
    return job.out_dir, train(run_params, job)
