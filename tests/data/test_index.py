"""index: hostile files become rejects with reasons; good ones are indexed with stable splits."""

from __future__ import annotations

import json
import os
import struct
import zlib

import numpy as np
import polars as pl
from PIL import Image

from linefuse.data.index import split_for
from linefuse.params.data import SplitRatios

from conftest import run_cli, tiny_params, write_params


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height and that holds no pixels at all."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", len(ihdr))
        + chunk
        + struct.pack(">I", zlib.crc32(chunk))
        + struct.pack(">I", 0)
        + b"IEND"
        + struct.pack(">I", zlib.crc32(b"IEND"))
    )


def _image(seed: int, size=(80, 60)) -> Image.Image:
    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    return Image.fromarray(pixels)


def make_hostile_folder(root) -> dict[str, str]:
    """Writes good and bad files under root; returns {bad relative path: expected reason}."""
    (root / "nested").mkdir(parents=True)
    _image(0).save(root / "good_a.png")
    _image(1).save(root / "nested" / "good b ü.jpg", quality=95)
    _image(2).save(root / "good_c.webp", lossless=True)
    _image(3).save(root / "good_d.tiff")
    (root / "good_a.txt").write_text("a line chart of a spectrum\n")
    Image.fromarray(np.full((40, 40), 40000, np.uint16)).save(root / "grey16.png")
    rgba = np.dstack([np.asarray(_image(4)), np.full((60, 80), 128, np.uint8)])
    Image.fromarray(rgba, "RGBA").save(root / "rgba.png")
    _image(5).convert("P", palette=Image.Palette.ADAPTIVE).save(root / "palette.png")
    _image(6).convert("CMYK").save(root / "cmyk.jpg", quality=95)
    _image(7).save(root / "new\nline.png")

    full = (root / "good_a.png").read_bytes()
    (root / "truncated.png").write_bytes(full[: len(full) // 2])
    photo = (root / "nested" / "good b ü.jpg").read_bytes()
    (root / "truncated_photo.jpg").write_bytes(photo[: len(photo) // 2])
    os.symlink("nowhere.png", root / "dangling.png")
    (root / "empty.png").write_bytes(b"")
    (root / "notes.png").write_text("this is not an image\n")
    Image.new("RGB", (1, 1), "white").save(root / "tiny.png")
    (root / "bomb.png").write_bytes(_png_header_only(100_000, 100_000))
    os.symlink("loop.png", root / "loop.png")
    (root / "nested" / "copy_of_a.png").write_bytes(full)
    os.mkfifo(root / "pipe.png")
    (root / "README.md").write_text("ignored: not an image suffix\n")
    return {
        "truncated.png": "truncated",
        "empty.png": "empty",
        "notes.png": "not_an_image",
        "tiny.png": "too_small",
        "bomb.png": "oversized",
        "loop.png": "unreadable",
        "nested/copy_of_a.png": "duplicate",
        "pipe.png": "unreadable",
        "truncated_photo.jpg": "truncated",
        "dangling.png": "unreadable",
    }


KEPT = [
    "cmyk.jpg",
    "good_a.png",
    "good_c.webp",
    "good_d.tiff",
    "grey16.png",
    "nested/good b ü.jpg",
    "new\nline.png",
    "palette.png",
    "rgba.png",
]


def test_hostile_files_are_rejected_with_reasons(tmp_path, capsys):
    source = tmp_path / "photos"
    expected = make_hostile_folder(source)
    params = tiny_params()
    params["data"]["source_dir"] = str(source)
    write_params(tmp_path, params)

    assert run_cli(tmp_path, "index", "--workers", "2") == 0

    rejects = pl.read_parquet(tmp_path / "data/index/rejects.parquet")
    assert dict(zip(rejects["path"], rejects["reason"], strict=True)) == expected
    details = dict(zip(rejects["path"], rejects["detail"], strict=True))
    assert details["nested/copy_of_a.png"] == "same content as good_a.png"
    assert details["bomb.png"].startswith("100000x100000 exceeds data.max_pixels")
    assert "symbolic links" in details["loop.png"]

    images = pl.read_parquet(tmp_path / "data/index/images.parquet")
    assert sorted(images["path"]) == KEPT
    row = images.filter(pl.col("path") == "good_a.png").row(0, named=True)
    assert (row["width"], row["height"], row["channels"], row["mode"]) == (80, 60, 3, "RGB")
    assert row["prompt"] == "a line chart of a spectrum"
    assert images.filter(pl.col("path") == "grey16.png")["mode"].item() == "I;16"
    assert images["id"].n_unique() == images.height

    metrics = json.loads((tmp_path / "metrics/index.json").read_text())
    assert metrics["kept"] == 9 and metrics["rejected"] == 10
    assert metrics["rejected_by_reason"]["unreadable"] == 3
    assert sum(metrics["split"].values()) == 9
    modes = dict(zip(images["path"], images["mode"], strict=True))
    assert (modes["rgba.png"], modes["palette.png"], modes["cmyk.jpg"]) == ("RGBA", "P", "CMYK")


def test_split_depends_only_on_the_id():
    ratios = SplitRatios(train=0.8, val=0.1, test=0.1)
    step = 2**64 // 1000
    ids = [f"{i * step + step // 2:016x}" for i in range(1000)]
    splits = [split_for(i, ratios) for i in ids]
    assert splits.count("train") == 800 and splits.count("val") == 100
    assert split_for("ffffffffffffffff", ratios) == "test"


def test_adding_images_moves_no_old_image(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    for seed in range(12):
        _image(seed).save(source / f"img{seed:02d}.png")
    params = tiny_params()
    params["data"]["source_dir"] = str(source)
    write_params(tmp_path, params)
    assert run_cli(tmp_path, "index", "--workers", "1") == 0
    before = pl.read_parquet(tmp_path / "data/index/images.parquet")
    for seed in range(12, 30):
        _image(seed).save(source / f"img{seed:02d}.png")
    assert run_cli(tmp_path, "index", "--workers", "1") == 0
    after = pl.read_parquet(tmp_path / "data/index/images.parquet")
    assert after.height == 30
    assert before.join(after, on="id").filter(pl.col("split") != pl.col("split_right")).is_empty()


def test_missing_source_folder_is_one_line(tmp_path, capsys):
    params = tiny_params()
    params["data"]["source_dir"] = "no/such/folder"
    write_params(tmp_path, params)
    assert run_cli(tmp_path, "index") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "linefuse: error: data.source_dir: no/such/folder is not a folder; run "
        "`linefuse generate` or point data.source_dir at a folder of images"
    ]


def test_a_held_out_family_gets_its_own_split_whatever_its_hash(tmp_path):
    """Images whose sidecar names a family in data.charts.held_out go to held_out; a sidecar
    that is not a JSON object, or names no family, changes nothing."""
    source = tmp_path / "src"
    source.mkdir()
    sidecars = {
        0: {"family": "held"},
        1: {"family": "held"},
        2: {"family": "trained"},
        3: ["not", "an", "object"],
        4: None,  # no sidecar
    }
    for seed, sidecar in sidecars.items():
        _image(seed).save(source / f"img{seed}.png")
        if sidecar is not None:
            (source / f"img{seed}.json").write_text(json.dumps(sidecar))
    _image(5).save(source / "img5.png")
    (source / "img5.json").write_text("{broken")
    params = tiny_params()
    params["data"]["source_dir"] = str(source)
    params["data"]["charts"]["families"]["held"] = ["dark_background"]
    params["data"]["charts"]["held_out"] = ["held"]
    write_params(tmp_path, params)
    assert run_cli(tmp_path, "index", "--workers", "1") == 0
    images = pl.read_parquet(tmp_path / "data/index/images.parquet").sort("path")
    rows = {row["path"]: row for row in images.iter_rows(named=True)}
    families = [rows[f"img{i}.png"]["family"] for i in range(6)]
    assert families == ["held", "held", "trained", "", "", ""]
    assert rows["img0.png"]["split"] == rows["img1.png"]["split"] == "held_out"
    ratios = SplitRatios(**params["data"]["split"])
    for name in ("img2.png", "img3.png", "img4.png", "img5.png"):
        assert rows[name]["split"] == split_for(rows[name]["id"], ratios)
    metrics = json.loads((tmp_path / "metrics/index.json").read_text())
    assert metrics["split"]["held_out"] == 2 and metrics["family"] == {"held": 2, "trained": 1}
