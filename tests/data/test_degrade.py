"""Degradation domains: determinism, severity ordering, drawn params and rebuilt kernels."""

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import ndimage
from skimage.metrics import peak_signal_noise_ratio

from linefuse.data.degrade import blur_kernel, degrade, item_rng
from linefuse.params import DOMAINS
from linefuse.params.full import load_params

PARAMS = load_params(Path(__file__).resolve().parents[2] / "params.yaml").degrade
LEVELS = ("easy", "medium", "hard")


def _chart(h: int = 96, w: int = 128) -> np.ndarray:
    """White canvas with three dark anti-aliased curves, like a small line chart."""
    img = np.ones((h, w, 3))
    x = np.arange(w, dtype=float)
    rows = np.arange(h, dtype=float)[:, None]
    curves = [
        (
            60 - 30 * np.exp(-(((x - 40) / 8) ** 2)) - 15 * np.exp(-(((x - 90) / 5) ** 2)),
            (0.1, 0.2, 0.7),
        ),
        (30 + 10 * np.sin(x / 12), (0.8, 0.1, 0.1)),
        (80 - 0.3 * x, (0.0, 0.0, 0.0)),
    ]
    for y, colour in curves:
        distance = np.abs(rows - y) / np.sqrt(1 + np.gradient(y) ** 2)
        cover = np.clip(1.2 - distance, 0, 1)[..., None]
        img = img * (1 - cover) + np.array(colour) * cover
    return np.rint(img * 255).astype(np.uint8)


CHART = _chart()


def _convolve(image: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    out = np.stack(
        [
            ndimage.convolve(image[..., c].astype(float) / 255, kernel, mode="reflect")
            for c in range(3)
        ],
        axis=-1,
    )
    return np.clip(np.rint(out * 255), 0, 255)


def test_item_rng_is_stable_and_keyed_by_every_part():
    assert item_rng(0, "img", "gaussian", "easy").integers(2**63) == 118066522174412994
    first = [
        item_rng(seed, *parts).integers(2**63)
        for seed, parts in [
            (0, ("img", "gaussian", "easy")),
            (1, ("img", "gaussian", "easy")),
            (0, ("img2", "gaussian", "easy")),
            (0, ("img", "motion", "easy")),
            (0, ("img", "gaussian", "hard")),
            (0, ("imggaussian", "easy")),
        ]
    ]
    assert len(set(first)) == len(first)


@pytest.mark.parametrize("domain", DOMAINS)
def test_same_rng_state_gives_identical_bytes(domain):
    level = PARAMS.level(domain, "medium")
    a, drawn_a = degrade(CHART, domain, level, item_rng(0, "x", domain, "medium"))
    b, drawn_b = degrade(CHART, domain, level, item_rng(0, "x", domain, "medium"))
    assert a.dtype == np.uint8 and a.shape == CHART.shape
    assert a.tobytes() == b.tobytes() and drawn_a == drawn_b
    c, _ = degrade(CHART, domain, level, item_rng(0, "y", domain, "medium"))
    assert c.tobytes() != a.tobytes()


@pytest.mark.parametrize("domain", DOMAINS)
def test_psnr_falls_from_easy_to_hard(domain):
    # The same six generator seeds at every level, so levels are compared at matched draws.
    means = []
    for level in LEVELS:
        scores = [
            peak_signal_noise_ratio(
                CHART,
                degrade(CHART, domain, PARAMS.level(domain, level), np.random.default_rng(i))[0],
                data_range=255,
            )
            for i in range(6)
        ]
        means.append(np.mean(scores))
    assert means[0] > means[1] > means[2], means


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("level", LEVELS)
def test_drawn_params_are_plain_and_within_the_level(domain, level):
    spec = PARAMS.level(domain, level)
    for i in range(5):
        _, drawn = degrade(CHART, domain, spec, item_rng(3, f"img{i}", domain, level))
        assert json.loads(json.dumps(drawn)) == drawn
        assert all(type(v) in (int, float) for v in drawn.values())
        if domain == "scan":
            assert abs(drawn["rotation"]) <= spec.rotation_deg
            assert abs(drawn["shear_x"]) <= spec.shear
            assert 0.9 <= drawn["paper"] <= 1.0
            for key in ("blur", "contrast", "noise", "background", "line_fade"):
                assert drawn[key] == getattr(spec, key)
        else:
            for key, value in drawn.items():
                low, high = getattr(spec, key)
                assert low <= value <= high
                assert isinstance(value, type(low))


@pytest.mark.parametrize("domain", ["gaussian", "motion"])
def test_kernel_reproduces_the_blur(domain):
    for level in LEVELS:
        out, drawn = degrade(CHART, domain, PARAMS.level(domain, level), item_rng(0, "k", level))
        kernel = blur_kernel(domain, drawn)
        assert kernel.dtype == np.float64 and kernel.shape[0] % 2 == 1
        assert kernel.sum() == pytest.approx(1.0)
        error = np.abs(_convolve(CHART, kernel) - out)
        assert error.mean() < 1.0 and error.max() <= 1


def test_motion_kernel_follows_length_and_angle():
    horizontal = blur_kernel("motion", {"length": 5, "angle": 0.0})
    vertical = blur_kernel("motion", {"length": 5, "angle": 90.0})
    centre = horizontal.shape[0] // 2
    assert horizontal[centre].sum() == pytest.approx(1.0)
    assert vertical[:, centre].sum() == pytest.approx(1.0)
    assert np.allclose(horizontal, horizontal[::-1, ::-1])  # centred: blurring does not shift
    rising = blur_kernel("motion", {"length": 9, "angle": 45.0})
    assert rising[0, -1] + rising[1, -2] > 0 and rising[0, 0] == 0  # up-right, rows grow down


def test_scan_kernel_and_non_convolutions():
    _, drawn = degrade(CHART, "scan", PARAMS.level("scan", "hard"), item_rng(0, "s"))
    kernel = blur_kernel("scan", drawn)
    assert kernel.sum() == pytest.approx(1.0) and np.allclose(kernel, kernel.T)
    assert blur_kernel("compression", {"quality": 30}) is None
    assert blur_kernel("lowres", {"factor": 2.0}) is None


def test_scan_line_fade_lightens_the_line_only():
    spec = PARAMS.level("scan", "hard").model_copy(update={"blur": 0.0})  # keep the line thin
    clean = spec.model_copy(update={"line_fade": 0.0})
    faded, _ = degrade(CHART, "scan", spec, item_rng(0, "f"))
    kept, _ = degrade(CHART, "scan", clean, item_rng(0, "f"))
    ink = CHART.mean(axis=2) < 100
    paper = ndimage.binary_dilation(CHART.mean(axis=2) < 250, iterations=6) == 0
    lift = faded.astype(float) - kept.astype(float)
    assert np.percentile(lift[ink], 90) > 10 and lift.min() >= -1
    assert np.abs(lift[paper]).max() <= 1


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="unknown domain"):
        degrade(CHART, "fog", PARAMS.level("gaussian", "easy"), item_rng(0))
    with pytest.raises(ValueError, match="uint8"):
        degrade(CHART.astype(float), "gaussian", PARAMS.level("gaussian", "easy"), item_rng(0))
