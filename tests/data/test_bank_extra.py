"""The bank's libraries are an extra: pyproject's `bank` (Lets-Plot, ReportLab, PDFium), not a
dependency of a plain install, which draws the default data without them; where one is missing,
drawing with it is one line that names the extra."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import subprocess
import sys
import tomllib

import pytest

from linefuse.data.charts import base_chart_params, draw_chart, require_libraries
from linefuse.data.charts.registry import BANK_LIBRARIES
from linefuse.params.data import LIBRARY_PACKAGES
from linefuse.params.full import load_params
from linefuse.stage import UserError

from conftest import ROOT


def _names(requirements: list[str]) -> set[str]:
    """The distributions requirements name, normalised (PEP 503), extras and pins dropped."""
    return {
        re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", r).group(0)).lower()
        for r in requirements
    }


def _distributions(library: str) -> set[str]:
    """The installed distributions that hold a library's packages (the suite installs them all)."""
    found = importlib.metadata.packages_distributions()
    return _names([name for package in LIBRARY_PACKAGES[library] for name in found[package]])


def test_the_bank_libraries_are_the_bank_extra_and_no_plain_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    plain = _names(project["dependencies"])
    extras = project["optional-dependencies"]
    bank = set().union(*(_distributions(library) for library in BANK_LIBRARIES))
    assert bank == {"lets-plot", "reportlab", "pypdfium2"}
    assert _names(extras["bank"]) == bank
    assert not bank & plain, bank & plain
    # every other library draws on a plain install; the suite draws with all of them
    for library in set(LIBRARY_PACKAGES) - set(BANK_LIBRARIES):
        assert _distributions(library) <= plain, library
    assert "linefuse[bank]" in extras["test"]


@pytest.mark.parametrize(
    ("library", "package"),
    [("letsplot", "lets_plot"), ("reportlab", "reportlab"), ("reportlab", "pypdfium2")],
)
def test_a_missing_bank_library_is_one_line_naming_the_extra(monkeypatch, library, package):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == package else real(name, *a)
    )
    with pytest.raises(UserError) as raised:
        require_libraries({"matplotlib": 0.5, library: 0.5}, "base.libraries")
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"base.libraries: {library} (package {package}) is not installed")
    assert "pip install 'linefuse[bank]'" in message and "make install-bank" in message


def test_a_plain_library_missing_is_told_to_install_the_project(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "plotnine" else real(name, *a)
    )
    with pytest.raises(UserError, match=r"plotnine .*\(make install\)") as raised:
        require_libraries({"plotnine": 1.0}, "data.charts.libraries")
    assert "[bank]" not in str(raised.value)


@pytest.mark.parametrize(
    ("library", "package"), [("letsplot", "lets_plot"), ("reportlab", "pypdfium2")]
)
def test_drawing_without_the_library_is_one_line_naming_the_extra(monkeypatch, library, package):
    """A caller that draws without require_libraries (a reader's training charts) is told the
    same, as the drawer imports the library, not with a worker's traceback."""
    monkeypatch.setitem(sys.modules, package, None)  # what `import` meets where it is not installed
    charts = base_chart_params(load_params(ROOT / "params.yaml"))
    with pytest.raises(UserError) as raised:
        draw_chart(charts.model_copy(update={"libraries": {library: 1.0}}), 0)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{library} (package {package}) is not installed")
    assert "pip install 'linefuse[bank]'" in message


PLAIN_INSTALL = """
import sys

for name in ("lets_plot", "reportlab", "pypdfium2"):
    sys.modules[name] = None  # as on a plain install: any import of them fails

import linefuse.cli
import linefuse.stages.generate
from linefuse.data.charts import draw_chart, plan_chart, require_libraries
from linefuse.params.full import load_params

charts = load_params("params.yaml").data.charts
require_libraries(charts.libraries, "data.charts.libraries")
drawn = set()
for index in range(200):
    library = plan_chart(charts, index).library
    if library not in drawn:
        draw_chart(charts, index)
        drawn.add(library)
print(" ".join(sorted(drawn)))
"""


@pytest.mark.slow
def test_a_plain_install_draws_the_default_data():
    """The CLI, the generate stage and a chart of each library of data.charts (make repro's),
    in a fresh interpreter where the bank's libraries cannot be imported."""
    shares = load_params(ROOT / "params.yaml").data.charts.libraries
    run = subprocess.run(
        [sys.executable, "-c", PLAIN_INSTALL], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == sorted(name for name, share in shares.items() if share > 0)
