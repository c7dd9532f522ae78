"""LineFuse's chart figures: where the peaks are and how much area the curve holds.

A restored chart whose peaks moved is wrong even at a good PSNR. Both figures come from the
column profile (the ink's height in each column) of the restored chart against the clean one.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import find_peaks

INK_THRESHOLD = 0.5  # darkness (0 white .. 1 black) above which a pixel counts as the line
PEAK_PROMINENCE = 0.05  # of the image height


def column_profile(image: np.ndarray) -> np.ndarray:
    """Height of the line in each column (px from the bottom), ink-weighted; gaps interpolated."""
    darkness = 1.0 - image.astype(np.float64).mean(axis=2) / 255.0
    weight = np.clip(darkness - INK_THRESHOLD, 0.0, None)
    total = weight.sum(axis=0)
    rows = np.arange(image.shape[0], dtype=np.float64)[:, None]
    height = image.shape[0] - 1 - (weight * rows).sum(axis=0) / np.where(total > 0, total, 1)
    inked = total > 0
    if not inked.any():
        return np.zeros(image.shape[1])
    columns = np.arange(image.shape[1])
    return np.interp(columns, columns[inked], height[inked])


def chart_errors(restored: np.ndarray, sharp: np.ndarray) -> dict[str, float]:
    """Mean peak-position error in px (each clean peak to the nearest restored one) and the
    relative error of the area under the profile."""
    clean, found = column_profile(sharp), column_profile(restored)
    prominence = PEAK_PROMINENCE * sharp.shape[0]
    clean_peaks, _ = find_peaks(clean, prominence=prominence)
    found_peaks, _ = find_peaks(found, prominence=prominence)
    if len(clean_peaks) == 0:
        peak_error = 0.0
    elif len(found_peaks) == 0:
        peak_error = float(sharp.shape[1])  # every peak lost: the worst a crop can be
    else:
        distances = np.abs(clean_peaks[:, None] - found_peaks[None, :]).min(axis=1)
        peak_error = float(distances.mean())
    area = clean.sum()
    integral_error = float(abs(found.sum() - area) / area) if area > 0 else 0.0
    return {"peak_position_error_px": peak_error, "integral_error": integral_error}
