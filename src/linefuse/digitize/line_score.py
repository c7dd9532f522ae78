"""CHART-Info's task-6b score of line data read from a chart: the field's score, beside ours.

The ICDAR 2019 / ICPR 2020-2022 CHART-Info competitions score the data series extracted from a
line chart (task 6b) with the continuous metric of adobe-research/CHART-Synthetic's
`metric6b.py` and `metric6b.tex` (C. Tensmeyer, 2019); LineFormer (Lal et al., ICDAR 2023) reports
its 6b figures with the same functions (its `metric6a.py`, `metric_6b_indv`). Implemented here as
that script computes it, in the chart's data units:

- A pair, read series P = (x_j, y_j) against true series G = (u_i, v_i), each sorted by x:

      Recall(P, G) = sum_i (1 - Error_i) * Interval_i / (u_M - u_1)
      Error_i      = min(1, |v_i - I(P, u_i)| / (|v_i| + eps)),   eps = (max v - min v) / 100
      Interval_i   = (u_2 - u_1) / 2 first, (u_M - u_M-1) / 2 last, (u_i+1 - u_i-1) / 2 between
      Precision    = Recall(G, P): the read points against the true series, the same eps
      pair score   = 2 * Precision * Recall / (Precision + Recall)   (0 when both are 0)

  I is numpy.interp, as in the script: within P's x range it interpolates linearly, beyond it
  P's end value stands (so a series read over half the range loses the other half only where
  its end value is wrong there). The error is relative to the true value's magnitude, eps (1 %
  of the true series' y range: EPSILON_SHARE, the script's fixed choice) keeping it finite
  near 0: an error of 1 % of the range costs little on a tall peak and everything on a
  baseline at 0, so the score depends on where the y axis's 0 lies, as the field's does.
- A chart: the pair scores of every (read, true) series, the series matched one to one by the
  Hungarian algorithm (scipy.optimize.linear_sum_assignment) to the largest sum, and that sum
  divided by max(read series, true series): a series read twice, or one invented, or one
  missed, scores 0 in the count.

The script also compares legend names (cost min(1 - S / beta, 1 - name similarity * S)); with
both names empty the similarity is 1 and the cost is 1 - S, which is what is computed here and
what LineFormer reports (names are not scored). Where the script would fail (a series of fewer
than two points, or of one x), the pair scores 0; a true series of zero y range has eps 0;
points that are not finite are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

EPSILON_SHARE = 0.01  # of the true series' y range: metric6b.py's epsilon (range / 100)

Points = tuple[np.ndarray, np.ndarray]  # x, y in data units


def _sorted(x: np.ndarray, y: np.ndarray) -> Points:
    """The series' finite points sorted by x."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    finite = np.isfinite(x) & np.isfinite(y)
    x, y = x[finite], y[finite]
    order = np.argsort(x, kind="stable")
    return x[order], y[order]


def continuous_recall(read: Points, truth: Points, epsilon: float) -> float:
    """metric6b.py's get_cont_recall: how well `read` follows each point of `truth`, the points
    weighted by the x interval each stands for (both sorted by x, each of >= 2 points)."""
    (px, py), (gx, gy) = read, truth
    span = gx[-1] - gx[0]
    if span <= 0:
        return 0.0
    interval = np.empty_like(gx)
    interval[0] = (gx[1] - gx[0]) / 2
    interval[-1] = (gx[-1] - gx[-2]) / 2
    interval[1:-1] = (gx[2:] - gx[:-2]) / 2
    difference = np.abs(gy - np.interp(gx, px, py))
    scale = np.abs(gy) + epsilon
    relative = np.divide(difference, scale, out=np.ones_like(gy), where=scale > 0)
    relative[difference == 0] = 0.0  # exact where the true value is 0 and eps is 0
    error = np.minimum(1.0, relative)
    return float(np.sum((1.0 - error) * interval) / span)


def pair_score(read: Points, truth: Points) -> dict[str, float]:
    """Recall, precision and their F-measure (`score`) of one read series against one true one
    (metric6b.py's compare_continuous)."""
    read, truth = _sorted(*read), _sorted(*truth)
    if len(read[0]) < 2 or len(truth[0]) < 2:
        return {"recall": 0.0, "precision": 0.0, "score": 0.0}
    epsilon = EPSILON_SHARE * float(truth[1].max() - truth[1].min())
    recall = continuous_recall(read, truth, epsilon)
    precision = continuous_recall(truth, read, epsilon)
    total = precision + recall
    f_measure = 2 * precision * recall / total if total > 0 else 0.0
    return {"recall": recall, "precision": precision, "score": f_measure}


def line_score(read: Sequence[Points], truth: Sequence[Points]) -> float:
    """The chart's task-6b score in [0, 1]: the pair scores of the one-to-one matching of read
    and true series with the largest sum, over max(read series, true series). No series on
    either side scores 0, or 1 where neither has one (LineFormer: empty matches empty)."""
    if not read or not truth:
        return 1.0 if not read and not truth else 0.0
    scores = np.array([[pair_score(r, t)["score"] for r in read] for t in truth])
    rows, columns = linear_sum_assignment(scores, maximize=True)
    return float(scores[rows, columns].sum() / max(len(read), len(truth)))
