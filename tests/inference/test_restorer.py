"""The restorer's shrink (eval.shrink): changes smaller than it are dropped, larger ones shortened
by it, so a sharp chart comes back nearly unchanged while a blurred one is still restored; and
its deskew (eval.deskew), run on the input first."""

from __future__ import annotations

import logging
from contextlib import chdir

import numpy as np
import torch
from scipy import ndimage

from linefuse.data.charts import draw_chart
from linefuse.data.deskew import straighten
from linefuse.evaluate.metrics import psnr
from linefuse.inference.restorer import Restorer, shrink_change
from linefuse.params.full import load_params, parse_params

from conftest import ROOT, matplotlib_charts, tiny_params


def test_shrink_soft_thresholds_the_change():
    blurred = np.zeros((1, 1, 1, 5), np.float32)
    restored = np.array([-10.0, -1.0, 0.5, 2.0, 10.0], np.float32).reshape(1, 1, 1, 5) * 2 / 255
    shrunk = shrink_change(restored, blurred, 2.0) * 255 / 2
    assert shrunk.dtype == np.float32
    assert np.allclose(shrunk.flatten(), [-8.0, 0.0, 0.0, 0.0, 8.0], atol=1e-4)
    assert shrink_change(restored, blurred, 0.0) is restored


def test_the_numpy_pixel_mapping_is_data_transforms_to_the_bit():
    """The restorer normalises and rounds back in numpy (no torch on the ONNX path): the same
    floats and bytes as data/transforms.py's torch mapping, which training uses."""
    from linefuse.data import transforms

    images = np.random.default_rng(0).integers(0, 256, (2, 5, 7, 3), dtype=np.uint8)
    floats = transforms.normalise_array(images)
    assert np.array_equal(floats, transforms.normalise(torch.from_numpy(images)).numpy())
    assert floats.flags.c_contiguous
    # values on and between the grey levels, halves (rounded to even) and beyond [-1, 1]
    pixels = np.random.default_rng(1).uniform(-1.1, 1.1, (2, 3, 5, 7)).astype(np.float32)
    pixels[0, 0, 0, :3] = np.array([0.5, 1.5, 2.5], np.float32) / 127.5 - 1
    expected = transforms.to_uint8(torch.from_numpy(pixels)).numpy()
    to_uint8 = transforms.to_uint8_array
    assert np.array_equal(to_uint8(pixels), expected) and np.array_equal(to_uint8(floats), images)


def test_shrink_leaves_a_sharp_chart_and_restores_a_blurred_one(trained_project):
    with chdir(trained_project):
        params = load_params("params.yaml")
        whole = params.tiles.model_copy(update={"size": 256})  # no tile blends clamped pixels
        restorers = {
            grey: Restorer.from_params(
                params.model_copy(
                    update={"eval": params.eval.model_copy(update={"shrink": grey}), "tiles": whole}
                ),
                "models/lora/hard",
                "cpu",
            )
            for grey in (0.0, 2.0, 255.0)
        }
    metric = params.eval.metric
    for seed in range(3):
        sharp = draw_chart(params.data.charts, seed, size_px=(192, 144))[0]
        blurred = ndimage.gaussian_filter(sharp.astype(np.float64), (1.2, 1.2, 0))
        blurred = np.clip(np.rint(blurred), 0, 255).astype(np.uint8)
        assert np.array_equal(restorers[255.0].restore_image(blurred, 1), blurred)
        plain, shrunk = (restorers[g].restore_image(blurred, 1) for g in (0.0, 2.0))
        change = np.abs(plain.astype(int) - blurred)
        shrunk_change = np.abs(shrunk.astype(int) - blurred)
        unclamped = (plain > 0) & (plain < 255)  # 255 + 10 and 255 + 8 both show as 255
        bound = np.maximum(change - 2, 0) + 1  # + 1: rounding
        assert (shrunk_change <= bound)[unclamped].all()
        assert (shrunk_change == 0).mean() > (change == 0).mean()
        gain = psnr(shrunk, sharp, metric) - psnr(blurred, sharp, metric)
        assert gain > 0.5 * (psnr(plain, sharp, metric) - psnr(blurred, sharp, metric))

        unchanged = [psnr(restorers[g].restore_image(sharp, 1), sharp, metric) for g in (0.0, 2.0)]
        # the suite's tiny model (10 steps) leaves a faint texture on a sharp chart, most of which
        # a shrink of 2 grey levels takes off
        assert unchanged[1] > unchanged[0] + 0.5, unchanged


def test_more_steps_than_the_model_was_trained_for_are_warned_once(trained_project, caplog):
    """optim.start_fraction 1 trains the first DDIM step only: restoring in more steps still
    works but says, once per model, that the later steps are untrained."""
    with chdir(trained_project):
        params = load_params("params.yaml")
        assert params.optim.start_fraction == 1
        restorer = Restorer.from_params(params, "models/lora/hard", "cpu")
    chart = draw_chart(params.data.charts, 0, size_px=(64, 64))[0]
    with caplog.at_level("WARNING", logger="linefuse"):
        restorer.restore_image(chart, 1)  # the first restore also logs the runtime it chose
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        for _ in range(2):
            assert restorer.restore_image(chart, 2).shape == chart.shape
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage()[:58] for r in warned] == [
        "2 DDIM steps: optim.start_fraction is 1, so the model was "
    ]


def test_restore_image_straightens_a_turned_chart_first():
    """eval.deskew's step runs inside restore_image (restore and serve): a chart turned by 3
    degrees (default chart 6, two spines) is restored as its straightened self (`auto`); `never`
    restores it as drawn."""
    params = parse_params(tiny_params())
    restorer = Restorer.from_params(
        params, None, "cpu", base_dir=ROOT / "src/linefuse/zoo/chart-base"
    )
    sharp, _, _ = draw_chart(matplotlib_charts(load_params(ROOT / "params.yaml").data.charts), 6)
    turned = ndimage.rotate(sharp, 3.0, reshape=False, order=1, mode="nearest")
    straight = straighten(turned, "always")
    restored = restorer.restore_image(turned, 1, deskew="auto")
    assert np.array_equal(restored, restorer.restore_image(straight, 1, deskew="never"))
    assert not np.array_equal(restored, restorer.restore_image(turned, 1, deskew="never"))
