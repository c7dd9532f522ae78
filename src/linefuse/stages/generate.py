"""The generate stage: draw the default data, synthetic spectrum charts (data.charts).

python -m linefuse.stages.generate [--workers N] [--params params.yaml]
"""

from __future__ import annotations

import argparse
import sys

from linefuse import paths
from linefuse.data.charts import generate
from linefuse.params import Sections
from linefuse.params.data import DataParams
from linefuse.stage import atomic_dir, stage, stage_main


class GenerateSections(Sections):
    """The sections of params.yaml the generate stage reads."""

    data: DataParams


def run(params: GenerateSections, args: argparse.Namespace) -> None:
    with stage("generate") as written, atomic_dir(paths.GENERATED_DIR) as tmp:
        generate(params.data.charts, tmp, workers=args.workers)
        written.append(paths.GENERATED_DIR)


def main(argv: list[str] | None = None) -> int:
    return stage_main(run, "generate", GenerateSections, argv, workers=True)


if __name__ == "__main__":
    sys.exit(main())
