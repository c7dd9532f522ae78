"""The shipped base's model card: score the base with no adapter and say how it was made.

A README.md with YAML front matter, as on the Hugging Face Hub, beside the weights in
linefuse/zoo/<base.name>, and the scores as JSON beside it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from linefuse import paths, stage
from linefuse.base.scores import score_base
from linefuse.hardware import choose_device, cpu_model

if TYPE_CHECKING:
    from linefuse.params.full import Params


def score_and_card(params: Params, folder: Path, metrics: dict) -> dict:
    """Scores the base in `folder`, writes scores.json and the card; returns the scores."""
    scores = score_base(params, folder, choose_device(params.compute.device).value)
    (folder / paths.SCORES_FILE).write_text(json.dumps(scores, indent=2, sort_keys=True) + "\n")
    write_card(params, folder, metrics, scores)
    return scores


def write_card(params: Params, folder: Path, metrics: dict, scores: dict) -> None:
    """The model card: what the base is, how it was made (commit, params, data, steps, device,
    hours) and how well it restores on its own."""
    base = params.base
    front = {
        "library_name": "diffusers",
        "pipeline_tag": "image-to-image",
        "tags": ["linefuse", "image-restoration", "deblurring", "line-charts", "diffusion"],
        "base_model": None,
    }
    test, held, sharp = scores["test"], scores.get("held_out", {}), scores["sharp"]
    hours = loop_hours(paths.train_logs("base") / "steps.jsonl", base.batch_size)
    samples = base.steps * base.batch_size
    lines = [
        "---",
        yaml.safe_dump(front, sort_keys=False).strip(),
        "---",
        "",
        f"# LineFuse {base.name}",
        "",
        "A conditional diffusion UNet (diffusers `UNet2DConditionModel`, InstructPix2Pix-style:",
        "the noisy residual and the blurred chart in, the residual sharp - blurred out) that",
        "restores blurred, scanned, compressed and down-scaled line charts in one DDIM step. It",
        "is the base that LineFuse's curriculum adapts with LoRA on a user's data",
        f"(`model.unet: {base.name}`).",
        "",
        *_use_lines(base.name),
        "## How it was made",
        "",
        f"- Command: `make base` (`linefuse base`), at commit `{stage.commit()}`.",
        f"- Architecture: `{base.unet}` ({metrics['total_params']:,} parameters), "
        + (
            f"fine-tuned from `{base.init}` (its own card says how that was made)."
            if base.init
            else "trained from scratch."
        ),
        f"- Data: a bank of {base.bank.charts:,} sharp charts (`make bank`) drawn once from "
        f"`data.charts` with `base.chart_overrides` and seed {base.chart_seed} (the default data "
        f"uses {params.data.charts.seed}), never the held-out families "
        f"({', '.join(params.data.charts.held_out)}); each step crops {base.crop} px windows "
        f"({base.bank.label_focus:.0%} centred on a tick label) and degrades them on the training "
        f"device in a random (domain, level), {base.light_fraction:.0%} of them light; "
        f"{params.optim.identity_fraction:.0%} identity pairs.",
        f"- Training: {base.steps:,} steps of {base.batch_size} ({samples:,} pairs), AdamW lr "
        f"{base.lr:g}, warmup {base.warmup_steps}, cosine; loss and timesteps from `optim`"
        f"{_text_terms(params)}.",
        f"- Device: {metrics['device']} ({metrics['device_reason']}), precision "
        f"{metrics['precision']}; {hours:.2f} hours in the training loop"
        + (
            f" (resumed at step {metrics['resumed_from_step']})"
            if metrics["resumed_from_step"]
            else ""
        )
        + ".",
        "- Parameters: the `base`, `optim`, `model`, `degrade` and `data.charts` blocks of",
        "  params.yaml at that commit.",
        "",
        "## Scores (no adapter, 1 DDIM step, whole images)",
        "",
        f"{_score_set(params)}, every domain and level (linefuse.base.scores): mean "
        "PSNR gain over the input, 95% interval.",
        "",
        "| split | mean gain (dB) | interval | images | worst cell |",
        "|---|---|---|---|---|",
        _row("test", test),
        _row("held out", held),
        "",
        f"Sharp charts through the model: {sharp['mean']:.2f} dB mean, {sharp['worst']:.2f} dB "
        "worst.",
        "",
        "Gain per domain (test): "
        + ", ".join(f"{d} {g:+.2f}" for d, g in test.get("by_domain", {}).items())
        + ".",
        "",
        *_cer_table(scores),
        "## Remake it",
        "",
        "`make base` (resumes from `.linefuse/state/base`), then commit this folder.",
    ]
    (folder / paths.CARD_FILE).write_text("\n".join(lines) + "\n")


def write_window_card(params: Params, folder: Path, scores: dict, ledger: dict) -> None:
    """The card of a base grown in GPU windows (make base-window): what it is, the ledger of
    windows that made it (workflow/base_windows/<base.name>/ledger.json) and its scores."""
    base, window = params.base, params.base.window
    test, held, sharp = scores["test"], scores.get("held_out", {}), scores["sharp"]
    front = {
        "library_name": "diffusers",
        "pipeline_tag": "image-to-image",
        "tags": ["linefuse", "image-restoration", "deblurring", "line-charts", "diffusion"],
        "base_model": None,
    }
    lines = [
        "---",
        yaml.safe_dump(front, sort_keys=False).strip(),
        "---",
        "",
        f"# LineFuse {base.name}",
        "",
        "A conditional diffusion UNet (diffusers `UNet2DConditionModel`, InstructPix2Pix-style:",
        "the noisy residual and the blurred chart in, the residual sharp - blurred out) that",
        "restores blurred, scanned, compressed and down-scaled line charts in one DDIM step. It",
        "is the base that LineFuse's curriculum adapts with LoRA on a user's data",
        f"(`model.unet: {base.name}`).",
        "",
        *_use_lines(base.name),
        "## How it was made",
        "",
        f"- Start: `{ledger['init']}` ({ledger['init_pairs']:,} pairs; {ledger['init_note']}).",
        f"- Then GPU windows (`make base-window`, linefuse.base.window), each resuming the last "
        f"one's stable state: `{base.unet}` UNet, AdamW at a constant {window.lr:g} after a "
        f"{window.warmup_steps}-step warmup in the first window (warmup-stable-decay), a "
        f"{window.cooldown_fraction:.0%} cool-down (1 - sqrt to 0) from that state making the "
        "weights each window offers.",
        f"- Data: charts drawn from `data.charts` with `base.chart_overrides` and seed "
        f"{base.chart_seed} (the default data uses {params.data.charts.seed}), never the held-out "
        f"families ({', '.join(params.data.charts.held_out)}), each window drawing charts no "
        f"earlier window saw; {base.crop} px crops cut on the GPU "
        f"({base.bank.label_focus:.0%} centred on a tick label), degraded there in a random "
        f"(domain, level), {base.light_fraction:.0%} of them light; "
        f"{params.optim.identity_fraction:.0%} identity pairs.",
        "",
        *_ledger_section(ledger, params),
        "## Scores (no adapter, 1 DDIM step, whole images)",
        "",
        f"{_score_set(params)}, every domain and level (linefuse.base.scores), scored "
        f"by `linefuse base-land` on {_machine(params)}: "
        "mean PSNR gain over the input, 95% interval. The ledger's paired columns are each "
        "window's per-image difference from the default base (`model.unet`) when it landed.",
        "",
        "| split | mean gain (dB) | interval | images | worst cell |",
        "|---|---|---|---|---|",
        _row("test", test),
        _row("held out", held),
        "",
        f"Sharp charts through the model: {sharp['mean']:.2f} dB mean, {sharp['worst']:.2f} dB "
        "worst.",
        "",
        "Gain per domain (test): "
        + ", ".join(f"{d} {g:+.2f}" for d, g in test.get("by_domain", {}).items())
        + ".",
        "",
        *_cer_table(scores),
        "## Grow it",
        "",
        "`make wheels` here, then `make base-window MINUTES=8 OUT=DIR` on a GPU machine; back",
        "here, `linefuse base-land DIR` scores the offered weights, ships them if they are",
        "better and adds the ledger row. Commit this folder and workflow/base_windows.",
    ]
    (folder / paths.CARD_FILE).write_text("\n".join(lines) + "\n")


LEDGER_HEADING = "## GPU windows"


def with_ledger(card: str, ledger: dict, params: Params) -> str:
    """`card` with its ledger section (LEDGER_HEADING to the next heading) made anew from
    `ledger`: the card of weights no window has replaced still lists every window."""
    head, _, rest = card.partition(f"\n{LEDGER_HEADING}\n")
    tail = rest[rest.index("\n## ") :] if "\n## " in rest else ""
    return head.rstrip("\n") + "\n\n" + "\n".join(_ledger_section(ledger, params)) + tail


def _ledger_section(ledger: dict, params: Params) -> list[str]:
    ship = params.base.window.ship
    # rows landed before the verdict read the drawn set's sharp charts: their verdict names none
    older = [w["window"] for w in ledger["windows"] if "sharp_worst" not in w["verdict"]]
    return [
        LEDGER_HEADING,
        "",
        "Each window (`make base-window`) resumes the last one's stable state and offers its",
        "cooled weights. The verdict reads the trained looks alone: the weights ship only when",
        "they beat the default base (`model.unet`) on the score set (interval included), lose",
        f"no more than {ship.drawn_tolerance_db:g} dB on average on charts drawn unlike the",
        "default data and bring the sharp charts of both sets back at "
        f"{ship.sharp_floor_db:g} dB or better",
        "(`base.window.ship`, linefuse.base.land). The held-out looks are scored and listed,",
        "never part of the verdict. Gains are the scores of the weights each window offered, in",
        "dB over the input; the paired columns their mean per-image difference from the default",
        "base when the window landed; sharp worst the worst sharp chart the verdict read"
        + (
            f" ({_windows(older)}: the score set's alone, held-out charts included)."
            if older
            else "."
        ),
        "Windows 1-4 were scored on the first 40 default charts and had to beat the shipped base",
        "held out too; windows 1-3 were judged by the earlier, unpaired rule.",
        "",
        "| window | date | device | minutes | pairs | cumulative pairs | pairs/s | test | held out "
        "| test vs shipped | held out vs shipped | sharp worst | shipped |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *_ledger_rows(ledger),
        "",
    ]


def _ledger_rows(ledger: dict) -> list[str]:
    return [
        f"| {w['window']} | {w['date']} | {w['device']} | {w['minutes']:.1f} | "
        f"{w['pairs']:,} | {w['cumulative_pairs']:,} | {w['pairs_per_s']:,.0f} | "
        f"{_signed(w['test'])} | {_signed(w['held_out'])} | "
        f"{_signed(w.get('test_vs_shipped'))} | {_signed(w.get('held_out_vs_shipped'))} | "
        f"{_decibels(w['sharp_worst'])} | {'yes' if w['shipped'] else 'no'} |"
        for w in ledger["windows"]
    ]


def _score_set(params: Params) -> str:
    """The score set, as the card's Scores section names it (base_scores.score_chart_params)."""
    return (
        f"{params.base.score_charts} charts drawn as the default data is (`data.charts`) with a "
        f"seed of their own ({params.base.score_seed}; the default data uses "
        f"{params.data.charts.seed}): none is a chart the default run trains on or reports"
    )


def _signed(value: float | None) -> str:
    """A ledger's dB figure; "-" where the window had none (no paired score, no held-out chart)."""
    return "-" if value is None else f"{value:+.2f}"


def _windows(numbers: list[int]) -> str:
    """Ledger rows named in the card's prose: "window 3", "windows 1-6"."""
    return f"window {numbers[0]}" if len(numbers) == 1 else f"windows {numbers[0]}-{numbers[-1]}"


def _decibels(value: float | None) -> str:
    """A ledger's sharp worst; "-" where the verdict read none (a set with no trained chart)."""
    return "-" if value is None else f"{value:.1f}"


def _machine(params: Params) -> str:
    """Where base-land restores: the GPU's name, or the CPU's cores and model."""
    device = choose_device(params.compute.device).value
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name()
    return f"a {os.cpu_count()}-core {cpu_model()}"


def _use_lines(name: str) -> list[str]:
    """How to restore with the base from Python: the pipeline `dvc repro` saves."""
    return [
        "## Use it",
        "",
        f"`dvc repro` with `model.unet: {name}` saves it, with the settings evaluate restored",
        "with, as a diffusers pipeline in `models/pipeline` (model_index.json, unet/,",
        "scheduler/), and the curriculum's LoRA adapter in `models/lora/LEVEL`:",
        "",
        "```python",
        "from PIL import Image",
        "from linefuse import LineFusePipeline",
        "",
        'pipe = LineFusePipeline.from_pretrained("models/pipeline")',
        'pipe.load_adapter("models/lora/hard")  # without it: the base alone',
        'pipe(Image.open("chart.png")).images[0].save("restored.png")',
        "```",
        "",
    ]


def _text_terms(params: Params) -> str:
    """What the loss reads of the tick labels, as a clause of the Training line."""
    text, laplacian = params.base.text, params.optim.loss.laplacian
    terms = [f"tick-label pixels weighted 1 + {text.label_weight:g}"] if text.label_weight else []
    if text.ctc:
        terms.append(f"the `{text.reader}` reader's CTC loss on the restored labels x {text.ctc:g}")
    if laplacian:
        terms.append(f"the error's Laplacian x {laplacian:g}")
    return f"; plus {', '.join(terms)}" if terms else ""


def _cer_table(scores: dict) -> list[str]:
    """The tick labels' character error rate (Tesseract) per split and level, where read."""
    rows = [
        f"| {split.replace('_', ' ')} | {level} | {r['input']:.3f} | {r['model']:.3f} | "
        f"{r['sharp']:.3f} |"
        for split in ("test", "held_out")
        for level, r in (scores.get(split, {}).get("cer") or {}).items()
    ]
    if not rows:
        return []
    return [
        "Tick labels read by Tesseract, character error rate (pooled over the domains):",
        "",
        "| split | level | input | model | sharp chart |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]


def loop_hours(step_log, batch_size: int) -> float:
    """Hours the training loop ran, over every resumed leg: each logged interval's pairs over its
    rate (the step log survives resumes; a run's own clock does not)."""
    records = [json.loads(line) for line in step_log.read_text().splitlines()]
    seconds, last_step = 0.0, 0
    for record in records:
        seconds += (record["step"] - last_step) * batch_size / record["samples_per_s"]
        last_step = record["step"]
    return seconds / 3600


def _row(name: str, split: dict) -> str:
    if not split:
        return f"| {name} | - | - | 0 | - |"
    low, high = split["low"], split["high"]
    interval = f"{low:+.2f}..{high:+.2f}" if low is not None else "-"
    return (
        f"| {name} | {split['mean']:+.2f} | {interval} | {split['samples']} | "
        f"{split['worst_cell']:+.2f} |"
    )
