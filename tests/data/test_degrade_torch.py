"""The torch degradations (linefuse.data.degrade_torch) against degrade.py's numpy ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from linefuse.data.charts import draw_chart
from linefuse.data.degrade import degrade, item_rng
from linefuse.data.degrade_torch import degrade_batch, degrade_seeded, draw_units
from linefuse.params import load_params

from conftest import ROOT

CHARTS = 8  # default charts, each cut to one CROP px window in its plot
CROP = 64
# degradations of each chart per domain and level, so the mean over draws settles; gaussian's
# easy sigmas (0.3 leaves a chart nearly sharp) spread its PSNR most, and it is cheap
DRAWS = {"gaussian": 192, "motion": 32, "scan": 32, "compression": 32, "lowres": 32}
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
            ours = degrade_batch(batch, [(domain, settings)] * len(sharp), torch.Generator())
            table[f"{domain}/{level}"] = (psnr(reference, sharp), psnr(to_uint8(ours), sharp))
    return table


@pytest.mark.slow
def test_every_domain_and_level_matches_numpy_psnr(psnr_deltas):
    print({cell: round(t - n, 3) for cell, (n, t) in psnr_deltas.items()})
    far = {cell: (n, t) for cell, (n, t) in psnr_deltas.items() if abs(t - n) > TOLERANCE_DB}
    assert not far, far


def test_same_seed_same_output_on_the_k255_grid(params, crops):
    batch = to_tensor(crops)
    units = draw_units(
        len(batch), params.degrade, params.base.light, 0.3, torch.Generator().manual_seed(1)
    )
    assert len({domain for domain, _ in units}) >= 3  # a mixed batch
    first = degrade_batch(batch, units, torch.Generator().manual_seed(7))
    again = degrade_batch(batch, units, torch.Generator().manual_seed(7))
    other = degrade_batch(batch, units, torch.Generator().manual_seed(8))
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    assert first.shape == batch.shape and first.dtype == batch.dtype
    assert first.min() >= 0 and first.max() <= 1
    assert torch.equal(first, torch.round(first * 255) / 255)


def test_a_mixed_batch_equals_each_sample_alone(params, crops):
    batch = to_tensor(crops)
    units = draw_units(
        len(batch), params.degrade, params.base.light, 0.0, torch.Generator().manual_seed(2)
    )
    seeds = list(range(100, 100 + len(batch)))
    together = degrade_seeded(batch, units, seeds)
    alone = torch.cat(
        [
            degrade_seeded(batch[i : i + 1], units[i : i + 1], seeds[i : i + 1])
            for i in range(len(batch))
        ]
    )
    # batched kernels may sum in another order: at most one grey level apart, and rarely
    assert (together - alone).abs().max() <= 1.5 / 255
    assert (together != alone).float().mean() < 1e-3


def test_draw_units_follows_the_recipe(params):
    generator = torch.Generator().manual_seed(3)
    units = draw_units(2000, params.degrade, params.base.light, 0.25, generator)
    light = sum(settings == getattr(params.base.light, d) for d, settings in units) / len(units)
    shares = {d: sum(u[0] == d for u in units) / len(units) for d in params.degrade.domains}
    assert abs(light - 0.25) < 0.04, light
    assert all(abs(share - 0.2) < 0.04 for share in shares.values()), shares
