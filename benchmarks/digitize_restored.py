"""Digitize charts blurred, restored and sharp: a built project's splits (by default val, which
evaluate does not report), or a chart set of digitize's own (linefuse.digitize.sets: `dev` and
`dev2`, which its rules are decided on, or `report`, read once every decision is made).

    python benchmarks/digitize_restored.py [--splits val | --set dev|dev2|report [--library NAME]
        [--charts N] [--seed N] [--every descending|log|offset|offset_x] [--dpi LOW HIGH]]
        [--levels medium hard] [--alone] [--out FILE.json]

Run in a project that `make repro` built (with --set and --levels given empty, sharp charts
only, no build needed); a set is drawn once into .linefuse/digitize_sets/. A dev set drawn with
another --seed is a development set of its own (docs/experiments.md names the ones rules were
decided on). --every draws every chart of a set with axes of one kind: a dev set's, a
development set of its own; the report set's, the report of that kind on as many charts as the
set has (the plain set draws each kind on a share of them, too few to report a share of 90 %).
--dpi draws a set's charts at LOW to HIGH dpi instead of the recipe's (the same figures, in
inches, at 2 or 3 times the pixels: a print export's 300 dpi), unbounded by data.charts.max_px.
Each whole chart is degraded in every domain at each level as `shard` degrades it (its seed),
straightened (eval.deskew) and restored by the run's final adapter at eval.steps, as evaluate
does with its test charts. The input, the restoration (read with the input it came from, as
`linefuse digitize` reads it; with --alone, also without, as kind model_alone) and the sharp
chart are digitized with no sidecar and scored against it (calibrated: both axes within 1% of
their range at every tick used; curve error in % of the y range, an unread chart counting 100;
CHART-Info's task-6b line score, the field's, digitize/line_score.py, an unread chart scoring
0). Writes, per level and library, the images' count, the share calibrated, the median curve
error and the mean line score of each kind, and the share of images whose restoration reads with
a lower error than their input; and the same for the charts that draw tick labels on both axes
(`labelled/`), and for those with a descending x, a log y, an offset y or an offset x
(`axes:KIND/`; offset and offset_x only for a set, whose plans say it). Each image's row
(chart, kind, level, domain, scores) goes beside FILE.json, gzip-packed, into
FILE.images.json.gz: a tenth of the size, so the results a lent GPU machine is sent stay small.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl

from linefuse import paths
from linefuse.data.charts import generate
from linefuse.data.charts.plan import plan_axes
from linefuse.data.degrade import degrade, item_rng
from linefuse.data.deskew import straighten
from linefuse.data.images import load_rgb
from linefuse.digitize.chart import digitize_many
from linefuse.digitize.score import reading_score
from linefuse.digitize.sets import CHART_SETS
from linefuse.hardware import cpu_model
from linefuse.inference.restorer import Restorer
from linefuse.params.data import LIBRARIES
from linefuse.params.full import load_params

IMAGES_SUFFIX = ".images.json.gz"  # each image's row, beside the summary
# --every: the data.charts knob that draws every chart of a set with axes of that kind
EVERY = {
    "descending": "descending_x_prob",
    "log": "log_y_prob",
    "offset": "offset_y_prob",
    "offset_x": "offset_x_prob",
}
UNBOUNDED_PX = 8192  # --dpi's max_px: data.charts' largest (params/data.py)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", nargs="*", default=["val"])
    parser.add_argument("--set", choices=sorted(CHART_SETS), help="a chart set, not splits")
    parser.add_argument(
        "--library", choices=LIBRARIES, help="the set's charts all drawn by this library"
    )
    parser.add_argument("--charts", type=int, help="the set's first charts only")
    parser.add_argument("--seed", type=int, help="a dev set drawn with this seed instead")
    parser.add_argument(
        "--every", choices=sorted(EVERY), help="the set's every chart drawn with axes of this kind"
    )
    parser.add_argument(
        "--dpi", nargs=2, type=int, metavar=("LOW", "HIGH"), help="the set drawn at this dpi"
    )
    parser.add_argument("--levels", nargs="*", default=["medium", "hard"])
    parser.add_argument("--alone", action="store_true", help="also read restorations alone")
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/digitize_restored.json")
    )
    args = parser.parse_args()
    if args.seed is not None and args.set not in ("dev", "dev2"):
        parser.error("--seed draws a dev set of its own: give --set dev or dev2")
    if (args.every or args.dpi) and args.set is None:
        parser.error("--every and --dpi draw a chart set: give --set dev, dev2 or report")
    params = load_params()
    restorer = None
    if args.levels:
        restorer = Restorer.from_params(params, paths.adapter(params.train.restoring_level()))
    rows = []
    recipe = {"seed": args.seed} if args.seed is not None else {}
    recipe |= {EVERY[args.every]: 1.0} if args.every else {}
    recipe |= {"dpi": tuple(args.dpi), "max_px": UNBOUNDED_PX} if args.dpi else {}
    charts = _charts(params, args.set, args.splits, args.library, args.charts, recipe)
    for image_id, source, split, tags in charts:
        rel = source.name
        sharp = load_rgb(source)
        library = json.loads(source.with_suffix(".json").read_text())["library"]
        images = {("sharp", "-"): sharp}
        for level in args.levels:
            for domain in params.degrade.domains:
                rng = item_rng(params.degrade.seed, image_id, domain, level)
                blurred, _ = degrade(sharp, domain, params.degrade.level(domain, level), rng)
                images[("input", level, domain)] = straighten(blurred, params.eval.deskew)
        inputs = [key for key in images if key[0] == "input"]
        restored = (
            restorer.restore_images(
                [images[key] for key in inputs], params.eval.steps, params.eval.seed
            )
            if inputs
            else []
        )
        images |= {("model", *key[1:]): image for key, image in zip(inputs, restored, strict=True)}
        if args.alone:
            images |= {("model_alone", *key[1:]): images[("model", *key[1:])] for key in inputs}
        # each restoration is read with the input it was restored from, as linefuse digitize does
        given = [images.get(("input", *key[1:])) if key[0] == "model" else None for key in images]
        read = digitize_many(list(images.values()), given)
        for key, result in zip(images, read, strict=True):
            calibrated, error, line = reading_score(result, source)
            row = {"chart": rel, "split": split, "library": library, "kind": key[0], "tags": tags}
            row |= {"level": key[1], "domain": key[2] if len(key) > 2 else "-"}
            rows.append(row | {"calibrated": calibrated, "curve_error": error, "line_score": line})
        print(f"{rel}: {len(images)} images digitized", flush=True)
    inputs_error = {
        (row["chart"], row["level"], row["domain"]): row["curve_error"]
        for row in rows
        if row["kind"] == "input"
    }
    groups = defaultdict(list)
    for row in rows:
        for library in (row["library"], "all"):
            groups[f"{row['level']}/{row['kind']}/{library}"].append(row)
        for tag in row["tags"]:
            groups[f"{tag}/{row['level']}/{row['kind']}"].append(row)
    summary = {
        name: {
            "count": len(group),
            "calibrated": float(np.mean([r["calibrated"] for r in group])),
            "median_curve_error_pct": float(np.median([r["curve_error"] for r in group])),
            "mean_line_score": float(np.mean([r["line_score"] for r in group])),
        }
        | _lowered(group, inputs_error)
        for name, group in sorted(groups.items())
    }
    source = f"set {args.set}" if args.set else f"splits {' '.join(args.splits)}"
    source += "".join(f", {key} {value}" for key, value in recipe.items())
    source += f", drawn by {args.library}" if args.library else ""
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows_file = args.out.with_suffix(IMAGES_SUFFIX)
    rows_file.write_bytes(gzip.compress(json.dumps(rows).encode(), mtime=0))
    result = {
        "cpu_model": cpu_model(),
        "charts": source,
        "summary": summary,
        "images": rows_file.name,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


def _charts(params, chart_set: str | None, splits: list[str], library, count, recipe: dict):
    """(image id, PNG path, split or set name, tags) of each chart read: a set's (its recipe
    updated by `recipe`), drawn once into .linefuse/digitize_sets/NAME-KEY (KEY: its recipe's
    and the drawers' code's hash), or the built project's splits'."""
    if chart_set is None:
        index = pl.read_parquet(paths.IMAGES_PARQUET).filter(pl.col("split").is_in(splits))
        root = Path(params.data.source_dir)
        for image_id, rel, split in index.select("id", "path", "split").iter_rows():
            yield image_id, root / rel, split, _tags(root / rel, None)
        return
    charts = CHART_SETS[chart_set](params)
    charts = charts.model_copy(update={"count": count or charts.count} | recipe)
    if library is not None:  # the same plans, drawn by another library
        charts = charts.model_copy(update={"libraries": {library: 1.0}})
    drawers = sorted(Path(generate.__code__.co_filename).parent.glob("*.py"))
    recipe = hashlib.sha256(
        charts.model_dump_json().encode() + b"".join(p.read_bytes() for p in drawers)
    ).hexdigest()[:16]
    folder = paths.DIGITIZE_SETS_ROOT / f"{chart_set}{'-' + library if library else ''}-{recipe}"
    if not (folder / "complete").exists():
        folder.mkdir(parents=True, exist_ok=True)
        generate(charts, folder, workers=2)
        (folder / "complete").touch()
    for index in range(charts.count):
        source = folder / f"chart_{index:05d}.png"
        yield f"{chart_set}-{index}", source, chart_set, _tags(source, plan_axes(charts, index))


def _tags(source: Path, axes) -> list[str]:
    """The groups a chart is also counted in: `labelled` when it draws tick labels on both
    axes, and `axes:descending`, `axes:log`, `axes:offset`, `axes:offset_x` by what its axes
    are."""
    sidecar = json.loads(source.with_suffix(".json").read_text())
    tags = []
    if {label["axis"] for label in sidecar["tick_labels"]} == {"x", "y"}:
        tags.append("labelled")
    drawn = sidecar.get("axes", {})
    if drawn.get("x", {}).get("direction") == "descending":
        tags.append("axes:descending")
    if drawn.get("y", {}).get("scale") == "log":
        tags.append("axes:log")
    if axes is not None and axes.power:
        tags.append("axes:offset")
    if axes is not None and axes.x_power:
        tags.append("axes:offset_x")
    return tags


def _lowered(group: list[dict], inputs_error: dict) -> dict:
    """For restorations: the share of images read with a lower curve error than their input."""
    if not group[0]["kind"].startswith("model"):
        return {}
    lower = [r["curve_error"] < inputs_error[(r["chart"], r["level"], r["domain"])] for r in group]
    return {"restoring_lowers_error": float(np.mean(lower))}


if __name__ == "__main__":
    main()
