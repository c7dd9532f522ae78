"""Selection never sees what is reported (issue 59): the charts that decide whether a base ships
(the score set and the drawn-unlike set, base/scores.py and base/land.py) share no
chart with the test and held-out splits the default run reports, by content; their seeds are
their own; and a default is tuned on the val split (benchmarks/library_gain.py). The verdict's
blindness to the held-out looks is tests/base/test_window.py's."""

from __future__ import annotations

import copy
import hashlib
import importlib.util

import numpy as np
import polars as pl
import pytest

from linefuse import paths
from linefuse.base.land import drawn_chart_params
from linefuse.base.scores import score_chart_params
from linefuse.data.charts import draw_chart
from linefuse.data.images import load_rgb
from linefuse.params import ParamsError
from linefuse.params.full import parse_params

from conftest import ROOT, tiny_params

REPORTED = ("test", "held_out")  # the splits the README reports


def digest(image: np.ndarray) -> str:
    """A chart's content hash: sha256 of its RGB bytes (the pixels, however they were encoded)."""
    return hashlib.sha256(np.ascontiguousarray(image, dtype=np.uint8).tobytes()).hexdigest()


def drawn_digests(charts, count: int) -> set[str]:
    return {digest(draw_chart(charts, index)[0]) for index in range(count)}


def test_the_score_sets_share_no_chart_with_the_reported_splits(tiny_project):
    """Both sets as base-land draws them (tiny params), hashed against every chart of the
    default run's test and held-out splits (generate, then index's split by content hash)."""
    params = parse_params(tiny_params())
    index = pl.read_parquet(tiny_project / paths.IMAGES_PARQUET)
    rows = index.filter(pl.col("split").is_in(REPORTED))
    assert set(rows["split"]) == set(REPORTED)
    source = tiny_project / params.data.source_dir
    reported = {digest(load_rgb(source / path)) for path in rows["path"]}
    assert len(reported) == rows.height
    score_set = drawn_digests(score_chart_params(params), params.base.score_charts)
    drawn_set = drawn_digests(drawn_chart_params(params), params.base.window.drawn_charts)
    assert len(score_set) == params.base.score_charts
    assert len(drawn_set) == params.base.window.drawn_charts
    assert not score_set & reported and not drawn_set & reported
    # the hashes see an overlap where there is one: the old score set, the default data's own
    # first charts, holds every reported chart
    old = drawn_digests(params.data.charts, params.data.charts.count)
    assert reported <= old


@pytest.mark.parametrize(
    ("key", "same_as"),
    [
        ("score_seed", "data.charts.seed"),
        ("score_seed", "base.chart_seed"),
        ("drawn_seed", "data.charts.seed"),
        ("drawn_seed", "base.score_seed"),
    ],
)
def test_the_score_sets_seeds_are_their_own(key, same_as):
    raw = copy.deepcopy(tiny_params())
    seeds = {
        "data.charts.seed": raw["data"]["charts"]["seed"],
        "base.chart_seed": raw["base"]["chart_seed"],
        "base.score_seed": raw["base"]["score_seed"],
    }
    block = raw["base"] if key == "score_seed" else raw["base"]["window"]
    block[key] = seeds[same_as]
    named = f"base.{key}" if key == "score_seed" else f"base.window.{key}"
    with pytest.raises(ParamsError, match=named):
        parse_params(raw)


def _library_gain():
    """benchmarks/library_gain.py as a module (its run is behind __main__)."""
    spec = importlib.util.spec_from_file_location(
        "library_gain", ROOT / "benchmarks/library_gain.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_default_is_tuned_on_val_charts_and_the_held_out_library_only_measured():
    gain = _library_gain()
    index = pl.DataFrame(
        {
            "id": ["a1", "a2", "a3", "b1", "b2", "c1", "c2"],
            "library": ["plotnine"] * 3 + ["matplotlib"] * 2 + ["vegalite"] * 2,
            "split": ["test", "val", "val", "val", "test", "held_out", "held_out"],
        }
    )
    held = {"magazine", "vegalite"}
    assert gain.scored_split("plotnine", held) == gain.scored_split("matplotlib", held) == "val"
    assert gain.scored_ids(index, "plotnine", held, 6) == ["a2", "a3"]
    assert gain.scored_ids(index, "plotnine", held, 1) == ["a2"]
    assert gain.scored_ids(index, "matplotlib", held, 6) == ["b1"]
    assert gain.scored_split("vegalite", held) == "held_out"
    assert gain.scored_ids(index, "vegalite", held, 6) == ["c1", "c2"]
