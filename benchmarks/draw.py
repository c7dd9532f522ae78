"""How fast each plotting library draws the default charts (data.charts), sidecar included.

For each library of linefuse's (params.yaml's data.charts, drawn by that library alone): the
seconds per chart of `generate` (PNG, CSV and JSON written) on one process and on --workers,
after one chart that loads the library (its import, and vl-convert's JavaScript engine). Writes
benchmarks/results/draw.json, with the CPU it ran on.

    python benchmarks/draw.py [--charts 40] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from linefuse.data.charts import draw_chart, generate
from linefuse.hardware import cpu_model
from linefuse.params.data import LIBRARIES
from linefuse.params.full import load_params

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--charts", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    charts = load_params(REPO / "params.yaml").data.charts
    report = {"cpu": cpu_model(), "charts": args.charts, "workers": args.workers, "libraries": {}}
    for library in LIBRARIES:
        cfg = charts.model_copy(
            update={"libraries": {library: 1.0}, "held_out": [], "count": args.charts}
        )
        started = time.perf_counter()
        draw_chart(cfg, 0)
        first = time.perf_counter() - started
        seconds = {}
        for workers in (1, args.workers):
            with tempfile.TemporaryDirectory() as folder:
                started = time.perf_counter()
                generate(cfg, Path(folder), workers=workers)
                seconds[workers] = time.perf_counter() - started
        report["libraries"][library] = {
            "first_chart_s": round(first, 3),
            "seconds_per_chart_1_worker": round(seconds[1] / args.charts, 3),
            f"seconds_per_chart_{args.workers}_workers": round(
                seconds[args.workers] / args.charts, 3
            ),
        }
    out = REPO / "benchmarks/results/draw.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
