"""What adapting to a user's charts buys: the curriculum's adapt gain (the adapted model's PSNR
minus the base's alone, at eval.steps) on chart sets the base never trained on, against steps,
learning rate and where LoRA goes.

Two sets stand in for a user's folder:
- `held_out`: the held-out style family (data.charts.held_out) drawn as the whole set, so the
  curriculum trains on its train split and is scored on its test split;
- `drawn`: charts drawn outside the base's ranges (base.chart_overrides): thick lines, large
  print, small figures at a high dpi, most of them with several panels.

For each set the data half, embed and pretrain (a copy of the shipped base) run once in a
temporary project, in-process, with the repo's params.yaml (the default run). Then for each point
the three curriculum levels train from the base, and the base alone and the adapter restore the
test split of every level. Results go to benchmarks/results/adapt-<device>.json after each point;
a rerun skips the points already there.

    python benchmarks/adapt.py [--sets held_out drawn] [--steps 80 320] [--lr 5e-4]
        [--rank 8] [--blocks decoder] [--unfreeze none medium] [--replay on off]
        [--ordered on off] [--charts 100] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from contextlib import chdir
from pathlib import Path

import numpy as np
import yaml

from linefuse import paths
from linefuse.base.land import DRAWN_UNLIKE
from linefuse.cli import main
from linefuse.data.readers import LmdbPairs
from linefuse.evaluate.intervals import mean_interval, mean_of_means_interval
from linefuse.evaluate.metrics import psnr
from linefuse.hardware import choose_device, machine_summary
from linefuse.inference.restorer import Restorer
from linefuse.params.full import Params, load_params

REPO = Path(__file__).resolve().parents[1]
SETS = {
    "held_out": {"families": {"magazine": ["Solarize_Light2", "fivethirtyeight"]}, "held_out": []},
    "drawn": DRAWN_UNLIKE,
}
# train.lora.blocks: the default high-resolution decoder, or every block ([])
BLOCKS = {"decoder": None, "all": []}
# train.unfreeze, the hybrid: none, or from this level on the high-resolution decoder trains fully
UNFREEZE_BLOCKS = ["up_blocks.1", "up_blocks.2"]


def run(*argv: str) -> None:
    assert main(list(argv)) == 0, argv


def write_params(project: Path, params: dict) -> None:
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def build(project: Path, params: dict) -> None:
    """The set's data half, embeddings and base (pretrain copies the shipped one)."""
    write_params(project, params)
    with chdir(project):
        run("generate")
        run("index")
        for level in params["degrade"]["levels"]:
            run("shard", "--level", level)
            run("embed", "--level", level)
        run("pretrain")


def test_pairs(levels: list[str]) -> dict[str, list]:
    """{level: [(blurred, sharp, meta)] of its test split}."""
    found = {}
    for level in levels:
        dataset = LmdbPairs(paths.shards(level), "test")
        found[level] = [dataset[i] for i in range(len(dataset))]
        dataset.close()
    return found


def cell_psnr(images: dict[str, list] | None, pairs: dict[str, list], params: Params) -> dict:
    """{(domain, level): [PSNR of each test image]}: of `images` {level: [restored]}, or of the
    blurred input where None."""
    found: dict[tuple, list] = {}
    for level, items in pairs.items():
        outputs = images[level] if images else [blurred for blurred, _, _ in items]
        for image, (_, sharp, meta) in zip(outputs, items, strict=True):
            found.setdefault((meta["domain"], level), []).append(
                psnr(image, sharp, params.eval.metric)
            )
    return found


def restored(restorer: Restorer, pairs: dict[str, list], params: Params) -> dict[str, list]:
    steps, seed = params.eval.steps, params.eval.seed
    return {
        level: restorer.restore_images([b for b, _, _ in items], steps, seed)
        for level, items in pairs.items()
    }


def scores(base: dict, adapted: dict, blurred: dict, settings) -> dict:
    """Per cell the base's gain over the input and the adapter's over the base, per domain their
    means, and the mean over cells of the adapt gain with its interval."""
    cells = {
        f"{domain} {level}": {
            "base_gain": round(float(np.mean(base[key]) - np.mean(blurred[key])), 4),
            "adapt_gain": mean_interval(np.subtract(adapted[key], base[key]).tolist(), settings, 0),
        }
        for key in sorted(base)
        for domain, level in [key]
    }
    adapt = [np.subtract(adapted[key], base[key]).tolist() for key in sorted(base)]
    by_domain = {}
    for domain in sorted({d for d, _ in base}):
        mine = [cell for name, cell in cells.items() if name.startswith(f"{domain} ")]
        by_domain[domain] = {
            "base_gain": round(float(np.mean([c["base_gain"] for c in mine])), 4),
            "adapt_gain": round(float(np.mean([c["adapt_gain"]["mean"] for c in mine])), 4),
        }
    return {
        "adapt_gain_db": mean_of_means_interval(adapt, settings, 0),
        "min_cell_adapt_gain_db": min(c["adapt_gain"]["mean"] for c in cells.values()),
        "by_domain": by_domain,
        "cells": cells,
    }


# the keys a point holds only where they differ from the default run's (older points lack them)
OPTIONAL = ("unfreeze", "replay", "ordered")


def same_point(point: dict, done: dict) -> bool:
    """Whether `done` measured `point`."""
    return all(done.get(k) == v for k, v in point.items()) and all(
        done.get(k) == point.get(k) for k in OPTIONAL
    )


def train_point(project: Path, params: dict, point: dict) -> float:
    """Trains the curriculum with the point's steps, lr, rank, blocks, hybrid, replay and order;
    returns its seconds."""
    for level in params["train"]["curriculum"].values():
        level.update(steps=point["steps_per_level"], lr=point["lr"])
    lora = params["train"]["lora"]
    lora.update(rank=point["rank"], alpha=point["rank"])
    if BLOCKS[point["blocks"]] is not None:
        lora["blocks"] = BLOCKS[point["blocks"]]
    if "unfreeze" in point:
        params["train"]["unfreeze"] = {"level": point["unfreeze"], "blocks": UNFREEZE_BLOCKS}
    for key in ("replay", "ordered"):
        params["train"][key] = point.get(key, params["train"][key])
    write_params(project, params)
    started = time.perf_counter()
    with chdir(project):
        for level in params["train"]["curriculum"]:
            run("train", "--level", level)
    return time.perf_counter() - started


def main_benchmark() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    parser.add_argument("--steps", nargs="+", type=int, default=[80, 320])
    parser.add_argument("--lr", nargs="+", type=float, default=[5e-4])
    parser.add_argument("--rank", nargs="+", type=int, default=[8])
    parser.add_argument("--blocks", nargs="+", default=["decoder"], choices=list(BLOCKS))
    parser.add_argument("--unfreeze", nargs="+", default=["none"])
    parser.add_argument("--replay", nargs="+", default=["on"], choices=["on", "off"])
    parser.add_argument("--ordered", nargs="+", default=["on"], choices=["on", "off"])
    parser.add_argument("--charts", type=int, default=100)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out or REPO / f"benchmarks/results/adapt-{choose_device('auto').value}.json"
    report = json.loads(out.read_text()) if out.is_file() else {"machine": machine_summary()}
    grid = [
        {"steps_per_level": s, "lr": lr, "rank": r, "blocks": b}
        | ({} if level == "none" else {"unfreeze": level})
        | ({} if replay == "on" else {"replay": False})
        | ({} if ordered == "on" else {"ordered": False})
        for s in args.steps
        for lr in args.lr
        for r in args.rank
        for b in args.blocks
        for level in args.unfreeze
        for replay in args.replay
        for ordered in args.ordered
    ]
    for name in args.sets:
        entry = report.setdefault(name, {"overrides": SETS[name], "charts": args.charts})
        points = entry.setdefault("points", [])
        todo = [p for p in grid if not any(same_point(p, done) for done in points)]
        if not todo:
            continue
        params = yaml.safe_load((REPO / "params.yaml").read_text())
        params["data"]["charts"].update(
            count=args.charts, seed=7, held_out_fraction=0.0, **SETS[name]
        )
        with tempfile.TemporaryDirectory() as folder:
            project = Path(folder)
            build(project, params)
            with chdir(project):
                typed = load_params(paths.PARAMS)
                pairs = test_pairs(typed.degrade.levels)
                base = cell_psnr(
                    restored(Restorer.from_params(typed, None), pairs, typed), pairs, typed
                )
                blurred = cell_psnr(None, pairs, typed)
            entry["test_images"] = sum(len(v) for v in base.values())
            for point in todo:
                seconds = train_point(project, json.loads(json.dumps(params)), point)
                with chdir(project):
                    typed = load_params(paths.PARAMS)
                    adapter = Restorer.from_params(
                        typed, paths.adapter(typed.train.restoring_level())
                    )
                    adapted = cell_psnr(restored(adapter, pairs, typed), pairs, typed)
                found = scores(base, adapted, blurred, typed.eval.interval)
                points.append(point | {"train_seconds": round(seconds, 1)} | found)
                out.write_text(json.dumps(report, indent=2) + "\n")
                shown = {k: v for k, v in points[-1].items() if k != "cells"}
                print(json.dumps(shown), flush=True)


if __name__ == "__main__":
    main_benchmark()
