"""The scan-geometry estimator (linefuse.data.deskew) against the rotation and shear drawn.

Draws N default charts from --first on (params.yaml's data.charts; the estimator was tuned on
the first 24, so measure from 100 on), degrades each in the scan domain
at every level as the shard stage would (degrade.seed), and estimates the geometry from the
degraded chart alone. Per level and per part (the trained families, the held-out ones): the
median and 95th percentile of |rotation error| in degrees and of |shear error|, how often no
line was found, and how often `auto` would undo it. Then what must stay untouched: how often
`auto` would move a sharp chart, or one degraded in another domain (hard level). And the
estimator's seconds per megapixel on this CPU (named in the report). Writes
benchmarks/results/deskew.json.

    python benchmarks/deskew.py [--charts 60] [--first 100]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from linefuse.data import deskew
from linefuse.data.charts import draw_chart
from linefuse.data.degrade import degrade, item_rng
from linefuse.hardware import cpu_model
from linefuse.params.full import load_params

REPO = Path(__file__).resolve().parents[1]


def _errors(found: list[tuple[float | None, float, float, float]]) -> dict:
    """{rotation, shear: {median, p95}, none, undone} over (estimate, drawn) pairs."""
    measured = [row for row in found if row[0] is not None]
    rotation = np.abs([row[0] - row[1] for row in measured])
    shear = np.abs([row[2] - row[3] for row in measured])
    summary = {"charts": len(found), "none": len(found) - len(measured)}
    for name, values in (("rotation_deg", rotation), ("shear", shear)):
        summary[name] = (
            {
                "median": round(float(np.median(values)), 4),
                "p95": round(float(np.percentile(values, 95)), 4),
            }
            if len(values)
            else None
        )
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--charts", type=int, default=60)
    parser.add_argument("--first", type=int, default=100)
    args = parser.parse_args()
    params = load_params(REPO / "params.yaml")
    charts, degrading = params.data.charts, params.degrade
    found = {(part, level): [] for part in ("test", "held_out") for level in degrading.levels}
    undone = {key: 0 for key in found}
    moved = {"sharp": 0, **{domain: 0 for domain in degrading.domains if domain != "scan"}}
    seconds = pixels = 0.0
    for index in range(args.first, args.first + args.charts):
        sharp, _, sidecar = draw_chart(charts, index)
        part = "held_out" if sidecar["family"] in charts.held_out else "test"
        chart_id = f"chart_{index:05d}"
        moved["sharp"] += deskew.estimate(sharp).confident(sharp.shape)
        for domain in moved.keys() - {"sharp"}:
            rng = item_rng(degrading.seed, chart_id, domain, "hard")
            image, _ = degrade(sharp, domain, degrading.level(domain, "hard"), rng)
            moved[domain] += deskew.estimate(image).confident(image.shape)
        for level in degrading.levels:
            rng = item_rng(degrading.seed, chart_id, "scan", level)
            image, drawn = degrade(sharp, "scan", degrading.level("scan", level), rng)
            started = time.perf_counter()
            skew = deskew.estimate(image)
            seconds += time.perf_counter() - started
            pixels += image.shape[0] * image.shape[1]
            found[part, level].append(
                (skew.rotation_deg, drawn["rotation"], skew.shear, drawn["shear_x"])
            )
            undone[part, level] += skew.confident(image.shape)
    report = {
        "charts": args.charts,
        "first": args.first,
        "cpu": cpu_model(),
        "seconds_per_megapixel": round(seconds / pixels * 1e6, 3),
        "scan": {
            f"{part}/{level}": {**_errors(rows), "undone_by_auto": undone[part, level]}
            for (part, level), rows in found.items()
        },
        "moved_by_auto": moved,
    }
    out = REPO / "benchmarks/results/deskew.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
