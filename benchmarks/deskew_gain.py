"""What undoing a scan's geometry buys the default run's model: three ways, one run.

Reads the default run's outputs (`make repro` first: data/shards, models/base, the last
curriculum adapter) and restores every test and held-out input of every level with the final
adapter, eval.steps DDIM steps, three ways:
- as drawn: the input itself (eval.deskew never);
- estimated: straightened as evaluate, restore and serve do (eval.deskew auto);
- oracle: the scan's drawn rotation and shear undone exactly (scan inputs only).
Per split, level and domain: the mean PSNR gain over the input as drawn, with its sample count
and evaluate's bootstrap interval; and the sharp charts through the model with and without the
step (do no harm). Also the step's seconds per megapixel on this CPU (named in the report). Writes
benchmarks/results/deskew_gain.json.

    python benchmarks/deskew_gain.py
"""

from __future__ import annotations

import json
import time
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from linefuse import paths
from linefuse.data import deskew
from linefuse.data.readers import LmdbPairs
from linefuse.evaluate.intervals import mean_interval
from linefuse.evaluate.metrics import psnr
from linefuse.hardware import choose_device, cpu_model
from linefuse.inference.restorer import Restorer
from linefuse.params.full import load_params

REPO = Path(__file__).resolve().parents[1]
WAYS = ("as_drawn", "estimated", "oracle")


def _estimated(image: np.ndarray) -> np.ndarray:
    return deskew.straighten(image, "auto")


def _oracle(image: np.ndarray, meta: dict) -> np.ndarray:
    drawn = meta["params"]
    skew = deskew.Skew(drawn["rotation"], drawn["shear_x"], 0.0, 1.0)
    return deskew.undo(image, skew)


def main() -> None:
    params = load_params(REPO / "params.yaml")
    restorer = Restorer.from_params(
        params,
        paths.adapter(params.train.restoring_level()),
        choose_device(params.compute.device).value,
    )
    steps, seed, batch, metric = (
        params.eval.steps,
        params.eval.seed,
        params.eval.batch_size,
        params.eval.metric,
    )

    def summary(gains: list[float]) -> dict:  # evaluate's bootstrap interval, its settings
        return mean_interval(gains, params.eval.interval, params.eval.seed)

    report = {"cpu": cpu_model(), "steps": steps, "cells": {}, "sharp": {}}
    sharp_images, seconds, pixels = {}, 0.0, 0
    with get_context("fork").Pool(2) as pool:
        for level in params.degrade.levels:
            for split in ("test", "held_out"):
                data = LmdbPairs(paths.shards(level), split)
                pairs = [data[i] for i in range(len(data))]
                data.close()
                blurred = [pair[0] for pair in pairs]
                started = time.perf_counter()
                inputs = {"as_drawn": blurred, "estimated": pool.map(_estimated, blurred)}
                seconds += time.perf_counter() - started
                pixels += sum(image.shape[0] * image.shape[1] for image in blurred)
                scan = [i for i, pair in enumerate(pairs) if pair[2]["domain"] == "scan"]
                oracle = list(blurred)
                for i in scan:
                    oracle[i] = _oracle(blurred[i], pairs[i][2])
                inputs["oracle"] = oracle
                restored = {
                    way: restorer.restore_images(images, steps, seed, batch)
                    for way, images in inputs.items()
                }
                cells: dict[str, dict[str, list[float]]] = {}
                for i, (image, sharp, meta) in enumerate(pairs):
                    sharp_images.setdefault((split, meta["image_id"]), sharp)
                    before = psnr(image, sharp, metric)
                    ways = WAYS if meta["domain"] == "scan" else WAYS[:2]
                    cell = cells.setdefault(meta["domain"], {way: [] for way in ways})
                    for way in ways:
                        cell[way].append(psnr(restored[way][i], sharp, metric) - before)
                    moved = cells[meta["domain"]].setdefault("moved", [])
                    moved.append(not np.array_equal(inputs["estimated"][i], image))
                for domain, cell in cells.items():
                    report["cells"][f"{split}/{level}/{domain}"] = {
                        **{way: summary(gains) for way, gains in cell.items() if way != "moved"},
                        "moved_by_auto": int(sum(cell["moved"])),
                    }
                print(
                    level,
                    split,
                    {d: report["cells"][f"{split}/{level}/{d}"] for d in cells},
                    flush=True,
                )
        for split in ("test", "held_out"):
            sharp = [image for (part, _), image in sharp_images.items() if part == split]
            straight = pool.map(_estimated, sharp)
            ways = {"as_drawn": sharp, "estimated": straight}
            report["sharp"][split] = {
                way: summary(
                    [
                        psnr(out, truth, metric)
                        for out, truth in zip(
                            restorer.restore_images(images, steps, seed, batch), sharp, strict=True
                        )
                    ]
                )
                for way, images in ways.items()
            }
            report["sharp"][split]["moved_by_auto"] = int(
                sum(not np.array_equal(a, b) for a, b in zip(sharp, straight, strict=True))
            )
    report["estimate_seconds_per_megapixel_2_workers"] = round(seconds / pixels * 1e6, 3)
    out = REPO / "benchmarks/results/deskew_gain.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["sharp"], indent=2))


if __name__ == "__main__":
    main()
