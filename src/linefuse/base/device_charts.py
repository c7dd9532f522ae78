"""Sharp charts held on the training device, cropped there: the base's data at GPU speed.

The bank (linefuse.base.bank) hands a loader one crop at a time, each an LMDB read and a numpy
window in a worker process: a few thousand pairs a second, far below what a GPU trains on 64 px
crops. A GPU base window instead keeps its charts in one flat uint8 buffer on the device and cuts
a whole batch of crops with one gather, seeded per step; the charts keep coming from matplotlib
on the host cores (`ChartDrawer`) while the GPU trains, and join the pool between steps.

The crops follow BankCrops' recipe: centred on a tick label (base.bank.label_focus), else on an
ink pixel (base.focus), else uniform; a centre moves by up to a quarter crop and the window stays
in the chart. Each chart's candidate centres (up to POINTS ink pixels, up to POINTS label
centres) are picked where it is drawn, from item_rng(chart_seed, "points", index).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from functools import partial
from multiprocessing import get_context
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from linefuse.base.bank import INK_LEVEL
from linefuse.data.charts import base_chart_params, draw_chart, require_libraries
from linefuse.data.degrade import item_rng
from linefuse.hardware import host_to_device
from linefuse.params.data import ChartParams
from linefuse.stage import UserError

if TYPE_CHECKING:
    from linefuse.params.full import Params

log = logging.getLogger("linefuse")

POINTS = 64  # candidate crop centres kept per chart, of each kind (ink, label)


@dataclass
class DrawnChart:
    """One sharp chart and where its crops may centre: (row, col) points, -1 where unused."""

    index: int
    image: np.ndarray  # (H, W, 3) uint8
    ink: np.ndarray  # (POINTS, 2) int32
    labels: np.ndarray  # (POINTS, 2) int32


def draw_record(charts: ChartParams, seed: int, index: int) -> DrawnChart:
    """Chart `index` of `charts` with its candidate centres."""
    image, _, sidecar = draw_chart(charts, index)
    rng = item_rng(seed, "points", index)
    median = np.median(image.reshape(-1, 3), axis=0)
    rows, cols = np.nonzero((np.abs(image.astype(np.int16) - median) > INK_LEVEL).any(axis=2))
    ink = np.full((POINTS, 2), -1, np.int32)
    if len(rows):
        pick = rng.choice(len(rows), size=min(POINTS, len(rows)), replace=False)
        ink[: len(pick)] = np.stack([rows[pick], cols[pick]], axis=1)
    labels = np.full((POINTS, 2), -1, np.int32)
    boxes = [label["box"] for label in sidecar["tick_labels"]][:POINTS]
    for k, (x0, y0, x1, y1) in enumerate(boxes):
        labels[k] = (round((y0 + y1) / 2), round((x0 + x1) / 2))
    return DrawnChart(index, np.ascontiguousarray(image), ink, labels)


class ChartDrawer:
    """Draws the base's charts first, first + 1, ... on `workers` forked processes in the
    background, a few per worker ahead of what was taken; hands them over in index order."""

    AHEAD = 4  # charts queued per worker

    def __init__(self, params: Params, first: int, workers: int):
        charts = base_chart_params(params)
        require_libraries(charts.libraries, "base.libraries")  # one line, before a worker starts
        self.draw = partial(draw_record, charts, params.base.chart_seed)
        self.pool = get_context("fork").Pool(max(1, workers))
        self.queued: deque = deque()
        self.next_index = first  # the first chart not yet handed over
        for _ in range(self.AHEAD * max(1, workers)):
            self._submit()

    def _submit(self) -> None:
        index = self.next_index + len(self.queued)
        self.queued.append(self.pool.apply_async(self.draw, (index,)))

    def _take(self) -> DrawnChart:
        chart = self.queued.popleft().get()
        self.next_index += 1
        self._submit()
        return chart

    def ready(self, limit: int) -> list[DrawnChart]:
        """Up to `limit` charts already drawn, without waiting."""
        out = []
        while len(out) < limit and self.queued[0].ready():
            out.append(self._take())
        return out

    def wait(self, count: int) -> list[DrawnChart]:
        """The next `count` charts, waiting for them."""
        return [self._take() for _ in range(count)]

    def close(self) -> None:
        self.pool.terminate()
        self.pool.join()


class DeviceCharts:
    """A pool of sharp charts in one flat uint8 buffer on `device`, cut into crops there."""

    def __init__(self, params: Params, capacity_bytes: int, device: torch.device):
        self.base, self.device = params.base, torch.device(device)
        smallest = min(base_chart_params(params).smallest_chart())
        if smallest < self.base.crop:
            raise UserError(
                f"base.crop: {self.base.crop} px is larger than the smallest chart "
                f"data.charts can draw ({smallest} px); lower base.crop or enlarge the charts"
            )
        self.buffer = torch.empty(capacity_bytes, dtype=torch.uint8, device=self.device)
        self.used = 0
        self.indices: list[int] = []  # chart indices held, in pool order
        self._meta: list[np.ndarray] = []  # per chart: offset, height, width
        self._points: list[np.ndarray] = []  # per chart: (2 * POINTS, 2)

    def __len__(self) -> int:
        return len(self.indices)

    def add(self, charts: list[DrawnChart]) -> int:
        """Copies in the charts, in order, while they fit; returns how many did."""
        added = 0
        for chart in charts:
            size = chart.image.nbytes
            if self.used + size > self.buffer.numel():
                break
            flat = torch.from_numpy(chart.image.reshape(-1))
            self.buffer[self.used : self.used + size] = host_to_device(flat, self.device)
            self._meta.append(np.array([self.used, *chart.image.shape[:2]], np.int64))
            self._points.append(np.concatenate([chart.ink, chart.labels]))
            self.indices.append(chart.index)
            self.used, added = self.used + size, added + 1
        if added:
            meta = torch.from_numpy(np.stack(self._meta))
            self.offsets, self.heights, self.widths = (
                host_to_device(meta[:, k].contiguous(), self.device) for k in range(3)
            )
            points = torch.from_numpy(np.stack(self._points)).long()
            self.points = host_to_device(points, self.device)
        return added

    def full(self, upcoming: int) -> bool:
        """True once a chart of `upcoming` bytes would not fit."""
        return self.used + upcoming > self.buffer.numel()

    def crops(self, count: int, generator: torch.Generator) -> Tensor:
        """(count, 3, crop, crop) uint8 crops drawn from `generator` (on the device)."""
        size, device = self.base.crop, self.device

        def uniform(*shape):
            return torch.rand(*shape, generator=generator, device=device)

        chart = (uniform(count) * len(self)).long().clamp(max=len(self) - 1)
        height, width = self.heights[chart], self.widths[chart]
        pick = (uniform(count) * POINTS).long().clamp(max=POINTS - 1)
        ink, label = self.points[chart, pick], self.points[chart, POINTS + pick]
        use_label = (uniform(count) < self.base.bank.label_focus) & (label[:, 0] >= 0)
        use_ink = ~use_label & (uniform(count) < self.base.focus) & (ink[:, 0] >= 0)
        centre = torch.where(use_label[:, None], label, ink)
        jitter = (uniform(count, 2) * (2 * (size // 4) + 1)).long() - size // 4
        focused = centre - size // 2 + jitter
        anywhere = (uniform(count, 2) * torch.stack([height, width], 1).add(1 - size)).long()
        corner = torch.where((use_label | use_ink)[:, None], focused, anywhere)
        top = torch.minimum(corner[:, 0].clamp(min=0), height - size)
        left = torch.minimum(corner[:, 1].clamp(min=0), width - size)
        steps = torch.arange(size, device=device)
        rows = (top[:, None] + steps)[:, :, None]  # (B, size, 1)
        cols = (left[:, None] + steps)[:, None, :]  # (B, 1, size)
        pixel = self.offsets[chart, None, None] + (rows * width[:, None, None] + cols) * 3
        index = pixel[..., None] + torch.arange(3, device=device)  # (B, size, size, 3)
        return self.buffer[index].permute(0, 3, 1, 2).contiguous()
