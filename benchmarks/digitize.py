"""Digitize generated sharp charts from a folder with their sidecars and score them per library.

    python benchmarks/digitize.py DATA_DIR [--split test held_out] [--out FILE.json]

DATA_DIR holds source/chart_NNNNN.{png,json,csv} and index/images.parquet (the split of each
chart). Writes, per library, the charts' count, the share digitized, the share calibrated (both
axes within 1 % of their range at every tick used), of all charts and of those that draw tick
labels, the median curve error (% of the y range; an unread chart counts as 100), the mean of
CHART-Info's task-6b line score (digitize/line_score.py: the field's, series matched one to
one; an unread chart scores 0) and the seconds per chart (whole run, Tesseract and the label
reader included).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl
from PIL import Image

from linefuse.digitize.chart import Unreadable, digitize_many
from linefuse.digitize.score import reading_score, score
from linefuse.hardware import cpu_model

BATCH = 16  # charts whose tick labels share one Tesseract call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--split", nargs="*", default=["test", "held_out"])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/digitize.json"))
    args = parser.parse_args()
    index = pl.read_parquet(args.data / "index" / "images.parquet")
    if args.split:
        index = index.filter(pl.col("split").is_in(args.split))
    paths = [args.data / "source" / p for p in index["path"].to_list()]
    rows = []
    start = time.perf_counter()
    for first in range(0, len(paths), BATCH):
        batch = paths[first : first + BATCH]
        images = [np.asarray(Image.open(p).convert("RGB")) for p in batch]
        for path, result in zip(batch, digitize_many(images), strict=True):
            sidecar = json.loads(path.with_suffix(".json").read_text())
            row = {"chart": path.name, "library": sidecar["library"], "read": True}
            row["labelled"] = bool(sidecar["tick_labels"])  # it draws tick labels to read
            if isinstance(result, Unreadable):
                row.update(read=False, reason=str(result))
            else:
                row.update(score(result, path))
            row["calibrated"], row["curve_error"], row["line_score"] = reading_score(result, path)
            rows.append(row)
    seconds = (time.perf_counter() - start) / max(len(rows), 1)
    summary = {}
    groups = defaultdict(list)
    for row in rows:
        groups[row["library"]].append(row)
        groups["all"].append(row)
    for library, group in sorted(groups.items()):
        summary[library] = {
            "count": len(group),
            "read": float(np.mean([r["read"] for r in group])),
            "calibrated": float(np.mean([r["calibrated"] for r in group])),
            "labelled": int(sum(r["labelled"] for r in group)),
            "calibrated_of_labelled": float(
                np.mean([r["calibrated"] for r in group if r["labelled"]] or [np.nan])
            ),
            "median_curve_error_pct": float(np.median([r["curve_error"] for r in group])),
            "median_curve_error_pct_calibrated": float(
                np.median([r["curve_error"] for r in group if r["calibrated"]] or [np.nan])
            ),
            "mean_line_score": float(np.mean([r["line_score"] for r in group])),
        }
    result = {
        "splits": args.split,
        "cpu_model": cpu_model(),
        "seconds_per_chart": seconds,
        "libraries": summary,
        "charts": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({"seconds_per_chart": seconds, **summary}, indent=1))


if __name__ == "__main__":
    main()
