"""The generate stage: draw the default data, synthetic spectrum charts (data.charts).

python -m linefuse.stages.generate [--workers N] [--params params.yaml]
"""

from __future__ import annotations

import sys

from linefuse import paths
from linefuse.data.charts import generate
from linefuse.stage import atomic_dir, stage, stage_main


def run(params, args) -> None:
    with stage("generate") as written, atomic_dir(paths.GENERATED_DIR) as tmp:
        generate(params.data.charts, tmp, workers=args.workers)
        written.append(paths.GENERATED_DIR)


def main(argv: list[str] | None = None) -> int:
    return stage_main(run, "generate", argv, workers=True)


if __name__ == "__main__":
    sys.exit(main())
