"""evaluate's ONNX export is kept only while everything that shaped its graph is as it is now
(onnx_model.export_key): the base's weight files, the export code and the libraries' versions.
Where any of them differs it is exported again, one line saying what differed, and until then
find_export hands it out to no restorer."""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path

import pytest
import torch

from linefuse.inference import onnx_model
from linefuse.inference.model import predict
from linefuse.inference.onnx_export import export_onnx, refresh_export
from linefuse.inference.onnx_model import (
    MANIFEST_FILE,
    ONNX_FILE,
    code_digest,
    code_files,
    find_export,
)
from linefuse.train.model import build_unet, save_base


def _random_base(folder: Path, seed: int) -> Path:
    """A tiny UNet in save_base's layout, its head drawn from `seed` (not zero: the weights
    show in the graph)."""
    torch.manual_seed(seed)
    unet = build_unet("tiny", 3)
    torch.nn.init.normal_(unet.conv_out.weight, std=0.05)
    save_base(unet, folder, torch.zeros(1, 1, unet.config.cross_attention_dim))
    return folder


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """A tiny random base and its export (base/, onnx/), made once: each test takes a copy."""
    root = tmp_path_factory.mktemp("export")
    export_onnx(_random_base(root / "base", 0), None, root / "onnx")
    return root


@pytest.fixture
def made(exported, tmp_path) -> tuple[Path, Path]:
    """(base, its export): a copy of `exported`'s."""
    shutil.copytree(exported, tmp_path, dirs_exist_ok=True)
    return tmp_path / "base", tmp_path / "onnx"


def _graph_file(folder: Path) -> tuple[int, int]:
    """The export's graph file as the file system knows it: a new export is a new file."""
    found = (folder / ONNX_FILE).stat()
    return found.st_ino, found.st_mtime_ns


def _refreshed(base: Path, folder: Path, caplog) -> str:
    """refresh_export's one line about `folder`."""
    caplog.clear()
    with caplog.at_level("INFO", logger="linefuse"):
        refresh_export(base, None, folder)
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("onnx export")]
    return line


def test_an_unchanged_export_is_kept(made, caplog):
    """The same base, code and libraries: the export there is kept, its file untouched."""
    base, folder = made
    graph = _graph_file(folder)
    assert _refreshed(base, folder, caplog) == f"onnx export: {folder} is current, kept"
    assert _graph_file(folder) == graph and find_export(base, None, (folder,)) == folder


def _new_weights(base: Path, folder: Path, monkeypatch) -> None:
    _random_base(base, 1)


def _other_code(base: Path, folder: Path, monkeypatch) -> None:
    monkeypatch.setattr(onnx_model, "code_digest", lambda: "0" * 64)


def _older_torch(base: Path, folder: Path, monkeypatch) -> None:
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    manifest["versions"]["torch"] = "2.0.0"
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    "change,said",
    [
        (_new_weights, "the base's files"),
        (_other_code, "the export code"),
        (_older_torch, "torch 2.0.0 (now "),
    ],
    ids=["weights", "code", "torch"],
)
def test_an_export_made_from_other_inputs_is_exported_again(
    made, caplog, monkeypatch, change, said
):
    """Each part of the key, changed, makes the export stale: no restorer gets it, and evaluate
    exports it again, saying which part differed; the new one is current."""
    base, folder = made
    graph, file = (folder / ONNX_FILE).read_bytes(), _graph_file(folder)
    change(base, folder, monkeypatch)
    assert find_export(base, None, (folder,)) is None
    line = _refreshed(base, folder, caplog)
    again = f"onnx export: exporting {folder}, as the one there was made from other inputs: "
    assert line.startswith(again) and said in line, line
    assert _graph_file(folder) != file and find_export(base, None, (folder,)) == folder
    if change is _new_weights:
        assert (folder / ONNX_FILE).read_bytes() != graph


def test_the_code_digest_covers_the_code_that_shapes_the_graph(tmp_path, monkeypatch):
    """The exporter's and predict's modules are in it, and a byte of either changes it."""
    files, digest = code_files(), code_digest()
    assert Path(inspect.getsourcefile(export_onnx)) in files
    assert Path(inspect.getsourcefile(predict)) in files
    copies = [tmp_path / path.name for path in files]
    for path, copy in zip(files, copies, strict=True):
        copy.write_bytes(path.read_bytes())
    monkeypatch.setattr(onnx_model, "code_files", lambda: copies)
    assert code_digest() == digest  # the same names and bytes
    for copy in copies:
        copy.write_bytes(copy.read_bytes() + b"\n")
        assert code_digest() != digest
        copy.write_bytes(copy.read_bytes()[:-1])
