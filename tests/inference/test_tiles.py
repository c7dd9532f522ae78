"""Tiled restoration: tiles cover the image, blend without seams, and agree with a whole run."""

from __future__ import annotations

import io
from contextlib import chdir

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage
from tqdm import tqdm

from linefuse.data.charts import draw_chart
from linefuse.evaluate.metrics import psnr
from linefuse.inference.restorer import Restorer
from linefuse.inference.tiles import boxes, restore_tiled, starts, window
from linefuse.params.full import load_params

from conftest import ROOT, matplotlib_charts, run_cli


@pytest.mark.parametrize("length", [1, 47, 48, 49, 100, 161, 2048])
def test_tiles_cover_every_pixel_and_the_last_is_flush(length):
    origins = starts(length, 48, 16)
    assert origins[0] == 0 and origins[-1] == max(length - 48, 0)
    assert all(b - a <= 48 - 16 for a, b in zip(origins, origins[1:], strict=False))
    covered = np.zeros(length, bool)
    for origin in origins:
        covered[origin : origin + 48] = True
    assert covered.all()


def test_the_window_tapers_only_where_another_tile_overlaps():
    inner = window(48, 16, True, True)
    assert inner[16:32].tolist() == [1.0] * 16 and 0 < inner[0] < 0.01 and 0 < inner[-1] < 0.01
    # where two neighbours' ramps cross, their weights add up to one: an even blend
    assert np.allclose(inner[-16:] + inner[:16], 1.0)
    assert window(48, 16, False, False).tolist() == [1.0] * 48


def test_an_identity_restorer_gives_the_input_back_exactly():
    image = np.random.default_rng(0).integers(0, 256, (161, 230, 3), dtype=np.uint8)
    calls = []

    def identity(batch):
        calls.append(batch.shape)
        return batch

    assert np.array_equal(restore_tiled(image, identity, 64, 16, 5), image)
    assert sum(shape[0] for shape in calls) == len(boxes(161, 230, 64, 16)) == 4 * 5
    assert all(shape[1:] == (64, 64, 3) for shape in calls) and max(s[0] for s in calls) == 5
    told = []  # progress hears of every batch's tiles, and changes nothing
    assert np.array_equal(restore_tiled(image, identity, 64, 16, 5, told.append), image)
    assert told == [shape[0] for shape in calls[:4]] and sum(told) == 20


def _chart(seed: int, params, size_px: tuple[int, int] = (192, 144)) -> np.ndarray:
    return draw_chart(matplotlib_charts(params.data.charts), seed, size_px=size_px)[0]


def _seams(length: int, tile: int, overlap: int) -> np.ndarray:
    """True within 3 px of a tile edge that lies inside the image."""
    near = np.zeros(length, bool)
    for origin in starts(length, tile, overlap):
        for edge in (origin, origin + tile):
            if 0 < edge < length:
                near[max(edge - 3, 0) : edge + 3] = True
    return near


def _blurred_charts(params, count: int = 4, size_px: tuple[int, int] = (192, 144)):
    for seed in range(count):
        sharp = _chart(seed, params, size_px)
        blurred = ndimage.gaussian_filter(sharp.astype(np.float64), (1.2, 1.2, 0))
        yield np.clip(np.rint(blurred), 0, 255).astype(np.uint8), sharp


def _restorers(project, tile: int, overlap: int, adapter: str | None = "models/lora/hard"):
    """The last adapter (or `adapter`) run whole (tiles.size above every chart here), and tiled
    in `tile` px tiles overlapping by `overlap`."""
    with chdir(project):
        params = load_params("params.yaml")
        made = {}
        for name, size in (("whole", 4096), ("tiled", tile)):
            tiles = params.tiles.model_copy(update={"size": size, "tile": tile, "overlap": overlap})
            made[name] = Restorer.from_params(
                params.model_copy(update={"tiles": tiles}), adapter, "cpu"
            )
    assert made["whole"].tile_for(2048, 2048) is None and made["tiled"].tile_for(tile + 1, 1)
    return params, made["whole"], made["tiled"]


def test_tiled_and_whole_agree_within_a_tenth_of_a_db(trained_project):
    """192 x 144 charts, small enough to run whole, cut by the suite's tiles (128, overlap 32)
    into four: PSNR against the sharp chart within 0.1 dB of the whole run's."""
    params, whole, tiled = _restorers(trained_project, 128, 32)
    assert params.tiles.size == 128 and params.tiles.overlap == 32  # conftest's tiny_params
    for blurred, sharp in _blurred_charts(params):
        by_whole, by_tiles = whole.restore_image(blurred, 2), tiled.restore_image(blurred, 2)
        gap = psnr(by_tiles, sharp, params.eval.metric) - psnr(by_whole, sharp, params.eval.metric)
        assert abs(gap) < 0.1, gap


def test_no_seam_shows_along_the_tile_edges(trained_project):
    """The default adapter (the curriculum's last) in the tiles restore and serve cut (the
    suite's params.tiles: 128 px, overlap 32), on 320 x 240 charts (six tiles each): what tiling
    adds to the error, against the whole run at the same pixels, is no larger within 3 px of a
    tile edge than elsewhere (within 0.1 grey levels)."""
    with chdir(trained_project):
        served = load_params("params.yaml").tiles
    tile, overlap = int(served.tile), served.overlap
    params, whole, tiled = _restorers(trained_project, tile, overlap)
    seams = _seams(240, tile, overlap)[:, None] | _seams(320, tile, overlap)[None, :]
    at_seams, elsewhere = [], []
    for blurred, sharp in _blurred_charts(params, count=8, size_px=(320, 240)):
        error = [
            np.abs(r.restore_image(blurred, params.eval.steps).astype(np.float64) - sharp).mean(
                axis=2
            )
            for r in (whole, tiled)
        ]
        added = error[1] - error[0]
        at_seams.append(added[seams].mean())
        elsewhere.append(added[~seams].mean())
    assert np.mean(at_seams) <= np.mean(elsewhere) + 0.1, (at_seams, elsewhere)


def test_restore_shows_the_tiles_of_a_tiled_image_and_writes_the_same_bytes(
    trained_project, tmp_path, monkeypatch
):
    """`linefuse restore` on a 400 x 300 chart, twelve tiles by the suite's (128 px, overlap
    32) in batches of 8, shows a second bar in tiles that counts them batch by batch; the PNG it
    writes is what restore_image gives with no bar. (tqdm hides a bar off a terminal, as here:
    the test shows them into a buffer.)"""
    bars = []

    class ShownBar(tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "disable": False, "file": io.StringIO()})
            self.updates: list[int] = []
            bars.append(self)

        def update(self, n=1):
            self.updates.append(n)
            return super().update(n)

    monkeypatch.setattr("linefuse.inference.restorer.tqdm", ShownBar)
    with chdir(trained_project):
        params = load_params("params.yaml")
    blurred = next(_blurred_charts(params, count=1, size_px=(400, 300)))[0]
    Image.fromarray(blurred).save(tmp_path / "chart.png")
    out = tmp_path / "out"
    argv = ("restore", str(tmp_path / "chart.png"), "--steps", "2", "--out", str(out))
    assert run_cli(trained_project, *argv) == 0
    images = [bar for bar in bars if bar.unit == "image"]
    tiles = [bar for bar in bars if bar.unit == "tile"]
    assert [bar.n for bar in images] == [1] and len(tiles) == 1
    assert tiles[0].total == tiles[0].n == len(boxes(300, 400, 128, 32)) == 12
    assert tiles[0].updates == [8, 4] and tiles[0].desc.startswith("chart.png")

    with chdir(trained_project):
        alone = Restorer.from_params(params, "models/lora/hard", "cpu").restore_image(blurred, 2)
    buffer = io.BytesIO()
    Image.fromarray(alone).save(buffer, "PNG")
    assert (out / "chart.png").read_bytes() == buffer.getvalue()


def test_tiles_params_are_checked():
    import yaml

    from linefuse.params import ParamsError
    from linefuse.params.full import parse_params

    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["tiles"]["overlap"] = raw["tiles"]["size"]
    with pytest.raises(ParamsError, match=r"tiles\.overlap: .* more than half of tiles\.size"):
        parse_params(raw)
