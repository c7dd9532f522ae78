"""Code a newcomer can find their way in: short functions, evaluate in modules of one job each,
a report that fits in one reading."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "src/linefuse"
MOST_FUNCTION_LINES = 80
MOST_EVALUATE_MODULE_LINES = 300  # the stage's orchestration, scoring, tables and outputs
MOST_REPORT_LINES = 410
# params.py is the schema: one class per params block, long by nature
EXEMPT = {PACKAGE / "params.py"}


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_function_is_longer_than_a_screen():
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1})"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in EXEMPT
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MOST_FUNCTION_LINES
    ]
    assert not long, long


def test_the_evaluate_stage_is_split_and_the_report_is_short():
    stage = ["evaluate", "scoring", "tables", "outputs"]
    sizes = {name: _lines(PACKAGE / "evaluate" / f"{name}.py") for name in stage}
    assert max(sizes.values()) < MOST_EVALUATE_MODULE_LINES, sizes
    report = sum(_lines(path) for path in (PACKAGE / "report").glob("*.py"))
    assert report <= MOST_REPORT_LINES, report
