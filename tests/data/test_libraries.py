"""The default charts as several plotting libraries draw them: one plan, each library's own look,
the same sidecar facts (checked against the pixels), byte-stable files, and roles in params.yaml
that keep the held-out library away from everything the model trains on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from linefuse.base.land import drawn_chart_params
from linefuse.data.charts import base_chart_params, draw_chart, generate, plan_chart
from linefuse.data.charts.registry import library_themes
from linefuse.data.layout import EMBEDDINGS_MANIFEST, SHARD_MANIFEST
from linefuse.params import ParamsError
from linefuse.params.data import LIBRARIES
from linefuse.params.full import parse_params

from conftest import LEVELS, ROOT, tiny_params
from test_charts import background, charts, files, to_pixels


def one_library(library: str, **overrides):
    """params.yaml's charts, all drawn by `library`: one thick solid series, no markers, so
    each pixel of the curve shows its colour."""
    return charts(
        libraries={library: 1.0},
        held_out=["magazine"],
        series=[1, 1],
        line_width_pt=[2.5, 2.5],
        dash_prob=0.0,
        marker_prob=0.0,
        annotate_prob=0.0,
        **overrides,
    )


@pytest.mark.parametrize("library", LIBRARIES)
def test_each_library_draws_the_plan_and_its_sidecar_maps_pixels_to_data(library):
    """The curve lies where the sidecar's plot box and limits put the table's data, in the
    series' recorded colour; every tick label box lies in the image around the label's ink."""
    cfg = one_library(library)
    for index in range(3):
        plan = plan_chart(cfg, index)
        image, table, sidecar = draw_chart(cfg, index)
        assert (sidecar["library"], plan.library) == (library, library)
        assert image.shape == (sidecar["height"], sidecar["width"], 3)
        assert (sidecar["width"], sidecar["height"]) == (plan.width, plan.height)
        left, top, right, bottom = sidecar["plot_box"]
        assert 0 <= left < right <= image.shape[1] and 0 <= top < bottom <= image.shape[0]
        x, y = to_pixels(table, sidecar)
        inside = (x > left + 2) & (x < right - 2) & (y > top + 2) & (y < bottom - 2)
        assert inside.mean() > 0.9, (library, index)
        colour = np.array(sidecar["series"][0]["color"])
        near = image[y[inside].astype(int), x[inside].astype(int)].astype(int)
        on_curve = np.abs(near - colour).max(axis=1) < 80
        assert on_curve.mean() > 0.7, (library, index, on_curve.mean())
        labels = sidecar["tick_labels"]
        assert {label["axis"] for label in labels} == {"x", "y"}, (library, index)
        for label in labels:
            x0, y0, x1, y1 = label["box"]
            assert 0 <= x0 < x1 <= image.shape[1] and 0 <= y0 < y1 <= image.shape[0]
            crop = image[int(y0) : int(np.ceil(y1)), int(x0) : int(np.ceil(x1))].astype(int)
            face = background(image, {"plot_box": [0, 0, image.shape[1], image.shape[0]]})
            ink = np.abs(crop - face).max(axis=2) > 80
            assert ink.sum() >= 4, (library, index, label)


def test_every_library_writes_byte_identical_files(tmp_path):
    """Each library's charts, drawn twice in one process: the same bytes (fonts, sizes and PNG
    metadata fixed), and their sidecars name the library that drew them."""
    cfg = charts(count=10, libraries={name: 1.0 / len(LIBRARIES) for name in LIBRARIES})
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        generate(cfg, tmp_path / name)
    a, b = files(tmp_path / "a"), files(tmp_path / "b")
    assert a == b
    drawn = {json.loads(a[f"chart_{i:05d}.json"])["library"] for i in range(10)}
    assert drawn == set(LIBRARIES)


# Draws each (folder, data.charts block, workers) with `generate`, in order, in one fresh
# interpreter.
DRAW = """
import json, sys
from pathlib import Path
from linefuse.data.charts import generate
from linefuse.params.data import ChartParams
for folder, block, workers in json.loads(sys.argv[1]):
    generate(ChartParams(**block), Path(folder), workers=workers)
"""
# A user's matplotlibrc: rcParams that plotnine's themes leave unset, and another font
USER_RC = """lines.solid_capstyle: round
lines.dash_capstyle: round
path.snap: False
path.simplify_threshold: 0.5
text.antialiased: False
text.hinting: none
font.family: serif
font.size: 16
"""


@pytest.mark.slow  # four fresh interpreters draw whole charts
def test_a_chart_does_not_depend_on_what_its_process_drew_before(tmp_path):
    """Each chart's bytes (PNG and sidecar) are its own: matplotlib's charts drawn alone in a
    fresh process, before or after plotnine's and Vega-Lite's, and under a user's matplotlibrc,
    are the same files; so are the other libraries' charts, drawn first or last. Charts 1, 3 and
    4 are among those once thought to differ after plotnine (docs/experiments.md)."""
    blocks = {
        "matplotlib": charts(count=5, libraries={"matplotlib": 1.0}),
        "others": charts(count=4, libraries={"plotnine": 0.5, "vegalite": 0.5}),
    }
    (tmp_path / "matplotlibrc").write_text(USER_RC)
    runs = {
        "alone": (["matplotlib"], {}),
        "matplotlib_first": (["matplotlib", "others"], {}),
        "matplotlib_last": (["others", "matplotlib"], {}),
        "user_rc": (["others", "matplotlib"], {"MATPLOTLIBRC": str(tmp_path / "matplotlibrc")}),
    }
    for run, (order, env) in runs.items():
        jobs = []
        for name in order:
            (tmp_path / run / name).mkdir(parents=True)
            jobs.append((str(tmp_path / run / name), blocks[name].model_dump(mode="json"), 1))
        subprocess.run(
            [sys.executable, "-c", DRAW, json.dumps(jobs)], env=os.environ | env, check=True
        )
    for name in blocks:
        drawn = {run: files(tmp_path / run / name) for run in runs if name in runs[run][0]}
        one = next(iter(drawn.values()))
        assert len(one) == 3 * blocks[name].count
        for run, written in drawn.items():
            assert written.keys() == one.keys(), run
            differ = sorted(key for key in one if written[key] != one[key])
            assert not differ, (name, run, differ)
    sidecars = files(tmp_path / "alone" / "matplotlib") | files(tmp_path / "user_rc" / "others")
    drew = {json.loads(data)["library"] for key, data in sidecars.items() if key.endswith("json")}
    assert drew == {"matplotlib", "plotnine", "vegalite"}


@pytest.mark.slow  # a fresh interpreter and its workers draw whole charts
def test_workers_draw_in_a_process_that_has_drawn_a_vega_lite_chart(tmp_path):
    """generate on 2 workers after the process drew Vega-Lite charts itself: workers forked from
    it would wait forever on vl-convert's runtime (a fork does not copy its thread), so they
    start from a fresh interpreter, and draw the same bytes as one worker."""
    block = charts(count=4, libraries={"plotnine": 0.5, "vegalite": 0.5}).model_dump(mode="json")
    jobs = [(str(tmp_path / name), block, workers) for name, workers in (("one", 1), ("two", 2))]
    for folder, _, _ in jobs:
        Path(folder).mkdir()
    subprocess.run([sys.executable, "-c", DRAW, json.dumps(jobs)], check=True, timeout=300)
    one = files(tmp_path / "one")
    assert one == files(tmp_path / "two")
    drew = {json.loads(one[f"chart_{i:05d}.json"])["library"] for i in range(4)}
    assert drew == {"plotnine", "vegalite"}


@pytest.mark.slow  # draws a whole chart
def test_a_process_forked_after_vega_lite_drew_says_it_cannot_draw_it():
    """Where a pool still forks (the label reader's patches, the base's score set), a worker
    forked after its parent drew a Vega-Lite chart stops with one line, not waiting forever."""
    cfg = charts(count=2, libraries={"vegalite": 1.0}, held_out=["magazine"])
    draw_chart(cfg, 0)
    with get_context("fork").Pool(1) as pool:
        with pytest.raises(RuntimeError, match="which this one was forked from"):
            pool.apply_async(draw_chart, (cfg, 1)).get(timeout=120)


# Lets-Plot's chart in a fresh process, and the fontconfig set-up it drew with
FONTCONFIG_SET_UP = """
import json, os, sys
from linefuse.data.charts import draw_chart
from linefuse.params.data import ChartParams
image, _, sidecar = draw_chart(ChartParams.model_validate(json.loads(sys.argv[1])), 0)
boxes = [label["box"] for label in sidecar["tick_labels"]]
ink = [int((image[int(y0):int(y1) + 1, int(x0):int(x1) + 1] < 175).any(axis=2).sum())
       for x0, y0, x1, y1 in boxes]
print(json.dumps({"config": os.environ.get("FONTCONFIG_FILE"), "ink": ink}))
"""


@pytest.mark.slow  # a fresh interpreter draws a whole chart
def test_lets_plot_draws_its_labels_with_matplotlibs_fonts(tmp_path):
    """Without FONTCONFIG_FILE, the Lets-Plot drawer points its fontconfig at matplotlib's
    bundled fonts (it reads no system config, and fails on a machine with no fonts in the
    default folders), and the chart's tick labels are drawn with them."""
    block = one_library("letsplot").model_dump(mode="json")
    env = {k: v for k, v in os.environ.items() if k != "FONTCONFIG_FILE"}
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", FONTCONFIG_SET_UP, json.dumps(block)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    found = json.loads(done.stdout.splitlines()[-1])
    config = Path(found["config"])
    assert config.parent.parent == tmp_path  # the drawer's own config, in the process's TMPDIR
    fonts = Path(config.read_text().split("<dir>")[1].split("</dir>")[0])
    assert (fonts / "DejaVuSans.ttf").is_file()
    assert len(found["ink"]) >= 4 and min(found["ink"]) >= 4, found["ink"]


def test_libraries_draw_their_shares_each_in_its_themes():
    cfg = charts()
    plans = [plan_chart(cfg, index) for index in range(300)]
    counts = Counter(plan.library for plan in plans)
    for library, share in cfg.libraries.items():
        assert abs(counts[library] / 300 - share) < 0.07, counts
    themes = {plan.style for plan in plans if plan.library == "plotnine"}
    assert themes == {"grey", "bw", "minimal", "classic", "light", "dark"}
    # the bank draws base.libraries in equal shares, each in every one of its themes, and never
    # the held-out library nor plotnine, the look the curriculum adapts the base to
    params = parse_params(yaml.safe_load((ROOT / "params.yaml").read_text()))
    bank = [plan_chart(base_chart_params(params), i) for i in range(300)]
    counts = Counter(plan.library for plan in bank)
    assert set(counts) == set(params.base.libraries) and len(counts) >= 3, counts
    assert not set(counts) & {"plotnine", *params.data.charts.held_out}
    for library in counts:
        assert abs(counts[library] / 300 - 1 / len(counts)) < 0.07, counts
        if library != "matplotlib":
            themes = {plan.style for plan in bank if plan.library == library}
            assert themes == set(library_themes(library)), library


def test_a_window_is_scored_on_every_library_the_held_out_one_measured():
    """The drawn-unlike set a new base must not lose on (base-land) draws the default libraries
    with its own seed: the held-out renderer it never trains on is measured there as the others
    are, and reported beside the verdict (tests/base/test_window.py: never part of it)."""
    params = parse_params(yaml.safe_load((ROOT / "params.yaml").read_text()))
    drawn = drawn_chart_params(params)
    assert drawn.seed == params.base.window.drawn_seed != params.data.charts.seed
    count = params.base.window.drawn_charts
    libraries = {plan_chart(drawn, i).library for i in range(count)}
    assert libraries == set(params.data.charts.libraries)
    assert set(params.data.charts.held_out) & libraries


def test_the_held_out_library_reaches_no_training_path(trained_project):
    """The default's held-out library is drawn (its charts exist) but every one of its charts is
    in the held_out split: none is in a shard's train or val split, an embedding, or the bank."""
    params = parse_params(tiny_params())
    held = set(params.data.charts.held_out) & set(LIBRARIES)
    assert held == {"vegalite"}
    index = pl.read_parquet(trained_project / "data/index/images.parquet")
    drawn = index.filter(pl.col("library").is_in(list(held)))
    assert drawn.height > 0 and set(drawn["split"]) == {"held_out"}
    held_ids = set(drawn["id"])
    trained_ids = set(index.filter(pl.col("split").is_in(["train", "val"]))["id"])
    assert trained_ids and not trained_ids & held_ids
    for level in LEVELS:
        manifest = pl.read_parquet(trained_project / "data/shards" / level / SHARD_MANIFEST)
        trained = manifest.filter(pl.col("split").is_in(["train", "val"]))
        ids = {key.split("_")[0] for key in trained["key"]}
        assert ids and ids <= trained_ids and not ids & held_ids
        embedded = json.loads(
            (trained_project / "data/embeddings" / level / EMBEDDINGS_MANIFEST).read_text()
        )
        keys = [key for split in embedded["splits"].values() for key in split["keys"]]
        assert keys and not {key.split("_")[0] for key in keys} & held_ids
    bank = base_chart_params(params)
    assert not set(bank.libraries) & held
    assert not {plan_chart(bank, i).library for i in range(200)} & held


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda raw: raw["base"].update(libraries=["matplotlib", "vegalite"]),
            "params.yaml: base.libraries: 'vegalite' is held out (data.charts.held_out): "
            "the base must never see it",
        ),
        (
            lambda raw: raw["data"]["charts"].update(libraries={"matplotlib": 0.5, "excel": 0.5}),
            "params.yaml: data.charts.libraries: 'excel' is not a library LineFuse draws with; "
            "accepts matplotlib, plotnine, vegalite",
        ),
        (
            lambda raw: raw["data"]["charts"].update(libraries={"matplotlib": 0.5}),
            "params.yaml: data.charts.libraries: the shares must sum to 1, got 0.5",
        ),
        (
            lambda raw: raw["data"]["charts"].update(held_out=["gnuplot"]),
            "params.yaml: data.charts.held_out: 'gnuplot' is neither a family",
        ),
        (
            lambda raw: raw["data"]["charts"].update(
                held_out=["matplotlib"], libraries={"matplotlib": 1.0}
            ),
            "params.yaml: data.charts.held_out: holds out every library",
        ),
    ],
)
def test_a_bad_library_role_is_one_line_naming_its_key(mutate, message):
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    mutate(raw)
    with pytest.raises(ParamsError) as error:
        parse_params(raw)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
