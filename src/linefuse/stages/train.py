"""The train stage: one curriculum level's LoRA adapter, from the one train.curriculum names.

python -m linefuse.launch ... -m linefuse.stages.train --level LEVEL [--params params.yaml]
"""

from __future__ import annotations

import argparse
import sys

from linefuse import paths
from linefuse.params import Sections
from linefuse.params.compute import ComputeParams
from linefuse.params.model import ModelParams
from linefuse.params.training import LaunchParams, LoaderParams, OptimParams, TrainParams
from linefuse.stage import UserError, known_level, stage, stage_main
from linefuse.train.curriculum import train_adapter, train_job


class TrainSections(Sections):
    """The sections of params.yaml the train stage reads."""

    compute: ComputeParams
    model: ModelParams
    loader: LoaderParams
    optim: OptimParams
    launch: LaunchParams
    train: TrainParams


def run(params: TrainSections, args: argparse.Namespace) -> None:
    level = known_level(params.train.order(), args.level, "train.curriculum")
    job = train_job(params, level)
    for needed in [paths.BASE_DIR] + ([job.init_adapter] if job.init_adapter else []):
        if not needed.is_dir():
            raise UserError(
                f"{needed} is missing; run the stage that writes it first "
                f"(dvc repro, or snakemake {needed})"
            )
    with stage(job.name) as written:
        train_adapter(params, job)
        written += [job.out_dir, job.metrics_path]


def main(argv: list[str] | None = None) -> int:
    return stage_main(run, "train", TrainSections, argv, level="a name from train.curriculum")


if __name__ == "__main__":
    sys.exit(main())
