"""What the scan estimator's own line fit gives when it is told where every line is.

Reads the default run's outputs (`make repro` first) and, for every scan input of the test and
held-out parts at every level, finds the long lines of its sharp target (each family's lines
across half the image or more, and faint ones down to a tenth of the strongest), maps them
through the drawn rotation and shear, runs the estimator's sub-pixel fit (deskew._fit_line)
along each of them on the scan, and pools the lines' slopes as the estimator does. That is the
geometry the estimator would find if its search never missed a line and never took a curve for
one. Each input is restored with the final adapter four ways in one run (as drawn, `auto`, lines
known, the drawn geometry undone exactly); per cell the mean gain with evaluate's interval, the
lines-known rotation and shear errors, and how many inputs come out more than 1 dB under the
oracle. Writes benchmarks/results/deskew_lines_known.json.

    python benchmarks/deskew_lines_known.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy import ndimage

from linefuse import paths
from linefuse.data import deskew
from linefuse.data.readers import LmdbPairs
from linefuse.evaluate.intervals import mean_interval
from linefuse.evaluate.metrics import psnr
from linefuse.hardware import choose_device, cpu_model
from linefuse.inference.restorer import Restorer
from linefuse.params.full import load_params

REPO = Path(__file__).resolve().parents[1]
WAYS = ("as_drawn", "auto", "lines_known", "oracle")
SHARP_GAPS = deskew.STRIPS // 2  # a sharp chart's line need only cross half the image
SHARP_PEAK = 0.1  # of its strongest line's evidence: faint grid lines count too


def _lines(sharp: np.ndarray) -> list[tuple[int, int]]:
    """(edge map, row) of every long near-horizontal edge of a sharp, straight gray chart."""
    found = []
    for map_index, edge in enumerate(deskew._edge_maps(sharp)):
        evidence = deskew._long_line_evidence(deskew._Points.of(edge), 0.0, SHARP_GAPS)
        top = evidence.max()
        found += [
            (map_index, row)
            for row in range(1, len(evidence) - 1)
            if evidence[row] > SHARP_PEAK * top
            and evidence[row] >= evidence[row - 1]
            and evidence[row] > evidence[row + 1]
        ]
    return found


def _family_slope(sharp: np.ndarray, scan: np.ndarray, matrix: np.ndarray) -> float | None:
    """The pooled slope (d row / d col) of the scan's lines, each fitted where the sharp chart's
    line lands under `matrix` (scan coordinates to sharp ones, about the centre)."""
    height, width = scan.shape
    centre = np.array([(height - 1) / 2, (width - 1) / 2])
    to_scan = np.linalg.inv(matrix)
    cols = np.arange(width) - (width - 1) / 2
    edges = [ndimage.gaussian_filter1d(edge, 3.0, axis=1) for edge in deskew._edge_maps(scan)]
    fits = []
    for map_index, row in _lines(sharp):
        left, right = (to_scan @ (np.array([row, col]) - centre) for col in (0.0, width - 1.0))
        slope = (right[0] - left[0]) / (right[1] - left[1])
        at_centre = left[0] - slope * left[1] + centre[0]
        fits.append(deskew._fit_line(edges[map_index], cols, at_centre, slope))
    pooled = deskew._pooled_tilt([fit for fit in fits if fit is not None])
    return None if pooled is None else pooled[0]


def _lines_known(scan: np.ndarray, sharp: np.ndarray, drawn: dict) -> deskew.Skew | None:
    """The geometry the estimator would find on `scan` with every line of `sharp` found."""

    def gray(image: np.ndarray) -> np.ndarray:
        return ndimage.gaussian_filter(image.astype(np.float32).mean(axis=2) / 255.0, 1.0)

    scan_gray, sharp_gray = gray(scan), gray(sharp)
    matrix = deskew._scan_matrix(drawn["rotation"], drawn["shear_x"])
    swap = np.array([[0.0, 1.0], [1.0, 0.0]])  # the vertical family: the same, transposed
    rows_per_col = _family_slope(sharp_gray, scan_gray, matrix)
    cols_per_row = _family_slope(sharp_gray.T, scan_gray.T, swap @ matrix @ swap)
    if rows_per_col is None or cols_per_row is None:
        return None
    rotation_deg, shear = deskew._rotation_and_shear(rows_per_col, cols_per_row)
    return deskew.Skew(rotation_deg, shear, 0.0, 1.0)


def main() -> None:
    params = load_params(REPO / "params.yaml")
    restorer = Restorer.from_params(
        params,
        paths.adapter(params.train.restoring_level()),
        choose_device(params.compute.device).value,
    )
    report = {"cpu": cpu_model(), "steps": params.eval.steps, "cells": {}}
    for level in params.degrade.levels:
        for split in ("test", "held_out"):
            data = LmdbPairs(paths.shards(level), split)
            pairs = [data[i] for i in range(len(data))]
            data.close()
            pairs = [pair for pair in pairs if pair[2]["domain"] == "scan"]
            inputs = {way: [] for way in WAYS}
            errors = {"rotation_deg": [], "shear": []}
            for scan, sharp, meta in pairs:
                drawn = meta["params"]
                known = _lines_known(scan, sharp, drawn)
                if known is not None:
                    errors["rotation_deg"].append(abs(known.rotation_deg - drawn["rotation"]))
                    errors["shear"].append(abs(known.shear - drawn["shear_x"]))
                exact = deskew.Skew(drawn["rotation"], drawn["shear_x"], 0.0, 1.0)
                inputs["as_drawn"].append(scan)
                inputs["auto"].append(deskew.straighten(scan, "auto"))
                inputs["lines_known"].append(scan if known is None else deskew.undo(scan, known))
                inputs["oracle"].append(deskew.undo(scan, exact))
            before = np.array([psnr(scan, sharp, params.eval.metric) for scan, sharp, _ in pairs])
            gains = {}
            for way, images in inputs.items():
                restored = restorer.restore_images(
                    images, params.eval.steps, params.eval.seed, params.eval.batch_size
                )
                after = [
                    psnr(out, pair[1], params.eval.metric)
                    for out, pair in zip(restored, pairs, strict=True)
                ]
                gains[way] = np.array(after) - before
            report["cells"][f"{split}/{level}"] = {
                **{
                    way: mean_interval(list(g), params.eval.interval, params.eval.seed)
                    for way, g in gains.items()
                },
                "lines_known_found": len(errors["shear"]),
                "lines_known_error": {
                    name: {
                        "median": round(float(np.median(values)), 4),
                        "p95": round(float(np.percentile(values, 95)), 4),
                    }
                    for name, values in errors.items()
                    if values
                },
                "over_1db_under_oracle": {
                    way: int(np.sum(gains["oracle"] - gains[way] > 1.0))
                    for way in ("auto", "lines_known")
                },
            }
            print(split, level, json.dumps(report["cells"][f"{split}/{level}"]), flush=True)
    out = REPO / "benchmarks/results/deskew_lines_known.json"
    out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
