"""A window's stable state travels back from a lent machine in files of at most 16 MiB, the
tree a lent machine is sent (the committed state and kernels in it) leaves room for the
libraries `make wheels` packs, and a base of a new layout starts from a shipped base's weights
where their shapes match."""

from __future__ import annotations

import subprocess

import pytest
import torch

from linefuse import paths
from linefuse.base.window import (
    WindowState,
    load_state,
    make_optimizer,
    pack_state,
    save_state,
)
from linefuse.inference.model import load_base
from linefuse.train.model import build_unet, init_from

from conftest import ROOT

SENT_BYTES = 64 * 2**20  # the working tree a lent machine is sent, at most
WHEELS_PACK_BYTES = 22 * 2**20  # make wheels' .whl/site.tar.xz, sent beside it


def _trained(model: torch.nn.Module):
    """`model` after two AdamW steps, and its optimizer (moments in every parameter)."""
    optimizer = make_optimizer(model, 1e-3, fused=False, moments=None)
    for _ in range(2):
        loss = sum((p.float() ** 2).sum() for p in model.parameters())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return optimizer


def test_a_state_larger_than_a_file_is_sharded_and_resumes_whole(tmp_path, monkeypatch):
    model = build_unet("tiny", 3)
    optimizer = _trained(model)
    state = WindowState(step=7, pairs=56, next_chart=3, windows=1)
    monkeypatch.setattr(paths, "WINDOW_FILE_BYTES", 2**20)  # 0.71 M parameters: ~5.7 MB
    files = save_state(tmp_path, model, optimizer, state)
    assert len(files) >= 5 and all(f.stat().st_size <= 2**20 + 2**16 for f in files)
    assert [f.name for f in files][0] == f"state-00001-of-{len(files):05d}.safetensors"
    tensors, loaded = load_state(tmp_path)
    assert loaded == state
    weights = {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}
    assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items())
    moments = [v for k, v in tensors.items() if k.endswith("exp_avg_sq")]
    assert len(moments) == len(list(model.parameters()))
    assert {v.dtype for v in moments} == {torch.bfloat16}
    # resumed, the moments are the saved ones to bf16's rounding
    first = next(model.parameters())
    exact = optimizer.state[first]["exp_avg_sq"]
    assert torch.allclose(tensors["adam.0.exp_avg_sq"].float(), exact, rtol=1e-2, atol=0)
    # a later save in the same folder replaces every shard of the earlier one
    monkeypatch.setattr(paths, "WINDOW_FILE_BYTES", 64 * 2**20)
    assert [f.name for f in save_state(tmp_path, model, optimizer, state)] == [
        paths.WINDOW_STATE_FILE
    ]
    assert paths.window_state_files(tmp_path) == [tmp_path / paths.WINDOW_STATE_FILE]


def test_a_deeper_layout_starts_from_a_shipped_base_where_shapes_match():
    deep = build_unet("deep", 3)
    fresh = {k: v.clone() for k, v in deep.state_dict().items()}
    shipped = load_base(paths.zoo_model("chart-base"))
    copied, total = init_from(deep, shipped)
    source, now = shipped.state_dict(), deep.state_dict()
    assert (
        total
        == sum(p.numel() for p in deep.parameters())
        > 3 * sum(p.numel() for p in shipped.parameters())
    )
    # the outer levels are chart-base's: the first down blocks, and the up blocks counted from
    # the deepest (deep's up_blocks.3 is chart-base's up_blocks.2)
    for name in ("conv_in.weight", "down_blocks.1.resnets.0.conv1.weight", "conv_out.weight"):
        assert torch.equal(now[name], source[name])
    assert torch.equal(
        now["up_blocks.3.resnets.1.conv2.weight"], source["up_blocks.2.resnets.1.conv2.weight"]
    )
    # the new deepest level keeps its own initialisation
    assert torch.equal(
        now["mid_block.resnets.0.conv1.weight"], fresh["mid_block.resnets.0.conv1.weight"]
    )
    assert 0.1 * total < copied < 0.3 * total


@pytest.mark.parametrize("spec", ["tiny"])
def test_the_same_layout_starts_as_the_shipped_base_itself(spec):
    unet = build_unet(spec, 3)
    shipped = load_base(paths.zoo_model("chart-base"))
    copied, total = init_from(unet, shipped)
    assert copied == total
    assert all(torch.equal(v, shipped.state_dict()[k]) for k, v in unet.state_dict().items())


def test_a_state_packed_for_its_base_folder_is_smaller_and_resumes_the_same(tmp_path, monkeypatch):
    model = build_unet("tiny", 3)
    state = WindowState(step=9, pairs=72, next_chart=5, windows=2)
    monkeypatch.setattr(paths, "WINDOW_FILE_BYTES", 2**21)
    window, committed = tmp_path / "window", tmp_path / "committed"
    window.mkdir(), committed.mkdir()
    written = save_state(window, model, _trained(model), state)
    (committed / "state.safetensors").write_bytes(b"the state committed before")
    packed = pack_state(window, committed)
    assert [p.name for p in packed] == [f"{p.name}.xz" for p in written]
    assert sum(p.stat().st_size for p in packed) < 0.95 * sum(p.stat().st_size for p in written)
    (tensors, loaded), (plain, _) = load_state(committed), load_state(window)
    assert loaded == state and tensors.keys() == plain.keys()
    assert all(torch.equal(tensors[k], plain[k]) for k in plain)
    assert pack_state(committed, tmp_path) == [tmp_path / p.name for p in packed]  # kept packed


def test_the_committed_tree_leaves_room_for_the_wheels_a_lent_machine_needs():
    """A window on a fresh lent machine is sent the tracked tree (with each base's committed
    state and kernels) and .whl: were they over 64 MiB together, the call would be refused."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    files = [ROOT / name.decode() for name in listed if name]
    tracked = sum(f.stat().st_size for f in files if f.is_file())
    assert tracked > 5 * 2**20  # the listing worked: the code, docs and shipped weights
    assert tracked + WHEELS_PACK_BYTES <= SENT_BYTES, f"{tracked / 2**20:.1f} MiB tracked"
