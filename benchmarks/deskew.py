"""The scan-geometry estimator (linefuse.data.deskew) against the rotation and shear drawn.

Draws N default charts from --first on (params.yaml's data.charts; the estimator was tuned on
the first 24, so measure from 100 on), degrades each in the scan domain
at every level as the shard stage would (degrade.seed), and estimates the geometry from the
degraded chart alone. Per level and per part (the trained families, the held-out ones): the
median and 95th percentile of |rotation error| in degrees and of |shear error|, how often no
line was found, how often `auto` would undo it, and how far (px) the farthest corner is still
off after `auto` (the error where it undoes, else the scan's whole geometry). Then what must
stay untouched: how often `auto` would move a sharp chart, or one degraded in another domain
(hard level). And the estimator's seconds per megapixel on this CPU (named in the report).
With --scale S, each chart is drawn at S x its size (S x the dpi) and the scan's lengths
scaled with it, as benchmarks/scale.py draws and degrades them: a user's export at 2-4x our
charts' size. Writes benchmarks/results/deskew.json (--out).

    python benchmarks/deskew.py [--charts 60] [--first 100] [--scale 1] [--out FILE.json]
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
from scale import degrade_scaled

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
    parser.add_argument("--scale", type=int, default=1, help="charts drawn at this x their size")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/deskew.json")
    args = parser.parse_args()
    params = load_params(REPO / "params.yaml")
    charts, degrading = params.data.charts, params.degrade
    found = {(part, level): [] for part in ("test", "held_out") for level in degrading.levels}
    undone = {key: 0 for key in found}
    left = {key: [] for key in found}  # px the farthest corner is still off after `auto`
    moved = {"sharp": 0, **{domain: 0 for domain in degrading.domains if domain != "scan"}}
    seconds = pixels = 0.0
    for index in range(args.first, args.first + args.charts):
        sharp, _, sidecar = draw_chart(charts, index)
        if args.scale > 1:
            size = (args.scale * sharp.shape[1], args.scale * sharp.shape[0])
            sharp = draw_chart(charts, index, size)[0]
        part = "held_out" if sidecar["family"] in charts.held_out else "test"
        chart_id = f"chart_{index:05d}"
        moved["sharp"] += deskew.estimate(sharp).confident(sharp.shape)
        for domain in moved.keys() - {"sharp"}:
            rng = item_rng(degrading.seed, chart_id, domain, "hard")
            image, _ = degrade(sharp, domain, degrading.level(domain, "hard"), rng)
            moved[domain] += deskew.estimate(image).confident(image.shape)
        for level in degrading.levels:
            image, drawn = degrade_scaled(params, sharp, chart_id, "scan", level, args.scale)
            started = time.perf_counter()
            skew = deskew.estimate(image)
            seconds += time.perf_counter() - started
            pixels += image.shape[0] * image.shape[1]
            found[part, level].append(
                (skew.rotation_deg, drawn["rotation"], skew.shear, drawn["shear_x"])
            )
            undone[part, level] += skew.confident(image.shape)
            after = skew if skew.confident(image.shape) else deskew.Skew(0.0, 0.0, 0.0, 1.0)
            error = (drawn["rotation"] - after.rotation_deg, drawn["shear_x"] - after.shear)
            left[part, level].append(deskew.Skew(*error, 0.0, 1.0).moves_px(image.shape))
    report = {
        "charts": args.charts,
        "first": args.first,
        "scale": args.scale,
        "cpu": cpu_model(),
        "seconds_per_megapixel": round(seconds / pixels * 1e6, 3),
        "scan": {
            f"{part}/{level}": {
                **_errors(rows),
                "undone_by_auto": undone[part, level],
                "corner_px_left": {
                    "median": round(float(np.median(left[part, level])), 3),
                    "mean": round(float(np.mean(left[part, level])), 3),
                },
            }
            for (part, level), rows in found.items()
        },
        "moved_by_auto": moved,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
