"""A training job: what one training stage does, built from params by train/pretrain.py,
train/curriculum.py, train/domains.py or base/train.py and run by train/run.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Job:
    """What one training stage does: built from params by `pretrain_job`, `train_job`,
    `domain_job` or `base_job`."""

    name: str
    steps: int
    lr: float
    lr_key: str  # where params.yaml sets lr, for messages
    levels: list[str]
    out_dir: Path
    metrics_path: Path
    log_dir: Path
    unet: str = ""  # what a full training starts from (model.unet; base.init or base.unet)
    init_adapter: Path | None = None
    unfreeze_blocks: list[str] = field(default_factory=list)
    domain: str | None = None
    settings: dict = field(default_factory=dict)
