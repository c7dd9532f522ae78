"""The suite's shape: test files mirror the package, and `slow` covers every test that builds or
runs a pipeline, so `make test-fast` (pytest -m "not slow") stays a quick loop."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import PIPELINE_FIXTURES, ROOT

TESTS = ROOT / "tests"
PACKAGE = ROOT / "src" / "linefuse"
# Beside one folder per subpackage: whole-pipeline behaviour (both engines, kill, faults, remotes,
# the cluster profile), the top-level modules (hardware, cli, stage) and checks over the
# source itself (import layers, unsafe calls, this file).
CROSS_CUTTING = {"pipeline", "core", "codebase"}
# What builds a pipeline in-process or through an engine (conftest.py, tests/pipeline/test_engines)
BUILDERS = {"run_cli", "build_data", "embed_all", "make_project"}
# Stage commands that embed, train or restore with a model: a test that runs one is slow
HEAVY_STAGES = {"embed", "pretrain", "train-domains", "base", "evaluate", "restore", "serve"}
TRAIN_LEVEL = {"train", "--level"}
# How a test runs a stage: in-process, through an engine, or as the linefuse command
LAUNCHERS = {"run_cli", "run", "Popen"}
COMMAND = "linefuse"


def _subpackages() -> set[str]:
    return {init.parent.name for init in PACKAGE.glob("*/__init__.py")}


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if p != TESTS / "conftest.py")


def test_every_test_file_lives_in_a_folder_named_after_a_package_area():
    areas = _subpackages() | CROSS_CUTTING
    misplaced = [
        p.relative_to(TESTS).as_posix()
        for p in _test_files()
        if len(p.relative_to(TESTS).parts) != 2
        or p.parent.name not in areas
        or not p.name.startswith("test_")
    ]
    assert misplaced == [], f"put these under tests/<one of {sorted(areas)}>/test_*.py"
    assert _subpackages() <= {p.name for p in TESTS.iterdir() if p.is_dir()}
    # no __init__.py: pytest imports each file by its name, so two files may not share one
    names = [p.name for p in _test_files()]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def _is_fixture(function: ast.FunctionDef) -> bool:
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if ast.unparse(target) == "pytest.fixture":
            return True
    return False


def _marked_slow(function: ast.FunctionDef) -> bool:
    return any(ast.unparse(d) == "pytest.mark.slow" for d in function.decorator_list)


def _called(function: ast.FunctionDef) -> set[str]:
    return {
        node.func.id
        for node in ast.walk(function)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }


def _strings(function: ast.FunctionDef) -> set[str]:
    return {
        node.value
        for node in ast.walk(function)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def _commands(function: ast.FunctionDef) -> set[str]:
    """The first word of each list literal in function (["linefuse", "serve"]: linefuse)."""
    return {
        node.elts[0].value
        for node in ast.walk(function)
        if isinstance(node, ast.List | ast.Tuple)
        and node.elts
        and isinstance(node.elts[0], ast.Constant)
    }


def _functions() -> list[tuple[Path, ast.FunctionDef]]:
    return [
        (path, node)
        for path in [TESTS / "conftest.py", *_test_files()]
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
    ]


def _slow_fixtures(functions) -> set[str]:
    """PIPELINE_FIXTURES and every fixture that takes one, however deep."""
    fixtures = {f.name: {a.arg for a in f.args.args} for _, f in functions if _is_fixture(f)}
    slow = set(PIPELINE_FIXTURES)
    while grown := {n for n, args in fixtures.items() if args & slow and n not in slow}:
        slow |= grown
    return slow


def test_fixtures_that_build_a_pipeline_make_their_tests_slow():
    """A fixture that runs stages either is one of conftest.PIPELINE_FIXTURES or builds on one;
    otherwise its tests would land in the fast loop."""
    functions = _functions()
    slow = _slow_fixtures(functions)
    unlisted = [
        f"{path.relative_to(TESTS)}::{f.name}"
        for path, f in functions
        if _is_fixture(f) and _called(f) & BUILDERS and f.name not in slow
    ]
    assert unlisted == [], "add these to conftest.PIPELINE_FIXTURES"


def test_tests_that_run_a_model_stage_themselves_are_slow():
    """A test that runs embed, training, evaluate, restore or serve (in-process or as a command)
    uses a pipeline fixture or carries @pytest.mark.slow."""
    functions = _functions()
    slow = _slow_fixtures(functions)
    unmarked = [
        f"{path.relative_to(TESTS)}::{f.name}"
        for path, f in functions
        if f.name.startswith("test_")
        and (LAUNCHERS & _called(f) or COMMAND in _commands(f))
        and (_strings(f) & HEAVY_STAGES or TRAIN_LEVEL <= _strings(f))
        and not {a.arg for a in f.args.args} & slow
        and not _marked_slow(f)
    ]
    assert unmarked == [], f"mark these @pytest.mark.slow: {unmarked}"


def _collected(*argv: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode in (0, 5), done.stdout[-2000:] + done.stderr[-2000:]  # 5: none
    return {line for line in done.stdout.splitlines() if "::" in line}


def test_slow_is_applied_to_the_pipeline_fixtures_users_and_to_no_unit_test():
    """Collected by pytest itself (-m slow) from a file whose imports are light."""
    params = "tests/params/test_params.py"
    slow = _collected("-m", "slow", params)
    # trained_project (the session's whole tiny pipeline) makes this one slow
    assert (
        f"{params}::test_every_mutation_stops_a_stage_that_reads_it_before_it_touches_a_file"
        in slow
    )
    # checks on params.yaml stay fast
    units = {
        f"{params}::test_{name}"
        for name in ("repo_params_are_valid", "params_yaml_round_trips_through_yaml")
    }
    assert units <= _defined(params) and not units & slow


def _defined(path: str) -> set[str]:
    tree = ast.parse((ROOT / path).read_text())
    return {f"{path}::{node.name}" for node in tree.body if isinstance(node, ast.FunctionDef)}
