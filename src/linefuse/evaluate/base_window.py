"""A base window's scores and verdict: the weights it offers against the base that ships, on the
model card's score set, restored on the same device in the same run.

A window's weights replace the shipped base only when they beat it on both the test and the
held-out parts of the score set with their interval included (the new interval's low end above
the shipped base's mean) and a sharp chart still comes back at SHARP_FLOOR_DB or better.
"""

from __future__ import annotations

import math
from pathlib import Path

from linefuse import paths
from linefuse.evaluate.base_scores import score_base, scoring_charts
from linefuse.params import Params

SHARP_FLOOR_DB = 45.0  # a sharp chart through the model, worst of the score set


def score_window(params: Params, candidate: Path, device: str, workers: int) -> dict:
    """{candidate, shipped: score_base's report, verdict: {...}} on one draw of the score set."""
    charts = scoring_charts(params, workers)
    scores = {
        "candidate": score_base(params, candidate, device, charts),
        "shipped": score_base(params, paths.zoo_model(params.base.name), device, charts),
    }
    scores["verdict"] = verdict(scores["candidate"], scores["shipped"])
    return scores


def verdict(candidate: dict, shipped: dict) -> dict:
    """Whether the candidate ships, and each condition it was held to."""
    checks = {  # no interval (too few cells to resample) shows nothing
        f"{split}_beaten": (candidate[split]["low"] or -math.inf) > shipped[split]["mean"]
        for split in ("test", "held_out")
        if candidate.get(split)
    }
    checks["sharp_kept"] = candidate["sharp"]["worst"] >= SHARP_FLOOR_DB
    return {**checks, "ships": all(checks.values())}
