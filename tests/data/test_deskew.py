"""The scan-geometry estimator (data/deskew.py): it reads a rotation and shear it was shown, leaves
what is not skewed alone, and its undo inverts the scan's geometry."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import ndimage

from linefuse.data import deskew
from linefuse.data.charts import draw_chart
from linefuse.data.degrade import degrade, item_rng
from linefuse.params.full import load_params

from conftest import ROOT, matplotlib_charts

CHARTS = matplotlib_charts(load_params(ROOT / "params.yaml").data.charts)
FRAMED = [2, 6]  # a default chart with a full frame (plain) and one with two spines (classic)


def scanned(image: np.ndarray, rotation_deg: float, shear: float) -> np.ndarray:
    """The scan's geometry as degrade._scan applies it (rotation and shear about the centre)."""
    a = math.radians(rotation_deg)
    matrix = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]) @ np.array(
        [[1.0, 0.0], [shear, 1.0]]
    )
    centre = np.array([(image.shape[0] - 1) / 2, (image.shape[1] - 1) / 2])
    offset = centre - matrix @ centre
    channels = image.astype(np.float32)
    out = [
        ndimage.affine_transform(channels[..., c], matrix, offset, order=1, mode="nearest")
        for c in range(3)
    ]
    return np.clip(np.rint(np.stack(out, axis=-1)), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("index", FRAMED)
@pytest.mark.parametrize("rotation_deg", [3.0, -3.0])
def test_a_chart_turned_3_degrees_and_sheared_is_read_to_hundredths(index, rotation_deg):
    sharp, _, _ = draw_chart(CHARTS, index)
    skew = deskew.estimate(scanned(sharp, rotation_deg, 0.01))
    assert skew.rotation_deg == pytest.approx(rotation_deg, abs=0.05), skew
    assert skew.shear == pytest.approx(0.01, abs=0.002), skew


@pytest.mark.parametrize("index", FRAMED)
def test_a_chart_drawn_at_four_times_its_size_is_read_on_block_means(index):
    """A user's export at 4x our charts' size (over 1000 px), turned and sheared, is measured as
    the means of its 3 x 3 blocks are (ESTIMATE_PX: near the size our charts are drawn at),
    read to hundredths; drawn straight, it is left alone."""
    sharp, _, _ = draw_chart(CHARTS, index)
    large, _, _ = draw_chart(CHARTS, index, (4 * sharp.shape[1], 4 * sharp.shape[0]))
    turned = scanned(large, -2.0, 0.01)
    gray = turned.astype(np.float32).mean(axis=2)
    height, width = gray.shape[0] // 3, gray.shape[1] // 3
    blocks = gray[: 3 * height, : 3 * width].reshape(height, 3, width, 3).mean(axis=(1, 3))
    assert 2 * deskew.ESTIMATE_PX < max(turned.shape) <= 3 * deskew.ESTIMATE_PX
    skew = deskew.estimate(turned)
    assert skew == deskew.estimate(blocks)
    assert skew.rotation_deg == pytest.approx(-2.0, abs=0.05), skew
    assert skew.shear == pytest.approx(0.01, abs=0.002), skew
    assert not deskew.estimate(large).confident(large.shape)


@pytest.mark.parametrize("index", FRAMED)
def test_a_straight_chart_is_left_alone(index):
    sharp, _, _ = draw_chart(CHARTS, index)
    skew = deskew.estimate(sharp)
    assert abs(skew.rotation_deg) < 0.01 and not skew.confident(sharp.shape), skew


def test_a_blank_page_and_a_photo_have_no_lines():
    rng = np.random.default_rng(0)
    blank = np.full((200, 300, 3), 250, np.uint8)
    photo = ndimage.gaussian_filter(rng.uniform(0, 255, (200, 300, 3)), (6, 6, 0)).astype(np.uint8)
    for image in (blank, photo):
        skew = deskew.estimate(image)
        assert skew.rotation_deg is None and not skew.confident(image.shape), skew


def test_undo_inverts_the_scan_geometry():
    sharp, _, _ = draw_chart(CHARTS, FRAMED[0])
    turned = scanned(sharp, 0.8, 0.015)
    back = deskew.undo(turned, deskew.Skew(0.8, 0.015, 0.0, 1.0))
    inner = (slice(10, -10), slice(10, -10))  # the corners were outside the turned page

    def error(image: np.ndarray) -> float:
        return float(np.mean(np.abs(image[inner].astype(int) - sharp[inner].astype(int))))

    # what is left is two resamplings' blur, a third of what the geometry itself costs
    assert error(back) < error(turned) / 3, (error(back), error(turned))


@pytest.mark.parametrize(("rotation_deg", "shear"), [(0.6, 0.01), (-3.0, -0.015), (5.0, 0.02)])
def test_the_lines_tilts_give_back_the_rotation_and_shear_that_made_them(rotation_deg, shear):
    to_scan = np.linalg.inv(deskew._scan_matrix(rotation_deg, shear))
    horizontal, vertical = to_scan @ np.array([0.0, 1.0]), to_scan @ np.array([1.0, 0.0])
    solved = deskew._rotation_and_shear(horizontal[0] / horizontal[1], vertical[1] / vertical[0])
    assert solved == pytest.approx((rotation_deg, shear), abs=1e-5)


def test_straighten_undoes_a_turned_chart_and_passes_the_rest_through():
    """eval.deskew's step: `auto` and `always` straighten a chart turned by 3 degrees (closer to the
    straight chart than the input); `auto` passes a straight chart through unchanged, every mode a
    blank page, and `never` touches nothing. (Chart 6: `auto` leaves chart 2 turned +3 degrees
    alone, its longest line spanning 0.69 of the width, under deskew.LONG_SPAN.)"""
    sharp, _, _ = draw_chart(CHARTS, FRAMED[1])
    turned = scanned(sharp, 3.0, 0.0)
    error = np.abs(turned.astype(float) - sharp).mean()
    for mode in ("auto", "always"):
        straight = deskew.straighten(turned, mode)
        assert np.abs(straight.astype(float) - sharp).mean() < error / 3
    blank = np.full((200, 300, 3), 250, np.uint8)
    for mode in ("auto", "never"):
        assert deskew.straighten(sharp, mode) is sharp
    for mode in ("auto", "always", "never"):
        assert deskew.straighten(blank, mode) is blank
    assert deskew.straighten(turned, "never") is turned


def test_a_curves_flat_baseline_is_not_taken_for_the_frame():
    """Default chart 135 (gridded: spectra whose flat baselines drift across a grey panel with a
    white grid; the estimator once read them as the page turned 0.86 degrees): straight, it is
    left alone; scanned at each level as the benchmark draws it, it is read to 0.1 degrees."""
    params = load_params(ROOT / "params.yaml")
    sharp, _, _ = draw_chart(CHARTS, 135)
    assert not deskew.estimate(sharp).confident(sharp.shape)
    for level in params.degrade.levels:
        rng = item_rng(params.degrade.seed, "chart_00135", "scan", level)
        image, drawn = degrade(sharp, "scan", params.degrade.level("scan", level), rng)
        skew = deskew.estimate(image)
        assert skew.confident(image.shape), (level, skew)
        assert skew.rotation_deg == pytest.approx(drawn["rotation"], abs=0.1), (level, skew)


def test_the_filters_and_the_fit_are_scipys_to_the_bit():
    """deskew's numpy Gaussian, Sobel and repeated median (restoring imports neither
    scipy.ndimage nor scipy.stats) give scipy's bytes: on a chart and its edges, on noise of
    every small size (lines shorter than the kernel reflect over and over), and on lines of
    points with outliers and ties; its median is np.median's, NaN and dtype alike."""
    from scipy.stats import siegelslopes

    rng = np.random.default_rng(0)
    gray = draw_chart(CHARTS, FRAMED[0])[0].astype(np.float32).mean(axis=2) / 255.0
    images = [gray] + [
        rng.random(shape).astype(np.float32) for shape in rng.integers(1, 40, (30, 2))
    ]
    for image in images:
        ours = deskew._smooth(deskew._smooth(image, 1.0, axis=0), 1.0, axis=1)
        assert np.array_equal(ours, ndimage.gaussian_filter(image, 1.0)), image.shape
        sobel = deskew._correlate(deskew._correlate(image, (-1.0, 0.0, 1.0), 0), (1.0, 2.0, 1.0), 1)
        assert np.array_equal(sobel, ndimage.sobel(image, axis=0)), image.shape
        edges = image.astype(np.float64)
        assert np.array_equal(
            deskew._smooth(edges, 3.0, axis=1), ndimage.gaussian_filter1d(edges, 3.0, axis=1)
        )
        for sigma in (1.0, 4):
            line = edges.ravel()
            assert np.array_equal(
                deskew._smooth(line, sigma), ndimage.gaussian_filter1d(line, sigma)
            )
    for count in (2, 3, 40, 301, 600):
        x = np.sort(rng.choice(np.arange(-400.0, 400.0), count, replace=False)) + 0.5
        y = np.round(0.01 * x + rng.normal(size=count), 1)  # rounded: ties among the slopes
        y[: count // 5] += 30  # outliers: a tick, a label
        expected = tuple(map(float, siegelslopes(y, x)))
        assert tuple(map(float, deskew._repeated_median(y, x))) == expected, count
    for count in (1, 2, 5, 6):
        for dtype in (np.float32, np.float64):
            values = rng.normal(size=(3, count)).astype(dtype)
            values[1, 0] = np.nan
            for data, axis in ((values, 1), (values[0], None), (values[1], None)):
                ours, numpy = deskew._median(data, axis), np.median(data, axis)
                assert type(ours) is type(numpy) and np.array_equal(ours, numpy, equal_nan=True)
