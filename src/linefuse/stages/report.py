"""The report stage: reports/index.html, evaluate's tables, plots and samples with the params.

python -m linefuse.stages.report [--params params.yaml]
"""

from __future__ import annotations

import sys
from pathlib import Path

from linefuse.report.report import check_inputs, write_report
from linefuse.stage import stage, stage_main


def run(params, args) -> None:
    check_inputs()
    with stage("report") as written:
        written.append(write_report(params, Path(args.params)))


def main(argv: list[str] | None = None) -> int:
    return stage_main(run, "report", argv)


if __name__ == "__main__":
    sys.exit(main())
