"""The base model's training data: chart pairs drawn and degraded on the fly, never stored.

The shipped base (`linefuse base`) trains on far more charts than any shard set could hold
(shards store every chart's pairs again at every level; docs/experiments.md has a level's size),
so each pair is made when a batch asks for it.
Item i is pair i % P of chart i // P (P = units x crops per chart): the chart is drawn from
`base_chart_params` (data.charts widened by `base.chart_overrides`, with `base.chart_seed`,
without the held-out families), then degraded in `base.units_per_chart` (domain, level) units,
each drawn with `base.light_fraction` from the light level, and cropped `base.crops_per_unit`
times. Every choice comes from `item_rng` of (seed, chart, unit), so item i is the same whatever
the worker or the order of reading.

Items are read in order (no shuffle: every chart is new content), so a batch holds whole charts
and each worker draws a chart once (matplotlib, the costly part) and degrades it a few times for
all of that chart's pairs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from torch.utils.data import Dataset

from linefuse.data.charts import base_chart_params, draw_chart
from linefuse.data.degrade import degrade, item_rng
from linefuse.data.shards import crop_windows
from linefuse.data.transforms import normalise_pair
from linefuse.params.base import BaseParams

if TYPE_CHECKING:
    from linefuse.params.full import Params


class ChartPairs(Dataset):
    """(blurred, sharp, prompt index 0) float tensors in [-1, 1], `base.crop` px square."""

    def __init__(self, params: Params):
        self.base: BaseParams = params.base
        self.degrade = params.degrade
        self.charts = base_chart_params(params)
        self.per_chart = self.base.units_per_chart * self.base.crops_per_unit
        # the shard stage's train crops (focused on what the degradation changed), at base.crop
        shards = params.shards.model_copy(
            update={
                "crop": self.base.crop,
                "patches_per_image": self.base.crops_per_unit,
                "focus": self.base.focus,
            }
        )
        self.crop_params = params.model_copy(update={"shards": shards})
        self._chart_cache: dict[int, list[tuple[np.ndarray, np.ndarray, list]]] = {}

    def __len__(self) -> int:
        return self.base.charts * self.per_chart

    def __getitem__(self, index: int):
        chart, pair = divmod(int(index), self.per_chart)
        unit, crop = divmod(pair, self.base.crops_per_unit)
        sharp, blurred, windows = self._units(chart)[unit]
        top, left = windows[crop]
        size = self.base.crop
        window = np.s_[top : top + size, left : left + size]
        return (*normalise_pair(blurred[window], sharp[window]), 0)

    def _units(self, chart: int) -> list:
        """Chart `chart`'s degraded units and crop windows, made once per worker."""
        if chart not in self._chart_cache:
            if len(self._chart_cache) > 4:
                self._chart_cache.clear()
            self._chart_cache[chart] = self._make_units(chart)
        return self._chart_cache[chart]

    def _make_units(self, chart: int) -> list:
        sharp, _, _ = draw_chart(self.charts, chart)
        units = []
        for unit in range(self.base.units_per_chart):
            rng = item_rng(self.base.chart_seed, chart, unit)
            domain = self.degrade.domains[int(rng.integers(len(self.degrade.domains)))]
            level = self.degrade.levels[int(rng.integers(len(self.degrade.levels)))]
            settings = self.degrade.level(domain, level)
            if rng.random() < self.base.light_fraction:
                settings = getattr(self.base.light, domain)
            blurred, _ = degrade(sharp, domain, settings, rng)
            windows = crop_windows(sharp, blurred, "train", self.crop_params, rng)
            units.append((sharp, blurred, [(top, left) for top, left, _, _ in windows]))
        return units
