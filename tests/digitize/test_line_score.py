"""CHART-Info's task-6b line score (digitize/line_score.py): the series matched one to one, each
pair the F-measure of the points' precision and recall, a series read twice or invented
counting 0; and score() carrying it beside the curve error, read from a chart's sidecar."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from linefuse.digitize.calibrate import Tick, fit_axis
from linefuse.digitize.chart import Digitized, Series, Unreadable
from linefuse.digitize.line_score import line_score, pair_score
from linefuse.digitize.score import MISSED, read_sidecar, reading_score, score

FIXTURES = Path(__file__).parent / "fixtures"
X = np.linspace(0.0, 10.0, 51)
PEAK = (X, 5.0 + 3.0 * np.exp(-((X - 4.0) ** 2)))
RAMP = (X, 1.0 + 0.5 * X)


def test_a_perfect_read_scores_1():
    assert line_score([PEAK], [PEAK]) == pytest.approx(1.0)
    assert line_score([PEAK, RAMP], [PEAK, RAMP]) == pytest.approx(1.0)


def test_the_series_are_matched_one_to_one_whatever_their_order():
    assert line_score([RAMP, PEAK], [PEAK, RAMP]) == pytest.approx(1.0)


def test_a_series_read_twice_counts_once():
    """Two reads of one true series: one is matched, the other scores 0, over max(2, 1)."""
    assert line_score([PEAK, PEAK], [PEAK]) == pytest.approx(0.5)


def test_an_invented_series_and_a_missed_one_lower_the_score():
    invented = (X, np.full_like(X, 40.0))
    assert line_score([PEAK, RAMP, invented], [PEAK, RAMP]) == pytest.approx(2 / 3)
    assert line_score([PEAK], [PEAK, RAMP]) == pytest.approx(0.5)
    assert line_score([], [PEAK]) == 0.0


def test_an_offset_of_1_percent_of_the_range_costs_as_the_formula_says():
    """Error_i = min(1, |v_i - I(P, u_i)| / (|v_i| + eps)), eps = 1 % of the true y range, the
    points weighted by their intervals (0.5, 1, 0.5 over a span of 2): relative to the true
    value, so 1 % of the range costs 0.1 % on a series near 10 and half on a baseline at 0."""
    x, eps = np.array([0.0, 1.0, 2.0]), 0.01  # the true series' range is 1

    def error(value: float) -> float:  # of an offset of 0.01 at a true (or read) value
        return min(1.0, 0.01 / (abs(value) + eps))

    scores = []
    for low, high in ((10.0, 11.0), (0.0, 1.0)):
        truth = np.array([low, high, low])
        found = pair_score((x, truth + 0.01), (x, truth))
        recall = 1 - (0.5 * error(low) * 2 + error(high)) / 2
        precision = 1 - (0.5 * error(low + 0.01) * 2 + error(high + 0.01)) / 2  # read vs true
        f_measure = 2 * precision * recall / (precision + recall)
        assert found["recall"] == pytest.approx(recall, abs=1e-12)
        assert found["precision"] == pytest.approx(precision, abs=1e-12)
        assert found["score"] == pytest.approx(f_measure, abs=1e-12)
        assert line_score([(x, truth + 0.01)], [(x, truth)]) == pytest.approx(f_measure)
        scores.append(found["score"])
    assert scores[0] == pytest.approx(0.99905, abs=1e-5)
    assert scores[1] == pytest.approx(0.59487, abs=1e-5)  # recall 0.4950, precision 0.7451


def test_a_series_read_over_half_the_range_recalls_half():
    """Read over x in [0, 0.5] of a true series that steps from 1 to 0 after 0.5: beyond its end
    the read series' last value (1) stands, wrong by the whole step, so the true points there
    score 0; recall is the covered share of the span, precision 1."""
    x = np.linspace(0.0, 1.0, 101)
    truth = np.where(x <= 0.5, 1.0, 0.0)
    covered = x <= 0.5
    found = pair_score((x[covered], truth[covered]), (x, truth))
    assert found["recall"] == pytest.approx(0.505)  # 0.005 + 50 intervals of 0.01, over 1
    assert found["precision"] == pytest.approx(1.0)
    assert found["score"] == pytest.approx(2 * 0.505 / 1.505)


def _axis(name: str, sidecar: dict):
    """An axis fitted to four ticks drawn where the sidecar's mapping puts them."""
    left, top, right, bottom = sidecar["plot_box"]
    low, high = sidecar["xlim" if name == "x" else "ylim"]
    start, end = (left, right) if name == "x" else (bottom, top)
    values = np.linspace(low, high, 6)[1:5].round(0)
    pixels = start + (values - low) / (high - low) * (end - start)
    ticks = [
        Tick(float(p), float(v), str(int(v)), (p - 5, 0, p + 5, 8), i)
        for i, (p, v) in enumerate(zip(pixels, values, strict=True))
    ]
    return fit_axis(name, ticks)


def test_score_reads_the_truth_from_the_sidecar_and_its_csv():
    """A chart's true series read back exactly score 1; read twice, 0.5; not read, 0."""
    png = FIXTURES / "chart_00005.png"
    sidecar, x, columns = read_sidecar(png)
    axes = _axis("x", sidecar), _axis("y", sidecar)
    assert None not in axes
    series = [Series((0.0, 0.0, 0.0), False, x, y) for y in columns.values()]
    exact = Digitized(tuple(sidecar["plot_box"]), *axes, series)
    assert score(exact, png)["line_score"] == pytest.approx(1.0)
    twice = Digitized(tuple(sidecar["plot_box"]), *axes, series + series)
    assert score(twice, png)["line_score"] == pytest.approx(0.5)
    calibrated, error, line = reading_score(exact, png)
    assert calibrated and error == pytest.approx(0.0) and line == pytest.approx(1.0)
    assert reading_score(Unreadable("no axes"), png) == (False, MISSED, 0.0)
    assert len(columns) == len(json.loads(png.with_suffix(".json").read_text())["series"])
