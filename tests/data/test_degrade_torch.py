"""The torch degradations (linefuse.data.degrade_torch) against degrade.py's numpy ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from linefuse.data.charts import draw_chart
from linefuse.data.degrade import degrade, item_rng
from linefuse.data.degrade_torch import degrade_batch, draw_plan, single_plan
from linefuse.params.full import load_params

from conftest import ROOT

CHARTS = 8  # default charts, each cut to one CROP px window in its plot
CROP = 64
# degradations of each chart per domain and level, so the mean over draws settles; gaussian's
# easy sigmas (0.3 leaves a chart nearly sharp) and lowres's easy factors (near 1) spread their
# PSNR most, and both are cheap
DRAWS = {"gaussian": 192, "motion": 32, "scan": 32, "compression": 32, "lowres": 128}
TOLERANCE_DB = 0.5


@pytest.fixture(scope="module")
def params():
    return load_params(ROOT / "params.yaml")


@pytest.fixture(scope="module")
def crops(params) -> np.ndarray:
    """(CHARTS, CROP, CROP, 3) uint8: a window about the centre of each default chart."""
    windows = []
    for index in range(CHARTS):
        image = draw_chart(params.data.charts, index)[0]
        top, left = (image.shape[0] - CROP) // 2, (image.shape[1] - CROP) // 2
        windows.append(image[top : top + CROP, left : left + CROP])
    return np.stack(windows)


def to_tensor(images: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255.0


def to_uint8(batch: torch.Tensor) -> np.ndarray:
    return (batch * 255.0).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()


def psnr(degraded: np.ndarray, sharp: np.ndarray) -> float:
    """Mean over images of PSNR (RGB, data range 255, no border crop), capped at 100 dB."""
    errors = ((degraded.astype(np.float64) - sharp.astype(np.float64)) ** 2).mean(axis=(1, 2, 3))
    return float(np.mean(10 * np.log10(255.0**2 / np.maximum(errors, 255.0**2 * 1e-10))))


@pytest.fixture(scope="module")
def psnr_deltas(params, crops) -> dict[str, tuple[float, float]]:
    """{domain/level: (numpy mean PSNR, torch mean PSNR)} over the same CHARTS x DRAWS crops."""
    table = {}
    for domain in params.degrade.domains:
        sharp = np.concatenate([crops] * DRAWS[domain])
        batch = to_tensor(sharp)
        for level in params.degrade.levels:
            settings = params.degrade.level(domain, level)
            reference = np.stack(
                [
                    degrade(image, domain, settings, item_rng(0, i, domain, level))[0]
                    for i, image in enumerate(sharp)
                ]
            )
            plan = single_plan(len(sharp), domain, settings, torch.Generator().manual_seed(0))
            ours = degrade_batch(batch, plan, torch.Generator().manual_seed(1))
            table[f"{domain}/{level}"] = (psnr(reference, sharp), psnr(to_uint8(ours), sharp))
    return table


@pytest.mark.slow
def test_every_domain_and_level_matches_numpy_psnr(psnr_deltas):
    print({cell: round(t - n, 3) for cell, (n, t) in psnr_deltas.items()})
    far = {cell: (n, t) for cell, (n, t) in psnr_deltas.items() if abs(t - n) > TOLERANCE_DB}
    assert not far, far


def test_same_plan_and_seed_same_output_on_the_k255_grid(params, crops):
    batch = to_tensor(np.concatenate([crops] * 4))
    plan = draw_plan(
        len(batch), params.degrade, params.base.light, 0.3, torch.Generator().manual_seed(1)
    )
    assert {domain for domain, _ in plan.labels(params.degrade)} == set(DRAWS)  # a mixed batch
    first = degrade_batch(batch, plan, torch.Generator().manual_seed(7))
    again = degrade_batch(batch, plan, torch.Generator().manual_seed(7))
    other = degrade_batch(batch, plan, torch.Generator().manual_seed(8))
    assert torch.equal(first, again)
    assert not torch.equal(first, other)  # the scan's grain and fields come from the generator
    assert first.shape == batch.shape and first.dtype == batch.dtype
    assert first.min() >= 0 and first.max() <= 1
    assert torch.equal(first, torch.round(first * 255) / 255)


def test_each_run_of_the_plan_gets_its_own_domain(params, crops):
    """A sample is degraded as its own run of the plan says: the same crops under a plan of one
    domain each give, sample for sample, what the mixed plan gave that run."""
    batch = to_tensor(np.concatenate([crops] * 8))
    plan = draw_plan(len(batch), params.degrade, params.base.light, 0.0, torch.Generator())
    mixed = degrade_batch(batch, plan, torch.Generator().manual_seed(3))
    for part in plan.parts:
        if (
            part.domain in ("gaussian", "motion", "compression", "lowres")
            and part.stop > part.start
        ):
            alone = type(plan)(
                [type(part)(part.domain, 0, part.stop - part.start, part.levels, part.values)]
            )
            own = degrade_batch(batch[part.start : part.stop], alone, torch.Generator())
            assert (own - mixed[part.start : part.stop]).abs().max() <= 1.5 / 255, part.domain


def test_draw_plan_follows_the_recipe(params):
    generator = torch.Generator().manual_seed(3)
    labels = draw_plan(4000, params.degrade, params.base.light, 0.25, generator).labels(
        params.degrade
    )
    light = sum(level == "light" for _, level in labels) / len(labels)
    shares = {d: sum(u[0] == d for u in labels) / len(labels) for d in params.degrade.domains}
    levels = {lv: sum(u[1] == lv for u in labels) / len(labels) for lv in params.degrade.levels}
    assert abs(light - 0.25) < 0.03, light
    assert all(abs(share - 0.2) < 0.03 for share in shares.values()), shares
    assert all(abs(share - 0.25) < 0.03 for share in levels.values()), levels


def test_plan_values_lie_in_each_samples_setting(params):
    plan = draw_plan(3000, params.degrade, params.base.light, 0.2, torch.Generator())
    names = [*params.degrade.levels, "light"]
    for part in plan.parts:
        for k, level in enumerate(part.levels.tolist()):
            name = names[level]
            setting = (
                getattr(params.base.light, part.domain)
                if name == "light"
                else params.degrade.level(part.domain, name)
            )
            for key, value in part.values.items():
                bounds = getattr(setting, key, None)
                if isinstance(bounds, (tuple, list)):
                    assert bounds[0] - 1e-9 <= float(value[k]) <= bounds[1] + 1e-9, (key, name)
                elif key in ("rotation_deg", "shear"):
                    assert abs(float(value[k])) <= bounds + 1e-9, (key, name)
