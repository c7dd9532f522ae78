"""A digitized chart scored against the sidecar and CSV it was generated with.

An axis is calibrated when, at each tick its fit used, the fitted value is within CALIBRATED of
the axis's range of the value the sidecar's mapping (plot box, limits and scale) gives there. A
series' curve error is the median, over the CSV's points in view, of |y read - y true| in % of
the y range; on a log axis both in log10 (`on_axis`), so a share of its decades. Each true
series takes the read series that fits it best, and the chart's curve error is the mean over
its true series (one never read counts as MISSED). Beside it, the field's stricter score of
the same points (line_score.py): CHART-Info's task-6b score, the series matched one to one, a
series read twice or invented counting 0.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from linefuse.digitize.calibrate import Axis
from linefuse.digitize.chart import Digitized, Unreadable
from linefuse.digitize.curves import on_axis
from linefuse.digitize.line_score import line_score

CALIBRATED = 0.01  # of the axis's range
MISSED = 100.0  # % of the y range: the curve error of a true series no read series matches


def read_sidecar(png_path: Path | str) -> tuple[dict, np.ndarray, dict[str, np.ndarray]]:
    """The sidecar beside a chart image, the CSV's wavelengths and its series by column."""
    png_path = Path(png_path)
    sidecar = json.loads(png_path.with_suffix(".json").read_text())
    with png_path.with_suffix(".csv").open(newline="") as table:
        rows = list(csv.DictReader(table))
    x = np.array([float(row["wavelength"]) for row in rows])
    order = np.argsort(x)
    columns = {
        s["column"]: np.array([float(row[s["column"]]) for row in rows])[order]
        for s in sidecar["series"]
        if s.get("column") in rows[0]
    }
    return sidecar, x[order], columns


def _limits(sidecar: dict, name: str) -> tuple[float, float]:
    """The axis' ends (left and right, or bottom and top) in on_axis units."""
    return tuple(
        float(v) for v in on_axis(sidecar, name, sidecar["xlim" if name == "x" else "ylim"])
    )


def _true_position(sidecar: dict, name: str, pixel: np.ndarray) -> np.ndarray:
    """Where the sidecar's mapping puts pixel positions along axis `name`, in on_axis units."""
    left, top, right, bottom = (float(v) for v in sidecar["plot_box"])
    low, high = _limits(sidecar, name)
    start, end = (left, right) if name == "x" else (bottom, top)
    return low + (np.asarray(pixel) - start) / (end - start) * (high - low)


def axis_error(axis: Axis, sidecar: dict) -> float:
    """The largest error of the fit at its ticks, in shares of the axis's range (on_axis)."""
    low, high = _limits(sidecar, axis.name)
    pixels = np.array([t.position for t in axis.used])
    found = on_axis(sidecar, axis.name, axis.value(pixels))
    error = np.max(np.abs(found - _true_position(sidecar, axis.name, pixels))) / abs(high - low)
    return float(error) if np.isfinite(error) else float("inf")


def curve_error(x: np.ndarray, y: np.ndarray, truth_x: np.ndarray, truth_y: np.ndarray, span):
    """Median |y read - y true| over the true points in view, in % of span; beyond the read
    series' ends its end values stand, so a series read in part is wrong on the rest."""
    if len(x) < 2 or len(truth_x) == 0:
        return MISSED
    order = np.argsort(x)
    read = np.interp(truth_x, x[order], y[order])
    return float(100.0 * np.median(np.abs(read - truth_y)) / span)


def score(digitized: Digitized, png_path: Path | str) -> dict:
    """Calibration per axis, the curve errors and the task-6b `line_score` of one chart against
    its sidecar and CSV (both over the CSV's points in view, in the sidecar's data units)."""
    sidecar, truth_x, columns = read_sidecar(png_path)
    x_error = axis_error(digitized.x_axis, sidecar)
    y_error = axis_error(digitized.y_axis, sidecar)
    low, high = _limits(sidecar, "y")
    x_low, x_high = sorted(float(v) for v in sidecar["xlim"])
    in_view = (truth_x >= x_low) & (truth_x <= x_high)
    truth_x = truth_x[in_view]
    truths = [on_axis(sidecar, "y", column[in_view]) for column in columns.values()]
    read = [(s.x, np.nan_to_num(on_axis(sidecar, "y", s.y), nan=low)) for s in digitized.series]
    errors = []
    for truth_y in truths:
        found = [curve_error(x, y, truth_x, truth_y, abs(high - low)) for x, y in read]
        errors.append(min(found, default=MISSED))
    return {
        "x_error": x_error,
        "y_error": y_error,
        "calibrated": bool(x_error <= CALIBRATED and y_error <= CALIBRATED),
        "series_errors": errors,
        "curve_error": float(np.mean(errors)) if errors else MISSED,
        "line_score": line_score(read, [(truth_x, truth_y) for truth_y in truths]),
    }


def reading_score(
    result: Digitized | Unreadable, png_path: Path | str
) -> tuple[bool, float, float]:
    """(calibrated, curve error in % of the y range, task-6b line score) of one chart digitized,
    or not: a chart it could not read is not calibrated, its curve error is MISSED and its line
    score 0."""
    if isinstance(result, Unreadable):
        return False, MISSED, 0.0
    scored = score(result, png_path)
    return scored["calibrated"], scored["curve_error"], scored["line_score"]
