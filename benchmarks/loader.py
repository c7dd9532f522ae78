"""Loader throughput: LMDB reader, WebDataset reader, raw LMDB ceiling, and the naive path.

The naive path is what a user would otherwise write: decode the source PNG and degrade it on the
fly for every sample. It reproduces the shard stage's pairs exactly (checked below), so all four
paths deliver the same crops. Builds the data half on the default params in a temporary folder,
measures in one run on one machine, and writes benchmarks/results/loader.json.

    python benchmarks/loader.py [--level easy] [--samples 600]
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import tempfile
import time
from contextlib import chdir
from pathlib import Path

import lmdb
import numpy as np
import polars as pl

from linefuse.cli import main as linefuse
from linefuse.data.degrade import degrade, item_rng
from linefuse.data.images import load_rgb
from linefuse.data.layout import LMDB_DIR
from linefuse.data.readers import LmdbPairs, read_manifest, shard_urls, webdataset_pairs
from linefuse.data.shards import crop_windows
from linefuse.params.full import load_params

REPO = Path(__file__).resolve().parents[1]


def rate(make_samples, repeats: int = 3) -> tuple[float, int]:
    """Best samples/s of `repeats` passes over make_samples(), an iterable of (blurred, sharp,
    ...)."""
    best = 0.0
    for _ in range(repeats):
        started, count = time.perf_counter(), 0
        for item in make_samples():
            item[0].sum(), item[1].sum()  # touch the pixels, as a training step would
            count += 1
        best = max(best, count / (time.perf_counter() - started))
    return best, count


def naive_pairs(params, rows: list[dict], index: pl.DataFrame):
    """Decode + degrade + crop per sample, as a hand-written on-the-fly loader would."""
    paths = dict(zip(index["id"], index["path"], strict=True))
    root = Path(params.data.source_dir)
    for row in rows:
        sharp = load_rgb(root / paths[row["image_id"]])
        rng = item_rng(params.degrade.seed, row["image_id"], row["domain"], row["level"])
        blurred, _ = degrade(
            sharp, row["domain"], params.degrade.level(row["domain"], row["level"]), rng
        )
        top, left, size_y, size_x = crop_windows(sharp, blurred, row["split"], params, rng)[
            row["patch"]
        ]
        window = np.s_[top : top + size_y, left : left + size_x]
        yield blurred[window], sharp[window]


def raw_lmdb(level_dir: Path, keys: list[bytes]):
    """Zero-copy views straight out of the memory map: no reader can go faster."""
    with lmdb.open(str(level_dir / LMDB_DIR), readonly=True, lock=False, readahead=False) as env:
        with env.begin(buffers=True) as txn:
            for key in keys:
                pair = np.frombuffer(txn.get(key), dtype=np.uint8).reshape(2, -1, 1, 1)
                yield pair[0], pair[1]


def measure(level: str, samples: int) -> dict:
    with tempfile.TemporaryDirectory() as folder, chdir(folder):
        (Path(folder) / "params.yaml").write_text((REPO / "params.yaml").read_text())
        for argv in (["generate"], ["index"], ["shard", "--level", level]):
            assert linefuse(argv) == 0, argv
        params = load_params()
        level_dir = Path("data/shards") / level
        manifest = read_manifest(level_dir, "train").head(samples)
        rows = manifest.to_dicts()
        index = pl.read_parquet("data/index/images.parquet")

        lmdb_reader = LmdbPairs(level_dir, "train")
        first = [lmdb_reader[i] for i in range(5)]
        for (blurred, sharp), (want_blurred, want_sharp, _) in zip(
            naive_pairs(params, rows, index), first, strict=True
        ):
            assert np.array_equal(blurred, want_blurred) and np.array_equal(sharp, want_sharp)

        results = {"lmdb_reader": rate(lambda: (lmdb_reader[i] for i in range(len(rows))))}
        lmdb_reader.close()
        urls, keys = shard_urls(level_dir, "train"), [row["key"].encode() for row in rows]
        results |= {
            "webdataset_reader": rate(lambda: itertools.islice(webdataset_pairs(urls), len(rows))),
            "raw_lmdb_ceiling": rate(lambda: raw_lmdb(level_dir, keys)),
            "naive_decode_and_degrade": rate(lambda: naive_pairs(params, rows, index), repeats=1),
        }
    naive = results["naive_decode_and_degrade"][0]
    return {
        "level": level,
        "crop": params.shards.crop,
        "samples": {name: count for name, (_, count) in results.items()},
        "samples_per_s": {name: round(value, 1) for name, (value, _) in results.items()},
        "ratio_to_naive": {name: round(value / naive, 2) for name, (value, _) in results.items()},
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", default="easy")
    parser.add_argument("--samples", type=int, default=600)
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/loader.json"))
    args = parser.parse_args()
    report = measure(args.level, args.samples)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["samples_per_s"], indent=2))
    print(json.dumps(report["ratio_to_naive"], indent=2))


if __name__ == "__main__":
    main()
