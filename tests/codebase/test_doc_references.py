"""What the docs promise about themselves: every `tests/...` path that the docs, the Makefile,
params.yaml, the package or the benchmarks name exists (a moved test file cannot leave a reader
looking for it), and the README stays short."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

# a tests/ path: folders and a file (test_x.py, conftest.py) or a folder ending in /
TEST_PATH = re.compile(r"\btests/(?:[\w.-]+/)*[\w-]+(?:\.py)?")


def _readers_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "Makefile", ROOT / "params.yaml"]
    files += sorted((ROOT / "docs").glob("*.md"))
    files += sorted((ROOT / "src").rglob("*.py")) + sorted((ROOT / "benchmarks").glob("*.py"))
    files += sorted((ROOT / "src").rglob("README.md"))
    return files


def named_test_paths(text: str) -> set[str]:
    return {match.rstrip(".") for match in TEST_PATH.findall(text)}


def test_the_pattern_finds_paths_in_prose():
    text = "(in `tests/serve/test_app.py`), tests/inference/ and tests/conftest.py."
    assert named_test_paths(text) == {
        "tests/serve/test_app.py",
        "tests/inference",
        "tests/conftest.py",
    }


def test_every_tests_path_a_doc_names_exists():
    missing = [
        f"{path.relative_to(ROOT)}: {named}"
        for path in _readers_files()
        for named in sorted(named_test_paths(path.read_text()))
        if not (ROOT / named).exists()
    ]
    assert len(_readers_files()) > 10
    assert not missing, "named but not there:\n" + "\n".join(missing)


def test_the_readme_is_at_most_200_lines():
    """A user's guide that fits two screens; the rest lives in docs/ (DESIGN: what a user reads)."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, len(lines)
