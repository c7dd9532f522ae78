"""What a training step reads: (blurred, sharp, prompt index) tensors, from the reader in params.

`embeddings` reads the embed stage's cached tensors (the default: no decoding, no VAE per step);
`lmdb` and `webdataset` read the shard stage's pairs and normalise them on the fly (pixel space).
Batches are reproducible from (seed, epoch) and resumable at any step, whatever the worker count.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING

import braceexpand
import torch
from torch.utils.data import ConcatDataset, DataLoader, Sampler, SequentialSampler, Subset

from linefuse import paths
from linefuse.data.layout import SHARD_MANIFEST, key_domain
from linefuse.data.readers import EmbeddedPairs, LmdbPairs, shard_urls, webdataset_pairs
from linefuse.data.transforms import normalise_pair
from linefuse.params.training import LoaderParams
from linefuse.stage import UserError
from linefuse.train.null_prompt import null_prompt

if TYPE_CHECKING:
    from linefuse.params.full import Params
    from linefuse.train.job import Job


class PixelPairs:
    """LmdbPairs as training triples, prompt index 0 (the null prompt)."""

    def __init__(self, level_dir: Path, split: str):
        self.pairs = LmdbPairs(level_dir, split)
        self.keys = [key.decode() for key in self.pairs.keys]

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: int):
        blurred, sharp, _ = self.pairs[index]
        return (*normalise_pair(blurred, sharp), 0)


class LruCache:
    """Keeps decoded samples in RAM up to `cap_gb`, least recently used out first.

    Each DataLoader worker holds its own cache; hits and misses feed the training logs.
    """

    def __init__(self, dataset, cap_gb: float):
        self.dataset, self.cap_bytes = dataset, int(cap_gb * 1024**3)
        self.entries: OrderedDict[int, tuple] = OrderedDict()
        self.size = self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int):
        if index in self.entries:
            self.entries.move_to_end(index)
            self.hits += 1
            return self.entries[index]
        self.misses += 1
        item = self.dataset[index]
        item_bytes = sum(t.nbytes for t in item if isinstance(t, torch.Tensor))
        while self.entries and self.size + item_bytes > self.cap_bytes:
            _, evicted = self.entries.popitem(last=False)
            self.size -= sum(t.nbytes for t in evicted if isinstance(t, torch.Tensor))
        if item_bytes <= self.cap_bytes:
            self.entries[index] = item
            self.size += item_bytes
        return item

    def hit_rate(self) -> float | None:
        total = self.hits + self.misses
        return self.hits / total if total else None


class EpochShuffle(Sampler):
    """A fresh permutation per epoch drawn from (seed, epoch) alone, identical on every rank."""

    def __init__(self, length: int, seed: int):
        self.length, self.seed, self.epoch = length, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        return iter(torch.randperm(self.length, generator=generator).tolist())


def map_dataset(reader: str, level_dirs: list[Path], split: str, domain: str | None = None):
    """One map-style dataset over the given levels (embedding dirs or shard dirs), optionally
    only the samples of one blur domain."""
    kind = EmbeddedPairs if reader == "embeddings" else PixelPairs
    parts = [kind(level_dir, split) for level_dir in level_dirs]
    if domain is not None:
        parts = [
            Subset(part, [i for i, key in enumerate(part.keys) if key_domain(key) == domain])
            for part in parts
        ]
    return parts[0] if len(parts) == 1 else ConcatDataset(parts)


def resolve_workers(workers: int | str) -> int:
    return max(0, min(4, len(os.sched_getaffinity(0)) - 1)) if workers == "auto" else workers


def loader_kwargs(loader: LoaderParams, on_gpu: bool) -> dict:
    workers = resolve_workers(loader.workers)
    kwargs = {
        "num_workers": workers,
        "pin_memory": on_gpu if loader.pin_memory == "auto" else loader.pin_memory,
    }
    if workers > 0:
        kwargs |= {
            "prefetch_factor": loader.prefetch_factor,
            "persistent_workers": loader.persistent_workers,
        }
    return kwargs


class BatchStream:
    """Endless batches, epoch after epoch; `batches(skip)` starts `skip` batches in."""

    def __init__(
        self,
        accelerator,
        loader: LoaderParams,
        batch_size: int,
        seed: int,
        dataset=None,
        urls: list[str] | None = None,
        shuffle: bool = True,
    ):
        self.accelerator, self.loader, self.batch_size, self.seed = (
            accelerator,
            loader,
            batch_size,
            seed,
        )
        on_gpu = accelerator.device.type == "cuda"
        self.cache = (
            LruCache(dataset, loader.cache_gb) if dataset is not None and loader.cache_gb else None
        )
        if urls is not None:
            self.urls, self.dataloader = urls, None
            self.kwargs = loader_kwargs(loader, on_gpu)
            return
        data = self.cache or dataset
        self.sampler = EpochShuffle(len(data), seed) if shuffle else SequentialSampler(data)
        dataloader = DataLoader(
            data,
            batch_size=batch_size,
            sampler=self.sampler,
            drop_last=True,
            **loader_kwargs(loader, on_gpu),
        )
        self.dataloader = accelerator.prepare(dataloader)
        if len(self.dataloader) == 0:
            raise ValueError(
                f"optim.batch_size {batch_size} x {accelerator.num_processes} "
                f"process(es) is more than the {len(data)} training samples; "
                f"lower optim.batch_size"
            )

    def batches(self, skip: int = 0) -> Iterator:
        if self.dataloader is None:
            yield from self._stream(skip)
            return
        per_epoch = len(self.dataloader)
        for epoch in count(skip // per_epoch):
            within = skip - epoch * per_epoch if epoch == skip // per_epoch else 0
            source = (
                self.accelerator.skip_first_batches(self.dataloader, within)
                if within
                else self.dataloader
            )
            # through accelerate's loader: it re-sets the sampler's epoch from its own counter
            # at every pass, which a fresh skip loader would otherwise restart at 0
            source.set_epoch(epoch)
            yield from source

    def _stream(self, skip: int) -> Iterator:
        """WebDataset: each rank reads its own shards, reshuffled per epoch; skipping is
        replaying."""
        produced = 0
        for epoch in count():
            pipeline = webdataset_pairs(
                self.urls,
                shuffle_shards=len(self.urls),
                shuffle_buffer=self.loader.shuffle_buffer,
                seed=self.seed * 1_000_003 + epoch,
            )
            pipeline = pipeline.map(lambda triple: (*normalise_pair(triple[0], triple[1]), 0))
            for batch in DataLoader(
                pipeline.batched(self.batch_size, partial=False), batch_size=None, **self.kwargs
            ):
                produced += 1
                if produced > skip:
                    yield [
                        part.to(self.accelerator.device) if isinstance(part, torch.Tensor) else part
                        for part in batch
                    ]

    def cache_hit_rate(self) -> float | None:
        return self.cache.hit_rate() if self.cache else None


def shard_stream_urls(level_dirs: list[Path], split: str, remote: dict | None = None) -> list[str]:
    """The tars of each level: its entry in `remote` (loader.shard_urls), else the local ones."""
    urls = []
    for level_dir in level_dirs:
        listed = (remote or {}).get(level_dir.name)
        if listed is None:
            urls += shard_urls(level_dir, split)
        else:
            urls += [
                url
                for spec in ([listed] if isinstance(listed, str) else listed)
                for url in braceexpand.braceexpand(spec)
            ]
    return urls


def shard_data(
    params: Params, job: Job, accelerator
) -> tuple[BatchStream, torch.Tensor, int, list[Path]]:
    """What pretrain and an adapter train on: the batch stream over the job's levels (and
    domain) in the reader params names, the prompt embedding table, the channel count, and the
    files that identify the data (for the checkpoints' fingerprint)."""
    reader = params.loader.reader
    if reader == "embeddings":
        dirs = [paths.embeddings(level) for level in job.levels]
        manifests = [d / "manifest.json" for d in dirs]
        for manifest in manifests:
            if not manifest.is_file():
                raise UserError(
                    f"{manifest.parent} is missing; run `linefuse embed --level "
                    f"{manifest.parent.name}` first"
                )
        dataset = map_dataset(reader, dirs, "train", job.domain)
        prompts = EmbeddedPairs(dirs[0], "train").prompt_embeddings()
        channels = json.loads(manifests[0].read_text())["channels"]
        stream = BatchStream(
            accelerator, params.loader, params.optim.batch_size, params.optim.seed, dataset=dataset
        )
        return stream, prompts, channels, manifests
    if params.model.vae is not None:
        raise UserError(
            f"loader.reader: {reader} reads pixels; latent mode (model.vae set) "
            f"needs loader.reader: embeddings"
        )
    dirs = [paths.shards(level) for level in job.levels]
    manifests = [d / SHARD_MANIFEST for d in dirs if d.name not in params.loader.shard_urls]
    if reader == "lmdb":
        stream = BatchStream(
            accelerator,
            params.loader,
            params.optim.batch_size,
            params.optim.seed,
            dataset=map_dataset(reader, dirs, "train", job.domain),
        )
    elif job.domain is not None:
        raise UserError(
            "loader.reader: webdataset streams every domain; per-domain adapters "
            "(train.adapters: per_domain) need loader.reader: embeddings or lmdb"
        )
    else:
        stream = BatchStream(
            accelerator,
            params.loader,
            params.optim.batch_size,
            params.optim.seed,
            urls=shard_stream_urls(dirs, "train", params.loader.shard_urls),
        )
    return stream, torch.from_numpy(null_prompt(params, job.levels)), 3, manifests
