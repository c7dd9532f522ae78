"""The bootstrap intervals evaluate reports: they hold the mean as often as they claim."""

from __future__ import annotations

import numpy as np
import pytest

from linefuse.evaluate.intervals import mean_interval, mean_of_means_interval
from linefuse.params.evaluation import IntervalParams

SETTINGS = IntervalParams(confidence=0.95, resamples=1000)


def test_a_95_percent_interval_holds_the_true_mean_about_95_times_in_100():
    """400 cells of 20 skewed gains (gamma, mean 2): a 95% interval that missed as often as a
    plain +-1 standard error (68%) would fail this, and so would one that never missed."""
    rng = np.random.default_rng(0)
    held = 0
    for trial in range(400):
        gains = rng.gamma(2.0, 1.0, size=20)
        cell = mean_interval(gains.tolist(), SETTINGS, seed=trial)
        held += cell["low"] <= 2.0 <= cell["high"]
    assert 0.90 <= held / 400 <= 0.99


def test_an_interval_is_about_two_standard_errors_each_side_and_narrows_with_samples():
    """On normal gains a 95% bootstrap interval is close to the textbook +-1.96 s / sqrt(n)."""
    rng = np.random.default_rng(1)
    widths = {}
    for n in (16, 64, 256):
        gains = rng.normal(5.0, 1.0, n)
        cell = mean_interval(gains.tolist(), SETTINGS, seed=0)
        assert cell["samples"] == n and cell["low"] < cell["mean"] < cell["high"]
        widths[n] = (cell["high"] - cell["low"]) / 2
        assert widths[n] == pytest.approx(1.96 * gains.std(ddof=1) / np.sqrt(n), rel=0.2)
    assert widths[16] > widths[64] > widths[256]


def test_the_same_gains_and_seed_give_the_same_interval_and_edge_cases_stay_defined():
    gains = [1.0, 2.5, 0.5, 3.0, 2.0]
    assert mean_interval(gains, SETTINGS, 0) == mean_interval(gains, SETTINGS, 0)
    assert mean_interval([4.0], SETTINGS, 0) == {
        "samples": 1,
        "mean": 4.0,
        "low": None,
        "high": None,
    }
    assert mean_interval([3.0, 3.0, 3.0], SETTINGS, 0)["low"] == 3.0


def test_the_headline_interval_resamples_within_each_cell():
    """Two cells, one noisy and one exact: the mean of means moves only by the noisy cell's half,
    so its interval is half as wide as that cell's own."""
    rng = np.random.default_rng(2)
    noisy, exact = rng.normal(4.0, 2.0, 40).tolist(), [8.0] * 10
    overall = mean_of_means_interval([noisy, exact], SETTINGS, seed=0)
    alone = mean_interval(noisy, SETTINGS, seed=0)
    assert overall["samples"] == 50
    assert overall["mean"] == pytest.approx((np.mean(noisy) + 8.0) / 2)
    assert overall["high"] - overall["low"] == pytest.approx(
        (alone["high"] - alone["low"]) / 2, rel=0.15
    )
