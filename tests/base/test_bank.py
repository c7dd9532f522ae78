"""The chart bank: drawn as draw_chart draws, resumable, and cropped the same in any order."""

from __future__ import annotations

import copy
import hashlib
import importlib.metadata
import importlib.util
import json
import re
from collections import Counter
from contextlib import chdir
from pathlib import Path

import lmdb
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from linefuse.base import bank
from linefuse.data.charts import base_chart_params, draw_chart
from linefuse.params.data import LIBRARIES, LIBRARY_PACKAGES
from linefuse.params.full import load_params
from linefuse.stage import UserError

from conftest import ROOT, run_cli, tiny_params, write_params

CHARTS = 8
# what a GPU image's python3 has (the Makefile's `make wheels` says so): the rest must travel
GPU_IMAGE = {
    "matplotlib",
    "numpy",
    "pandas",
    "pillow",
    "scipy",
    "statsmodels",
    "torch",
    "accelerate",
}


def bank_params(project: Path, **bank_keys) -> dict:
    raw = copy.deepcopy(tiny_params())
    raw["base"].update(crop=32, units_per_chart=2, crops_per_unit=2, focus=0.8)
    raw["base"]["bank"] = {"charts": CHARTS, "label_focus": 0.5, **bank_keys}
    write_params(project, raw)
    return raw


def env_items(folder: Path) -> dict[bytes, str]:
    with bank.open_bank(folder).begin() as txn:
        return {key: hashlib.sha256(value).hexdigest() for key, value in txn.cursor()}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A project with a bank of CHARTS tiny charts, built on 2 workers (quick: not a pipeline)."""
    project = tmp_path_factory.mktemp("bank")
    bank_params(project)
    with chdir(project):
        bank.build_bank(load_params("params.yaml"), workers=2)
    return project


def test_the_bank_holds_draw_charts_charts(built):
    with chdir(built):
        params = load_params("params.yaml")
        folder = bank.bank_dir(params)
    assert folder.parent == Path(".linefuse/bank") and len(folder.name) == 16
    env = bank.open_bank(built / folder)
    with env.begin() as txn:
        assert int(txn.get(b"count")) == CHARTS
        for index in (0, CHARTS - 1):
            image, _, sidecar = draw_chart(base_chart_params(params), index)
            meta = json.loads(txn.get(f"{index:09d}.json".encode()))
            stored = np.frombuffer(txn.get(f"{index:09d}.rgb".encode()), np.uint8)
            assert np.array_equal(stored.reshape(meta["height"], meta["width"], 3), image)
            assert meta["tick_labels"] == sidecar["tick_labels"] and meta["tick_labels"]


def test_a_stopped_build_resumes_to_the_same_env(built, tmp_path, monkeypatch):
    bank_params(tmp_path)
    monkeypatch.setattr(bank, "COMMIT_EVERY", 2)
    drawn = bank.draw_chart

    def stop_at_five(cfg, index):
        if index == 5:
            raise KeyboardInterrupt("stopped")
        return drawn(cfg, index)

    monkeypatch.setattr(bank, "draw_chart", stop_at_five)
    assert run_cli(tmp_path, "bank", "--workers", "1") != 0  # the CLI reports the stop
    folder = next((tmp_path / ".linefuse/bank").iterdir())
    with lmdb.open(str(folder), lock=False) as env, env.begin() as txn:
        # chunks of 2: charts 0-3 committed, chart 4's chunk lost with the stop
        assert int(txn.get(b"count")) == 4 and txn.get(b"000000004.rgb") is None
    monkeypatch.setattr(bank, "draw_chart", drawn)
    assert run_cli(tmp_path, "bank", "--workers", "2") == 0
    assert env_items(folder) == env_items(built / ".linefuse/bank" / folder.name)


def crops(project: Path):
    with chdir(project):
        return bank.BankCrops(load_params("params.yaml"))


def test_crops_are_the_same_in_any_order_and_worker(built):
    dataset = crops(built)
    forward = [dataset[i] for i in range(16)]
    backward = [crops(built)[i] for i in reversed(range(16))][::-1]
    for a, b in zip(forward, backward, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    loader = DataLoader(dataset, batch_size=4, num_workers=2, shuffle=False)
    batches = list(zip(*[b for _, b in zip(range(4), loader, strict=False)], strict=True))
    stacked = [torch.cat(parts) for parts in batches]
    for field, parts in zip(stacked, zip(*forward, strict=True), strict=True):
        assert torch.equal(field, torch.stack(parts))
    sharp, mask, boxes, targets, lengths = stacked
    assert sharp.shape == (16, 3, 32, 32) and sharp.dtype == torch.uint8
    assert mask.shape == (16, 1, 32, 32) and boxes.shape == (16, bank.MAX_LABELS, 4)
    assert targets.shape == (16, bank.MAX_LABELS, bank.MAX_CHARS)
    assert lengths.dtype == torch.int64


def test_label_boxes_lie_in_the_window_under_the_mask(built):
    dataset, found = crops(built), 0
    for index in range(64):
        _, mask, boxes, targets, lengths = dataset[index]
        for box, target, length in zip(boxes, targets, lengths, strict=True):
            if length == 0:
                assert not box.any() and not target.any()
                continue
            found += 1
            left, top, right, bottom = box.tolist()
            assert 0 <= left < right <= 32 and 0 <= top < bottom <= 32
            assert (target[:length] > 0).all() and not target[length:].any()
            inner = mask[0, int(np.ceil(top)) : int(bottom), int(np.ceil(left)) : int(right)]
            assert inner.numel() and inner.all()
    assert found >= 8  # label_focus puts labels in the windows


def test_a_missing_or_unfinished_bank_is_a_one_line_error(built, tmp_path):
    bank_params(tmp_path)
    with pytest.raises(UserError, match="no chart bank .* run `linefuse bank`") as missing:
        crops(tmp_path)
    assert "\n" not in str(missing.value)
    bank_params(built, charts=CHARTS * 2)
    try:
        with pytest.raises(UserError, match=f"holds {CHARTS} of base.bank.charts") as short:
            crops(built)
        assert "\n" not in str(short.value)
    finally:
        bank_params(built)


def test_a_bank_library_not_installed_is_one_line_before_anything_is_drawn(tmp_path, monkeypatch):
    """A GPU machine without plotnine (no `make wheels`) is told so, not a worker's traceback."""
    raw = bank_params(tmp_path)
    raw["base"]["libraries"] = ["matplotlib", "plotnine"]
    write_params(tmp_path, raw)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "plotnine" else real(name, *a)
    )
    with chdir(tmp_path), pytest.raises(UserError, match=r"base.libraries: plotnine .*make wheels"):
        bank.build_bank(load_params("params.yaml"), workers=1)
    assert not (tmp_path / ".linefuse").exists()


def test_make_wheels_carries_every_library_the_bank_may_draw():
    """What `make base-window` installs on a GPU machine: each library that base.libraries may
    name (all but the held-out ones), with what it requires that a GPU image lacks."""
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^GPU_WHEELS := ((?:.*\\\n)*.*)$", makefile, re.M).group(1)
    wheels = {name.lower().replace("_", "-") for name in listed.replace("\\", " ").split()}
    params = load_params(ROOT / "params.yaml")
    for library in set(LIBRARIES) - set(params.data.charts.held_out) - GPU_IMAGE:
        distributions = {
            name.lower().replace("_", "-")
            for package in LIBRARY_PACKAGES[library]
            for name in importlib.metadata.packages_distributions()[package]
        }
        needed = distributions | {
            re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower().replace("_", "-")
            for name in distributions
            for requirement in importlib.metadata.requires(name) or []
            if "extra ==" not in requirement
        }
        assert needed - GPU_IMAGE <= wheels, (library, needed - GPU_IMAGE - wheels)


def test_the_bank_draws_every_library_of_base_libraries_each_with_its_facts(built):
    """base.libraries (three libraries, each its own rasteriser) share the bank; every chart
    keeps who drew it, its plot box inside the image, its axis limits and its tick labels
    (both axes, boxes inside the image, outside the plot box)."""
    with chdir(built):
        params = load_params("params.yaml")
        folder = bank.bank_dir(params)
    with bank.open_bank(built / folder).begin() as txn:
        metas = [json.loads(txn.get(f"{i:09d}.json".encode())) for i in range(CHARTS)]
    drawn = Counter(meta["library"] for meta in metas)
    assert set(drawn) == set(params.base.libraries) and len(drawn) >= 3, drawn
    for meta in metas:
        left, top, right, bottom = meta["plot_box"]
        assert 0 <= left < right <= meta["width"] and 0 <= top < bottom <= meta["height"]
        assert meta["xlim"][0] < meta["xlim"][1] and meta["ylim"][0] < meta["ylim"][1]
        assert {label["axis"] for label in meta["tick_labels"]} == {"x", "y"}, meta["library"]
        for label in meta["tick_labels"]:
            x0, y0, x1, y1 = label["box"]
            assert 0 <= x0 < x1 <= meta["width"] and 0 <= y0 < y1 <= meta["height"]
            assert y0 >= bottom - 1 if label["axis"] == "x" else x1 <= left + 1, label
