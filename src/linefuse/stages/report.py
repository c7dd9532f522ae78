"""The report stage: reports/index.html, evaluate's tables, plots and samples with the params.

python -m linefuse.stages.report [--params params.yaml]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from linefuse.params import Sections
from linefuse.params.data import DataParams
from linefuse.params.degrade import DegradeParams
from linefuse.params.embed import EmbedParams
from linefuse.params.evaluation import EvalParams
from linefuse.params.model import ModelParams
from linefuse.params.shards import ShardParams
from linefuse.params.training import OptimParams, PretrainParams, TrainParams
from linefuse.report.report import check_inputs, write_report
from linefuse.stage import stage, stage_main


class ReportSections(Sections):
    """The sections of params.yaml the report stage reads."""

    data: DataParams
    degrade: DegradeParams
    shards: ShardParams
    model: ModelParams
    embed: EmbedParams
    optim: OptimParams
    pretrain: PretrainParams
    train: TrainParams
    eval: EvalParams


def run(params: ReportSections, args: argparse.Namespace) -> None:
    check_inputs()
    with stage("report") as written:
        written.append(write_report(params, Path(args.params)))


def main(argv: list[str] | None = None) -> int:
    return stage_main(run, "report", ReportSections, argv)


if __name__ == "__main__":
    sys.exit(main())
