"""What task-6b (digitize/line_score.py) a reader that knows each chart's true series would score
reading it one point per pixel column, as digitize's tracer does: how much of the score the pixel
grid itself costs, apart from reading the axes and the curves.

    python -m linefuse.digitize.sets dev FOLDER
    python benchmarks/line_score_ceiling.py FOLDER [--out FILE.json]

Each true series (the sidecar's CSV, in view; log axes in decades, as the score reads them) is
read at the centre of every pixel column of the plot box: its value there (`point`), rounded to
whole pixel rows (`whole_px`), and its mean over the column (`column_mean`, what a line drawn
over the column's points and read at its centre holds at best); and from the chart's pixels
(`rendered_ink`): the ink-weighted centre of the series' colour (digitize's series_ink) near the
true curve in each column (within half a line width and 1.5 px of the rows it spans there),
which is digitize's reading with the path, the colour and the axes known, so what the drawing
itself costs (anti-aliasing, noise finer than the line, crossings). Writes each reader's mean
task-6b with evaluate's bootstrap interval over charts (eval.interval), and the share of charts
at 0.95 or more.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from linefuse.data.images import load_rgb
from linefuse.digitize.curves import _rgb255, on_axis, plot_background, series_ink
from linefuse.digitize.line_score import line_score
from linefuse.digitize.score import read_sidecar
from linefuse.evaluate.intervals import mean_interval
from linefuse.hardware import cpu_model
from linefuse.params.full import load_params

READERS = ("point", "whole_px", "column_mean", "rendered_ink")
SUBSAMPLES = 9  # points a column's mean is taken over
REACH_PX = 1.5  # beyond half a line width around the rows a true curve spans in a column
MIN_INK = 0.3  # line widths of ink a column needs to show the series


def read_as(reader: str, side: dict, truth_x: np.ndarray, truth_y: np.ndarray) -> tuple:
    """One true series read one point per pixel column by `reader`: (x, y) in the score's units."""
    left, top, right, bottom = (float(v) for v in side["plot_box"])
    x_left, x_right = (float(v) for v in side["xlim"])
    low, high = (float(v) for v in on_axis(side, "y", side["ylim"]))
    centres = np.arange(np.ceil(left), np.floor(right)) + 0.5
    x = x_left + (centres - left) / (right - left) * (x_right - x_left)
    if reader == "column_mean":
        step = (x_right - x_left) / (right - left)
        fine = x[:, None] + np.linspace(-0.5, 0.5, SUBSAMPLES)[None, :] * step
        return x, np.interp(fine, truth_x, truth_y).mean(axis=1)
    y = np.interp(x, truth_x, truth_y)
    if reader == "whole_px":
        rows = np.round(bottom - (y - low) / (high - low) * (bottom - top))
        y = low + (bottom - rows) / (bottom - top) * (high - low)
    return x, y


def read_rendered(
    image: np.ndarray, side: dict, series: dict, truth_x: np.ndarray, truth_y: np.ndarray
) -> tuple:
    """One true series read from the chart's pixels (`rendered_ink`): (x, y) in the score's units,
    the columns that show too little of its colour left out."""
    left, top, right, bottom = (float(v) for v in side["plot_box"])
    x_left, x_right = (float(v) for v in side["xlim"])
    low, high = (float(v) for v in on_axis(side, "y", side["ylim"]))
    box = image[round(top) : round(bottom), round(left) : round(right)]
    colour = np.array(_rgb255(series["color"]), dtype=np.float32)
    ink = series_ink(image.astype(np.float32), plot_background(box), colour)[0]
    columns = np.arange(np.ceil(left + 2), np.floor(right - 2))
    step = (x_right - x_left) / (right - left)
    fine = x_left + (columns[:, None] + np.linspace(0, 1, SUBSAMPLES)[None, :] - left) * step
    rows = bottom - (np.interp(fine, truth_x, truth_y) - low) / (high - low) * (bottom - top)
    width = float(series["linewidth_px"])
    all_rows = np.arange(image.shape[0])[:, None] + 0.5
    near = (all_rows >= rows.min(axis=1) - width / 2 - REACH_PX) & (
        all_rows <= rows.max(axis=1) + width / 2 + REACH_PX
    )
    weights = np.where(near, ink[:, columns.astype(int)], 0.0)
    shown = weights.sum(axis=0) >= MIN_INK * width
    centres = (weights * all_rows).sum(axis=0)[shown] / weights.sum(axis=0)[shown]
    x = x_left + (columns[shown] + 0.5 - left) * step
    return x, low + (bottom - centres) / (bottom - top) * (high - low)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="charts with their sidecars and CSVs")
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/line_score_ceiling.json")
    )
    args = parser.parse_args()
    scores: dict[str, list[float]] = {reader: [] for reader in READERS}
    charts = sorted(args.folder.glob("chart_*.png"))
    for png in charts:
        side, truth_x, columns = read_sidecar(png)
        x_low, x_high = sorted(float(v) for v in side["xlim"])
        in_view = (truth_x >= x_low) & (truth_x <= x_high)
        drawn = [s for s in side["series"] if s.get("column") in columns]
        truths = [
            (truth_x[in_view], on_axis(side, "y", columns[s["column"]][in_view])) for s in drawn
        ]
        image = load_rgb(png)
        for reader in READERS:
            if reader == "rendered_ink":
                read = [
                    read_rendered(image, side, s, *t) for s, t in zip(drawn, truths, strict=True)
                ]
            else:
                read = [read_as(reader, side, *truth) for truth in truths]
            scores[reader].append(line_score(read, truths))
    params = load_params()
    summary = {
        reader: mean_interval(values, params.eval.interval, params.eval.seed)
        | {"share_at_least_0.95": float(np.mean(np.array(values) >= 0.95))}
        for reader, values in scores.items()
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {"cpu_model": cpu_model(), "charts": args.folder.name, "summary": summary}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
