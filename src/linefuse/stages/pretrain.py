"""The pretrain stage: train the base UNet on every level, or copy the one model.unet names.

python -m linefuse.launch ... -m linefuse.stages.pretrain [--params params.yaml]
"""

from __future__ import annotations

import argparse
import sys

from linefuse.params import Sections
from linefuse.params.compute import ComputeParams
from linefuse.params.degrade import DegradeParams
from linefuse.params.model import ModelParams
from linefuse.params.training import LaunchParams, LoaderParams, OptimParams, PretrainParams
from linefuse.stage import stage, stage_main
from linefuse.train.pretrain import pretrain_job, pretrain_or_copy


class PretrainSections(Sections):
    """The sections of params.yaml the pretrain stage reads."""

    compute: ComputeParams
    model: ModelParams
    loader: LoaderParams
    optim: OptimParams
    launch: LaunchParams
    pretrain: PretrainParams
    degrade: DegradeParams


def run(params: PretrainSections, args: argparse.Namespace) -> None:
    job = pretrain_job(params)
    with stage("pretrain") as written:
        pretrain_or_copy(params)
        written += [job.out_dir, job.metrics_path]


def main(argv: list[str] | None = None) -> int:
    return stage_main(run, "pretrain", PretrainSections, argv)


if __name__ == "__main__":
    sys.exit(main())
