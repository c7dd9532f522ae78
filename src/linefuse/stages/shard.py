"""The shard stage: degrade every indexed image at one level into LMDB and WebDataset shards.

python -m linefuse.stages.shard --level LEVEL [--workers N] [--params params.yaml]
"""

from __future__ import annotations

import argparse
import sys

from linefuse import paths
from linefuse.data.shards import build_level
from linefuse.params import Sections
from linefuse.params.data import DataParams
from linefuse.params.degrade import DegradeParams
from linefuse.params.evaluation import EvalParams
from linefuse.params.shards import ShardParams
from linefuse.stage import UserError, atomic_dir, known_level, stage, stage_main, write_json


class ShardSections(Sections):
    """The sections of params.yaml the shard stage reads."""

    data: DataParams
    degrade: DegradeParams
    shards: ShardParams
    eval: EvalParams


def run(params: ShardSections, args: argparse.Namespace) -> None:
    level = known_level(params.degrade.levels, args.level)
    if not paths.IMAGES_PARQUET.is_file():
        raise UserError(f"{paths.IMAGES_PARQUET} is missing; run `linefuse index` first")
    out = paths.shards(level)
    with stage(f"shard@{level}") as written:
        with atomic_dir(out) as tmp:
            metrics = build_level(params, level, paths.IMAGES_PARQUET, tmp, workers=args.workers)
        write_json(paths.shard_metrics(level), metrics)
        written += [out, paths.shard_metrics(level)]


def main(argv: list[str] | None = None) -> int:
    return stage_main(
        run, "shard", ShardSections, argv, level="a name from degrade.levels", workers=True
    )


if __name__ == "__main__":
    sys.exit(main())
