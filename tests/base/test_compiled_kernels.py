"""torch.compile's kernels saved by one window and loaded by the next (base/compiled_kernels.py):
in a fresh process with an empty inductor cache, the loaded kernels are found instead of
compiled; a kind never saved, other versions or altered bytes load nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib

import pytest
from safetensors import safe_open
from safetensors.torch import save_file

from linefuse.base.compiled_kernels import load_kernels

# a process that compiles one small function and reports what inductor's cache did
COMPILE = """
import sys
from pathlib import Path
import torch
from torch._dynamo.utils import counters
from linefuse.base.compiled_kernels import load_kernels, save_kernels

folder, kind, action = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
if action == "load":
    print("loaded", load_kernels(folder / "compiled.safetensors", kind))
torch.compile(lambda x: (x.sin() + 1).sum())(torch.randn(8, 8))
print("counters", dict(counters["inductor"]))
if action == "save":
    save_kernels(folder / "compiled.safetensors", kind, folder / "none.safetensors")
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
        packed = handle.get_tensor("GH100").numpy().tobytes()
    assert len(zlib.decompress(packed)) > 1000
    second = _compile(tmp_path, "GH100", "load", tmp_path / "cache-2")
    assert "loaded True" in second and "'fxgraph_cache_hit': 1" in second
    assert "fxgraph_cache_miss" not in second
    # another kind finds nothing (and so compiles, as the first did)
    assert not load_kernels(tmp_path / "compiled.safetensors", "GA100")


def test_kernels_of_other_versions_or_altered_bytes_are_not_loaded(tmp_path):
    import torch

    from linefuse.base.compiled_kernels import versions

    path = tmp_path / "compiled.safetensors"
    data = torch.arange(16, dtype=torch.uint8)
    old = {**versions(), "torch": "2.0.0"}
    meta = {"GH100": {"versions": old, "sha256": "0" * 64}}
    save_file({"GH100": data}, str(path), metadata={"kernels": json.dumps(meta)})
    assert not load_kernels(path, "GH100")  # another torch
    meta = {"GH100": {"versions": versions(), "sha256": "0" * 64}}
    save_file({"GH100": data}, str(path), metadata={"kernels": json.dumps(meta)})
    assert not load_kernels(path, "GH100")  # bytes that are not the ones saved
    assert not load_kernels(tmp_path / "none.safetensors", "GH100")
