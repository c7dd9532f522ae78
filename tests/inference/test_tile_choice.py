"""tiles.tile `auto`: an image that fits runs whole; a larger one takes the candidate tile size
whose tile count times its measured seconds is least. The seconds are timed once per machine and
model and cached, so every process makes the same choice and gives the same bytes."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from diffusers import DDIMScheduler

from linefuse.inference import tile_choice
from linefuse.inference.restorer import Restorer, RestoreSettings
from linefuse.inference.tiles import boxes
from linefuse.train.model import build_unet


def _restorer(**update) -> Restorer:
    torch.manual_seed(0)
    unet = build_unet("tiny", 3).eval()
    torch.nn.init.normal_(unet.conv_out.weight, std=0.05)
    settings = {
        "target": "residual",
        "sample_start": "mean",
        "start_fraction": 1.0,
        "shrink": 0.0,
        "deskew": "never",
        "whole": 128,
        "tile": "auto",
        "overlap": 16,
        "tile_batch": 4,
    }
    settings = RestoreSettings(**(settings | update))
    scheduler = DDIMScheduler(clip_sample=False, timestep_spacing="trailing")
    return Restorer(unet, scheduler, torch.zeros(1, 1, 32), settings)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LINEFUSE_CACHE", str(tmp_path))
    return tmp_path / "tile_seconds.json"


def test_candidates_run_from_four_overlaps_to_the_whole_size():
    assert tile_choice.candidates(384, 32) == [128, 192, 256, 320, 384]
    assert tile_choice.candidates(300, 32) == [128, 192, 256, 300]
    assert tile_choice.candidates(192, 0) == [64, 128, 192]


def test_the_cheapest_estimate_is_chosen_timed_once_and_cached(cache, monkeypatch, caplog):
    restorer = _restorer()
    assert restorer.tile_for(128, 100) is None and not cache.exists()  # fits: whole, untimed
    with caplog.at_level("INFO", logger="linefuse"):
        tile = restorer.tile_for(150, 200)
    (key, seconds), *_ = json.loads(cache.read_text()).items()
    seconds = {int(size): s for size, s in seconds.items()}
    assert sorted(seconds) == [64, 128] and all(s > 0 for s in seconds.values())
    cost = {size: len(boxes(150, 200, size, 16)) * s for size, s in seconds.items()}
    assert tile == min(cost, key=cost.get)
    assert any(
        f"in {len(boxes(150, 200, tile, 16))} tiles of {tile} px" in r.getMessage()
        for r in caplog.records
    )

    def untimed(self, size):
        raise AssertionError("timed again")

    monkeypatch.setattr(tile_choice.TileCosts, "_time", untimed)
    assert _restorer().tile_for(150, 200) == tile  # another process reads the cache
    for cheap in (64, 128):  # what the cache says decides
        fake = {str(size): (0.001 if size == cheap else 10.0) for size in seconds}
        cache.write_text(json.dumps({key: fake}))
        assert _restorer().tile_for(150, 200) == cheap
    assert _restorer(tile=96).tile_for(150, 200) == 96  # a fixed size is taken as it is


def test_an_auto_tiled_image_is_the_fixed_size_run(cache):
    auto = _restorer()
    image = np.random.default_rng(0).integers(0, 256, (140, 170, 3), dtype=np.uint8)
    tile = auto.tile_for(140, 170)
    fixed = _restorer(tile=tile)
    assert np.array_equal(auto.restore_image(image, 1), fixed.restore_image(image, 1))
    assert auto.tile_count(140, 170) == len(boxes(140, 170, tile, 16)) > 1


def test_the_same_architecture_loaded_from_elsewhere_shares_the_timings():
    """restore loads models/base, the pipeline models/pipeline/unet: one cache entry for both,
    so they choose alike; another architecture gets its own."""
    here, there = _restorer(), _restorer()
    there.unet.register_to_config(_name_or_path="models/pipeline/unet")
    sizes = tile_choice.candidates(128, 16)
    assert here.tile_costs._key(sizes) == there.tile_costs._key(sizes)
    there.unet.register_to_config(layers_per_block=2)
    assert here.tile_costs._key(sizes) != there.tile_costs._key(sizes)
