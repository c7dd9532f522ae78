"""A shipped label reader's scores and model card.

A reader is scored on the tick labels of the first `score_charts` default charts (data.charts,
the seed the pipeline's own data uses, which it never trained on), sharp and Gaussian-blurred
at each of degrade.levels (degrade.gaussian's ranges, seeded per chart): the reader whose CTC
loss is to judge restorations must read sharp labels and fail on blurred ones; digitize's must
read both.
The character error rate is pooled: edit distances summed over the labels, over the characters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import yaml

from linefuse import paths, stage
from linefuse.data.labels import ALPHABET
from linefuse.digitize.label_patches import label_patches
from linefuse.digitize.label_reader import LabelReader, read_labels
from linefuse.digitize.ocr import edit_distance

if TYPE_CHECKING:
    from linefuse.params.base import LabelReaderParams
    from linefuse.params.full import Params

# what each params.yaml reader section's reader is for, on its card
PURPOSE = {
    "label_reader": (
        "Its CTC loss on restored label crops can join the base's pixel loss, so a restorer is "
        "taught to draw the right digits; it reads sharp labels only, so that loss tells a "
        "restoration's labels from a blurred one's."
    ),
    "digitize_reader": (
        "`linefuse digitize` reads each tick label with it, and with every other reader of "
        "params.yaml's `digitize_reader` (the first and its voters, each reading a candidate), "
        "beside Tesseract (linefuse.digitize.calibrate), on sharp, blurred and restored charts "
        "alike, through model.onnx on ONNX Runtime (linefuse.digitize.label_onnx)."
    ),
}


def character_error_rate(reads: list[str], truths: list[str]) -> dict:
    """{cer, labels, characters}: the pooled character error rate of `reads` against `truths`."""
    edits = sum(edit_distance(r, t) for r, t in zip(reads, truths, strict=True))
    characters = sum(len(t) for t in truths)
    return {"cer": edits / max(characters, 1), "labels": len(truths), "characters": characters}


def score_reader(reader: LabelReader, params: Params, cfg: LabelReaderParams, workers: int) -> dict:
    """{condition: {test, held_out}: CER}, condition sharp or gaussian_<level>, at the drawer's
    boxes."""
    indices = list(range(cfg.score_charts))
    conditions = {"sharp": None} | {
        f"gaussian_{level}": (
            "gaussian",
            params.degrade.level("gaussian", level),
            level,
            params.degrade.seed,
        )
        for level in params.degrade.levels
    }
    scores = {}
    for condition, blur in conditions.items():
        labels = label_patches(params.data.charts, indices, workers, blur)
        boxes = torch.cat([torch.arange(len(labels))[:, None], torch.from_numpy(labels.boxes)], 1)
        reads = read_labels(reader.eval(), labels.images(slice(None)), boxes)
        scores[condition] = {
            split: character_error_rate(
                [r for r, h in zip(reads, labels.held_out, strict=True) if h == held],
                [t for t, h in zip(labels.texts, labels.held_out, strict=True) if h == held],
            )
            for split, held in (("test", False), ("held_out", True))
        }
    return scores


def write_scores_and_card(
    params: Params, section: str, cfg: LabelReaderParams, folder: Path, metrics: dict, scores: dict
) -> None:
    """scores.json and the model card of the reader `cfg` (params.yaml's `section`'s, or one of
    its voters'): what it is, how it was made and its scores."""
    (folder / paths.SCORES_FILE).write_text(json.dumps(scores, indent=2, sort_keys=True) + "\n")
    charts = params.data.charts
    command = section.replace("_", "-")
    voter = f" (its voter {cfg.name}'s keys)" if cfg.name != getattr(params, section).name else ""
    libraries = cfg.libraries or params.base.libraries
    copies = f", each also in {cfg.degraded} degraded copies (a `degrade` domain and level each)"
    restored = f" and {cfg.restored} more each restored by {cfg.restorer} (whole, no adapter)"
    axes = " with the default data's axes (descending x, log y and offset labels too)"
    sizes = (
        f" at the default data's type and figure sizes ({charts.font_pt[0]:g}-"
        f"{charts.font_pt[1]:g} pt, {charts.dpi[0]}-{charts.dpi[1]} dpi)"
    )
    boxes = {
        "sidecar": "the drawer's boxes",
        "found": "the words digitize finds (axes.find_frame), each matched to one drawn label",
    }[cfg.boxes]
    front = {
        "library_name": "linefuse",
        "pipeline_tag": "image-to-text",
        "tags": ["linefuse", "ocr", "crnn", "ctc", "line-charts", "tick-labels"],
    }
    minutes = metrics["draw_minutes"] + metrics["train_minutes"]
    lines = [
        "---",
        yaml.safe_dump(front, sort_keys=False).strip(),
        "---",
        "",
        f"# LineFuse {cfg.name}",
        "",
        "A small CRNN (linefuse.digitize.label_reader.LabelReader, a diffusers `ModelMixin`: four",
        f"conv blocks, a bidirectional GRU, CTC over the characters `{ALPHABET}`; 10^2 is 10",
        "with a superscript 2) that reads a chart's tick labels from their boxes.",
        PURPOSE[section],
        "",
        "## How it was made",
        "",
        f"- Command: `make {command} READER={cfg.name}` (`linefuse {command} --reader "
        f"{cfg.name}`), at commit `{stage.commit()}`.",
        f"- Architecture: {metrics['parameters']:,} parameters; crops of {cfg.height} x "
        f"{cfg.width} px (grey, each label scaled to the height, left-aligned, white around).",
        f"- Data: the {metrics['labels']:,} readable tick labels of {cfg.charts} sharp charts"
        f"{copies if cfg.degraded else ''}{restored if cfg.restored else ''}, drawn by "
        f"{', '.join(libraries)} like the base's "
        f"charts{axes if cfg.axes == 'data' else ''}{sizes if cfg.sizes == 'data' else ''} "
        f"with seed {params.base.chart_seed} (the default data uses {charts.seed}), "
        f"never the held-out families or libraries ({', '.join(charts.held_out)}); cut at "
        f"{boxes}; every box edge jittered by up to {cfg.jitter_px} px.",
        f"- Training: {cfg.steps:,} steps of {cfg.batch_size} crops, AdamW, one-cycle lr "
        f"{cfg.lr:g}, seed {cfg.seed}; final loss {metrics['final_loss']:.3f}.",
        f"- Device: {metrics['device']} ({metrics['threads']} threads); {minutes:.1f} minutes "
        f"({metrics['draw_minutes']:.1f} drawing the charts).",
        f"- Parameters: the `{section}`{voter}, `base` and `data.charts` entries of params.yaml",
        "  at that commit.",
        "",
        "## Scores",
        "",
        f"Character error rate (pooled) on the tick labels of the first {cfg.score_charts} "
        f"default charts (seed {charts.seed}; never seen in training), sharp and Gaussian-blurred "
        "at each level of `degrade.gaussian`:",
        "",
        "| labels | test CER | held-out CER | test labels | held-out labels |",
        "|---|---|---|---|---|",
        *map(_row, scores.items()),
        "",
        "## Remake it",
        "",
        f"`make {command} READER={cfg.name}` (`make {command}` remakes every reader of "
        f"`{section}`), then commit this folder.",
    ]
    (folder / paths.CARD_FILE).write_text("\n".join(lines) + "\n")


def _row(condition: tuple[str, dict]) -> str:
    name, split = condition
    test, held = split["test"], split["held_out"]
    return (
        f"| {name} | {test['cer']:.3f} | {held['cer']:.3f} | {test['labels']} | {held['labels']} |"
    )
