"""Bootstrap intervals of mean PSNR gains: how far a cell's mean could move with other test images.

scipy.stats.bootstrap with its default BCa method, which corrects the plain percentile interval
for bias and skew (it matters at the tens of samples a cell holds). Resampling is seeded, so the
same gains give the same interval.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import bootstrap

from linefuse.params.evaluation import IntervalParams


def _bounds(data: tuple[np.ndarray, ...], statistic, settings: IntervalParams, seed: int):
    if all(np.ptp(sample) == 0 for sample in data):  # BCa is undefined without spread
        value = float(statistic(*data, axis=-1))
        return value, value
    result = bootstrap(
        data,
        statistic,
        n_resamples=settings.resamples,
        confidence_level=settings.confidence,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def mean_interval(gains: list[float], settings: IntervalParams, seed: int) -> dict:
    """{samples, mean, low, high} of one cell's gains; low and high are None below 2 samples."""
    values = np.asarray(gains, np.float64)
    low = high = None
    if values.size >= 2:
        low, high = _bounds((values,), np.mean, settings, seed)
    return {"samples": int(values.size), "mean": float(values.mean()), "low": low, "high": high}


def mean_of_means_interval(cells: list[list[float]], settings: IntervalParams, seed: int) -> dict:
    """The same for the mean over cells of each cell's mean gain, resampling within each cell
    (a stratified bootstrap: every cell keeps its weight, as in the headline)."""
    data = tuple(np.asarray(gains, np.float64) for gains in cells)

    def statistic(*samples, axis=-1):
        return np.mean([sample.mean(axis=axis) for sample in samples], axis=0)

    low = high = None
    if data and all(sample.size >= 2 for sample in data):
        low, high = _bounds(data, statistic, settings, seed)
    return {
        "samples": int(sum(sample.size for sample in data)),
        "mean": float(statistic(*data)) if data else None,
        "low": low,
        "high": high,
    }
