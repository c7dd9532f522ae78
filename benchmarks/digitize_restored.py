"""Digitize the val charts of a built project blurred, restored and sharp: the split that
digitize's rules are tuned on (evaluate reports test and held-out).

    python benchmarks/digitize_restored.py [--levels medium hard] [--out FILE.json]

Run in a project that `make repro` built. Each whole val chart is degraded in every domain at
each level as `shard` degrades it (its seed), straightened (eval.deskew) and restored by the
run's final adapter at eval.steps, as evaluate does with its test charts. The input, the
restoration and the sharp chart are digitized with no sidecar and scored against it (calibrated:
both axes within 1% of their range at every tick used; curve error in % of the y range, an
unread chart counting 100). Writes, per level and library, the charts' count, the share
calibrated and the median curve error of each.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl

from linefuse import paths
from linefuse.data.degrade import degrade, item_rng
from linefuse.data.deskew import straighten
from linefuse.data.images import load_rgb
from linefuse.digitize.chart import digitize_many
from linefuse.digitize.score import reading_score
from linefuse.hardware import cpu_model
from linefuse.inference.restorer import Restorer
from linefuse.params.full import load_params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", nargs="*", default=["medium", "hard"])
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/digitize_restored.json")
    )
    args = parser.parse_args()
    params = load_params()
    restorer = Restorer.from_params(params, paths.adapter(params.train.restoring_level()))
    index = pl.read_parquet(paths.IMAGES_PARQUET).filter(pl.col("split") == "val")
    root = Path(params.data.source_dir)
    rows = []
    for image_id, rel in index.select("id", "path").iter_rows():
        source = root / rel
        sharp = load_rgb(source)
        library = json.loads(source.with_suffix(".json").read_text())["library"]
        images = {("sharp", "-"): sharp}
        for level in args.levels:
            for domain in params.degrade.domains:
                rng = item_rng(params.degrade.seed, image_id, domain, level)
                blurred, _ = degrade(sharp, domain, params.degrade.level(domain, level), rng)
                images[("input", level, domain)] = straighten(blurred, params.eval.deskew)
        inputs = [key for key in images if key[0] == "input"]
        restored = restorer.restore_images(
            [images[key] for key in inputs], params.eval.steps, params.eval.seed
        )
        images |= {("model", *key[1:]): image for key, image in zip(inputs, restored, strict=True)}
        for key, result in zip(images, digitize_many(list(images.values())), strict=True):
            calibrated, error = reading_score(result, source)
            row = {"chart": rel, "library": library, "kind": key[0], "level": key[1]}
            rows.append(row | {"calibrated": calibrated, "curve_error": error})
        print(f"{rel}: {len(images)} images digitized", flush=True)
    groups = defaultdict(list)
    for row in rows:
        for library in (row["library"], "all"):
            groups[f"{row['level']}/{row['kind']}/{library}"].append(row)
    summary = {
        name: {
            "count": len(group),
            "calibrated": float(np.mean([r["calibrated"] for r in group])),
            "median_curve_error_pct": float(np.median([r["curve_error"] for r in group])),
        }
        for name, group in sorted(groups.items())
    }
    result = {"cpu_model": cpu_model(), "summary": summary, "images": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
