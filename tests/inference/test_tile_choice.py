"""tiles.tile `auto`: an image that fits runs whole; a larger one takes the candidate tile size
whose tile count times its measured seconds is least. The seconds are timed once per machine and
model and cached, so every process makes the same choice and gives the same bytes."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from diffusers import DDIMScheduler

from linefuse.hardware import Choice
from linefuse.inference import tile_choice
from linefuse.inference.restorer import Restorer
from linefuse.inference.settings import RestoreSettings
from linefuse.inference.tiles import boxes
from linefuse.inference.torch_model import TorchModel
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
    model = TorchModel(unet, scheduler, torch.zeros(1, 1, 32))
    return Restorer(model, settings, Choice("torch", "set to torch"))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LINEFUSE_CACHE", str(tmp_path))
    return tmp_path / "tile_seconds.json"


def test_candidates_run_from_four_overlaps_to_the_whole_size():
    assert tile_choice.candidates(384, 32) == [128, 160, 192, 224, 256, 288, 320, 352, 384]
    assert tile_choice.candidates(300, 32) == [128, 160, 192, 224, 256, 288, 300]
    assert tile_choice.candidates(96, 0) == [32, 64, 96]
    # each a multiple of the model's: a four-level UNet's 8, a seven-level one's 64
    assert tile_choice.candidates(300, 32, 8) == [128, 160, 192, 224, 256, 288, 296]
    assert tile_choice.candidates(400, 32, 64) == [128, 192, 256, 320, 384]


def test_the_cheapest_estimate_is_chosen_timed_once_and_cached(cache, monkeypatch, caplog):
    restorer = _restorer()
    assert restorer.tile_for(128, 100) is None and not cache.exists()  # fits: whole, untimed
    with caplog.at_level("INFO", logger="linefuse"):
        tile = restorer.tile_for(150, 200)
    (key, entry), *_ = json.loads(cache.read_text()).items()
    seconds = {int(size): s for size, s in entry["1"].items()}
    assert sorted(seconds) == [64, 96, 128] and all(s > 0 for s in seconds.values())
    cost = {size: len(boxes(150, 200, size, 16)) * s for size, s in seconds.items()}
    assert tile == min(cost, key=cost.get)
    assert any(
        f"in {len(boxes(150, 200, tile, 16))} tiles of {tile} px" in r.getMessage()
        for r in caplog.records
    )

    def untimed(self, size, batch):
        raise AssertionError("timed again")

    monkeypatch.setattr(tile_choice.TileCosts, "_time", untimed)
    assert _restorer().tile_for(150, 200) == tile  # another process reads the cache
    for cheap in (64, 128):  # what the cache says decides
        fake = {str(size): (0.001 if size == cheap else 10.0) for size in seconds}
        cache.write_text(json.dumps({key: {"1": fake}}))
        assert _restorer().tile_for(150, 200) == cheap
    assert _restorer(tile=96).tile_for(150, 200) == 96  # a fixed size is taken as it is


def test_tiles_run_in_batches_only_where_a_batch_was_measured_cheaper(cache, monkeypatch):
    """The chosen size is timed in batches of tiles.batch_size once, cached beside the single
    timings; the batch follows the cheaper of the two, and a fixed tile keeps tiles.batch_size."""
    restorer = _restorer()
    tile = restorer.tile_for(150, 200)
    batch = restorer.tile_batch(tile)
    (key, entry), *_ = json.loads(cache.read_text()).items()
    batched, single = entry["batched"][str(tile)], entry["1"][str(tile)]
    assert batched > 0 and batch == (4 if batched < single else 1)

    def untimed(self, size, batch):
        raise AssertionError("timed again")

    monkeypatch.setattr(tile_choice.TileCosts, "_time", untimed)
    for per_tile, expected in ((single / 2, 4), (single * 2, 1)):
        entry["batched"][str(tile)] = per_tile
        cache.write_text(json.dumps({key: entry}))
        assert _restorer().tile_batch(tile) == expected
    assert _restorer(tile=96, tile_batch=3).tile_batch(96) == 3
    assert _restorer(tile_batch=1).tile_batch(tile) == 1


def test_an_auto_tiled_image_is_the_fixed_size_run(cache):
    """The same tile size and batch, fixed, give the same bytes (a batch of tiles may round
    differently from one at a time, so the batch auto measured cheaper is fixed too)."""
    auto = _restorer()
    image = np.random.default_rng(0).integers(0, 256, (140, 170, 3), dtype=np.uint8)
    tile = auto.tile_for(140, 170)
    fixed = _restorer(tile=tile, tile_batch=auto.tile_batch(tile))
    assert np.array_equal(auto.restore_image(image, 1), fixed.restore_image(image, 1))
    assert auto.tile_count(140, 170) == len(boxes(140, 170, tile, 16)) > 1


def test_the_same_architecture_loaded_from_elsewhere_shares_the_timings():
    """restore loads models/base, the pipeline models/pipeline/unet: one cache entry for both,
    so they choose alike; another architecture gets its own."""
    here, there = _restorer(), _restorer()
    there.model.unet.register_to_config(_name_or_path="models/pipeline/unet")
    sizes = tile_choice.candidates(128, 16)
    assert here.tile_costs._key(sizes) == there.tile_costs._key(sizes)
    there.model.unet.register_to_config(layers_per_block=2)
    assert here.tile_costs._key(sizes) != there.tile_costs._key(sizes)
