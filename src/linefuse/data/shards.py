"""shard@LEVEL: indexed images x blur domains -> aligned (blurred, sharp) pairs, written twice.

One level directory holds
  lmdb/data.mdb          one LMDB env; value = uint8 array (2, H, W, 3): [blurred, sharp]
  wds/{split}-NNNNNN.tar WebDataset shards: KEY.blurred.npy, KEY.sharp.npy, KEY.json
  manifest.parquet       every key with split, domain, level, shape, dtype, tar and drawn params
The manifest is the LMDB meta file (BasicSR's meta_info, as a table). Everything is a pure
function of (image bytes, params, seed), computed per item, so worker count never matters.
"""

from __future__ import annotations

import io
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import lmdb
import numpy as np
import polars as pl

from linefuse.data.degrade import degrade, item_rng
from linefuse.data.deskew import straighten
from linefuse.data.images import load_rgb
from linefuse.data.layout import LMDB_DIR, PAIR_LAYOUT, SHARD_MANIFEST, WDS_DIR, sample_key
from linefuse.data.tars import ShardWriter
from linefuse.params import SPLITS
from linefuse.stage import ordered_map

if TYPE_CHECKING:
    from linefuse.params.full import Params

LMDB_MAP_SIZE = 1 << 40  # address space only: the file grows with what is written
COMMIT_EVERY = 256
# restoring straightens every input first (eval.deskew), so the pairs a model trains on pass
# through the same step: the scan domain's, the one whose degradation turns the page. The other
# domains' inputs are left as drawn, as the step leaves nearly all of them (docs/experiments.md),
# at a fraction of the stage's time; the scored splits stay as drawn: evaluate straightens them
MOVES_PAGE = ("scan",)
TRAINED = ("train", "val")

MANIFEST_SCHEMA = {
    "key": pl.String,
    "split": pl.String,
    "image_id": pl.String,
    "domain": pl.String,
    "level": pl.String,
    "patch": pl.Int64,
    "height": pl.Int64,
    "width": pl.Int64,
    "channels": pl.Int64,
    "dtype": pl.String,
    "layout": pl.String,
    "tar": pl.String,
    "params": pl.String,
}


@dataclass(frozen=True)
class Pair:
    key: str
    meta: dict
    blurred: np.ndarray
    sharp: np.ndarray


def npy_bytes(array: np.ndarray) -> bytes:
    """Raw .npy, not PNG: the tar reader would otherwise decode two PNGs per sample, its
    costliest work (docs/experiments.md); .npy loads without pickle (allow_pickle stays False)."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


CHANGED_LEVEL = 8  # grey levels (of 255) a pixel must move by to count as changed by the blur


def crop_windows(sharp: np.ndarray, blurred: np.ndarray, split: str, params: Params, rng) -> list:
    """Crop windows (top, left, size_y, size_x): train patches; for val and test one centred
    crop (test: the whole image when shards.test_crop is null).

    A `shards.focus` share of the train patches is centred, give or take a quarter of a crop, on
    a pixel the degradation changed: a uniform patch of a chart is mostly blank paper, which
    teaches nothing (docs/experiments.md has the trial).
    """
    shards = params.shards
    height, width = sharp.shape[:2]
    if split != "train":
        size = shards.val_crop if split == "val" else shards.test_crop
        size_y = min(height, size or height)
        size_x = min(width, size or width)
        return [((height - size_y) // 2, (width - size_x) // 2, size_y, size_x)]
    size = shards.crop
    if height < size or width < size:
        return []
    changed = np.abs(sharp.astype(np.int16) - blurred.astype(np.int16)).max(axis=2)
    rows, cols = np.nonzero(changed > CHANGED_LEVEL)
    windows = []
    for _ in range(shards.patches_per_image):
        if len(rows) and rng.random() < shards.focus:
            pick = rng.integers(len(rows))
            jitter = rng.integers(-(size // 4), size // 4 + 1, size=2)
            top = int(np.clip(rows[pick] - size // 2 + jitter[0], 0, height - size))
            left = int(np.clip(cols[pick] - size // 2 + jitter[1], 0, width - size))
        else:
            top = int(rng.integers(0, height - size + 1))
            left = int(rng.integers(0, width - size + 1))
        windows.append((top, left, size, size))
    return windows


def pairs_for_image(task: tuple[str, str, str, str, Params]) -> list[Pair]:
    """Every pair one image yields at one level: all domains, all its crops."""
    path, image_id, split, level, params = task
    sharp_full = load_rgb(path)
    pairs = []
    for domain in params.degrade.domains:
        rng = item_rng(params.degrade.seed, image_id, domain, level)
        blurred_full, drawn = degrade(sharp_full, domain, params.degrade.level(domain, level), rng)
        if split in TRAINED and domain in MOVES_PAGE:  # the residual the model will meet
            blurred_full = straighten(blurred_full, params.eval.deskew)
        for patch, (top, left, size_y, size_x) in enumerate(
            crop_windows(sharp_full, blurred_full, split, params, rng)
        ):
            window = np.s_[top : top + size_y, left : left + size_x]
            key = sample_key(image_id, domain, patch)
            meta = {
                "key": key,
                "image_id": image_id,
                "domain": domain,
                "level": level,
                "split": split,
                "patch": patch,
                "params": drawn,
            }
            pairs.append(
                Pair(
                    key,
                    meta,
                    np.ascontiguousarray(blurred_full[window]),
                    np.ascontiguousarray(sharp_full[window]),
                )
            )
    return pairs


class _LevelWriter:
    """Streams pairs into the LMDB env and one tar ShardWriter per split."""

    def __init__(self, out_dir: Path, samples_per_shard: int):
        (out_dir / LMDB_DIR).mkdir()
        (out_dir / WDS_DIR).mkdir()
        self.env = lmdb.open(
            str(out_dir / LMDB_DIR), map_size=LMDB_MAP_SIZE, lock=False, sync=False, meminit=True
        )
        self.txn = self.env.begin(write=True)
        self.pending = 0
        self.tars = {
            split: ShardWriter(str(out_dir / WDS_DIR / f"{split}-%06d.tar"), samples_per_shard)
            for split in SPLITS
        }
        self.rows: list[dict] = []

    def add(self, pair: Pair) -> None:
        stacked = np.stack([pair.blurred, pair.sharp])
        self.txn.put(pair.key.encode(), stacked.tobytes())
        self.pending += 1
        if self.pending >= COMMIT_EVERY:
            self.txn.commit()
            self.txn, self.pending = self.env.begin(write=True), 0
        tar = self.tars[pair.meta["split"]]
        tar.write(
            pair.key,
            {
                "blurred.npy": npy_bytes(pair.blurred),
                "sharp.npy": npy_bytes(pair.sharp),
                "json": json.dumps(pair.meta, sort_keys=True).encode(),
            },
        )
        height, width, channels = pair.sharp.shape
        self.rows.append(
            {
                **{
                    k: pair.meta[k]
                    for k in ("key", "split", "image_id", "domain", "level", "patch")
                },
                "height": height,
                "width": width,
                "channels": channels,
                "dtype": "uint8",
                "layout": PAIR_LAYOUT,
                "tar": Path(tar.fname).name,
                "params": json.dumps(pair.meta["params"], sort_keys=True),
            }
        )

    def abort(self) -> None:
        """Release the env and the tars after a failure; out_dir is discarded by the caller."""
        self.txn.abort()
        self.env.close()
        for tar in self.tars.values():
            try:
                tar.close()
            except OSError:
                pass

    def close(self) -> pl.DataFrame:
        self.txn.commit()
        self.env.sync(True)
        self.env.close()
        for tar in self.tars.values():
            tar.close()
        return pl.DataFrame(self.rows, schema=MANIFEST_SCHEMA)


def _psnr_of_mse(mse: float) -> float:
    return 10.0 * math.log10(255.0**2 / mse) if mse > 0 else float("inf")


def build_level(
    params: Params, level: str, index_path: Path, out_dir: Path, workers: int = 1
) -> dict:
    """Writes the level into `out_dir` (empty) and returns its metrics."""
    images = pl.read_parquet(index_path).sort("id")
    root = Path(params.data.source_dir)
    tasks = [
        (str(root / row["path"]), row["id"], row["split"], level, params)
        for row in images.iter_rows(named=True)
    ]
    writer = _LevelWriter(out_dir, params.shards.samples_per_shard)
    squared_error: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    too_small = 0
    try:
        for pairs in ordered_map(
            pairs_for_image, tasks, workers, desc=f"shard@{level}", unit="image"
        ):
            too_small += not pairs
            for pair in pairs:
                writer.add(pair)
                diff = pair.blurred.astype(np.float64) - pair.sharp.astype(np.float64)
                total = squared_error[pair.meta["domain"]]
                total[0] += float(np.square(diff).sum())
                total[1] += diff.size
    except BaseException:
        writer.abort()
        raise
    manifest = writer.close()
    manifest.write_parquet(out_dir / SHARD_MANIFEST)
    counts = manifest.group_by("split").len().rows()
    return {
        "samples": {split: dict(counts).get(split, 0) for split in SPLITS},
        "images": images.height,
        "images_smaller_than_crop": too_small,
        # PSNR of the squared error pooled over every sample of a domain: a quick gauge of the
        # level's strength, named apart from evaluate's input PSNR (the mean of per-image PSNRs)
        "input_psnr_pooled": {
            domain: round(_psnr_of_mse(sse / n), 4)
            for domain, (sse, n) in sorted(squared_error.items())
        },
    }
