"""A scanned chart's rotation and shear, found from its long straight lines and undone.

The scan domain (degrade._scan) turns the page by a small angle and shears it about the centre;
the target is the straight chart, and a UNet that sees a tile cannot learn a page's geometry. A
chart's frame, axes and grid are long lines in two directions: the horizontal ones tilt by the
rotation, the vertical ones by the rotation plus the shear.

Each family is found from its edges (rising and falling apart: a dark or white line is one of
each, the border of a tinted plot area one) in two passes. Coarse: the edges are projected onto
a tilted axis in vertical strips, and an edge must be strong in most strips at once (a curve
crosses a row in a few strips only, a spine, grid line or plot border in all of them); the tilt
whose long edges are sharpest wins, over +-SEARCH_DEG. Fine: along each long edge found, its
sub-pixel position in every column (the top of its own peak), and a robust straight fit through
those; the edges' slopes, pooled by their standard errors, give the family's tilt below the
coarse step.

Our own rather than scikit-image's Hough or Radon transforms, OpenCV, `deskew` or `jdeskew`:
those vote over the whole image's ink, where a chart's curves outweigh its frame, and resolve
the angle to their grid's step; a sub-pixel fit along each line is what reaches hundredths of
a degree on a 300 px chart. `straighten` is the step evaluate, `linefuse restore` and
`linefuse serve` run on every input before restoring (eval.deskew); docs/experiments.md has
what the estimator measures (benchmarks/deskew.py) and what it still gets wrong.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SEARCH_DEG = 5.0  # the widest tilt searched, each way: real scans skew by a few degrees
COARSE_STEP_DEG = 0.2  # then 11 tilts within FINE_SPAN of the best
FINE_SPAN = 0.2
STRIPS = 8  # a long line is dark in all but LINE_GAPS of these strips of the image
LINE_GAPS = 2
HALF_WINDOW = 4  # rows each side of a line where its sub-pixel centre is measured
MIN_COLUMNS = 40  # fewer columns than this along a line: no fit
MAX_SHEAR = 0.02  # a scanner's shear is smaller: two families further from square are not a frame
# `auto` undoes a skew only when it moves the chart's corners by this much (less is within what
# resampling itself costs), when the rotation's standard error is at most CONFIDENT_SE_DEG, and
# when each family's longest line spans LONG_SPAN of the image: a plotting program's axes and
# grid span about three quarters of it, a curve's flat stretch rarely 70%
NEGLIGIBLE_PX = 0.3
CONFIDENT_SE_DEG = 0.1
LONG_SPAN = 0.7
TREND_PX = 4  # the search scores a tilt's evidence less its trend, the evidence smoothed this much
# an image wider or taller than this is measured on the means of blocks of k x k pixels, k the
# least that brings it within: a skew is the same at any scale, the search and fits were made
# on charts of our default size (at most 360 px), and their cost grows with the pixels (a
# chart exported at 3-4x that size is measured faster and, scanned hard, nearer the truth:
# docs/benchmarks.md)
ESTIMATE_PX = 512


@dataclass(frozen=True)
class Skew:
    """A scan's geometry as degrade._scan draws it: `rotation_deg`, and `shear` (col += shear *
    row); `rotation_se_deg` the larger of the two families' standard errors; `span` the shorter
    of the two families' longest lines, as a fraction of the image's width (height). Nothing
    found: rotation None."""

    rotation_deg: float | None
    shear: float
    rotation_se_deg: float
    span: float

    def moves_px(self, shape: tuple[int, ...]) -> float:
        """How far undoing it moves the image's farthest corner, in pixels."""
        if self.rotation_deg is None:
            return 0.0
        height, width = shape[:2]
        tilt = abs(math.radians(self.rotation_deg))
        return tilt * max(height, width) / 2 + abs(self.shear) * height / 2

    def confident(self, shape: tuple[int, ...]) -> bool:
        """Worth undoing: found on lines as long as a frame's (LONG_SPAN; the flat baseline of a
        curve, tilted by its data, is not), measured to CONFIDENT_SE_DEG, and larger than
        NEGLIGIBLE_PX."""
        return (
            self.rotation_deg is not None
            and self.span >= LONG_SPAN
            and self.rotation_se_deg <= CONFIDENT_SE_DEG
            and self.moves_px(shape) >= NEGLIGIBLE_PX
        )


def straighten(image: np.ndarray, mode: str) -> np.ndarray:
    """The image to restore (eval.deskew): with its skew undone where `mode` is `always` and
    lines were found, or `auto` and the estimate is confident; else (and `never`) itself."""
    if mode == "never":
        return image
    skew = estimate(image)
    if skew.rotation_deg is None or (mode == "auto" and not skew.confident(image.shape)):
        return image
    return undo(image, skew)


def estimate(image: np.ndarray) -> Skew:
    """The scan geometry of an RGB (or gray) uint8 chart, from its long lines. Both families must
    be found, at right angles up to MAX_SHEAR (a frame, axes or grid are; a curve's flat
    stretch, or a legend's box beside a label, need not be): else nothing is found."""
    gray = image.astype(np.float32).mean(axis=2) if image.ndim == 3 else image.astype(np.float32)
    gray = _block_means(gray, math.ceil(max(gray.shape) / ESTIMATE_PX))
    gray = _smooth(_smooth(gray / 255.0, 1.0, axis=0), 1.0, axis=1)
    horizontal = _family_tilt(_edge_maps(gray))
    vertical = _family_tilt(_edge_maps(gray.T))
    if horizontal is None or vertical is None:
        return Skew(None, 0.0, math.inf, 0.0)
    se = max(horizontal[1], vertical[1])
    span = min(horizontal[2] / gray.shape[1], vertical[2] / gray.shape[0])
    rotation_deg, shear = _rotation_and_shear(horizontal[0], vertical[0])
    if abs(shear) > MAX_SHEAR:
        return Skew(None, 0.0, math.inf, span)
    return Skew(rotation_deg, shear, math.degrees(se), span)


def _block_means(gray: np.ndarray, k: int) -> np.ndarray:
    """The means of `gray`'s k x k blocks (the last rows and columns that fill no block left
    out); `gray` itself for k = 1."""
    if k <= 1:
        return gray
    height, width = gray.shape[0] // k, gray.shape[1] // k
    return gray[: height * k, : width * k].reshape(height, k, width, k).mean(axis=(1, 3))


def _rotation_and_shear(rows_per_col: float, cols_per_row: float) -> tuple[float, float]:
    """(rotation in degrees, shear) that tilt horizontal lines by `rows_per_col` and vertical
    ones by `cols_per_row`."""
    # horizontal lines: d row / d col = sin a / (cos a - sin a * shear); vertical: d col / d row
    # = -(tan a + shear) (degrade._scan's matrix); solved for a and shear, shear first taken as 0
    tan_a, shear = rows_per_col, 0.0
    for _ in range(2):
        shear = -cols_per_row - tan_a
        tan_a = rows_per_col / (1 + rows_per_col * shear)
    return math.degrees(math.atan(tan_a)), shear


def undo(image: np.ndarray, skew: Skew) -> np.ndarray:
    """The image with `skew` undone about its centre (cubic spline, edges extended): the inverse
    of degrade._scan's rotation and shear."""
    from scipy import ndimage  # here only: undoing is rare, and scipy.ndimage slow to import

    inverse = np.linalg.inv(_scan_matrix(skew.rotation_deg or 0.0, skew.shear))
    h, w = image.shape[:2]
    centre = np.array([(h - 1) / 2, (w - 1) / 2])
    offset = centre - inverse @ centre
    channels = image[..., None] if image.ndim == 2 else image
    out = np.stack(
        [
            ndimage.affine_transform(
                channels[..., c].astype(np.float32), inverse, offset, order=3, mode="nearest"
            )
            for c in range(channels.shape[2])
        ],
        axis=-1,
    )
    out = np.clip(np.rint(out), 0, 255).astype(image.dtype)
    return out[..., 0] if image.ndim == 2 else out


def _scan_matrix(rotation_deg: float, shear: float) -> np.ndarray:
    """degrade._scan's (row, col) matrix: a scanned pixel's place on the straight page, about
    the centre."""
    a = math.radians(rotation_deg)
    rotate = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    return rotate @ np.array([[1.0, 0.0], [shear, 1.0]])


def _edge_maps(gray: np.ndarray) -> list[np.ndarray]:
    """The rising and the falling edges across rows (a dark line is one of each, the border of a
    tinted plot area one), as two non-negative maps; what is within the noise (a robust
    deviation of the change) is 0, so that the search projects only the pixels that matter."""
    change = _correlate(_correlate(gray, (-1.0, 0.0, 1.0), axis=0), (1.0, 2.0, 1.0), axis=1) / 4
    change[np.abs(change) <= _mad(change)] = 0.0
    return [np.maximum(change, 0), np.maximum(-change, 0)]


def _family_tilt(edges: list[np.ndarray]) -> tuple[float, float, int] | None:
    """(d row / d col of the long near-horizontal edges, its standard error, the columns the
    longest of them was fitted on), or None where there is no long line."""
    height, width = edges[0].shape
    cols = np.arange(width) - (width - 1) / 2
    points = [_Points.of(edge) for edge in edges]
    coarse = np.arange(-SEARCH_DEG, SEARCH_DEG + COARSE_STEP_DEG / 2, COARSE_STEP_DEG)
    angle = _sharpest(points, coarse)[0]
    angle, evidences = _sharpest(points, angle + np.linspace(-1, 1, 11) * FINE_SPAN)
    slope = math.tan(math.radians(angle))
    lowest = abs(slope) * (width - 1) / 2
    top = max(float(e.max()) for e in evidences)
    fits = []
    for edge, evidence in zip(edges, evidences, strict=True):
        noise = 4 * _mad(evidence)
        peaks = [
            row
            for row in range(1, len(evidence) - 1)
            if evidence[row] > max(noise, 0.25 * top)
            and evidence[row] >= evidence[row - 1]
            and evidence[row] > evidence[row + 1]
        ]
        smooth = _smooth(edge, 3.0, axis=1)
        fits += [_fit_line(smooth, cols, row - lowest, slope) for row in peaks]
    tolerance = math.tan(math.radians(2 * FINE_SPAN))
    return _pooled_tilt(
        [fit for fit in fits if fit is not None and abs(fit[0] - slope) <= tolerance]
    )


def _pooled_tilt(fits: list[tuple[float, float, int]]) -> tuple[float, float, int] | None:
    """One family's (slope, standard error, longest line's columns) from its lines' fits
    (_fit_line's), or None where there are none: the slopes that agree with their median,
    weighted by their errors."""
    if not fits:
        return None
    slopes, errors, columns = (np.array(column) for column in zip(*fits, strict=True))
    keep = np.abs(slopes - _median(slopes)) <= 3 * np.maximum(errors, _mad(slopes))
    weights = 1 / np.square(errors[keep])
    pooled = float(np.sum(weights * slopes[keep]) / weights.sum())
    # lines of one page turn together: where they disagree by more than their errors say (a
    # curve's drifting baseline is no frame line), the error grows by that excess (Birge ratio)
    count = int(keep.sum())
    excess = np.sum(weights * np.square(slopes[keep] - pooled)) / (count - 1) if count > 1 else 1
    return pooled, float(math.sqrt(max(1.0, excess) / weights.sum())), int(columns[keep].max())


def _sharpest(points: list[_Points], angles) -> tuple[float, list[np.ndarray]]:
    """(the first angle among `angles` whose long edges are sharpest, their evidence per row).

    Each angle's evidence is smoothed, less its trend, and scored by the energy left; the
    smoothing runs on every angle's rows at once (_smooth_each), to the bit as one by one."""
    found = [
        [_long_line_evidence(edge, math.tan(math.radians(a))) for edge in points] for a in angles
    ]
    lengths = [len(rows[0]) for rows in found]
    evidence = np.zeros((len(found), len(points), max(lengths) + _reach(TREND_PX)))
    for a, rows in enumerate(found):
        evidence[a, :, : lengths[a]] = rows
    evidence = _smooth_each(evidence, lengths, 1.0)
    evidence = evidence - _smooth_each(evidence, lengths, TREND_PX)
    squares, scores = np.square(evidence), np.empty(len(found))
    for length in set(lengths):  # each row summed over its own length, as numpy sums a row
        same = np.array(lengths) == length
        scores[same] = squares[same, :, :length].sum(axis=-1).sum(axis=-1)
    best = int(np.argmax(scores))
    return float(angles[best]), list(evidence[best, :, : lengths[best]])


def _smooth_each(rows: np.ndarray, lengths: list[int], sigma: float) -> np.ndarray:
    """_smooth(rows[a, ..., :lengths[a]], sigma) for every a at once. Each row a holds its values
    in its first lengths[a] places and has at least the filter's reach of room after them; there
    it is made its own mirror image, as _correlate extends a line, so that its smoothed values
    are the same to the bit (past its length they mean nothing)."""
    reach = _reach(sigma)
    rows = rows.copy()
    for a, length in enumerate(lengths):
        past = np.arange(length, length + reach) % (2 * length)
        mirrored = np.where(past < length, past, 2 * length - 1 - past)
        rows[a, ..., length : length + reach] = rows[a][..., mirrored]
    return _smooth(rows, sigma)


@dataclass(frozen=True)
class _Points:
    """An edge map's non-zero pixels: row, column from the centre, strip, weight; and per strip
    its column count. The search projects these, not the whole image."""

    rows: np.ndarray
    cols: np.ndarray
    strips: np.ndarray
    weights: np.ndarray
    strip_columns: np.ndarray
    shape: tuple[int, int]

    @classmethod
    def of(cls, edge: np.ndarray) -> _Points:
        height, width = edge.shape
        strip_of = np.minimum(np.arange(width) * STRIPS // width, STRIPS - 1)
        rows, cols = np.nonzero(edge)
        centred = cols - (width - 1) / 2
        columns = np.bincount(strip_of, minlength=STRIPS)
        # each pixel weighs the square root of its edge: a tinted plot area's faint border is
        # a long line beside a curve's strong but short edges
        weights = np.sqrt(edge[rows, cols])
        return cls(rows, centred, strip_of[cols], weights, columns, edge.shape)


def _long_line_evidence(points: _Points, slope: float, gaps: int = LINE_GAPS) -> np.ndarray:
    """Per projected row (1 px bins, each pixel split between its two), the edge of its
    (gaps + 1)-th weakest strip: high only where a line runs across all strips but `gaps`."""
    height, width = points.shape
    projected = points.rows - slope * points.cols + abs(slope) * (width - 1) / 2
    low = np.floor(projected)
    upper = projected - low
    bins = height + int(math.ceil(abs(slope) * (width - 1))) + 2
    index = points.strips * bins + low.astype(np.int64)
    size = STRIPS * bins
    profile = np.bincount(index, points.weights * (1 - upper), size)
    profile += np.bincount(index + 1, points.weights * upper, size)
    per_strip = profile.reshape(STRIPS, bins) / points.strip_columns[:, None]
    return np.sort(per_strip, axis=0)[gaps]


def _fit_line(edge, cols, row0, slope) -> tuple[float, float, int] | None:
    """(slope, its standard error, the columns it was fitted on) of a robust straight fit through
    the sub-pixel centres of the line that runs through row `row0` at the centre column with about
    this slope. The first fit is the repeated median (_repeated_median: half the columns may be a
    tick, a label or a crossing curve), then least squares on the columns within 3 robust
    deviations of it."""
    height, width = edge.shape
    offsets = np.arange(-HALF_WINDOW, HALF_WINDOW + 1)
    fitted = (slope, row0)
    for _ in range(2):  # centre the window on the line, then measure again there
        rows = np.rint(fitted[1] + fitted[0] * cols).astype(np.int64)[None, :] + offsets[:, None]
        inside = (rows >= 0).all(axis=0) & (rows < height).all(axis=0)
        if inside.sum() < MIN_COLUMNS:  # the line leaves the image: too little of it to fit
            return None
        profile = edge[np.clip(rows, 0, height - 1), np.arange(width)[None, :]]
        # the line's own peak, nearest the window's centre (a curve or label beside the line
        # is another peak): its sub-pixel top from a parabola through it and its neighbours
        near = HALF_WINDOW + np.argmax(profile[HALF_WINDOW - 2 : HALF_WINDOW + 3], axis=0) - 2
        top, below, above = (profile[near + k, np.arange(width)] for k in (0, -1, 1))
        curvature = below - 2 * top + above
        step = np.where(curvature < 0, 0.5 * (below - above) / np.minimum(curvature, -1e-9), 0.0)
        centroid = rows[0] + near + np.clip(step, -0.5, 0.5)
        height_over = top - profile.min(axis=0)
        is_peak = (top >= below) & (top >= above)
        strong = inside & is_peak & (height_over > 0.5 * _median(height_over[inside]))
        if strong.sum() < MIN_COLUMNS:
            return None
        x, y = cols[strong], centroid[strong]
        fitted = _repeated_median(y, x)
    residual = y - (fitted[1] + fitted[0] * x)
    keep = np.abs(residual) <= max(3 * _mad(residual), 0.05)
    if keep.sum() < MIN_COLUMNS:
        return None
    line = np.polyfit(x[keep], y[keep], 1)
    residual = y[keep] - np.polyval(line, x[keep])
    spread = np.sqrt(np.sum(np.square(x[keep] - x[keep].mean())))
    se = float(np.std(residual, ddof=2) / max(spread, 1e-9))
    return float(line[0]), max(se, 1e-6), int(keep.sum())


def _mad(values: np.ndarray) -> float:
    """The median absolute deviation, scaled to a normal's standard deviation."""
    return float(1.4826 * _median(np.abs(values - _median(values))))


# The filters and the robust fit below are scipy's (ndimage.gaussian_filter1d and sobel,
# stats.siegelslopes), and the median numpy's, redone to the bit: importing scipy.ndimage and
# scipy.stats took 3 s of a 5 s `linefuse restore` of one chart, whose estimate runs them on
# every input, and np.median imports numpy.ma. tests/data/test_deskew.py holds each to the
# original's output.


def _reach(sigma: float) -> int:
    """How far _smooth's Gaussian reaches each side: 4 sigma, rounded."""
    return int(4.0 * sigma + 0.5)


def _smooth(values: np.ndarray, sigma: float, axis: int = -1) -> np.ndarray:
    """scipy.ndimage.gaussian_filter1d(values, sigma, axis): a Gaussian truncated at 4 sigma,
    edges reflected."""
    radius = _reach(sigma)
    taps = np.exp(-0.5 / (sigma * sigma) * np.arange(-radius, radius + 1) ** 2)
    return _correlate(values, taps / taps.sum(), axis)


def _correlate(values: np.ndarray, weights, axis: int) -> np.ndarray:
    """scipy.ndimage.correlate1d(values, weights, axis) with edges reflected, for odd-length
    `weights` that are symmetric or antisymmetric (as all here are), in values' dtype: ndimage's
    own loop and order (in float64, the centre tap, then each pair of taps from the outermost
    in, their inputs added, or subtracted, before the multiply), so the sums round alike."""
    weights = np.asarray(weights, np.float64)
    reach = len(weights) // 2
    antisymmetric = weights[0] != 0 and weights[0] == -weights[-1]
    lines = np.moveaxis(values, axis, -1).astype(np.float64)
    length = lines.shape[-1]
    # the line extended by `reach` each side, mirrored about its ends (d c b a | a b c d | d c b a)
    index = np.arange(-reach, length + reach) % (2 * length)
    extended = lines[..., np.where(index < length, index, 2 * length - 1 - index)]
    out = lines * weights[reach]
    pair = np.empty_like(out)
    for k in range(reach, 0, -1):
        before = extended[..., reach - k : reach - k + length]
        after = extended[..., reach + k : reach + k + length]
        (np.subtract if antisymmetric else np.add)(before, after, out=pair)
        pair *= weights[reach - k]
        out += pair
    return np.moveaxis(out.astype(values.dtype), -1, axis)


def _repeated_median(y: np.ndarray, x: np.ndarray, block: int = 256) -> tuple[float, float]:
    """scipy.stats.siegelslopes(y, x) for distinct `x`: (slope, intercept) of Siegel's repeated
    median, each point's median slope to all the others, their median; the intercept the median
    of y - slope * x. `block` rows of the pairwise slopes at a time: a wide scan's stay small."""
    count = len(x)
    medians = np.empty(count)
    for first in range(0, count, block):
        rows = slice(first, first + block)
        dx, dy = x[rows, None] - x[None, :], y[rows, None] - y[None, :]
        others = dx != 0  # all but the point itself: x are distinct
        medians[rows] = _median((dy[others] / dx[others]).reshape(len(dx), count - 1), axis=1)
    slope = _median(medians)
    return slope, _median(y - slope * x)


def _median(values: np.ndarray, axis: int | None = None):
    """np.median(values, axis), NaN and dtype alike, without the import of numpy.ma it makes
    (to check for a masked array) on its first call."""
    if axis is None:
        values, axis = np.ravel(values), 0
    count = values.shape[axis]
    middle = [count // 2 - 1, count // 2] if count % 2 == 0 else [count // 2]
    part = np.partition(values, [*middle, -1], axis=axis)
    median = part.take(middle, axis=axis).mean(axis=axis)
    last = part.take(-1, axis=axis)  # a NaN sorts last, and makes the median NaN
    nan = np.isnan(last)
    if not nan.any():
        return median
    if np.ndim(median) == 0:
        return last
    np.copyto(median, last, where=nan)
    return median
