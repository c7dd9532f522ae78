"""Which module draws each plotting library's charts: the one place that names the drawers.

A drawer module draws a planned chart with `render(plan)` -> (RGB uint8 image, sidecar dict) and
names the themes it draws in as THEMES (matplotlib has none: its looks are the style sheets).
Drawers are imported only when a chart asks for them, so a stage that never draws with plotnine
never imports its drawer. The packages each library needs are params.data.LIBRARY_PACKAGES'.
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
        f"{name} (package {package})"
        for name, share in libraries.items()
        for package in LIBRARY_PACKAGES[name]
        if share > 0 and importlib.util.find_spec(package) is None
    ]
    if missing:
        raise UserError(
            f"{key}: {', '.join(missing)} is not installed on this machine; install the project "
            "here (make install), carry its wheels to a GPU machine (make wheels), or drop it"
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
    with matplotlib.rc_context():
        matplotlib.style.use("default")
        return drawer(plan.library).render(plan)
