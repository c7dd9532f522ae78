"""digitize is decided apart from what it reports (issue 72): its two dev sets and report set are
the default recipe drawn with seeds of their own, sharing no chart with each other nor with the
splits the default run reports, by content; the dev sets leave the held-out looks out; and every
chart in tests/digitize/fixtures is a dev chart, redrawn here byte for byte."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from PIL import Image

from linefuse import paths
from linefuse.data.charts import draw_chart
from linefuse.data.charts.plan import DECIMALS
from linefuse.data.images import load_rgb
from linefuse.digitize.sets import dev2_chart_params, dev_chart_params, report_chart_params
from linefuse.params import ParamsError
from linefuse.params.full import load_params, parse_params

from conftest import ROOT, tiny_params

FIXTURES = Path(__file__).parent / "fixtures"
REPORTED = ("test", "held_out")  # the splits the README reports


def digest(image: np.ndarray) -> str:
    """A chart's content hash: sha256 of its RGB bytes (the pixels, however they were encoded)."""
    return hashlib.sha256(np.ascontiguousarray(image, dtype=np.uint8).tobytes()).hexdigest()


def test_the_sets_share_no_chart_with_each_other_or_the_reported_splits(tiny_project):
    """Both sets as tiny params draw them, hashed against each other and against every chart of
    the tiny run's test and held-out splits (generate, then index's split by content hash)."""
    params = parse_params(tiny_params())
    index = pl.read_parquet(tiny_project / paths.IMAGES_PARQUET)
    rows = index.filter(pl.col("split").is_in(REPORTED))
    source = tiny_project / params.data.source_dir
    reported = {digest(load_rgb(source / path)) for path in rows["path"]}
    assert len(reported) == rows.height > 0
    count = params.data.charts.count
    dev = {digest(draw_chart(dev_chart_params(params), i)[0]) for i in range(count)}
    dev2 = {digest(draw_chart(dev2_chart_params(params), i)[0]) for i in range(count)}
    report = {digest(draw_chart(report_chart_params(params), i)[0]) for i in range(count)}
    assert len(dev) == len(dev2) == len(report) == count
    assert not (dev | dev2 | report) & reported
    assert not dev & report and not dev2 & report and not dev & dev2
    # the hashes see an overlap where there is one: the default data's own charts
    default = {digest(draw_chart(params.data.charts, i)[0]) for i in range(count)}
    assert reported <= default


def test_the_dev_set_leaves_the_held_out_looks_out():
    params = load_params(ROOT / "params.yaml")
    dev, report = dev_chart_params(params), report_chart_params(params)
    held = set(params.data.charts.held_out)
    assert not held & set(dev.libraries) and not held & set(dev.families)
    assert sum(dev.libraries.values()) == pytest.approx(1.0)
    assert set(report.libraries) == set(params.data.charts.libraries)  # the report reads all
    assert dev.count == report.count == params.digitize_sets.charts


@pytest.mark.parametrize(
    ("key", "same_as"),
    [
        ("dev_seed", ("data", "charts", "seed")),
        ("dev2_seed", ("digitize_sets", "dev_seed")),
        ("report_seed", ("base", "score_seed")),
    ],
)
def test_the_sets_seeds_are_their_own(key, same_as):
    raw = copy.deepcopy(tiny_params())
    section, *rest = same_as
    value = raw[section]
    for part in rest:
        value = value[part]
    raw["digitize_sets"][key] = value
    with pytest.raises(ParamsError, match=f"digitize_sets.{key}"):
        parse_params(raw)


# The fixtures: dev charts, written by
#   python -m linefuse.digitize.sets dev tests/digitize/fixtures 0 1 3 5 10 17 28 75 89 97 99 111
# two ascending linear charts of each dev library (matplotlib 5, 28; plotnine 0, 10), a
# descending x of each (99, 17) and a log y of each (111 in 10^n, 3 in 1e2), chosen on the dev
# set's sharp reading (docs/experiments.md); and words that were hard to find (1: plotnine's
# labels touching their tick marks, 1-px points; 97: tick marks off the box's edge, a lavender
# series beside a blue one; 89: no frame line, a spike as long as one) or read (75: 10^n that
# Tesseract reads as 10, over a descending x)
FIXTURE_NUMBERS = (0, 1, 3, 5, 10, 17, 28, 75, 89, 97, 99, 111)


@pytest.mark.slow  # plotnine starts up: seconds
def test_every_fixture_is_the_dev_chart_of_its_number():
    """chart_NNNNN.png/.csv/.json in fixtures is dev chart NNNNN as `generate` writes it."""
    dev = dev_chart_params(load_params(ROOT / "params.yaml"))
    charts = sorted(FIXTURES.glob("chart_*.png"))
    assert [int(png.stem.split("_")[1]) for png in charts] == list(FIXTURE_NUMBERS)
    for png in charts:
        image, table, sidecar = draw_chart(dev, int(png.stem.split("_")[1]))
        assert np.array_equal(np.asarray(Image.open(png).convert("RGB")), image), png.name
        assert json.loads(png.with_suffix(".json").read_text()) == sidecar, png.name
        written = np.loadtxt(png.with_suffix(".csv"), delimiter=",", skiprows=1, ndmin=2)
        assert np.array_equal(written, np.round(table, DECIMALS)), png.name
