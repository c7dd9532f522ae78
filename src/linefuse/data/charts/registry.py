"""Which module draws each plotting library's charts: the one place that names the drawers.

A drawer module draws a planned chart with `render(plan)` -> (RGB uint8 image, sidecar dict) and
names the themes it draws in as THEMES (matplotlib has none: its looks are the style sheets).
Drawers are imported only when a chart asks for them, so a stage that never draws with plotnine
never imports its drawer, and a drawer imports its library only as it draws: `import
linefuse.data.charts` needs none of the libraries. The packages each library needs are
params.data.LIBRARY_PACKAGES'.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

import numpy as np

from linefuse.data.charts.facts import bundled_file
from linefuse.params.data import LIBRARY_PACKAGES
from linefuse.stage import UserError

# library (data.charts.libraries) -> the module that draws its charts
DRAWERS = {
    "matplotlib": "linefuse.data.charts.matplotlib_drawer",
    "plotnine": "linefuse.data.charts.plotnine_drawer",
    "vegalite": "linefuse.data.charts.vegalite_drawer",
    "letsplot": "linefuse.data.charts.letsplot_drawer",
    "reportlab": "linefuse.data.charts.reportlab_drawer",
}


# the libraries a plain install lacks: pyproject.toml's `bank` extra installs them. The base's
# bank draws with them (base.libraries); the default data never does, so make repro needs none
BANK_LIBRARIES = ("letsplot", "reportlab")


def drawer(library: str) -> ModuleType:
    """The module that draws `library`'s charts, imported on first use."""
    return importlib.import_module(DRAWERS[library])


def library_themes(library: str) -> tuple[str, ...]:
    """The themes a library draws in (none for matplotlib: its style sheets are the families)."""
    return getattr(drawer(library), "THEMES", ())


def require_libraries(libraries: dict[str, float], key: str) -> None:
    """Every library with a share must be importable where its charts are drawn; one line names
    any that is not, before a worker starts (a GPU machine gets plotnine from `make wheels`)."""
    missing = [
        (name, package)
        for name, share in libraries.items()
        for package in LIBRARY_PACKAGES[name]
        if share > 0 and importlib.util.find_spec(package) is None
    ]
    if missing:
        raise UserError(f"{key}: {not_installed(missing)}")


def not_installed(missing: list[tuple[str, str]]) -> str:
    """One line on libraries whose packages ((library, package) pairs) are not installed, and how
    to install them: the bank's with the `bank` extra, the others with the project."""
    names = ", ".join(f"{name} (package {package})" for name, package in missing)
    here = (
        "install linefuse's [bank] extra here (pip install 'linefuse[bank]', or make "
        "install-bank in a checkout)"
        if any(name in BANK_LIBRARIES for name, _ in missing)
        else "install the project here (make install)"
    )
    return (
        f"{names} is not installed on this machine; {here}, carry its wheels to a GPU machine "
        "(make wheels), or drop it"
    )


def render_plan(plan) -> tuple[np.ndarray, dict]:
    """(height, width, 3) uint8 RGB image and the sidecar dict of one planned chart (a
    plan.ChartPlan), drawn by its library's drawer.

    Every library draws from matplotlib's own defaults, whatever rcParams the process holds (a
    user's matplotlibrc, a caller's changes): plotnine's themes leave some unset (cap styles,
    snapping, text antialiasing) that would otherwise reach its pixels. Restored after."""
    import matplotlib
    import matplotlib.style

    bundled_file(plan.font)
    try:
        with matplotlib.rc_context():
            matplotlib.style.use("default")
            return drawer(plan.library).render(plan)
    except ModuleNotFoundError as error:
        # a caller that drew without require_libraries: still one line, not a traceback
        package = (error.name or "").partition(".")[0]
        if package not in LIBRARY_PACKAGES[plan.library]:
            raise
        raise UserError(not_installed([(plan.library, package)])) from error
