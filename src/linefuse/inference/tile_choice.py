"""tiles.tile `auto`: the tile size, and the batch, that restore an image cheapest on this machine.

A tile's cost grows faster than its pixels (the UNet's self-attention grows with the square of
its positions) while smaller tiles spend more of their pixels on the overlap, so which size is
cheapest depends on the model, its runtime, the device and the image. Each candidate (every 32
px from 4 x overlap up to tiles.size) is timed once, one tile through one sampler step; an image
then takes the candidate whose tile count times its seconds is least. Batching tiles pays on a
GPU and can cost on a CPU, where a batch of large tiles outgrows the caches: the chosen size is
timed once more in batches of tiles.batch_size, and runs in them only where that is cheaper per
tile.
The seconds are cached per machine, model and runtime (LINEFUSE_CACHE, else ~/.cache/linefuse),
so every process on the machine that runs the model on the same runtime, evaluate, restore, serve
and LineFusePipeline alike, makes the same choice for the same image; the choice is logged with
the timings.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Protocol

import numpy as np

from linefuse.hardware import cpu_flags, cpu_model
from linefuse.inference.tiles import boxes

log = logging.getLogger("linefuse")

CANDIDATE_STEP = 32  # px between the candidate tile sizes


def cache_folder() -> Path:
    """Where timings made once per machine are kept: LINEFUSE_CACHE, else ~/.cache/linefuse."""
    root = os.environ.get("LINEFUSE_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "linefuse"
    )
    return Path(root)


def cache_file(name: str = "tile_seconds.json") -> Path:
    return cache_folder() / name


def read_cache(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def write_cache(path: Path, key: str, entry: dict) -> None:
    """`entry` under `key` in the cache file at `path`, written whole and renamed into place (a
    process reading it meanwhile sees the old file or the new one)."""
    stored = read_cache(path)
    stored[key] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
    partial.replace(path)


def candidates(largest: int, overlap: int, multiple: int = 1) -> list[int]:
    """Tile sizes worth timing, each a multiple of the model's `multiple` (a tile the model
    would pad costs a padded tile's time): from 4 x overlap (below it more than half a tile is
    overlap) every CANDIDATE_STEP px, or every `multiple` px where that is coarser, up to
    `largest` rounded down to the multiple."""
    step = math.lcm(CANDIDATE_STEP, multiple)
    top = largest - largest % multiple
    smallest = -(-max(4 * overlap, step) // step) * step
    sizes = list(range(smallest, top + 1, step))
    return sizes if sizes and sizes[-1] == top else [*sizes, top]


class Timed(Protocol):
    """What TileCosts times: a restorer (inference/restorer.py, which holds its TileCosts)."""

    settings: object  # its RestoreSettings (inference/settings.py): tile size, overlap, batch
    model: object  # its model on a runtime, whose timing_facts() say what else the seconds need

    def restore(self, images, steps: int): ...


class TileCosts:
    """Seconds per tile for one restorer: of each candidate size one tile at a time, and of a
    chosen size in batches of tiles.batch_size; timed on first use, cached."""

    def __init__(self, restorer: Timed):
        self.restorer = restorer
        self.seconds: dict[int, float] | None = None  # one tile at a time, by size
        self.batched: dict[int, float] = {}  # per tile in batches of tiles.batch_size, by size

    def cheapest(self, height: int, width: int) -> int:
        """The candidate with the least estimated time for an image of this size."""
        seconds = self.measured()
        overlap = self.restorer.settings.overlap
        cost = {tile: len(boxes(height, width, tile, overlap)) * s for tile, s in seconds.items()}
        tile = min(cost, key=lambda t: (cost[t], -t))
        log.info(
            "tiles.tile auto: %dx%d px in %d tiles of %d px (estimated %.1f s a step; "
            "whole up to %d px)",
            width,
            height,
            len(boxes(height, width, tile, overlap)),
            tile,
            cost[tile],
            self.restorer.settings.whole,
        )
        return tile

    def batch_for(self, tile: int) -> int:
        """tiles.batch_size where a batch of that many `tile` px tiles costs less per tile than
        one tile at a time, else 1."""
        largest = self.restorer.settings.tile_batch
        if largest == 1:
            return 1
        single = self.measured()[tile]
        if tile not in self.batched:
            self.batched[tile] = self._time(tile, largest)
            self._store()
            log.info(
                "tiles.tile auto: %d px tiles %.0f ms each one at a time, %.0f ms each in "
                "batches of %d (timed now, cached in %s)",
                tile,
                single * 1e3,
                self.batched[tile] * 1e3,
                largest,
                cache_file(),
            )
        return largest if self.batched[tile] < single else 1

    def measured(self) -> dict[int, float]:
        """The candidates' seconds, one tile at a time: from the cache, else timed now."""
        if self.seconds is not None:
            return self.seconds
        path = cache_file()
        entry = read_cache(path).get(self._key(self._sizes()))
        if entry is not None:
            self.seconds = {int(size): s for size, s in entry["1"].items()}
            self.batched = {int(size): s for size, s in entry.get("batched", {}).items()}
            source = f"cached in {path}"
        else:
            self.seconds = {size: self._time(size, 1) for size in self._sizes()}
            self._store()
            source = f"timed now, cached in {path}"
        table = ", ".join(f"{size} px {s * 1e3:.0f} ms" for size, s in self.seconds.items())
        log.info("tiles.tile auto: seconds per tile and step (%s): %s", source, table)
        return self.seconds

    def _sizes(self) -> list[int]:
        settings = self.restorer.settings
        return candidates(settings.whole, settings.overlap, self.restorer.model.multiple)

    def _store(self) -> None:
        """This restorer's entry into the cache file."""
        entry = {"1": self.seconds, "batched": self.batched}
        write_cache(cache_file(), self._key(self._sizes()), entry)

    def _time(self, size: int, batch: int) -> float:
        """Seconds per tile of `size` px, `batch` at a time, through one sampler step: the
        faster of two runs."""
        tiles = np.full((batch, size, size, 3), 255, np.uint8)
        runs = []
        for _ in range(2):
            started = time.perf_counter()
            self.restorer.restore(tiles, 1)
            runs.append((time.perf_counter() - started) / batch)
        return min(runs)

    def _key(self, sizes: list[int]) -> str:
        """What the timings depend on: the model on its runtime (architecture, device, threads,
        library versions), the CPU, the candidates, overlap and batch."""
        restorer = self.restorer
        facts = {
            **restorer.model.timing_facts(),
            "cpu": cpu_model(),
            "cpu_flags": sorted(cpu_flags()),
            "sizes": sizes,
            "overlap": restorer.settings.overlap,
            "batch": restorer.settings.tile_batch,
        }
        text = json.dumps(facts, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
