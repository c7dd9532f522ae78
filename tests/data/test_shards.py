"""shard@LEVEL: deterministic outputs, LMDB and WebDataset readers that agree, harder = blurrier."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
import torch
import webdataset as wds
from PIL import Image

from linefuse.data import shards
from linefuse.data.readers import (
    LmdbPairs,
    collate_pairs,
    read_manifest,
    shard_urls,
    webdataset_pairs,
)
from linefuse.data.tars import ShardWriter
from linefuse.params import DOMAINS, SPLITS
from linefuse.params.full import parse_params

from conftest import LEVELS, build_data, file_digests, run_cli, tiny_params


def test_two_runs_and_worker_counts_give_identical_bytes(tiny_project, tmp_path):
    """The session project was built with 1 worker; a fresh build with 2 must match it byte for
    byte."""
    second = build_data(tmp_path, tiny_params(), workers=2)
    first_files = file_digests(tiny_project / "data")
    assert file_digests(second / "data") == first_files
    assert any(name.endswith("lmdb/data.mdb") for name in first_files)
    assert sum(name.endswith(".tar") for name in first_files) >= 3 * len(SPLITS)
    for level in LEVELS:
        assert (tmp_path / f"metrics/shard/{level}.json").read_text() == (
            tiny_project / f"metrics/shard/{level}.json"
        ).read_text()


def _by_key(triples) -> dict:
    return {meta["key"]: (blurred, sharp, meta) for blurred, sharp, meta in triples}


@pytest.mark.parametrize("level", LEVELS)
def test_lmdb_and_webdataset_readers_agree(tiny_project, level):
    level_dir = tiny_project / "data/shards" / level
    metrics = json.loads((tiny_project / f"metrics/shard/{level}.json").read_text())
    for split in SPLITS:
        manifest = read_manifest(level_dir, split)
        from_lmdb = _by_key(LmdbPairs(level_dir, split)[i] for i in range(manifest.height))
        from_tars = _by_key(webdataset_pairs(shard_urls(level_dir, split)))
        assert len(from_lmdb) == len(from_tars) == manifest.height == metrics["samples"][split]
        assert manifest.height > 0
        assert from_lmdb.keys() == from_tars.keys() == set(manifest["key"])
        for key, (blurred, sharp, meta) in from_lmdb.items():
            tar_blurred, tar_sharp, tar_meta = from_tars[key]
            assert np.array_equal(blurred, tar_blurred) and np.array_equal(sharp, tar_sharp)
            assert meta == tar_meta
            assert blurred.dtype == np.uint8 and blurred.shape == sharp.shape
            assert "." not in key and meta["level"] == level and meta["split"] == split


def test_our_tars_are_webdatasets_byte_for_byte(tmp_path):
    """shard writes its tars without webdataset (whose import starts torch); they are the bytes
    webdataset's own ShardWriter writes, shard boundaries included, so its readers read them."""
    rng = np.random.default_rng(0)
    samples = [
        (
            f"chart{i:03d}_scan_{i % 2}",
            {
                "sharp.npy": shards.npy_bytes(rng.integers(0, 256, (i + 1, 7, 3), np.uint8)),
                "blurred.npy": rng.bytes(int(rng.integers(0, 1500))),
                "json": json.dumps({"i": i}).encode(),
            },
        )
        for i in range(7)
    ]
    (tmp_path / "ours").mkdir(), (tmp_path / "theirs").mkdir()
    ours = ShardWriter(str(tmp_path / "ours/train-%06d.tar"), maxcount=3)
    theirs = wds.ShardWriter(
        str(tmp_path / "theirs/train-%06d.tar"), maxcount=3, verbose=0, mtime=0
    )
    for key, members in samples:
        ours.write(key, members)
        theirs.write({"__key__": key, **members})
    ours.close(), theirs.close()
    written = file_digests(tmp_path / "ours")
    assert written == file_digests(tmp_path / "theirs")
    assert list(written) == [f"train-{n:06d}.tar" for n in range(3)]
    ShardWriter(str(tmp_path / "ours/unused-%06d.tar"), maxcount=3).close()
    assert not list(tmp_path.glob("ours/unused-*"))  # a split with no samples leaves no tar


def test_manifest_declares_shapes_and_drawn_params(tiny_project):
    params = tiny_params()
    manifest = read_manifest(tiny_project / "data/shards/hard")
    train = manifest.filter(pl.col("split") == "train")
    assert set(train["height"]) == {32} and set(train["width"]) == {32}
    val = manifest.filter(pl.col("split") == "val")  # shards.val_crop
    assert set(val["height"]) == {48} and set(val["width"]) == {48}
    test = manifest.filter(pl.col("split") == "test")  # shards.test_crop: null, the whole chart
    assert set(test["height"]) == {64} and set(test["width"]) == {96}
    assert set(manifest["dtype"]) == {"uint8"} and set(manifest["layout"]) == {"blurred,sharp"}
    images = pl.read_parquet(tiny_project / "data/index/images.parquet")
    n_train = images.filter(pl.col("split") == "train").height
    assert train.height == n_train * len(DOMAINS) * params["shards"]["patches_per_image"]
    sigma_low, sigma_high = params["degrade"]["gaussian"]["hard"]["sigma"]
    sigmas = [
        json.loads(p)["sigma"] for p in manifest.filter(pl.col("domain") == "gaussian")["params"]
    ]
    assert all(sigma_low <= s <= sigma_high for s in sigmas) and len(set(sigmas)) > 1


def _pooled_psnr(level_dir) -> dict[str, float]:
    """PSNR of the squared error pooled over every split's samples, per domain."""
    totals: dict[str, list[float]] = {}
    for split in SPLITS:
        dataset = LmdbPairs(level_dir, split)
        for i in range(len(dataset)):
            blurred, sharp, meta = dataset[i]
            diff = blurred.astype(np.float64) - sharp.astype(np.float64)
            total = totals.setdefault(meta["domain"], [0.0, 0])
            total[0] += float(np.square(diff).sum())
            total[1] += diff.size
        dataset.close()
    return {domain: 10 * np.log10(255.0**2 / (sse / n)) for domain, (sse, n) in totals.items()}


def test_blurred_psnr_falls_from_easy_to_hard_in_every_domain(tiny_project):
    """Pooled over every split's samples (a test split of three charts can invert lowres, whose
    easy and medium factors overlap), as shard's own metric reports it."""
    psnr = {}
    for level in LEVELS:
        psnr[level] = _pooled_psnr(tiny_project / "data/shards" / level)
        reported = json.loads((tiny_project / f"metrics/shard/{level}.json").read_text())
        assert reported["input_psnr_pooled"] == pytest.approx(psnr[level], abs=1e-3)
    for domain in DOMAINS:
        easy, medium, hard = (psnr[level][domain] for level in LEVELS)
        assert easy > medium > hard, (domain, easy, medium, hard)


def test_dataloader_workers_read_lmdb_and_split_webdataset(tiny_project):
    level_dir = tiny_project / "data/shards/easy"
    dataset = LmdbPairs(level_dir, "train")
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=8, num_workers=2, collate_fn=collate_pairs
    )
    batches = list(loader)
    assert sum(batch[0].shape[0] for batch in batches) == len(dataset)
    assert torch.equal(batches[0][1][0], torch.from_numpy(dataset[0][1]))
    assert [meta["key"] for batch in batches for meta in batch[2]] == [
        dataset.metas[i]["key"] for i in range(len(dataset))
    ]

    urls = shard_urls(level_dir, "train")
    assert len(urls) >= 2
    pipeline = webdataset_pairs(urls, shuffle_shards=len(urls), shuffle_buffer=32, seed=3)
    loader = torch.utils.data.DataLoader(pipeline, batch_size=None, num_workers=2)
    keys = [meta["key"] for _, _, meta in loader]
    assert sorted(keys) == sorted(dataset.metas[i]["key"] for i in range(len(dataset)))
    assert keys != sorted(keys)


def test_failed_shard_leaves_the_previous_output(tiny_project, tmp_path, monkeypatch, capsys):
    build_data(tmp_path, tiny_params())
    before = file_digests(tmp_path / "data/shards/easy")

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shards, "npy_bytes", broken)
    assert run_cli(tmp_path, "shard", "--level", "easy", "--workers", "1") == 2
    assert "No space left on device" in capsys.readouterr().err
    assert file_digests(tmp_path / "data/shards/easy") == before
    assert [p.name for p in (tmp_path / "data/shards").iterdir()] == sorted(
        p.name for p in (tmp_path / "data/shards").iterdir() if not p.name.startswith(".")
    )


def image(height: int, width: int) -> np.ndarray:
    return np.full((height, width, 3), 255, np.uint8)


def test_focused_train_patches_hold_what_the_blur_changed():
    """focus 1: every patch holds the one changed dot of a blank page; focus 0: uniform patches,
    of which most (on a page 16x the crop's area) miss it."""
    raw = tiny_params()
    raw["shards"].update(crop=32, patches_per_image=200)
    sharp = image(128, 128)
    blurred = sharp.copy()
    blurred[100:102, 20:22] = 0
    hits = {}
    for focus in (1.0, 0.0):
        raw["shards"]["focus"] = focus
        windows = shards.crop_windows(
            sharp, blurred, "train", parse_params(raw), np.random.default_rng(0)
        )
        assert len(windows) == 200 and all(w[2:] == (32, 32) for w in windows)
        hits[focus] = np.mean([y <= 100 < y + 31 and x <= 20 < x + 31 for y, x, _, _ in windows])
    assert hits[1.0] == 1.0
    assert hits[0.0] < 0.2


def test_val_and_test_crops_follow_their_own_keys():
    """val: one centred shards.val_crop; test: the whole image, or one centred test_crop."""
    raw = tiny_params()
    rng = np.random.default_rng(0)
    params = parse_params(raw)
    page = image(64, 96)
    assert shards.crop_windows(page, page, "val", params, rng) == [(8, 24, 48, 48)]
    assert shards.crop_windows(page, page, "test", params, rng) == [(0, 0, 64, 96)]
    raw["shards"]["test_crop"] = 32
    assert shards.crop_windows(page, page, "test", parse_params(raw), rng) == [(16, 32, 32, 32)]
    assert shards.crop_windows(image(20, 96), image(20, 96), "val", params, rng) == [
        (0, 24, 20, 48)
    ]  # smaller than a crop


def test_scan_pairs_a_model_trains_on_pass_through_the_restore_steps_deskew(tmp_path, monkeypatch):
    """The train and val pairs of the scan domain go through eval.deskew's step with its mode
    (restoring straightens every input first); the scored splits and other domains stay as drawn."""
    seen = []

    def marking(blurred, mode):
        seen.append(mode)
        return np.zeros_like(blurred)  # a mark no degradation draws

    monkeypatch.setattr(shards, "straighten", marking)
    path = tmp_path / "chart.png"
    Image.fromarray(image(96, 128)).save(path)
    params = parse_params(tiny_params())
    for split in SPLITS:
        seen.clear()
        pairs = shards.pairs_for_image((str(path), "chart", split, LEVELS[0], params))
        marked = {pair.meta["domain"] for pair in pairs if not pair.blurred.any()}
        trained = split in ("train", "val")
        assert marked == ({"scan"} if trained else set()), split
        assert seen == ([params.eval.deskew] if trained else []), split
