"""The train_domains stage: with train.adapters: per_domain, one LoRA adapter per blur domain and
their weighted merge; else an empty folder.

    python -m linefuse.launch ... -m linefuse.stages.train_domains [--params params.yaml]
"""

from __future__ import annotations

import argparse
import sys

from linefuse import paths
from linefuse.params import Sections
from linefuse.params.compute import ComputeParams
from linefuse.params.degrade import DegradeParams
from linefuse.params.model import ModelParams
from linefuse.params.training import LaunchParams, LoaderParams, OptimParams, TrainParams
from linefuse.stage import UserError, stage, stage_main
from linefuse.train.domains import LOG_DIR, METRICS_PATH, train_domain_adapters


class TrainDomainsSections(Sections):
    """The sections of params.yaml the train_domains stage reads."""

    compute: ComputeParams
    model: ModelParams
    loader: LoaderParams
    optim: OptimParams
    launch: LaunchParams
    degrade: DegradeParams
    train: TrainParams


def run(params: TrainDomainsSections, args: argparse.Namespace) -> None:
    if params.train.adapters == "per_domain" and not paths.BASE_DIR.is_dir():
        raise UserError(
            f"{paths.BASE_DIR} is missing; run the stage that writes it first "
            f"(dvc repro, or snakemake {paths.BASE_DIR})"
        )
    with stage("train_domains") as written:
        train_domain_adapters(params)
        written += [paths.DOMAIN_ADAPTERS_DIR, LOG_DIR, METRICS_PATH]


def main(argv: list[str] | None = None) -> int:
    return stage_main(run, "train-domains", TrainDomainsSections, argv)


if __name__ == "__main__":
    sys.exit(main())
