"""The embed stage: cache one level's model inputs (pixels or VAE latents) and prompt table.

python -m linefuse.stages.embed --level LEVEL [--params params.yaml]
"""

from __future__ import annotations

import argparse
import sys

from linefuse import paths
from linefuse.data.layout import SHARD_MANIFEST
from linefuse.hardware import logged_device
from linefuse.params import Sections
from linefuse.params.compute import ComputeParams
from linefuse.params.degrade import DegradeParams
from linefuse.params.embed import EmbedParams
from linefuse.params.model import ModelParams
from linefuse.stage import UserError, atomic_dir, known_level, stage, stage_main, write_json
from linefuse.train.embed import embed_level


class EmbedSections(Sections):
    """The sections of params.yaml the embed stage reads."""

    compute: ComputeParams
    model: ModelParams
    embed: EmbedParams
    degrade: DegradeParams


def run(params: EmbedSections, args: argparse.Namespace) -> None:
    level = known_level(params.degrade.levels, args.level)
    shards = paths.shards(level)
    if not (shards / SHARD_MANIFEST).is_file():
        raise UserError(f"{shards} is missing; run `linefuse shard --level {level}` first")
    out = paths.embeddings(level)
    with stage(f"embed@{level}") as written:
        with atomic_dir(out) as tmp:
            device = logged_device(params, f"embed@{level}")
            metrics = embed_level(
                params, level, shards, paths.IMAGES_PARQUET, tmp, device=device.value
            )
        metrics |= {"device": device.value, "device_reason": device.reason}
        write_json(paths.embed_metrics(level), metrics)
        written += [out, paths.embed_metrics(level)]


def main(argv: list[str] | None = None) -> int:
    return stage_main(run, "embed", EmbedSections, argv, level="a name from degrade.levels")


if __name__ == "__main__":
    sys.exit(main())
