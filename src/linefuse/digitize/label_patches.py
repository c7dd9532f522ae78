"""Tick labels cut out of drawn charts: what the label reader trains on and is scored on.

Each readable tick label (data/labels.readable) of a chart is cut out as a fixed-size patch with
PAD image pixels above and left of its box, so thousands of labels from charts of different
sizes stack into one array and crop_labels (digitize/label_reader.py) can cut them again, with the
box jittered, at every training step. A chart may be degraded before its labels are cut (the
blur spreads from the chart around each label), each degradation seeded per chart, and its
labels may be cut at the boxes of the words digitize finds (axes.find_frame) instead of the
drawer's: a reader for digitize then learns the crops it will be given, blurred glyphs' wider
boxes and all. Further degraded copies may be restored before their labels are cut (by a
shipped base: train/label_reader_training.py): digitize reads restorations, whose labels the
restorer redraws in part, unlike any blurred or sharp label.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch

from linefuse.data.charts import draw_chart
from linefuse.data.degrade import degrade, item_rng
from linefuse.data.labels import encode, normalise, readable
from linefuse.digitize.axes import find_frame
from linefuse.params.data import ChartParams
from linefuse.params.degrade import DegradeParams
from linefuse.stage import ordered_map

PATCH = (48, 128)  # (rows, columns) of image pixels per patch: the largest tick label and PAD
PAD = 8  # image pixels kept above and left of each box, room for the box's jitter and margin
MATCH_PX = 2.0  # px: a found word is a drawn label where each centre is this near the other


@dataclass(frozen=True)
class LabelPatches:
    """N labels: patches (N, rows, cols, 3) uint8, boxes (N, 4) (left, top, right, bottom) in
    patch pixels, their normalised texts, and whether each chart is of a held-out family."""

    patches: np.ndarray
    boxes: np.ndarray
    texts: list[str]
    held_out: np.ndarray

    def __len__(self) -> int:
        return len(self.texts)

    def images(self, pick) -> torch.Tensor:
        """The patches `pick` as (n, 3, rows, cols) floats in [-1, 1]."""
        chosen = torch.from_numpy(self.patches[pick]).permute(0, 3, 1, 2).float()
        return chosen / 127.5 - 1

    def targets(self, pick) -> tuple[torch.Tensor, torch.Tensor]:
        """CTC targets (n, longest) padded with 0 and their lengths, of the labels `pick`."""
        codes = [encode(self.texts[i]) for i in np.arange(len(self))[pick]]
        lengths = torch.tensor([len(code) for code in codes])
        targets = torch.zeros(len(codes), int(lengths.max()), dtype=torch.long)
        for row, code in enumerate(codes):
            targets[row, : len(code)] = torch.tensor(code)
        return targets, lengths


def cut(image: np.ndarray, labels: list[dict]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(patches, boxes in patch pixels, texts) of the readable labels that fit a PATCH."""
    rows, cols = PATCH
    padded = np.pad(image, ((PAD, rows), (PAD, cols), (0, 0)), constant_values=255)
    patches, boxes, texts = [], [], []
    for label in labels:
        left, top, right, bottom = label["box"]
        x, y = int(np.floor(left)), int(np.floor(top))
        box = [left - x + PAD, top - y + PAD, right - x + PAD, bottom - y + PAD]
        if not readable(label["text"]) or box[2] > cols - PAD or box[3] > rows - PAD:
            continue
        patches.append(padded[y : y + rows, x : x + cols])  # padded's origin is (-PAD, -PAD)
        boxes.append(box)
        texts.append(normalise(label["text"]))
    return (
        np.array(patches, np.uint8).reshape(-1, rows, cols, 3),
        np.array(boxes, np.float32),
        texts,
    )


def found_labels(image: np.ndarray, labels: list[dict]) -> list[dict]:
    """The drawn `labels` at the boxes of the words digitize finds in `image`: each word that
    holds one label's centre, its centre in that label's box (both widened by MATCH_PX), takes
    that label's text; words that hold none or several (labels run together) are left out."""
    frame = find_frame(image)
    if frame is None:
        return []

    def near(point: tuple[float, float], box) -> bool:
        left, top, right, bottom = box
        x, y = point
        return left - MATCH_PX <= x <= right + MATCH_PX and top - MATCH_PX <= y <= bottom + MATCH_PX

    found = []
    for word in frame.x_words + frame.y_words:
        hits = [
            label
            for label in labels
            if near(_centre(label["box"]), word.box) and near(word.centre, label["box"])
        ]
        if len(hits) == 1:
            found.append({"box": list(word.box), "text": hits[0]["text"]})
    return found


def _centre(box) -> tuple[float, float]:
    left, top, right, bottom = box
    return (left + right) / 2, (top + bottom) / 2


def degraded_copies(
    image: np.ndarray, index: int, degrade_cfg: DegradeParams, copies: int, seed: int
) -> list[np.ndarray]:
    """`copies` degraded versions of chart `index`, each in a domain and level of `degrade_cfg`
    drawn for it, all seeded by (seed, index)."""
    rng = item_rng(seed, index, "copies")
    found = []
    for copy in range(copies):
        domain = degrade_cfg.domains[rng.integers(len(degrade_cfg.domains))]
        level = degrade_cfg.levels[rng.integers(len(degrade_cfg.levels))]
        rng_copy = item_rng(seed, index, domain, level, copy)
        found.append(degrade(image, domain, degrade_cfg.level(domain, level), rng_copy)[0])
    return found


@dataclass(frozen=True)
class RestoredCopies:
    """`count` further degraded copies of each chart (after degraded_copies' own), each brought
    back by `restore` before its labels are cut: a picklable callable from degraded uint8
    (H, W, 3) images to their restorations, in order (train/label_reader_training.py's)."""

    count: int
    restore: Callable[[list[np.ndarray]], list[np.ndarray]]


def _chart_patches(
    index: int, cfg: ChartParams, blur, copies, found: bool, restore: RestoredCopies | None
) -> tuple:
    image, _, sidecar = draw_chart(cfg, index)
    if blur is not None:
        domain, level, name, seed = blur
        image, _ = degrade(image, domain, level, item_rng(seed, index, domain, name))
    views = [image]
    if copies:
        degrade_cfg, count, seed = copies
        extra = restore.count if restore else 0
        drawn = degraded_copies(image, index, degrade_cfg, count + extra, seed)
        views += drawn[:count] + (restore.restore(drawn[count:]) if extra else [])
    labels = sidecar["tick_labels"]
    parts = [cut(view, found_labels(view, labels) if found else labels) for view in views]
    return (
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1].reshape(-1, 4) for p in parts]),
        [text for p in parts for text in p[2]],
        sidecar["family"] in cfg.held_out,
    )


def label_patches(
    cfg: ChartParams,
    indices: list[int],
    workers: int,
    blur: tuple | None = None,
    copies: tuple[DegradeParams, int, int] | None = None,
    found: bool = False,
    restore: RestoredCopies | None = None,
) -> LabelPatches:
    """The labels of charts `indices` drawn with `cfg`, on `workers` processes; with `blur` =
    (domain, level settings, level name, seed), each chart degraded so before its labels are
    cut; with `copies` = (degrade settings, count, seed), each chart's labels cut from that many
    degraded copies too (degraded_copies), and with `restore` from that many more, restored;
    `found`: cut at the words digitize finds (found_labels), not at the drawer's boxes. The
    result does not depend on `workers`."""
    task = partial(_chart_patches, cfg=cfg, blur=blur, copies=copies, found=found, restore=restore)
    # a restorer's torch in a worker forked after this process ran torch (a reader trained
    # before its voter's labels are cut) would wait forever on the threads the fork left behind
    start = "forkserver" if restore else "fork"
    charts = list(ordered_map(task, list(indices), workers, "label charts", "chart", start))
    return LabelPatches(
        patches=np.concatenate([c[0] for c in charts]),
        boxes=np.concatenate([c[1].reshape(-1, 4) for c in charts]),
        texts=[text for c in charts for text in c[2]],
        held_out=np.concatenate([np.full(len(c[2]), c[3]) for c in charts]),
    )
