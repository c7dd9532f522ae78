"""The chart bank: the base's sharp charts, drawn once into an LMDB env and cropped many times.

Drawing is the costly part of a training pair, so `build_bank` draws `base.bank.charts` charts
once, on all cores, and the trainer reuses each for many crops (`BankCrops`) that it degrades on
its own device (linefuse.data.degrade_torch). Chart i depends only on the chart params and i
(`base_chart_params`: the base's seed, no held-out family), so the env lives under a fingerprint
of those params and a rerun continues where the last one stopped.

The env holds, per chart, `<i>.rgb` (raw uint8 RGB, row-major) and `<i>.json` (height, width and
the sidecar's facts: library, plot box, axis limits and tick labels), plus `params` (the chart
params as JSON) and `count` (charts written, committed with them in chunks of COMMIT_EVERY).
Nothing is pickled.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import lmdb
import numpy as np
import torch
from torch.utils.data import Dataset

from linefuse import paths
from linefuse.data.charts import base_chart_params, draw_chart, require_libraries
from linefuse.data.degrade import item_rng
from linefuse.data.labels import encode, readable
from linefuse.params.data import ChartParams, chart_pixels
from linefuse.stage import UserError, ordered_map

if TYPE_CHECKING:
    from linefuse.params.full import Params

log = logging.getLogger("linefuse")

COMMIT_EVERY = 64  # charts per write transaction: a stop loses at most this many
MAX_LABELS = 6  # K: label slots per crop (boxes, targets, lengths)
MAX_CHARS = 10  # T: the longest label text a crop's targets hold
INK_LEVEL = 96  # a pixel this far (0..255, any channel) from the chart's median colour is ink
META_BYTES = 16384  # room per chart for its JSON meta and LMDB's page overhead
# what the meta keeps of a chart's sidecar: who drew it, where its plot lies in data units, and
# its tick labels (the furniture's polylines would pass META_BYTES)
SIDECAR_FACTS = ("library", "plot_box", "xlim", "ylim", "tick_labels")
_READERS: dict[tuple[int, str], lmdb.Environment] = {}  # open_bank's handles


def fingerprint(charts: ChartParams) -> str:
    """16 hex digits naming a bank: a SHA-256 of the chart params it was drawn with."""
    return hashlib.sha256(charts.model_dump_json().encode()).hexdigest()[:16]


def bank_dir(params: Params) -> Path:
    return paths.bank(fingerprint(base_chart_params(params)))


def _map_size(charts: ChartParams, count: int) -> int:
    """Twice the largest charts the params can draw: room to spare, not terabytes."""
    width = chart_pixels(charts.width_in[1], charts.dpi[1])
    height = chart_pixels(charts.height_in[1], charts.dpi[1])
    return max(1 << 26, 2 * count * (width * height * 3 + META_BYTES))


def _draw(charts: ChartParams, index: int) -> tuple[bytes, bytes]:
    """Chart `index` as (raw RGB bytes, JSON meta bytes)."""
    image, _, sidecar = draw_chart(charts, index)
    height, width = image.shape[:2]
    facts = {key: sidecar[key] for key in SIDECAR_FACTS}
    meta = {"height": height, "width": width, **facts}
    return np.ascontiguousarray(image).tobytes(), json.dumps(meta, sort_keys=True).encode()


def _key(index: int, kind: str) -> bytes:
    return f"{index:09d}.{kind}".encode()


def _count(txn) -> int:
    value = txn.get(b"count")
    return 0 if value is None else int(value)


def build_bank(params: Params, workers: int) -> Path:
    """Draw the bank's missing charts, in index order on `workers` processes; returns its env."""
    charts, total = base_chart_params(params), params.base.bank.charts
    require_libraries(charts.libraries, "base.libraries")
    folder = bank_dir(params)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    env = lmdb.open(str(folder), map_size=_map_size(charts, total), subdir=True, lock=True)
    try:
        with env.begin(write=True) as txn:
            txn.put(b"params", charts.model_dump_json().encode())
            done = _count(txn)
        tasks = list(range(done, total))
        # workers from a fresh interpreter, as generate's (a Vega-Lite chart's runtime is no fork's)
        drawn = ordered_map(
            partial(_draw, charts), tasks, workers, "bank", "chart", start="forkserver"
        )
        _write(env, zip(tasks, drawn, strict=True), total)
    finally:
        env.close()
    log.info(
        "bank: %d charts drawn (%d were there, %d in all) into %s in %.1f s",
        len(tasks),
        done,
        total,
        folder,
        time.perf_counter() - started,
    )
    return folder


def _write(env: lmdb.Environment, drawn, total: int) -> None:
    """Put (index, (image, meta)) in order, committing `count` with every COMMIT_EVERY charts;
    a failure aborts only the chunk under way."""
    txn = env.begin(write=True)
    try:
        for index, (image, meta) in drawn:
            txn.put(_key(index, "rgb"), image)
            txn.put(_key(index, "json"), meta)
            if (index + 1) % COMMIT_EVERY == 0 or index + 1 == total:
                txn.put(b"count", str(index + 1).encode())
                txn.commit()
                txn = env.begin(write=True)
    finally:
        txn.abort()


def open_bank(folder: Path) -> lmdb.Environment:
    """Read-only, lock-free, no readahead; one handle per process and env, as py-lmdb allows. A
    forked loader worker first closes the handles it inherited (an LMDB env must not cross a
    fork; closing the child's copy leaves the parent's open) and opens its own."""
    pid = os.getpid()
    for inherited in [key for key in _READERS if key[0] != pid]:
        _READERS.pop(inherited).close()
    key = (pid, str(Path(folder).resolve()))
    if key not in _READERS:
        _READERS[key] = lmdb.open(
            key[1], readonly=True, lock=False, readahead=False, max_readers=512
        )
    return _READERS[key]


def _check_bank(params: Params) -> Path:
    """The bank's folder, or a UserError saying what is wrong with it and what to run."""
    folder, charts = bank_dir(params), base_chart_params(params)
    fix = "run `linefuse bank` (make bank)"
    if not (folder / "data.mdb").is_file():
        raise UserError(f"no chart bank for these chart params at {folder}; {fix}")
    with open_bank(folder).begin() as txn:
        stored, count = txn.get(b"params"), _count(txn)
    if stored is None or stored.decode() != charts.model_dump_json():
        raise UserError(f"the chart bank at {folder} was drawn with other chart params; {fix}")
    if count < params.base.bank.charts:
        raise UserError(
            f"the chart bank at {folder} holds {count} of base.bank.charts "
            f"({params.base.bank.charts}) charts; {fix} to finish it"
        )
    return folder


class BankCrops(Dataset):
    """`base.crop` px windows of bank charts, item i drawn from item_rng(chart_seed, "crop", i).

    Each item: (sharp uint8 (3, c, c), label mask uint8 (1, c, c), boxes float32 (K, 4) as
    (left, top, right, bottom) window px, targets int64 (K, T), lengths int64 (K,)); slots past
    the readable labels wholly inside the window are zeros. The env opens in each worker on
    first use, never pickled.
    """

    def __init__(self, params: Params):
        self.base = params.base
        smallest = min(base_chart_params(params).smallest_chart())
        if smallest < self.base.crop:
            raise UserError(
                f"base.crop: {self.base.crop} px is larger than the smallest chart "
                f"data.charts can draw ({smallest} px); lower base.crop or enlarge the charts"
            )
        self.folder = _check_bank(params).resolve()  # workers may start in another folder
        self._env: lmdb.Environment | None = None
        self._pid: int | None = None  # the process self._env was opened in

    def __len__(self) -> int:
        """A pass reuses each chart units_per_chart x crops_per_unit times, as the stream did."""
        return self.base.bank.charts * self.base.units_per_chart * self.base.crops_per_unit

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_env": None, "_pid": None}

    def __getitem__(self, index: int) -> tuple[torch.Tensor, ...]:
        rng = item_rng(self.base.chart_seed, "crop", int(index))
        image, labels = self._chart(int(rng.integers(self.base.bank.charts)))
        top, left = self._window(image, labels, rng)
        size = self.base.crop
        sharp = image[top : top + size, left : left + size]
        mask = np.zeros((1, size, size), np.uint8)
        boxes = np.zeros((MAX_LABELS, 4), np.float32)
        targets = np.zeros((MAX_LABELS, MAX_CHARS), np.int64)
        lengths = np.zeros(MAX_LABELS, np.int64)
        slot = 0
        for label in labels:
            x0, y0, x1, y1 = np.subtract(label["box"], [left, top, left, top])
            mask[0, max(0, int(y0)) : int(np.ceil(y1)), max(0, int(x0)) : int(np.ceil(x1))] = 1
            codes = encode(label["text"]) if readable(label["text"]) else []
            inside = x0 >= 0 and y0 >= 0 and x1 <= size and y1 <= size
            if inside and 0 < len(codes) <= MAX_CHARS and slot < MAX_LABELS:
                boxes[slot], lengths[slot] = (x0, y0, x1, y1), len(codes)
                targets[slot, : len(codes)] = codes
                slot += 1
        tensors = (sharp.transpose(2, 0, 1), mask, boxes, targets, lengths)
        return tuple(torch.from_numpy(np.ascontiguousarray(t)) for t in tensors)

    def _chart(self, chart: int) -> tuple[np.ndarray, list[dict]]:
        """Chart `chart`'s (H, W, 3) uint8 image and its tick labels."""
        if self._pid != os.getpid():  # first use here, or in a fork of a process that read
            self._env, self._pid = open_bank(self.folder), os.getpid()
        with self._env.begin() as txn:
            meta = json.loads(txn.get(_key(chart, "json")))
            raw = txn.get(_key(chart, "rgb"))
        image = np.frombuffer(raw, np.uint8).reshape(meta["height"], meta["width"], 3)
        return image, meta["tick_labels"]

    def _window(self, image: np.ndarray, labels: list[dict], rng) -> tuple[int, int]:
        """(top, left): centred on a tick label (label_focus), else on ink (focus), else
        uniform; a centre moves by up to a quarter crop, and the window stays in the chart."""
        size, (height, width) = self.base.crop, image.shape[:2]
        centre = None
        if labels and rng.random() < self.base.bank.label_focus:
            x0, y0, x1, y1 = labels[int(rng.integers(len(labels)))]["box"]
            centre = ((y0 + y1) / 2, (x0 + x1) / 2)
        elif rng.random() < self.base.focus:
            median = np.median(image.reshape(-1, 3), axis=0)
            rows, cols = np.nonzero((np.abs(image - median) > INK_LEVEL).any(axis=2))
            if len(rows):
                pick = int(rng.integers(len(rows)))
                centre = (rows[pick], cols[pick])
        if centre is None:
            return int(rng.integers(height - size + 1)), int(rng.integers(width - size + 1))
        jitter = rng.integers(-(size // 4), size // 4 + 1, size=2)
        top = int(np.clip(round(centre[0]) - size // 2 + jitter[0], 0, height - size))
        left = int(np.clip(round(centre[1]) - size // 2 + jitter[1], 0, width - size))
        return top, left
