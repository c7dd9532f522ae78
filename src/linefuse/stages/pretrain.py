"""The pretrain stage: train the base UNet on every level, or copy the one model.unet names.

accelerate launch ... -m linefuse.stages.pretrain [--params params.yaml]
"""

from __future__ import annotations

import sys

from linefuse.stage import stage, stage_main
from linefuse.train.loop import pretrain_job, pretrain_or_copy


def run(params, args) -> None:
    job = pretrain_job(params)
    with stage("pretrain") as written:
        pretrain_or_copy(params)
        written += [job.out_dir, job.metrics_path]


def main(argv: list[str] | None = None) -> int:
    return stage_main(run, "pretrain", argv)


if __name__ == "__main__":
    sys.exit(main())
