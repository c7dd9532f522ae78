"""`linefuse base-window`, the command a lent GPU runs, end to end on the CPU with tiny settings:
two windows in a row, the second resuming the first's stable state, as a lent GPU runs a long
window and then a short one on the warm machine; then `linefuse base-land`'s paired rule."""

from __future__ import annotations

import json
import lzma
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from diffusers import UNet2DConditionModel
from safetensors import safe_open

from linefuse import paths
from linefuse.base import land as base_window
from linefuse.base.land import paired, trained_sharp_worst, verdict
from linefuse.base.window import load_state, measured_setting, summarise
from linefuse.evaluate.intervals import mean_of_means_interval
from linefuse.params.full import Params

from conftest import ROOT, built_once, run_cli, shared_folder, tiny_params, write_params

SHIPPED = ROOT / "src/linefuse/zoo/chart-base"


def window_params() -> dict:
    params = tiny_params()
    # the tiny layout, started from chart-base whole (init_from copies every tensor): a deeper
    # one's start and its sharded state are tests/base/test_window_state.py's
    params["base"].update(score_charts=2, crop=48, unet="tiny")
    params["base"]["window"].update(
        batch_sizes=[4, 8],
        tune_seconds=0.3,
        first_charts=3,
        pool_gb=0.01,
        finish_seconds=5,
        log_every=4,
        drawn_charts=1,
        warmup_steps=5,
        try_compile=False,
    )
    return params


def windows_folder(root):
    """Where base-land keeps the windowed base's state and ledger, under `root`."""
    return root / "base_windows" / window_params()["base"]["name"]


@pytest.fixture(scope="session")
def two_windows(tmp_path_factory):
    """Two windows in a row, run once for all of the suite's workers."""
    return built_once(shared_folder(tmp_path_factory, "window"), _run_two_windows)


# in a process of their own, as on the GPU machine: accelerate keeps one state per process, and
# the window's (fp32: it autocasts itself) would refuse the bf16 of the training that later tests
# run in this worker
WINDOWS = """
import sys
from pathlib import Path
from linefuse import paths
from linefuse.cli import main

paths.ZOO_DIR = Path(sys.argv[1])
for name, state, trace in (("first", "none", "0"), ("second", "first", "2")):
    argv = ["base-window", "--minutes", "0.75", "--out", name, "--state", state, "--workers", "2"]
    argv += ["--trace", trace]
    if main(argv) != 0:
        sys.exit(f"the {name} window failed")
"""


def _run_two_windows(project):
    project.mkdir()
    zoo = project / "zoo"
    shutil.copytree(SHIPPED, zoo / SHIPPED.name)
    write_params(project, window_params())
    subprocess.run([sys.executable, "-c", WINDOWS, str(zoo)], cwd=project, check=True)


def test_a_window_writes_its_weights_state_and_record(two_windows):
    out = two_windows / "first"
    # what a lent machine returns: at most 8 files, none over 16 MiB
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8 and max(p.stat().st_size for p in files) <= 16 * 2**20
    assert sorted(p.name for p in out.iterdir()) == ["candidate", "record.json"] + [
        p.name for p in paths.window_state_files(out)
    ]
    unet = UNet2DConditionModel.from_pretrained(out / "candidate")
    assert unet.config.in_channels == 6
    record = json.loads((out / "record.json").read_text())
    summary = record["summary"]
    assert summary["pairs"] > 0 and summary["pairs_per_s"] > 0
    assert 0 < summary["step_share"] < 1
    assert record["flops_per_pair"] > 1e6  # a UNet's forward and backward, not a stub
    # nothing but training on the device: the weights are scored by base-land, afterwards
    assert set(record["phases"]) == {"setup", "tune", "compile", "stable", "cooldown", "finish"}
    assert "scores" not in record
    tried = {(row["batch"], row["channels_last"], row["fused_adamw"]) for row in record["tune"]}
    assert {4, 8} <= {batch for batch, _, _ in tried} and len(tried) >= 3
    steps = record["steps"]
    assert {line["phase"] for line in steps} >= {"stable"}
    assert all(line["step"] % 4 == 0 for line in steps)


def test_the_second_window_resumes_the_first_and_the_bank_moves_on(two_windows):
    first = json.loads((two_windows / "first/record.json").read_text())
    second = json.loads((two_windows / "second/record.json").read_text())
    assert first["start_state"] == {
        "step": 0,
        "pairs": 0,
        "next_chart": 0,
        "windows": 0,
        "tuned": {},
    }
    assert second["start_state"] == first["stable_state"]
    # the setting the first window measured on this CPU is the second's, without one trial
    (measured,) = first["stable_state"]["tuned"].values()
    assert len(first["tune"]) >= 3 and second["tune"] == []
    assert second["setting"] == measured
    assert second["summary"]["pairs"] > 0
    assert second["stable_state"]["step"] > first["stable_state"]["step"]
    assert second["stable_state"]["pairs"] > first["stable_state"]["pairs"]
    assert second["stable_state"]["next_chart"] > first["stable_state"]["next_chart"] > 0
    assert second["stable_state"]["windows"] == 2
    # the second traced two of its steps and timed the wide UNet's step beside the base's
    trace = second["trace"]
    assert first["trace"] is None and trace["steps"] == 2 and trace["device_busy_share"] > 0
    assert trace["top"] and sum(k["share"] for k in trace["top"]) <= 1 + 1e-9
    # both UNets' eager steps timed (which is faster is the record's to say, not a test's)
    assert set(trace["eager_ms"]) == {"base", "wide"} and min(trace["eager_ms"].values()) > 0
    tensors, state = load_state(two_windows / "second")
    assert state.step == second["stable_state"]["step"]
    assert any(key.startswith("adam.") and key.endswith("exp_avg_sq") for key in tensors)
    with safe_open(str(two_windows / "first/state.safetensors"), "pt") as handle:
        first_weights = handle.get_tensor("model.conv_out.weight")
    assert not torch.equal(first_weights, tensors["model.conv_out.weight"])  # it trained on


def _report(cells: dict[str, np.ndarray], worst: float = 55.0) -> dict:
    """score_base's report of one split from its per-image gains by cell and its worst sharp
    chart."""
    return {"test": {"gains": {c: list(g) for c, g in cells.items()}, "sharp": {"worst": worst}}}


def _scores(
    shipped_cells, candidate_cells, drawn_shift=0.0, worst=55.0, held_shift=None, drawn_worst=55.0
) -> dict:
    """scores as score_window makes them: the same cells in the score set's test and held-out
    parts and in the drawn set's two parts; the candidate's worst sharp chart `worst` on the score
    set's test part, `drawn_worst` on the drawn set's; `held_shift`: the candidate's held-out
    gains (score set and drawn set) are instead the shipped ones plus this, give or take a tenth
    of a dB."""
    held = candidate_cells
    if held_shift is not None:
        held = {
            c: g + held_shift + np.linspace(-0.1, 0.1, g.size) for c, g in shipped_cells.items()
        }
    both = {
        name: {"test": _report(cells, sharp)["test"], "held_out": _report(held_cells)["test"]}
        for name, cells, held_cells, sharp in (
            ("shipped", shipped_cells, shipped_cells, 55.0),
            ("candidate", candidate_cells, held, worst),
        )
    }
    shifted = {c: g + drawn_shift for c, g in shipped_cells.items()}
    drawn = {
        "shipped": {"test": _report(shipped_cells)["test"], "held_out": {}},
        "candidate": {"test": _report(shifted, drawn_worst)["test"], "held_out": {}},
    }
    if held_shift is not None:
        drawn["shipped"]["held_out"] = _report(shipped_cells)["test"]
        drawn["candidate"]["held_out"] = _report(held)["test"]
    return {**both, "drawn": drawn}


def _judged(params, scores: dict) -> dict:
    """score_window's verdict on `scores`: its checks and ships alone."""
    found = verdict(params, paired(params, scores), trained_sharp_worst(scores))
    return {k: v for k, v in found.items() if isinstance(v, bool)}


def test_the_ship_rule_is_paired_image_by_image():
    """Window 4's case: images whose gains spread over dB, each restored a quarter of a dB
    better. The candidate's own interval reaches below the shipped mean (the unpaired rule says
    'not beaten'), but every paired difference is positive: it ships. A rule comparing unpaired
    intervals fails this test."""
    rng = np.random.default_rng(0)
    shipped = {f"gaussian/{lvl}": rng.normal(4.3, 1.5, 6) for lvl in ("easy", "medium", "hard")}
    candidate = {c: g + 0.25 + rng.normal(0, 0.02, g.size) for c, g in shipped.items()}
    params = Params.model_validate(tiny_params())
    own = mean_of_means_interval(list(candidate.values()), params.eval.interval, 0)
    assert (
        own["low"] < mean_of_means_interval(list(shipped.values()), params.eval.interval, 0)["mean"]
    )
    scores = _scores(shipped, candidate)
    found = paired(params, scores)
    assert found["test"]["mean"] == pytest.approx(0.25, abs=0.02) and found["test"]["low"] > 0.2
    assert found["test"]["samples"] == 18 and found["test"]["better"] == 1.0
    assert found["drawn"] == {"mean": 0.0, "samples": 18, "better": 0.0}
    shipping = {"test_beaten": True, "drawn_not_lost": True, "sharp_kept": True, "ships": True}
    assert _judged(params, scores) == shipping
    # worse on every image: the paired interval is below zero, so it does not ship
    worse = {c: g - 0.1 for c, g in shipped.items()}
    assert not _judged(params, _scores(shipped, worse))["test_beaten"]
    # the drawn set lost by more than the tolerance, or a sharp chart harmed: not shipped
    lost = _scores(shipped, candidate, drawn_shift=-0.06)
    assert paired(params, lost)["drawn"]["mean"] == pytest.approx(-0.06)
    assert _judged(params, lost) == {**shipping, "drawn_not_lost": False, "ships": False}
    assert not _judged(params, _scores(shipped, candidate, worst=44.0))["ships"]
    assert not _judged(params, _scores(shipped, candidate, drawn_worst=22.0))["ships"]
    # no interval (one image a cell): not beaten
    one = {c: g[:1] for c, g in shipped.items()}
    assert not _judged(params, _scores(one, {c: g + 1 for c, g in one.items()}))["ships"]
    # a set with no trained chart judges nothing: a part that is missing passes no check
    assert {
        k: v for k, v in verdict(params, {}, {"test": None, "drawn": None}).items() if k in shipping
    } == {"test_beaten": False, "drawn_not_lost": False, "sharp_kept": False, "ships": False}


@pytest.mark.parametrize("better", [True, False])
def test_the_verdict_never_reads_the_held_out_looks(better):
    """Selection never sees what is reported: the held-out families and library are scored on
    both sets and paired beside the verdict, but however they moved (5 dB worse on every
    held-out image, or 5 dB better) the verdict is the one the trained looks give."""
    rng = np.random.default_rng(1)
    shipped = {f"motion/{lvl}": rng.normal(5.0, 1.0, 6) for lvl in ("easy", "medium", "hard")}
    candidate = {c: g + (0.3 if better else -0.3) for c, g in shipped.items()}
    params = Params.model_validate(tiny_params())
    reference = _judged(params, _scores(shipped, candidate))
    assert reference["ships"] is better
    for shift in (-5.0, 5.0):
        scores = _scores(shipped, candidate, held_shift=shift)
        found = paired(params, scores)
        # measured and reported: both held-out parts carry the shift ...
        assert found["held_out"]["mean"] == pytest.approx(shift)
        assert (found["held_out"]["high"] < 0) if shift < 0 else (found["held_out"]["low"] > 0)
        assert found["drawn_held_out"]["mean"] == pytest.approx(shift)
        # ... never selected on: the verdict and its checks are unchanged
        assert _judged(params, scores) == reference


def test_the_summary_counts_only_training_steps_as_step_time():
    record = {
        "phases": {
            "setup": {"seconds": 5.0},
            "compile": {"seconds": 3.0, "pairs": 20},
            "stable": {"seconds": 60.0, "pairs": 6000, "pairs_per_s": 100.0},
            "cooldown": {"seconds": 15.0, "pairs": 1500},
        },
        "tune": [{"seconds": 5.0, "pairs": 400}, {"error": "out of memory"}],
        "wall_seconds": 100.0,
        "setting": {"batch": 10},
        "flops_per_pair": 1e9,
        "peak_flops": 1e12,
        "data_seconds_per_step": 0.01,
    }
    summary = summarise(record)
    assert summary["step_share"] == pytest.approx(0.8)
    assert summary["pairs"] == 7920
    assert summary["data_share_of_step"] == pytest.approx(0.1)
    assert summary["peak_fraction"] == pytest.approx(0.1)


def test_landing_a_window_scores_it_here_keeps_its_state_and_ships_only_if_better(
    two_windows, tmp_path, monkeypatch
):
    """linefuse base-land on the first window: the offered weights and the base model.unet names
    restored here on one chart set, the paired differences and the verdict in the scores file,
    the state and a ledger row landed, and the offered weights shipped or dropped."""
    zoo, windows = tmp_path / "zoo", windows_folder(tmp_path)
    shutil.copytree(two_windows / "zoo", zoo)
    windows.mkdir(parents=True)
    ledger = {"init": "chart-base", "init_note": "test", "init_pairs": 1000, "windows": []}
    (windows / "ledger.json").write_text(json.dumps(ledger))
    monkeypatch.setattr(paths, "ZOO_DIR", zoo)
    monkeypatch.setattr(paths, "BASE_WINDOWS_DIR", windows.parent)
    # the drawn-unlike set at a tenth of its pixels: its look (thick lines, big fonts) is kept,
    # and at 230-300 dpi its 15 images a model would be most of the suite's scoring
    drawn_at_80_dpi = {**base_window.DRAWN_UNLIKE, "dpi": [80, 80]}
    monkeypatch.setattr(base_window, "DRAWN_UNLIKE", drawn_at_80_dpi)
    before = (zoo / SHIPPED.name / "diffusion_pytorch_model.safetensors").read_bytes()
    params = window_params()
    params["model"]["unet"] = SHIPPED.name  # the default base, which the weights are paired with
    write_params(tmp_path, params)
    assert run_cli(tmp_path, "base-land", str(two_windows / "first")) == 0
    record = json.loads((two_windows / "first/record.json").read_text())
    (row,) = json.loads((windows / "ledger.json").read_text())["windows"]
    scores = json.loads((windows / "scores-1.json").read_text())
    assert row["window"] == 1 and row["pairs"] == record["candidate_pairs"]
    assert row["cumulative_pairs"] == 1000 + record["candidate_pairs"]
    assert row["verdict"] == scores["verdict"] and row["shipped"] == row["verdict"]["ships"]
    assert row["test_vs_shipped"] == scores["paired"]["test"]["mean"]
    # every image of both models, paired: 2 charts x 15 (domain, level) on the score set, one of
    # a trained look and one held out (base.score_seed's first two tiny charts)
    test_cells = scores["candidate"]["test"]["gains"]
    assert sum(map(len, test_cells.values())) == 15 == scores["paired"]["held_out"]["samples"]
    assert set(test_cells) == set(scores["shipped"]["test"]["gains"])
    assert scores["paired"]["drawn"]["samples"] == 15
    # the held-out part is scored and recorded beside the verdict, which names no held-out check
    assert row["held_out_vs_shipped"] == scores["paired"]["held_out"]["mean"]
    checks = {k for k, v in row["verdict"].items() if isinstance(v, bool)}
    assert checks == {"test_beaten", "drawn_not_lost", "sharp_kept", "ships"}
    assert scores["shipped_base"] == SHIPPED.name
    # the sharp charts the verdict read, the ledger's figure: both sets' trained parts
    parts = (scores["candidate"], scores["drawn"]["candidate"])
    sharp = min(part["test"]["sharp"]["worst"] for part in parts)
    floor = params["base"]["window"]["ship"]["sharp_floor_db"]
    assert row["sharp_worst"] == row["verdict"]["sharp_worst"] == sharp
    assert row["verdict"]["sharp_kept"] == (sharp >= floor)
    landed = lzma.decompress((windows / "state.safetensors.xz").read_bytes())  # packed to travel
    assert landed == (two_windows / "first/state.safetensors").read_bytes()
    after = (zoo / SHIPPED.name / "diffusion_pytorch_model.safetensors").read_bytes()
    offered = (two_windows / "first/candidate/diffusion_pytorch_model.safetensors").read_bytes()
    assert after == (offered if row["shipped"] else before)
    assert not (windows / paths.WINDOW_CANDIDATE_DIR).exists()  # an offer is shipped or dropped
    name = params["base"]["name"]  # a base of its own: its card comes with its first ship
    if row["shipped"]:
        card = (zoo / name / "README.md").read_text()
        assert f"| 1 | {row['date']} | {row['device']} |" in card and "make base-window" in card
    else:
        assert not (zoo / name).exists()


def test_a_window_already_in_the_ledger_is_refused_in_one_line_before_scoring(
    tmp_path, monkeypatch, capsys
):
    """base-land on a window the ledger holds: one line naming it and its date, nothing scored,
    the ledger unchanged."""
    windows, window = windows_folder(tmp_path), tmp_path / "4"
    windows.mkdir(parents=True), window.mkdir()
    ledger = {"init_pairs": 1000, "windows": [{"window": 4, "date": "2026-11-27"}]}
    (windows / "ledger.json").write_text(json.dumps(ledger))
    (window / "record.json").write_text(json.dumps({"stable_state": {"windows": 4}}))
    (window / paths.WINDOW_STATE_FILE).write_bytes(b"")
    monkeypatch.setattr(paths, "BASE_WINDOWS_DIR", windows.parent)
    monkeypatch.setattr(base_window, "score_window", pytest.fail)
    write_params(tmp_path, window_params())
    assert run_cli(tmp_path, "base-land", "4") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "is window 4, landed on 2026-11-27" in line and "nothing to do" in line
    assert json.loads((windows / "ledger.json").read_text()) == ledger


def test_a_setting_measured_on_one_gpu_holds_for_another_on_its_die():
    h100 = {"batch": 4096, "compiled": True}
    tuned = {"NVIDIA H100 80GB HBM3": h100, "CPU Intel(R) Xeon(R)": {"batch": 64}}
    assert measured_setting(tuned, "NVIDIA H100 80GB HBM3") is h100
    assert measured_setting(tuned, "NVIDIA H200") is h100  # the same GH100 die
    assert measured_setting(tuned, "NVIDIA A100-SXM4-80GB") is None
    assert measured_setting(tuned, "CPU AMD EPYC 9654") is None
