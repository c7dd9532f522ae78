"""A base window's scores and verdict: the weights it offers against the base that ships, on the
model card's score set, restored on the same device in the same run.

A window's weights replace the shipped base only when they beat it on both the test and the
held-out parts of the score set with their interval included (the new interval's low end above
the shipped base's mean) and a sharp chart still comes back at SHARP_FLOOR_DB or better.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from diffusers.utils import SAFETENSORS_WEIGHTS_NAME

from linefuse import paths
from linefuse.evaluate.base_scores import score_base, scoring_charts
from linefuse.evaluate.model_card import CARD, SCORES, with_ledger, write_window_card
from linefuse.hardware import choose_device
from linefuse.stage import UserError, atomic_dir, write_json

if TYPE_CHECKING:
    from linefuse.params.full import Params

log = logging.getLogger("linefuse")

SHARP_FLOOR_DB = 45.0  # a sharp chart through the model, worst of the score set
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


def drawn_params(params: Params) -> Params:
    """params whose default charts are the drawn set's (scoring_charts draws them)."""
    charts = params.data.charts.model_copy(update=DRAWN_UNLIKE)
    base = params.base.model_copy(update={"score_charts": params.base.window.drawn_charts})
    return params.model_copy(
        update={"data": params.data.model_copy(update={"charts": charts}), "base": base}
    )


def score_window(
    params: Params, candidate: Path, device: str, workers: int, scores=None, score_missing=True
) -> dict:
    """{candidate, shipped: score_base's report; drawn: both on the drawn set; verdict} on one
    draw of each chart set; the parts `scores` already holds (a window's own) are kept, and the
    missing ones scored here unless `score_missing` is off (then the verdict cannot ship). Scores
    made against other shipped weights (a window landed since) are all made again here, so the
    two models are restored on one device."""
    shipped = paths.zoo_model(params.base.name)
    digest = weights_digest(shipped)
    scores = dict(scores or {})
    if scores and scores.get("shipped_weights") != digest:
        log.info("base-land: the shipped base changed since the window scored it; scoring anew")
        scores = {}
    scores["shipped_weights"] = digest
    if not score_missing:
        scores.setdefault("drawn", None)
    models = (("candidate", candidate), ("shipped", shipped))
    if not {"candidate", "shipped"} <= set(scores):
        charts = scoring_charts(params, workers)
        scores.update({name: score_base(params, folder, device, charts) for name, folder in models})
    if "drawn" not in scores:  # PSNR only: the verdict reads no labels there
        drawn = drawn_params(params)
        charts = scoring_charts(drawn, workers)
        scores["drawn"] = {
            name: score_base(drawn, folder, device, charts, read_labels=False)
            for name, folder in models
        }
    scores["verdict"] = verdict(scores["candidate"], scores["shipped"], scores["drawn"])
    return scores


def weights_digest(model: Path) -> str:
    """sha256 of a model folder's weights: the shipped base a window's scores were made against."""
    return hashlib.sha256((model / SAFETENSORS_WEIGHTS_NAME).read_bytes()).hexdigest()


def verdict(candidate: dict, shipped: dict, drawn: dict | None = None) -> dict:
    """Whether the candidate ships, and each condition it was held to: both splits beaten with
    the interval included, the drawn set not lost (its mean gain over all its charts), the sharp
    floor kept."""
    checks = {  # no interval (too few cells to resample) shows nothing
        f"{split}_beaten": (candidate[split]["low"] or -math.inf) > shipped[split]["mean"]
        for split in ("test", "held_out")
        if candidate.get(split)
    }
    checks["drawn_not_lost"] = (  # None: not scored, so not shown, and not shipped
        None if drawn is None else _pooled(drawn["candidate"]) >= _pooled(drawn["shipped"])
    )
    checks["sharp_kept"] = candidate["sharp"]["worst"] >= SHARP_FLOOR_DB
    return {**checks, "ships": all(check is True for check in checks.values())}


def _pooled(report: dict) -> float:
    """A report's mean gain over the images of both splits."""
    splits = [report[split] for split in ("test", "held_out") if report.get(split)]
    return sum(s["mean"] * s["samples"] for s in splits) / sum(s["samples"] for s in splits)


LEDGER = "ledger.json"


def land_window(params: Params, window: Path, workers: int, score_missing=True) -> list[Path]:
    """`linefuse base-land`: the verdict on the weights a window offered, from the scores the
    window made on its GPU (a part it lacks is scored here); ships them when the verdict says
    so, keeps the window's stable state and adds its ledger row; the card is rewritten either
    way. Returns what it wrote."""
    record_path = window / "record.json"
    if not (record_path.is_file() and (window / paths.WINDOW_STATE_FILE).is_file()):
        raise UserError(
            f"{window} holds no base window (record.json and {paths.WINDOW_STATE_FILE}); pass "
            "the OUT folder make base-window wrote"
        )
    record = json.loads(record_path.read_text())
    device = choose_device(params.compute.device).value
    offered = window / paths.WINDOW_CANDIDATE_DIR
    scores = score_window(params, offered, device, workers, record.get("scores"), score_missing)
    ledger_path = paths.BASE_WINDOWS_DIR / LEDGER
    ledger = json.loads(ledger_path.read_text())
    ships = scores["verdict"]["ships"]
    cumulative = ledger["init_pairs"] + record["candidate_pairs"]
    ledger["windows"].append(
        {
            "window": record["stable_state"]["windows"],
            "date": record.get("date") or time.strftime("%Y-%m-%d"),
            "device": record["gpu"] or record["device"],
            "minutes": record["minutes"],
            "pairs": record["candidate_pairs"] - record["start_state"]["pairs"],
            "cumulative_pairs": cumulative,
            "pairs_per_s": record["summary"]["pairs_per_s"],
            "step_share": record["summary"]["step_share"],
            "test": scores["candidate"]["test"]["mean"],
            "held_out": scores["candidate"]["held_out"]["mean"],
            "sharp_worst": scores["candidate"]["sharp"]["worst"],
            "verdict": scores["verdict"],
            "shipped": ships,
        }
    )
    folder = paths.zoo_model(params.base.name)
    shutil.copyfile(
        window / paths.WINDOW_STATE_FILE, paths.BASE_WINDOWS_DIR / paths.WINDOW_STATE_FILE
    )
    if ships:
        with atomic_dir(folder) as tmp:
            shutil.copytree(window / paths.WINDOW_CANDIDATE_DIR, tmp, dirs_exist_ok=True)
            (tmp / SCORES).write_text(
                json.dumps(scores["candidate"], indent=2, sort_keys=True) + "\n"
            )
    if ships:
        write_window_card(params, folder, scores["candidate"], ledger)
    else:  # the shipped weights' own card, its ledger brought up to date
        card = folder / CARD
        card.write_text(with_ledger(card.read_text(), ledger))
    write_json(ledger_path, ledger)
    write_json(paths.BASE_WINDOWS_DIR / f"scores-{ledger['windows'][-1]['window']}.json", scores)
    return [folder, paths.BASE_WINDOWS_DIR]
