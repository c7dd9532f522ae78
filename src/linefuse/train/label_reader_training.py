"""`linefuse label-reader` and `digitize-reader`: train a label reader LineFuse ships.

The tick labels of a reader's `charts` charts drawn like the base's (data/charts'
base_chart_params: base.chart_seed, never a held-out family or library), by its `libraries`
where it names them, with data.charts' axes where its `axes` are the data's and at data.charts'
fonts and sizes where its `sizes` are, are cut out once, on every core: sharp, from `degraded`
degraded copies of each chart and from `restored` more, each restored by the base `restorer`;
at the drawer's boxes or at the words digitize finds (`boxes`). Then the reader learns to read
them: AdamW on the CTC loss, a one-cycle learning rate, each step's crops cut with every box
edge jittered by up to `jitter_px`. Seeded, so a run remakes the same weights on the same
machine.
evaluate/label_reader_card.py scores it and writes its card.
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm import tqdm

from linefuse.data.charts import base_chart_params
from linefuse.data.deskew import straighten
from linefuse.digitize.label_patches import RestoredCopies, label_patches
from linefuse.digitize.label_reader import LabelReader, ctc_loss
from linefuse.hardware import cpu_model
from linefuse.params.data import AXIS_KNOBS, SIZE_KNOBS
from linefuse.paths import unet_folder

if TYPE_CHECKING:
    from linefuse.inference.restorer import Restorer
    from linefuse.params.base import LabelReaderParams
    from linefuse.params.full import Params

log = logging.getLogger("linefuse")


def reader_charts(params: Params, cfg: LabelReaderParams):
    """The charts a reader trains on: the base's, drawn by cfg.libraries in equal shares if it
    names them, with the axes the default data draws (descending x, log y: the labels digitize
    reads) where cfg.axes is "data", and its fonts and sizes where cfg.sizes is "data"."""
    charts = base_chart_params(params)
    update = {}
    if cfg.libraries:
        update["libraries"] = {name: 1 / len(cfg.libraries) for name in cfg.libraries}
    if cfg.axes == "data":
        update |= {knob: getattr(params.data.charts, knob) for knob in AXIS_KNOBS}
    if cfg.sizes == "data":
        update |= {knob: getattr(params.data.charts, knob) for knob in SIZE_KNOBS}
    return charts.model_copy(update=update)


_restorers: dict[str, Restorer] = {}  # per process: each base loaded once


def restore_whole(images: list, params: Params, base: str) -> list:
    """The degraded uint8 (H, W, 3) `images` restored by the base `base` (a shipped base's name
    or a base folder, no adapter) as evaluate restores them (straightened by eval.deskew,
    eval.steps, eval.seed), each whole, never in tiles: the tile size `auto` picks hangs on
    this machine's timings, and a reader's data must not."""
    from linefuse.inference.restorer import Restorer

    if base not in _restorers:
        if multiprocessing.parent_process() is not None:
            torch.set_num_threads(1)  # a worker process: the workers share the cores
        _restorers[base] = Restorer.from_params(params, None, "cpu", unet_folder(base))
    restorer, evaluation = _restorers[base], params.eval
    return [
        restorer.restore(
            straighten(image, evaluation.deskew)[None], evaluation.steps, evaluation.seed
        )[0]
        for image in images
    ]


def train_label_reader(
    params: Params, cfg: LabelReaderParams, workers: int
) -> tuple[LabelReader, dict]:
    """Trains the reader `cfg` (params.label_reader or params.digitize_reader) from scratch;
    returns it and what the card tells of the run."""
    started = time.perf_counter()
    copies = None
    if cfg.degraded or cfg.restored:
        copies = (params.degrade, cfg.degraded, params.base.chart_seed)
    labels = label_patches(
        reader_charts(params, cfg),
        list(range(cfg.charts)),
        workers,
        copies=copies,
        found=cfg.boxes == "found",
        restore=(
            RestoredCopies(cfg.restored, partial(restore_whole, params=params, base=cfg.restorer))
            if cfg.restored
            else None
        ),
    )
    drawn = time.perf_counter()
    torch.manual_seed(cfg.seed)
    reader = LabelReader(cfg.height, cfg.width, tuple(cfg.channels), cfg.hidden)
    optimizer = torch.optim.AdamW(reader.parameters(), lr=cfg.lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, cfg.lr, total_steps=cfg.steps)
    generator = torch.Generator().manual_seed(cfg.seed)
    boxes = torch.from_numpy(labels.boxes)
    losses = []
    bar = tqdm(range(cfg.steps), desc="label reader", unit="step", disable=None)
    for _ in bar:
        # a batch of labels, their boxes jittered
        pick = torch.randint(len(labels), (cfg.batch_size,), generator=generator).numpy()
        jitter = (torch.rand(cfg.batch_size, 4, generator=generator) * 2 - 1) * cfg.jitter_px
        batch_boxes = torch.cat([torch.arange(cfg.batch_size)[:, None], boxes[pick] + jitter], 1)
        targets, lengths = labels.targets(pick)
        # the loss, backward, clip, step
        loss = ctc_loss(reader, labels.images(pick), batch_boxes, targets, lengths)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(reader.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        bar.set_postfix(loss=f"{np.mean(losses[-50:]):.3f}")
    finished = time.perf_counter()
    reader.eval()
    log.info(
        "label reader: %d labels of %d charts drawn in %.1fs, %d steps in %.1fs",
        len(labels), cfg.charts, drawn - started, cfg.steps, finished - drawn,
    )  # fmt: skip
    return reader, {
        "labels": len(labels),
        "parameters": sum(p.numel() for p in reader.parameters()),
        "final_loss": float(np.mean(losses[-50:])),
        "draw_minutes": (drawn - started) / 60,
        "train_minutes": (finished - drawn) / 60,
        "device": f"CPU {cpu_model()}",
        "threads": torch.get_num_threads(),
    }
