"""`linefuse base-window`, the command a lent GPU runs, end to end on the CPU with tiny settings:
two windows in a row, the second resuming the first's stable state."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch
from diffusers import UNet2DConditionModel
from safetensors import safe_open

from linefuse import paths
from linefuse.evaluate import base_window
from linefuse.evaluate.base_window import verdict
from linefuse.params.full import Params
from linefuse.train.window import load_state, measured_setting, summarise

from conftest import ROOT, built_once, run_cli, shared_folder, tiny_params, write_params

SHIPPED = ROOT / "src/linefuse/zoo/chart-base"


def window_params() -> dict:
    params = tiny_params()
    params["base"].update(score_charts=2, crop=48)
    params["base"]["window"].update(
        batch_sizes=[4, 8],
        tune_seconds=0.3,
        first_charts=3,
        pool_gb=0.01,
        score_seconds=12,
        log_every=4,
        drawn_charts=1,
        warmup_steps=5,
        try_compile=False,
    )
    return params


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
from linefuse.evaluate import base_window

paths.ZOO_DIR = Path(sys.argv[1])
# the drawn-unlike set at a tenth of its pixels: its thick lines and large print, on the CPU
base_window.DRAWN_UNLIKE = {**base_window.DRAWN_UNLIKE, "dpi": [80, 80]}
for name, state in (("first", "none"), ("second", "first")):
    argv = ["base-window", "--minutes", "0.5", "--out", name, "--state", state, "--workers", "2"]
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
    assert sorted(p.name for p in out.iterdir()) == [
        "candidate",
        "record.json",
        "state.safetensors",
        "steps.jsonl",
    ]
    unet = UNet2DConditionModel.from_pretrained(out / "candidate")
    assert unet.config.in_channels == 6
    assert (out / "state.safetensors").stat().st_size < 32 * 2**20
    record = json.loads((out / "record.json").read_text())
    summary = record["summary"]
    assert summary["pairs"] > 0 and summary["pairs_per_s"] > 0
    assert 0 < summary["step_share"] < 1
    assert record["flops_per_pair"] > 1e6  # a UNet's forward and backward, not a stub
    assert {"setup", "tune", "stable", "cooldown", "score"} <= set(record["phases"])
    tried = {(row["batch"], row["channels_last"], row["fused_adamw"]) for row in record["tune"]}
    assert {4, 8} <= {batch for batch, _, _ in tried} and len(tried) >= 3
    scores = record["scores"]
    assert (
        scores["candidate"]["test"]["samples"] + scores["candidate"]["held_out"].get("samples", 0)
        == 2 * 15
    )
    assert set(scores["verdict"]) >= {"test_beaten", "sharp_kept", "ships"}
    steps = [json.loads(line) for line in (out / "steps.jsonl").open()]
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
    # the setting the first window measured on this CPU is the second's, without trials
    (measured,) = first["stable_state"]["tuned"].values()
    assert len(first["tune"]) >= 3 and len(second["tune"]) == 1
    assert {k: second["tune"][0][k] for k in measured} == measured
    assert second["stable_state"]["step"] > first["stable_state"]["step"]
    assert second["stable_state"]["pairs"] > first["stable_state"]["pairs"]
    assert second["stable_state"]["next_chart"] > first["stable_state"]["next_chart"] > 0
    assert second["stable_state"]["windows"] == 2
    tensors, state = load_state(two_windows / "second")
    assert state.step == second["stable_state"]["step"]
    assert any(key.startswith("adam.") and key.endswith("exp_avg_sq") for key in tensors)
    with safe_open(str(two_windows / "first/state.safetensors"), "pt") as handle:
        first_weights = handle.get_tensor("model.conv_out.weight")
    assert not torch.equal(first_weights, tensors["model.conv_out.weight"])  # it trained on


def test_the_ship_rule_holds_both_splits_interval_included_and_the_sharp_floor():
    good = {"low": 5.0, "mean": 5.2}
    shipped = {"test": {"mean": 4.7}, "held_out": {"mean": 3.2}, "sharp": {"worst": 59}}
    candidate = {"test": good, "held_out": good, "sharp": {"worst": 50.0}}
    drawn = {
        "candidate": {"test": {"mean": 2.0, "samples": 10}, "held_out": {}},
        "shipped": {"test": {"mean": 1.9, "samples": 10}, "held_out": {}},
    }
    assert verdict(candidate, shipped, drawn)["ships"]
    assert not verdict(candidate, shipped)["ships"]  # the drawn set not scored: not shown
    lost = {**drawn, "shipped": {"test": {"mean": 2.1, "samples": 10}, "held_out": {}}}
    assert not verdict(candidate, shipped, lost)["ships"]
    assert not verdict({**candidate, "sharp": {"worst": 44.0}}, shipped, drawn)["ships"]
    held_close = {**candidate, "held_out": {"low": 3.1, "mean": 3.6}}
    assert not verdict(held_close, shipped, drawn)["ships"]  # the interval reaches the mean
    assert not verdict({**candidate, "test": {"low": None, "mean": 9.0}}, shipped, drawn)["ships"]


def test_the_summary_counts_only_training_steps_as_step_time():
    record = {
        "phases": {
            "setup": {"seconds": 5.0},
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
    assert summary["pairs"] == 7900
    assert summary["data_share_of_step"] == pytest.approx(0.1)
    assert summary["peak_fraction"] == pytest.approx(0.1)


def test_landing_a_window_adds_its_ledger_row_keeps_its_state_and_ships_only_if_better(
    two_windows, tmp_path, monkeypatch
):
    """linefuse base-land on the first window, from the scores the window made itself (nothing
    is scored again): the state and a ledger row land, the card shows the row, and the shipped
    weights change exactly when the verdict says so."""
    zoo, windows = tmp_path / "zoo", tmp_path / "base_windows"
    shutil.copytree(two_windows / "zoo", zoo)
    windows.mkdir()
    ledger = {"init": "chart-base", "init_note": "test", "init_pairs": 1000, "windows": []}
    (windows / "ledger.json").write_text(json.dumps(ledger))
    monkeypatch.setattr(paths, "ZOO_DIR", zoo)
    monkeypatch.setattr(paths, "BASE_WINDOWS_DIR", windows)
    before = (zoo / SHIPPED.name / "diffusion_pytorch_model.safetensors").read_bytes()
    assert run_cli(two_windows, "base-land", "first") == 0
    record = json.loads((two_windows / "first/record.json").read_text())
    (row,) = json.loads((windows / "ledger.json").read_text())["windows"]
    assert row["window"] == 1 and row["pairs"] == record["candidate_pairs"]
    assert row["cumulative_pairs"] == 1000 + record["candidate_pairs"]
    assert (
        row["verdict"] == record["scores"]["verdict"] and row["shipped"] == row["verdict"]["ships"]
    )
    assert (windows / "state.safetensors").read_bytes() == (
        two_windows / "first/state.safetensors"
    ).read_bytes()
    after = (zoo / SHIPPED.name / "diffusion_pytorch_model.safetensors").read_bytes()
    offered = (two_windows / "first/candidate/diffusion_pytorch_model.safetensors").read_bytes()
    assert after == (offered if row["shipped"] else before)
    card = (zoo / SHIPPED.name / "README.md").read_text()
    assert f"| 1 | {row['date']} | {row['device']} |" in card and "make base-window" in card


def test_a_setting_measured_on_one_gpu_holds_for_another_on_its_die():
    h100 = {"batch": 4096, "compiled": True}
    tuned = {"NVIDIA H100 80GB HBM3": h100, "CPU Intel(R) Xeon(R)": {"batch": 64}}
    assert measured_setting(tuned, "NVIDIA H100 80GB HBM3") is h100
    assert measured_setting(tuned, "NVIDIA H200") is h100  # the same GH100 die
    assert measured_setting(tuned, "NVIDIA A100-SXM4-80GB") is None
    assert measured_setting(tuned, "CPU AMD EPYC 9654") is None


def test_scores_made_against_other_shipped_weights_are_made_again(monkeypatch):
    """A window's own scores stand only while the base it was scored against still ships; after
    another window lands, base-land restores both models again, here."""
    calls = []
    report = {
        "test": {"mean": 6.0, "low": 5.8, "samples": 5},
        "held_out": {"mean": 4.0, "low": 3.9, "samples": 5},
        "sharp": {"worst": 50.0},
    }

    def fake_score(params, folder, device, charts, read_labels=True):
        calls.append(folder)
        return report

    monkeypatch.setattr(base_window, "score_base", fake_score)
    monkeypatch.setattr(base_window, "scoring_charts", lambda params, workers: [])
    monkeypatch.setattr(paths, "ZOO_DIR", SHIPPED.parent)
    params = Params.model_validate(tiny_params())
    made = {
        "candidate": report,
        "shipped": report,
        "drawn": {"candidate": report, "shipped": report},
    }
    digest = base_window.weights_digest(SHIPPED)
    same = base_window.score_window(params, SHIPPED, "cpu", 1, {**made, "shipped_weights": digest})
    assert calls == [] and same["shipped_weights"] == digest
    other = {**made, "shipped_weights": "0" * 64}
    again = base_window.score_window(params, SHIPPED, "cpu", 1, other)
    assert len(calls) == 4 and again["shipped_weights"] == digest
