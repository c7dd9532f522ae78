"""A base window's scores and verdict: the weights it offers against the base that ships, both
restored here (`linefuse base-land`, on the CPU where time is free) on one draw of the model
card's score set and of a set drawn unlike the default data, each with a seed of its own
(base.score_seed, base.window.drawn_seed), so nothing that decides a ship is a chart the default
run reports.

Both models restore the same images, so the rule reads each image's difference (candidate gain
- shipped gain) and the interval of its mean (evaluate's stratified bootstrap over the domain x
level cells). The verdict reads the trained looks alone: the weights ship when that interval
lies above zero on the score set's test part, the drawn-unlike set's trained part loses no more
than DRAWN_TOLERANCE_DB on average, and the test part's sharp charts come back at SHARP_FLOOR_DB
or better. The held-out families and library are scored on both sets and recorded beside the
verdict (paired held_out and drawn_held_out), never part of it: what is held out is measured,
never selected on. Two unpaired intervals would need a gain of about their width (a third of a
dB on 90 images) before any window could ship.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from diffusers.utils import SAFETENSORS_WEIGHTS_NAME

from linefuse import paths
from linefuse.base.card import with_ledger, write_window_card
from linefuse.base.scores import score_base, scoring_charts
from linefuse.evaluate.intervals import mean_of_means_interval
from linefuse.hardware import choose_device
from linefuse.stage import UserError, atomic_dir, write_json

if TYPE_CHECKING:
    from linefuse.params.data import ChartParams
    from linefuse.params.full import Params

log = logging.getLogger("linefuse")


SHARP_FLOOR_DB = 45.0  # a sharp chart through the model, worst of the score set's test part
# the drawn-unlike set's mean paired difference a new base may lose: the noise of two models'
# restorations of one image, not a look the new weights forgot
DRAWN_TOLERANCE_DB = 0.05
# data.charts drawn unlike the default data and outside the base's own ranges (thick lines, large
# print, small figures at a high dpi, mostly several panels): a new base must not lose there
DRAWN_UNLIKE = {
    "line_width_pt": [3.8, 5.0],
    "font_pt": [15.0, 18.0],
    "width_in": [2.2, 2.6],
    "height_in": [1.7, 2.0],
    "dpi": [230, 300],
    "multi_panel_prob": 0.6,
}


def drawn_chart_params(params: Params) -> ChartParams:
    """The drawn-unlike set's recipe: data.charts with DRAWN_UNLIKE, drawn with its own seed."""
    return params.data.charts.model_copy(
        update={**DRAWN_UNLIKE, "seed": params.base.window.drawn_seed}
    )


def score_window(params: Params, candidate: Path, device: str, workers: int) -> dict:
    """{candidate, shipped: score_base's reports; drawn: both on the drawn set; paired: the
    per-image differences; verdict}, both models restored on `device` from one draw of each
    chart set."""
    shipped = paths.zoo_model(params.base.name)
    models = (("candidate", candidate), ("shipped", shipped))
    charts = scoring_charts(params, workers)
    scores = {name: score_base(params, folder, device, charts) for name, folder in models}
    count = params.base.window.drawn_charts
    charts = scoring_charts(params, workers, drawn_chart_params(params), count)
    scores["drawn"] = {  # PSNR only: the verdict reads no labels there
        name: score_base(params, folder, device, charts, read_labels=False)
        for name, folder in models
    }
    scores["shipped_weights"] = weights_digest(shipped)
    scores["paired"] = paired(params, scores)
    trained_sharp = scores["candidate"]["test"].get("sharp", {}).get("worst")
    scores["verdict"] = verdict(scores["paired"], trained_sharp)
    return scores


def weights_digest(model: Path) -> str:
    """sha256 of a model folder's weights: the shipped base a window's scores were made against."""
    return hashlib.sha256((model / SAFETENSORS_WEIGHTS_NAME).read_bytes()).hexdigest()


def paired(params: Params, scores: dict) -> dict:
    """Candidate minus shipped, image by image: {test, held_out, drawn, drawn_held_out: {mean,
    samples, better, ...}}; the score set's splits with the stratified interval over their
    cells, the drawn set's pooled over its cells (better: the share of images the candidate
    restored better). A split without charts has no entry."""

    def differences(candidate: dict, shipped: dict) -> list[np.ndarray]:
        return [
            np.subtract(gains, shipped["gains"][cell]) for cell, gains in candidate["gains"].items()
        ]

    def summary(cells: list[np.ndarray]) -> dict:
        found = mean_of_means_interval(cells, params.eval.interval, params.eval.seed)
        every = np.concatenate(cells) if cells else np.zeros(0)
        return {**found, "better": float(np.mean(every > 0)) if every.size else None}

    def pooled(cells: list[np.ndarray]) -> dict:
        every = np.concatenate(cells)
        return {
            "mean": float(every.mean()),
            "samples": int(every.size),
            "better": float(np.mean(every > 0)),
        }

    result = {}
    drawn = scores["drawn"]
    for split, drawn_key in (("test", "drawn"), ("held_out", "drawn_held_out")):
        if scores["candidate"].get(split):
            cells = differences(scores["candidate"][split], scores["shipped"][split])
            result[split] = summary(cells)
        if drawn["candidate"].get(split):
            cells = differences(drawn["candidate"][split], drawn["shipped"][split])
            result[drawn_key] = pooled(cells)
    return result


def verdict(paired: dict, sharp_worst: float | None) -> dict:
    """Whether the candidate ships, and each condition it was held to, all on the trained looks:
    the score set's test part's paired interval above zero, the drawn set's trained part's mean
    difference at least -DRAWN_TOLERANCE_DB, the test part's worst sharp chart (`sharp_worst`)
    at the floor. A part with no charts passes nothing. The held-out parts of `paired` are not
    read: they are reported beside the verdict, never selected on."""
    checks = {
        "test_beaten": (paired.get("test", {}).get("low") or 0.0) > 0.0,
        "drawn_not_lost": paired.get("drawn", {}).get("mean", -np.inf) >= -DRAWN_TOLERANCE_DB,
        "sharp_kept": sharp_worst is not None and sharp_worst >= SHARP_FLOOR_DB,
    }
    return {**checks, "ships": all(checks.values())}


LEDGER = "ledger.json"


def land_window(params: Params, window: Path, workers: int) -> list[Path]:
    """`linefuse base-land`: scores the weights a window offered against the shipped base, here;
    ships them when the verdict says so, else keeps them in BASE_WINDOWS_DIR until a better
    base ships; keeps the window's stable state and compiled kernels and adds its ledger row;
    the card is rewritten either way. Returns what it wrote."""
    record_path = window / "record.json"
    if not (record_path.is_file() and (window / paths.WINDOW_STATE_FILE).is_file()):
        raise UserError(
            f"{window} holds no base window (record.json and {paths.WINDOW_STATE_FILE}); pass "
            "the OUT folder make base-window wrote"
        )
    record = json.loads(record_path.read_text())
    ledger_path = paths.BASE_WINDOWS_DIR / LEDGER
    ledger = json.loads(ledger_path.read_text())
    number = record["stable_state"]["windows"]
    landed = [row for row in ledger["windows"] if row["window"] == number]
    if landed:  # before scoring: landing it again would pair the shipped weights with themselves
        raise UserError(
            f"{window} is window {number}, landed on {landed[0]['date']} ({ledger_path}); "
            "nothing to do: pass the OUT folder of a window that is not in the ledger"
        )
    device = choose_device(params.compute.device).value
    offered = window / paths.WINDOW_CANDIDATE_DIR
    scores = score_window(params, offered, device, workers)
    ships = scores["verdict"]["ships"]
    ledger["windows"].append(
        {
            "window": number,
            "date": record.get("date") or time.strftime("%Y-%m-%d"),
            "device": record["gpu"] or record["device"],
            "minutes": record["minutes"],
            "pairs": record["candidate_pairs"] - record["start_state"]["pairs"],
            "cumulative_pairs": ledger["init_pairs"] + record["candidate_pairs"],
            "pairs_per_s": record["summary"]["pairs_per_s"],
            "step_share": record["summary"]["step_share"],
            "test": scores["candidate"]["test"].get("mean"),
            "held_out": scores["candidate"]["held_out"].get("mean"),
            "test_vs_shipped": scores["paired"].get("test", {}).get("mean"),
            "held_out_vs_shipped": scores["paired"].get("held_out", {}).get("mean"),
            "sharp_worst": scores["candidate"]["sharp"]["worst"],
            "verdict": scores["verdict"],
            "shipped": ships,
        }
    )
    for name in (paths.WINDOW_STATE_FILE, paths.WINDOW_COMPILED_FILE):
        if (window / name).is_file():  # compiled kernels: only from a GPU that compiled
            shutil.copyfile(window / name, paths.BASE_WINDOWS_DIR / name)
    folder = paths.zoo_model(params.base.name)
    kept = paths.BASE_WINDOWS_DIR / paths.WINDOW_CANDIDATE_DIR
    with atomic_dir(folder if ships else kept) as tmp:
        shutil.copytree(offered, tmp, dirs_exist_ok=True)
        (tmp / paths.SCORES_FILE).write_text(
            json.dumps(scores["candidate"], indent=2, sort_keys=True) + "\n"
        )
    if ships:
        shutil.rmtree(kept, ignore_errors=True)  # an older offer, superseded by what ships
        write_window_card(params, folder, scores["candidate"], ledger)
    else:  # the shipped weights' own card, its ledger brought up to date
        card = folder / paths.CARD_FILE
        card.write_text(with_ledger(card.read_text(), ledger))
    write_json(ledger_path, ledger)
    write_json(paths.BASE_WINDOWS_DIR / f"scores-{ledger['windows'][-1]['window']}.json", scores)
    return [folder, paths.BASE_WINDOWS_DIR]
