"""torch.compile's kernels saved by one window and loaded by the next (base/compiled_kernels.py):
in a fresh process with an empty inductor cache, the loaded kernels are found instead of
compiled; a kind never saved, other versions or altered bytes load nothing; kernels larger than a
file a lent machine returns travel in parts, and load the same repacked with xz."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import zlib

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from linefuse import paths
from linefuse.base import compiled_kernels
from linefuse.base.compiled_kernels import load_kernels, repack_kernels, save_kernels

# a process that compiles one small function and reports what inductor's cache did
COMPILE = """
import sys
from pathlib import Path
import torch
from torch._dynamo.utils import counters
from linefuse.base.compiled_kernels import load_kernels, save_kernels

folder, kind, action = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
if action == "load":
    print("loaded", load_kernels(folder, kind))
torch.compile(lambda x: (x.sin() + 1).sum())(torch.randn(8, 8))
print("counters", dict(counters["inductor"]))
if action == "save":
    save_kernels(folder, kind, None)
"""


def _compile(folder, kind, action, cache):
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", COMPILE, str(folder), kind, action],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.mark.slow
def test_kernels_saved_by_one_window_are_found_by_the_next(tmp_path):
    first = _compile(tmp_path, "GH100", "save", tmp_path / "cache-1")
    assert "'fxgraph_cache_miss': 1" in first
    with safe_open(str(tmp_path / "compiled.safetensors"), "pt") as handle:
        meta = json.loads(handle.metadata()["kernels"])
        assert list(meta) == ["GH100"] and meta["GH100"]["packing"] == "zlib"
        assert meta["GH100"]["chunks"] == 1
        packed = handle.get_tensor("GH100.0").numpy().tobytes()
    assert len(zlib.decompress(packed)) > 1000
    second = _compile(tmp_path, "GH100", "load", tmp_path / "cache-2")
    assert "loaded True" in second and "'fxgraph_cache_hit': 1" in second
    assert "fxgraph_cache_miss" not in second
    # another kind finds nothing (and so compiles, as the first did)
    assert not load_kernels(tmp_path, "GA100")


def test_kernels_of_other_versions_or_altered_bytes_are_not_loaded(tmp_path):
    from linefuse.base.compiled_kernels import versions

    path = tmp_path / "compiled.safetensors"
    data = torch.frombuffer(bytearray(zlib.compress(bytes(16))), dtype=torch.uint8)
    old = {**versions(), "torch": "2.0.0"}
    meta = {"GH100": {"versions": old, "sha256": "0" * 64, "packing": "zlib", "chunks": 1}}
    save_file({"GH100.0": data}, str(path), metadata={"kernels": json.dumps(meta)})
    assert not load_kernels(tmp_path, "GH100")  # another torch
    meta["GH100"]["versions"] = versions()
    save_file({"GH100.0": data}, str(path), metadata={"kernels": json.dumps(meta)})
    assert not load_kernels(tmp_path, "GH100")  # bytes that are not the ones saved
    assert not load_kernels(tmp_path / "none", "GH100")
    assert not load_kernels(None, "GH100")


def test_kernels_over_a_returned_file_travel_in_parts_and_load_the_same_repacked(
    tmp_path, monkeypatch
):
    data = random.Random(0).randbytes(5000)  # incompressible: 5 parts of at most 1000 bytes
    info = {"versions": compiled_kernels.versions(), "sha256": hashlib.sha256(data).hexdigest()}
    monkeypatch.setattr(compiled_kernels, "PART_BYTES", 1000)
    monkeypatch.setattr(torch.compiler, "save_cache_artifacts", lambda: (data, info))
    loaded = []
    monkeypatch.setattr(torch.compiler, "load_cache_artifacts", loaded.append)
    window, committed = tmp_path / "window", tmp_path / "committed"
    window.mkdir(), committed.mkdir()
    assert save_kernels(window, "GH100", None)
    parts = paths.window_kernel_files(window)
    assert [p.name for p in parts][-1] == "compiled-00006-of-00006.safetensors"
    assert all(p.stat().st_size < 2000 for p in parts)
    assert load_kernels(window, "GH100") and loaded == [data]
    (committed / "compiled.safetensors").write_bytes(b"the kernels committed before")
    repacked = repack_kernels(window, committed)
    assert paths.window_kernel_files(committed) == repacked and len(repacked) == 6
    assert load_kernels(committed, "GH100") and loaded == [data, data]
    with safe_open(str(repacked[0]), "pt") as handle:
        assert json.loads(handle.metadata()["kernels"])["GH100"]["packing"] == "xz"
