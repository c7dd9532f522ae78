"""The package's shape: imports flow one way, and the service stays light."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "src" / "linefuse"
# lower layers never import higher ones; the core (params, paths, stage, hardware) imports no
# subpackage. Reading a chart back from its pixels (digitize: its text by Tesseract and the label
# reader, its curves, its axes) sits on data, under everything that restores or scores.
# Inference (loading a model, sampling, tiling, the restorer) sits under training and the
# service, which sit side by side. evaluate and report sit side by side and do not
# import each other. Each stage's entry module (linefuse.stages) sits above them all; the stage
# graph (pipeline.py) sits with the cli at the top: it names every stage. The base's training
# (linefuse.base: bank, windows, landing, card) trains through train and scores through
# evaluate, beside the stages; only the cli starts it.
LAYERS = {
    "core": 0,
    "data": 1,
    "digitize": 1.5,
    "inference": 2,
    "train": 3,
    "serve": 3,
    "evaluate": 4,
    "report": 4,
    "stages": 5,
    "base": 5,
    "cli": 6,
}
# above the layers: scoring a model restores it as the service does, through inference alone
APART = {("evaluate", "train"), ("evaluate", "serve")}
SUBPACKAGES = {
    "data",
    "digitize",
    "inference",
    "train",
    "serve",
    "evaluate",
    "report",
    "stages",
    "base",
}


def _layer(module: str) -> str:
    """linefuse.train.run -> train; linefuse.params -> core; linefuse.cli, .pipeline -> cli; the
    package itself (its __init__: the public names, `from linefuse import LineFusePipeline`,
    loaded only when asked for) -> cli."""
    if module == "linefuse":
        return "cli"
    part = module.split(".")[1] if "." in module else ""
    if part in SUBPACKAGES or part == "cli":
        return part
    if part == "pipeline":
        return "cli"
    return "core"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every linefuse import in the file, at any depth (lazy ones too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: relative import; use linefuse.X"
            if node.module == "linefuse":
                found += [(node.lineno, f"linefuse.{alias.name}") for alias in node.names]
            elif node.module.startswith("linefuse."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, alias.name)
                for alias in node.names
                if alias.name.startswith("linefuse.")
            ]
    return found


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(relative.parts).removesuffix(".__init__")


def test_imports_only_flow_downward():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _layer(_module_name(path))
        for line, target in _imports(path):
            target_layer = _layer(target)
            allowed = (
                target_layer == source
                or target_layer == "core"
                or LAYERS[target_layer] < LAYERS[source]
            ) and (source, target_layer) not in APART
            if not allowed:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {source} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_the_layer_rule_catches_an_upward_import(tmp_path):
    """The check above can fail: a data module importing train is reported."""
    assert _layer("linefuse.data.shards") == "data" and _layer("linefuse.train.run") == "train"
    assert LAYERS[_layer("linefuse.train.run")] > LAYERS[_layer("linefuse.data.shards")]
    module = tmp_path / "bad.py"
    module.write_text("def f():\n    from linefuse.train.run import run\n")
    assert _imports(module) == [(2, "linefuse.train.run")]


@pytest.mark.slow  # a fresh interpreter imports torch
def test_the_service_does_not_import_the_data_stages_libraries():
    """Each of the service's entry points, imported one after the other in one interpreter
    (the restorer first, which the app imports): which data-stage libraries it brought in."""
    entries = ("linefuse.inference.restorer", "linefuse.serve.app")
    probe = (
        "import importlib, json, sys\n"
        f"for entry in {entries!r}:\n"
        "    importlib.import_module(entry)\n"
        "    print(json.dumps([entry, [m for m in ('lmdb', 'webdataset', 'polars')"
        " if m in sys.modules]]))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = dict(json.loads(line) for line in done.stdout.splitlines())
    assert loaded == {entry: [] for entry in entries}
