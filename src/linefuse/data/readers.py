"""Readers over one shard@LEVEL directory (a map-style LMDB dataset and a WebDataset pipeline) and
over one embed@LEVEL directory (EmbeddedPairs).

Both yield `(blurred, sharp, meta)` with uint8 (H, W, 3) arrays and the same meta dict, so a
training loop can switch reader without changing a result.
"""

from __future__ import annotations

import json
from pathlib import Path

import lmdb
import numpy as np
import polars as pl
import torch
import webdataset as wds

from linefuse.data.layout import (
    EMBEDDINGS_MANIFEST,
    LMDB_DIR,
    PROMPTS,
    SHARD_MANIFEST,
    WDS_DIR,
    split_file,
)
from linefuse.stage import UserError

META_FIELDS = ("key", "image_id", "domain", "level", "split", "patch")


def read_manifest(level_dir: str | Path, split: str | None = None) -> pl.DataFrame:
    manifest = pl.read_parquet(Path(level_dir) / SHARD_MANIFEST)
    if split is not None:
        manifest = manifest.filter(pl.col("split") == split)
    return manifest.sort("key")


class LmdbPairs:
    """Map-style dataset over the level's LMDB env, in key order.

    The env is opened lazily in whichever process reads first (each DataLoader worker opens its
    own: LMDB handles cannot cross a fork or a pickle), read-only and without a lock file.
    """

    def __init__(self, level_dir: str | Path, split: str):
        self.path = str(Path(level_dir) / LMDB_DIR)
        rows = read_manifest(level_dir, split).to_dicts()
        self.keys = [row["key"].encode() for row in rows]
        self.shapes = [(2, row["height"], row["width"], row["channels"]) for row in rows]
        self.metas = [
            {**{k: row[k] for k in META_FIELDS}, "params": json.loads(row["params"])}
            for row in rows
        ]
        self._env = None

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray, dict]:
        if self._env is None:
            self._env = lmdb.open(
                self.path,
                readonly=True,
                lock=False,
                readahead=False,
                meminit=False,
                max_readers=512,
            )
        with self._env.begin(buffers=True) as txn:
            pair = np.frombuffer(txn.get(self.keys[index]), dtype=np.uint8)
            pair = pair.reshape(self.shapes[index]).copy()
        return pair[0], pair[1], self.metas[index]

    def close(self) -> None:
        """Releases the env (py-lmdb allows one open handle per env and process)."""
        if self._env is not None:
            self._env.close()
            self._env = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_env": None}


def collate_pairs(batch: list[tuple]) -> tuple:
    """Stacks (blurred, sharp) into uint8 (B, H, W, 3) tensors and keeps the metas as a list.

    torch's default collate cannot merge metas whose drawn params differ between domains.
    """
    blurred, sharp, metas = zip(*batch, strict=True)
    return torch.from_numpy(np.stack(blurred)), torch.from_numpy(np.stack(sharp)), list(metas)


def shard_urls(level_dir: str | Path, split: str) -> list[str]:
    return sorted(str(p) for p in (Path(level_dir) / WDS_DIR).glob(f"{split}-*.tar"))


def _as_triple(sample: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    return sample["blurred.npy"], sample["sharp.npy"], sample["json"]


def webdataset_pairs(
    urls: str | list[str], shuffle_shards: int = 0, shuffle_buffer: int = 0, seed: int = 0
) -> wds.WebDataset:
    """A WebDataset pipeline over local paths or URLs (file://, http://, pipe:).

    Shards are split across ranks and then across DataLoader workers; with shuffling off the
    samples come in the order the shard stage wrote them.
    """
    dataset = wds.WebDataset(
        urls,
        shardshuffle=shuffle_shards or False,
        nodesplitter=wds.split_by_node,
        workersplitter=wds.split_by_worker,
        empty_check=False,
        seed=seed,
    )
    if shuffle_buffer:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed)
    return dataset.decode().map(_as_triple)


class EmbeddedPairs:
    """Map-style dataset over one split of an embeddings dir.

    __getitem__(i) -> (blurred float32 CHW, sharp float32 CHW, prompt_index int). The split's
    safetensors file is loaded once, lazily on first access, so the dataset pickles cheaply into
    DataLoader workers (each loads its own copy).
    """

    def __init__(self, embed_dir: str | Path, split: str):
        self.root = Path(embed_dir)
        self.split = split
        self.manifest = json.loads((self.root / EMBEDDINGS_MANIFEST).read_text())
        if split not in self.manifest["splits"]:
            raise UserError(
                f"{self.root} holds no {split} split (it has "
                f"{', '.join(self.manifest['splits']) or 'none'}); check embed.splits"
            )
        entry = self.manifest["splits"][split]
        self.keys: list[str] = list(entry["keys"])
        self.shape: tuple[int, ...] = tuple(entry["shape"])
        self.path = self.root / split_file(split)
        self._tensors: dict[str, torch.Tensor] | None = None

    def tensors(self) -> dict[str, torch.Tensor]:
        """The whole split as stored ('blurred', 'sharp' in the embed dtype, 'prompt' int64)."""
        if self._tensors is None:
            from safetensors.torch import load_file

            self._tensors = load_file(str(self.path))
        return self._tensors

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        tensors = self.tensors()
        return (
            tensors["blurred"][index].to(torch.float32),
            tensors["sharp"][index].to(torch.float32),
            int(tensors["prompt"][index]),
        )

    def prompt_embeddings(self) -> torch.Tensor:
        """The prompt table, float32 (P, seq, dim)."""
        from safetensors.torch import load_file

        return load_file(str(self.root / PROMPTS))["embeddings"].to(torch.float32)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_tensors": None}
