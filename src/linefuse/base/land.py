"""A base window's scores and verdict: the weights it offers against the base `model.unet` names
(the one users restore with by default, "shipped" below), both restored here (`linefuse
base-land`, on the CPU where time is free) on one draw of the model card's score set and of a
set drawn unlike the default data, each with a seed of its own (base.score_seed,
base.window.drawn_seed), so nothing that decides a ship is a chart the default run reports.

Both models restore the same images, so the rule reads each image's difference (candidate gain
- shipped gain) and the interval of its mean (evaluate's stratified bootstrap over the domain x
level cells). The verdict reads the trained looks alone, held to base.window.ship: the weights
ship when that interval lies above zero on the score set's test part, the drawn-unlike set's
trained part loses no more than drawn_tolerance_db on average, and the sharp charts of both
trained parts come back at sharp_floor_db or better. The held-out families and library are
scored on both sets and recorded beside the verdict (paired held_out and drawn_held_out), never
part of it: what is held out is measured, never selected on. Two unpaired intervals would need
a gain of about their width (a third of a dB on 90 images) before any window could ship.

Weights that ship go to linefuse/zoo/<base.name> (the first that ship create it, for a base of a
new layout); `model.unet` still names the default until someone points it there. Until then a
window of such a base is judged against the default alone, not against the base.name weights it
replaces.
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
from linefuse.base.compiled_kernels import repack_kernels
from linefuse.base.scores import score_base, scoring_charts
from linefuse.base.window import pack_state
from linefuse.evaluate.intervals import mean_of_means_interval
from linefuse.hardware import choose_device
from linefuse.stage import UserError, atomic_dir, write_json

if TYPE_CHECKING:
    from linefuse.params.data import ChartParams
    from linefuse.params.full import Params

log = logging.getLogger("linefuse")


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
    """The drawn-unlike set's recipe: data.charts (its axis knobs off) with DRAWN_UNLIKE, drawn
    with its own seed."""
    return params.data.charts.without_axis_knobs().model_copy(
        update={**DRAWN_UNLIKE, "seed": params.base.window.drawn_seed}
    )


def default_base(params: Params) -> Path:
    """The folder of the base `model.unet` names (paths.unet_folder): what a window's weights are
    paired against. A spec with no trained weights (an architecture such as tiny) is a one-line
    error."""
    folder = paths.unet_folder(params.model.unet)
    if not (folder / SAFETENSORS_WEIGHTS_NAME).is_file():
        raise UserError(
            f"model.unet: {params.model.unet} names no trained base to pair the window's weights "
            f"with ({folder / SAFETENSORS_WEIGHTS_NAME} is missing); set it to a shipped base "
            "(linefuse/zoo) or a local diffusers UNet folder"
        )
    return folder


def score_window(params: Params, candidate: Path, device: str, workers: int) -> dict:
    """{candidate, shipped: score_base's reports (shipped: the default base, default_base);
    drawn: both on the drawn set; shipped_base: model.unet; shipped_weights; paired: the
    per-image differences; verdict}, both models restored on `device` from one draw of each
    chart set."""
    shipped = default_base(params)
    models = (("candidate", candidate), ("shipped", shipped))
    charts = scoring_charts(params, workers)
    scores = {name: score_base(params, folder, device, charts) for name, folder in models}
    count = params.base.window.drawn_charts
    charts = scoring_charts(params, workers, drawn_chart_params(params), count)
    scores["drawn"] = {  # PSNR only: the verdict reads no labels there
        name: score_base(params, folder, device, charts, read_labels=False)
        for name, folder in models
    }
    scores["shipped_base"] = params.model.unet
    scores["shipped_weights"] = weights_digest(shipped)
    scores["paired"] = paired(params, scores)
    scores["verdict"] = verdict(params, scores["paired"], trained_sharp_worst(scores))
    return scores


def trained_sharp_worst(scores: dict) -> dict[str, float | None]:
    """The candidate's worst sharp chart through it on each trained part the verdict reads: {test:
    the score set's test part, drawn: the drawn set's trained part}; None where a part has no
    chart."""
    reports = {"test": scores["candidate"], "drawn": scores["drawn"]["candidate"]}
    return {part: report["test"].get("sharp", {}).get("worst") for part, report in reports.items()}


def weights_digest(model: Path) -> str:
    """sha256 of a model folder's weights: the default base a window's scores were made against."""
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


def verdict(params: Params, paired: dict, sharp: dict[str, float | None]) -> dict:
    """Whether the candidate ships, and each condition it was held to (base.window.ship), all on
    the trained looks: the score set's test part's paired interval above zero, the drawn set's
    trained part's mean difference at least -drawn_tolerance_db, and the worst sharp chart of both
    trained parts (`sharp`, trained_sharp_worst's) at sharp_floor_db or better. A part with no
    charts passes nothing. The held-out parts of `paired` are not read: they are reported beside
    the verdict, never selected on. Also returns sharp_worst, the value sharp_kept read (None
    where a part had no chart), its parts (sharp_worst_by_part) and the thresholds (held_to)."""
    ship = params.base.window.ship
    parts = [sharp[part] for part in ("test", "drawn")]
    worst = None if None in parts else min(parts)
    checks = {
        "test_beaten": (paired.get("test", {}).get("low") or 0.0) > 0.0,
        "drawn_not_lost": paired.get("drawn", {}).get("mean", -np.inf) >= -ship.drawn_tolerance_db,
        "sharp_kept": worst is not None and worst >= ship.sharp_floor_db,
    }
    return {
        **checks,
        "ships": all(checks.values()),
        "sharp_worst": worst,
        "sharp_worst_by_part": dict(sharp),
        "held_to": ship.model_dump(),
    }


LEDGER = "ledger.json"


def new_ledger(params: Params) -> dict:
    """The ledger of a base no window has landed for yet: what its first window started from."""
    init = params.base.window.init
    note = (
        f"{params.base.unet} initialised from {init} where shapes match (train.model.init_from)"
        if init
        else f"{params.base.unet} from scratch"
    )
    return {"init": init, "init_note": note, "init_pairs": 0, "windows": []}


def land_window(params: Params, window: Path, workers: int) -> list[Path]:
    """`linefuse base-land`: scores the weights a window offered against the default base
    (model.unet), here; ships them to linefuse/zoo/<base.name> when the verdict says so (an
    offer that does not ship is dropped: the next window offers the state trained further, and
    the tree a lent GPU carries holds 64 MiB); keeps the window's stable state (its files) and
    compiled kernels and adds its ledger row (its sharp_worst: the value the verdict read); the
    base.name card is rewritten either way, where there is one. Returns what it wrote."""
    record_path = window / "record.json"
    if not (record_path.is_file() and paths.window_state_files(window)):
        raise UserError(
            f"{window} holds no base window (record.json and {paths.WINDOW_STATE_FILE}); pass "
            "the OUT folder make base-window wrote"
        )
    record = json.loads(record_path.read_text())
    windows = paths.base_windows(params.base.name)
    ledger_path = windows / LEDGER
    ledger = json.loads(ledger_path.read_text()) if ledger_path.is_file() else new_ledger(params)
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
            "sharp_worst": scores["verdict"]["sharp_worst"],
            "verdict": scores["verdict"],
            "shipped": ships,
        }
    )
    windows.mkdir(parents=True, exist_ok=True)
    pack_state(window, windows)  # the state before, replaced whole
    if paths.window_kernel_files(window):  # only from a GPU that compiled
        repack_kernels(window, windows)
    folder = paths.zoo_model(params.base.name)
    written = [windows]
    card = folder / paths.CARD_FILE
    if ships:
        with atomic_dir(folder) as tmp:
            shutil.copytree(offered, tmp, dirs_exist_ok=True)
            (tmp / paths.SCORES_FILE).write_text(
                json.dumps(scores["candidate"], indent=2, sort_keys=True) + "\n"
            )
        write_window_card(params, folder, scores["candidate"], ledger)
        written.insert(0, folder)
    elif card.is_file():  # base.name's own card, its ledger brought up to date (a base of a new
        # layout has none until weights of it first ship)
        card.write_text(with_ledger(card.read_text(), ledger, params))
        written.insert(0, folder)
    write_json(ledger_path, ledger)
    write_json(windows / f"scores-{ledger['windows'][-1]['window']}.json", scores)
    return written
