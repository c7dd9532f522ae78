"""How fast each plotting library draws the default charts (data.charts), sidecar included.

For each library of linefuse's (params.yaml's data.charts, drawn by that library alone): the
seconds per chart of `generate` (PNG, CSV and JSON written) on one process and on --workers,
each in a fresh process as the generate stage runs (workers are forked from a parent that has
drawn nothing), and the seconds of that process's first chart, which loads the library (its
import, and vl-convert's JavaScript engine). Writes benchmarks/results/draw.json, with the CPU
it ran on and the load average while it ran (the machine may be shared).

    python benchmarks/draw.py [--charts 24] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from linefuse.data.charts import draw_chart, generate
from linefuse.hardware import cpu_model
from linefuse.params.data import LIBRARIES
from linefuse.params.full import load_params

REPO = Path(__file__).resolve().parents[1]


def _timed(library: str, charts: int, workers: int) -> dict:
    """Run in a fresh process: the first chart's seconds, then generate's seconds per chart."""
    cfg = load_params(REPO / "params.yaml").data.charts.model_copy(
        update={"libraries": {library: 1.0}, "held_out": [], "count": charts}
    )
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        generate(cfg, Path(folder), workers=workers)
        per_chart = (time.perf_counter() - started) / charts
    started = time.perf_counter()
    draw_chart(cfg, charts)
    return {
        "seconds_per_chart": round(per_chart, 3),
        "one_more_chart_s": round(time.perf_counter() - started, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--charts", type=int, default=24)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # LIBRARY WORKERS: one timing
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_timed(args.one[0], args.charts, int(args.one[1]))))
        return
    report = {"cpu": cpu_model(), "charts": args.charts, "libraries": {}}
    report["load_average_before"] = round(os.getloadavg()[0], 2)
    for library in LIBRARIES:
        for workers in (1, args.workers):
            command = [sys.executable, __file__, "--charts", str(args.charts)]
            done = subprocess.run(
                [*command, "--one", library, str(workers)],
                check=True,
                capture_output=True,
                text=True,
            )
            timed = json.loads(done.stdout.strip().splitlines()[-1])
            report["libraries"].setdefault(library, {})[f"{workers}_workers"] = timed
    report["load_average_after"] = round(os.getloadavg()[0], 2)
    out = REPO / "benchmarks/results/draw.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
