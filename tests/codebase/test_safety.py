"""No unsafe deserialisation or code evaluation anywhere in the package (checked on its syntax
tree)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "linefuse"
UNSAFE_MODULES = {"pickle", "cPickle", "dill", "marshal", "shelve", "joblib", "cloudpickle"}


def _keyword(call: ast.Call, name: str):
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def unsafe_calls(source: str) -> list[str]:
    """What a reviewer would flag: pickle-family imports, eval/exec, torch.load without
    weights_only=True, yaml.load without a safe loader, np.load(allow_pickle=True)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            found += [f"import {n}" for n in names if n.split(".")[0] in UNSAFE_MODULES]
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = (
            func.id
            if isinstance(func, ast.Name)
            else func.attr
            if isinstance(func, ast.Attribute)
            else ""
        )
        owner = (
            func.value.id
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            else ""
        )
        if isinstance(func, ast.Name) and name in ("eval", "exec", "__import__"):
            found.append(f"{name}()")
        elif owner == "torch" and name == "load":
            weights_only = _keyword(node, "weights_only")
            if not (isinstance(weights_only, ast.Constant) and weights_only.value is True):
                found.append("torch.load without weights_only=True")
        elif owner == "yaml" and name in ("load", "load_all", "unsafe_load", "full_load"):
            loader = _keyword(node, "Loader")
            if name != "load" or not (
                isinstance(loader, ast.Attribute) and loader.attr == "SafeLoader"
            ):
                found.append(f"yaml.{name} without SafeLoader")
        elif owner in ("np", "numpy") and name == "load":
            allow = _keyword(node, "allow_pickle")
            if (
                isinstance(allow, ast.Constant)
                and allow.value is True
                or allow is not None
                and not isinstance(allow, ast.Constant)
            ):
                found.append("np.load with allow_pickle")
    return found


@pytest.mark.parametrize(
    "snippet,flagged",
    [
        ("import pickle\npickle.loads(b'')", "import pickle"),
        ("from joblib import load", "import joblib"),
        ("torch.load('m.pt')", "torch.load without weights_only=True"),
        ("torch.load('m.pt', weights_only=False)", "torch.load without weights_only=True"),
        ("eval(text)", "eval()"),
        ("exec(code)", "exec()"),
        ("yaml.load(stream)", "yaml.load without SafeLoader"),
        ("np.load('a.npy', allow_pickle=True)", "np.load with allow_pickle"),
    ],
)
def test_the_checker_flags_each_unsafe_form(snippet, flagged):
    assert flagged in unsafe_calls(snippet)


def test_the_checker_passes_the_safe_forms():
    safe = (
        "torch.load('m.pt', weights_only=True)\nyaml.safe_load(s)\n"
        "yaml.load(s, Loader=yaml.SafeLoader)\nnp.load('a.npy')\nmodel.eval()\n"
    )
    assert unsafe_calls(safe) == []


def test_the_package_loads_nothing_unsafely():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 15
    offences = {
        str(path.relative_to(PACKAGE)): found
        for path in files
        if (found := unsafe_calls(path.read_text()))
    }
    assert offences == {}
