"""The default data set: matplotlib charts, reproducible byte for byte, whose sidecar maps every
pixel to data exactly, varied in style, with a fixed share of held-out style families."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections import Counter
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image
from scipy.spatial import cKDTree

from linefuse.data.charts import base_chart_params, draw_chart, generate, plan_chart
from linefuse.data.charts.facts import bundled_file
from linefuse.data.charts.plan import (
    X_OFFSET_UNITS,
    chart_rng,
    choose_style,
    family_weights,
    plan_axes,
)
from linefuse.data.charts.registry import render_plan
from linefuse.data.images import find_images
from linefuse.digitize.calibrate import parse
from linefuse.digitize.curves import _furniture_mask, on_axis, read_truth
from linefuse.params import ParamsError
from linefuse.params.data import AXIS_KNOBS, ChartParams
from linefuse.params.full import load_params, parse_params

from conftest import ROOT, tiny_params

SIDECAR_KEYS = {
    "family",
    "style",
    "font",
    "width",
    "height",
    "dpi",
    "plot_box",
    "xlim",
    "ylim",
    "axes",
}
# The tests of matplotlib's drawer (its style sheets, panels and rcParams) draw with it alone:
# params.yaml's charts mix in plotnine and Vega-Lite (tests/data/test_libraries.py tests those)
MATPLOTLIB = {"matplotlib": 1.0}


def charts(**overrides) -> ChartParams:
    """params.yaml's data.charts block with overrides (its own sizes: about 200-360 px wide)."""
    base = load_params(ROOT / "params.yaml").data.charts.model_dump()
    return ChartParams(**(base | overrides))


def small(**overrides) -> ChartParams:
    """The suite's tiny charts (96 x 64 px, conftest.tiny_params), so the tests stay fast."""
    tiny = tiny_params()["data"]["charts"]
    return charts(
        **(
            {key: tiny[key] for key in ("width_in", "height_in", "dpi", "font_pt")}
            | {"count": 4, "points": 128}
            | overrides
        )
    )


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def to_pixels(table: np.ndarray, sidecar: dict, column: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) image coordinates (x right, y down, pixel edges at integers) of a series' points,
    on the sidecar's axes (a descending x's limits run high to low; a log y maps log10)."""
    left, top, right, bottom = sidecar["plot_box"]
    (x0, x1), (y0, y1) = sidecar["xlim"], on_axis(sidecar, "y", sidecar["ylim"])
    x = left + (table[:, 0] - x0) / (x1 - x0) * (right - left)
    y = bottom - (on_axis(sidecar, "y", table[:, column]) - y0) / (y1 - y0) * (bottom - top)
    return x, y


def background(image: np.ndarray, sidecar: dict) -> np.ndarray:
    """The commonest colour inside the plot box: the axes' face."""
    left, top, right, bottom = (round(v) for v in sidecar["plot_box"])
    inside = image[top + 2 : bottom - 2, left + 2 : right - 2].reshape(-1, 3)
    colours, counts = np.unique(inside, axis=0, return_counts=True)
    return colours[counts.argmax()].astype(int)


def test_two_runs_are_byte_identical(tmp_path):
    cfg = small()
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        assert generate(cfg, tmp_path / name) == cfg.count
    a, b = files(tmp_path / "a"), files(tmp_path / "b")
    assert sorted(a) == [f"chart_{i:05d}.{ext}" for i in range(4) for ext in ("csv", "json", "png")]
    assert a == b


# sha256 of what `generate` writes for the first 12 charts of params.yaml's data.charts drawn by
# matplotlib alone: the default data as of commit 13c4bec (the sidecars since name their library
# and their axes' direction and scale). A new chart knob, off, must leave it unchanged (the axis
# knobs are switched off here); so must the other libraries' draws.
# held_out_fraction stays 13c4bec's 0.15: the default's 0.1 (issue 55) weighs the families
# otherwise, and charts 1, 3, 4 and 9 then draw another style sheet.
DEFAULT_DATA_SHA256 = {
    "chart_00000.csv": "bafec1ca743e216de233c262a3040e5ab66711de2d47a94c97c42c7964c1180c",
    "chart_00000.json": "d170c368058137c6a9a9c83b8a381173f1b8cfc00982aed60c8091b3bfb7f3f6",
    "chart_00000.png": "8cab45f5f3abd1a31c1aa293d4dff9dd2f399c95a296fc8f31be4d140cfcdfdb",
    "chart_00001.csv": "89b051f65c8b170118ce8ef2fcb894c256a00c92fe0751e0b41b7bb659e7e363",
    "chart_00001.json": "58fb4d5b79affb59cb27d8ac62961d38be8d4fe7fa4f9f22f0f5e6dedfa1788d",
    "chart_00001.png": "fdb50328050b201651607de8f65f653fdfb1c00c9a2ca28ccc282acd23beadca",
    "chart_00002.csv": "15d4e73db32d162a55eae2268bb1eb0b1b40c3529fd1b48c1c916f7e0fe607b1",
    "chart_00002.json": "54ab365bdd8bc4c6877a56a4447b70408112ac512a28dc1d04f73ae9574afff3",
    "chart_00002.png": "37451f345d5cf3a92355a0e11ccd647783b358500f86ca4d2b2978d4bba8e08f",
    "chart_00003.csv": "f9cb5a71d552b7ad11f3a08e45c710cad2773563f65092b335f30f742ddad235",
    "chart_00003.json": "2873d4f6d4a4d204cf22419ee00521e3de4aa45b428366187075725e55a4bc58",
    "chart_00003.png": "f785cb6f0acde7bfec1b3ce8b17f76cddfab102444f5e693a13f857bea8d3a62",
    "chart_00004.csv": "e75d069eadfef7ef13ad82e9e9bee13874a2105138a38e787d3f91862f9667c3",
    "chart_00004.json": "f1c99c696cc3e7dbf39098384fa3588e667d5c58f91007c5d203b12ea6da2832",
    "chart_00004.png": "1ebdd097b60c176cbdd601a8c0c5893158209e25c35b6efc8123b5c604218720",
    "chart_00005.csv": "a33e0556858306d911922dd9c319d418422ef79de2645de28a035c118b1cc910",
    "chart_00005.json": "58daa5070a956358ba408a10ba71045e5ea6021fe4dfddaccc9fc2be17897dd5",
    "chart_00005.png": "50895c202e95c055a3a231423a16ab5964710408a37cdd024c46ef13215b7468",
    "chart_00006.csv": "10415016247b52b87148a3e75bef744e9c96de7c4e5dd5809e4778a217dd2d32",
    "chart_00006.json": "b74031feaed4ec30d0208c9863d5669f825b87249a9fa9c8d5366748bc7091c0",
    "chart_00006.png": "b9bb923a91997432ddbda6bea2c366c5ecddb5b935b1aa0e47a7e10d9f284427",
    "chart_00007.csv": "7f0c7fe68496c1d59081f819a424fddaef4bb36420a7fa27f6beacdcd3c3523e",
    "chart_00007.json": "b9081874539019c8642c750b2d92b729154207d56db7378211dcfdfa66bcbc77",
    "chart_00007.png": "cbb90c1470e007dc1a0f3377514944d2a8a923d12d7043093d78bcc9d1dc4cd9",
    "chart_00008.csv": "3cec3807441a41381e5ad49bd165228ea7f12e5419f77e357975db738f8de8b0",
    "chart_00008.json": "adba43b20db8c05e0014c767beadc306e1a472c5c89dedc5499539d22e594ed3",
    "chart_00008.png": "8441de78777ed8ac7bf244d94acae5ac9b303914b3812ce73eb090ff5be7aa94",
    "chart_00009.csv": "aa463e875542d10e59e27a89d212440e00e2c6a976dd16b9f25dda26e53c347b",
    "chart_00009.json": "a71ae91f9c54dae1cc01570d34e57a3a31d170784322331cb43943225f7db8ac",
    "chart_00009.png": "91fa9d30c5d661e1f48ed6fa1294d7fd36f5611068542798a1b23bb8e8cdd5f3",
    "chart_00010.csv": "f6ec56428fbc0b39652cce79c3e9b1559c6264cce710fdde80e2db24b76b466e",
    "chart_00010.json": "4ddaa8cc4bbaea7ba52424b4e80770bef5e9ff3afa1ed67bab621a08ab7a2b91",
    "chart_00010.png": "776e426e794e44bab1bf2f285d7c740ba998da33b870695f8711d54841630b71",
    "chart_00011.csv": "aae43bb3170d28911365b883188ce655b72cbcefa8c9a88cc3f78e9cb5cb4280",
    "chart_00011.json": "051491713ed7f15f8674b8b7810f1312dd4dcd2b18c823eabd6b9582717fa395",
    "chart_00011.png": "c2c9b501fc0c767738c2bdf66f762ae6ea04a3f25cc50a6dfb63311331945c0d",
}


def test_default_data_is_unchanged(tmp_path):
    axes_off = dict.fromkeys(AXIS_KNOBS, 0.0)
    generate(
        charts(count=12, libraries={"matplotlib": 1.0}, held_out_fraction=0.15, **axes_off),
        tmp_path,
    )
    written = {name: hashlib.sha256(data).hexdigest() for name, data in files(tmp_path).items()}
    assert written == DEFAULT_DATA_SHA256


# sha256 of what `generate` writes for the first 9 charts of params.yaml's data.charts as it is:
# the default data `make repro` draws, matplotlib's, plotnine's and Vega-Lite's charts among them
# (charts 2, 5 and 6 with a descending x, 2 with a log y, 5 and 6 with an offset y). A change to
# any library's drawing, the plan or the sidecars shows here first.
DEFAULT_THREE_LIBRARY_SHA256 = {
    "chart_00000.csv": "bafec1ca743e216de233c262a3040e5ab66711de2d47a94c97c42c7964c1180c",
    "chart_00000.json": "d170c368058137c6a9a9c83b8a381173f1b8cfc00982aed60c8091b3bfb7f3f6",
    "chart_00000.png": "8cab45f5f3abd1a31c1aa293d4dff9dd2f399c95a296fc8f31be4d140cfcdfdb",
    "chart_00001.csv": "89b051f65c8b170118ce8ef2fcb894c256a00c92fe0751e0b41b7bb659e7e363",
    "chart_00001.json": "473bcb961b619218cf12ca3251ccaac8dc8e402ae77788d5ef080f8a3669b977",
    "chart_00001.png": "2e89b15453578d3fb81c3f2d983f26e4763491b92847f5812b72c5bdcac9e6bb",
    "chart_00002.csv": "d02204e2e29a807229db82efde1111e7c8d1308696703e331f42dd8f474052ea",
    "chart_00002.json": "77b271048dc8d16e6b73272b0c61f3fb400ea440b9bba8763a53d85a8dc32629",
    "chart_00002.png": "d0590f0a8be15561ec082c2e072763b52113e1c7ffa1c92642c3f97242946896",
    "chart_00003.csv": "f9cb5a71d552b7ad11f3a08e45c710cad2773563f65092b335f30f742ddad235",
    "chart_00003.json": "91c4dcc0c6dd2f465c256aa976e0a10606cd9413a1f20052baaeb948e44064f2",
    "chart_00003.png": "08fec4eca71c8b2bcd13cd1df838f1005ac37474ac990f0122dccdf4532144bb",
    "chart_00004.csv": "e75d069eadfef7ef13ad82e9e9bee13874a2105138a38e787d3f91862f9667c3",
    "chart_00004.json": "125d69ebbe3e9c46c837cccba413d4d0f25e308734d8f0c50385b27f8fb468c0",
    "chart_00004.png": "52ee4aa80afd800443fd71d3800a75ac207443f543666924dce9b31eda8f32d4",
    "chart_00005.csv": "c4e2d1891ac3afb778cd343f38f61e748316948f31ae92caa19ae2f9308fcb8e",
    "chart_00005.json": "dc2912caab593b3c9e0583171509b580211e8210b15de8e06c38f461349e9a4b",
    "chart_00005.png": "098392cded2bf8ddf4edf3956d3f84ca75d0db7f574030bdbcfce51f8164c76c",
    "chart_00006.csv": "b518e80ee67faa3eab75c6356df306b505b0b11ed7a9e17c5915689e40f95877",
    "chart_00006.json": "2e8a97393d78b1e7f6ce0578bfa486351cf4ed7a596a6975724887744cf3a660",
    "chart_00006.png": "a5c7cc7124fadca0037a4e1769bde7f2a763e1efbd1efa376ce34a0e50a9f047",
    "chart_00007.csv": "7f0c7fe68496c1d59081f819a424fddaef4bb36420a7fa27f6beacdcd3c3523e",
    "chart_00007.json": "b9081874539019c8642c750b2d92b729154207d56db7378211dcfdfa66bcbc77",
    "chart_00007.png": "cbb90c1470e007dc1a0f3377514944d2a8a923d12d7043093d78bcc9d1dc4cd9",
    "chart_00008.csv": "3cec3807441a41381e5ad49bd165228ea7f12e5419f77e357975db738f8de8b0",
    "chart_00008.json": "aaafcf1c05f7a7f056a851392d83b0d04b1a9c328c4085a28c6b3a441e3b3796",
    "chart_00008.png": "bee4cacf93a81ec3b06416a99328d35140a27e27432c9eb0842224b6040629cb",
}


@pytest.mark.slow  # Vega-Lite and plotnine start up: seconds
def test_default_three_library_data_is_unchanged(tmp_path):
    generate(charts(count=9), tmp_path)
    written = {name: hashlib.sha256(data).hexdigest() for name, data in files(tmp_path).items()}
    libraries = {
        json.loads(data)["library"]
        for name, data in files(tmp_path).items()
        if name.endswith(".json")
    }
    assert libraries == set(charts().libraries)  # every library the default data draws
    assert written == DEFAULT_THREE_LIBRARY_SHA256


def test_worker_count_does_not_change_output(tmp_path):
    cfg = small(count=5, title_prob=1.0, annotate_prob=1.0)  # text goes through both paths too
    for name, workers in (("one", 1), ("two", 2)):
        (tmp_path / name).mkdir()
        assert generate(cfg, tmp_path / name, workers=workers) == 5
    assert files(tmp_path / "one") == files(tmp_path / "two")


def test_chart_does_not_depend_on_count(tmp_path):
    (tmp_path / "few").mkdir()
    (tmp_path / "more").mkdir()
    generate(small(count=2), tmp_path / "few")
    generate(small(count=5), tmp_path / "more")
    few, more = files(tmp_path / "few"), files(tmp_path / "more")
    assert few == {name: more[name] for name in few}


def test_seed_changes_the_data():
    tables = [plan_chart(small(seed=seed), 0).table for seed in (0, 1)]
    assert tables[0].shape != tables[1].shape or not np.array_equal(*tables)


def test_png_csv_and_sidecar_agree(tmp_path):
    cfg = small(count=6, libraries=MATPLOTLIB)
    generate(cfg, tmp_path)
    headers = set()
    for index in range(cfg.count):
        stem = tmp_path / f"chart_{index:05d}"
        sidecar = json.loads(stem.with_suffix(".json").read_text())
        text = stem.with_suffix(".json").read_text()
        assert text == json.dumps(sidecar, sort_keys=True) + "\n"  # sorted, one line
        assert set(sidecar) == SIDECAR_KEYS | {"library", "series", "furniture", "tick_labels"}
        with Image.open(stem.with_suffix(".png")) as image:
            assert image.mode == "RGB" and image.info.keys() <= {"dpi"}  # no Software, no dates
            pixels = np.asarray(image)
        assert pixels.dtype == np.uint8
        assert pixels.shape == (sidecar["height"], sidecar["width"], 3) == (64, 96, 3)
        left, top, right, bottom = sidecar["plot_box"]
        assert 0 <= left < right <= sidecar["width"] and 0 <= top < bottom <= sidecar["height"]
        assert sidecar["family"] in cfg.families
        assert sidecar["style"] in cfg.families[sidecar["family"]]

        lines = stem.with_suffix(".csv").read_text().splitlines()
        columns = [s["column"] for s in sidecar["series"]]
        assert lines[0] == ",".join(["wavelength", *columns])
        assert columns == (
            ["intensity"] if len(columns) == 1 else [f"intensity_{k}" for k in range(len(columns))]
        )
        headers.add(lines[0])
        table = np.loadtxt(stem.with_suffix(".csv"), delimiter=",", skiprows=1, ndmin=2)
        assert table.shape == (cfg.points, 1 + len(columns)) and np.isfinite(table).all()
        assert np.all(np.diff(table[:, 0]) > 0)
        for series in sidecar["series"]:
            assert len(series["color"]) == 3 and all(0 <= c <= 255 for c in series["color"])
            assert series["linewidth_px"] > 0 and series["linestyle"] in ("-", "--", ":", "-.")
        # what draw_chart returns in memory is what generate wrote
        image, drawn, again = draw_chart(cfg, index)
        assert np.array_equal(image, pixels) and np.allclose(drawn, table) and again == sidecar
    assert len(headers) > 1  # one and several series among six charts


def test_find_images_skips_the_tables_and_sidecars(tmp_path):
    generate(small(count=2), tmp_path)
    assert [p.name for p in find_images(tmp_path)] == ["chart_00000.png", "chart_00001.png"]


def test_sidecar_maps_every_point_of_the_main_series_onto_its_ink():
    """Default sizes and styles (grids, tints, markers, several series): each CSV point of the
    main series, mapped through the sidecar, lands on ink (within a pixel)."""
    cfg = charts(dash_prob=0.0, legend_prob=0.0, annotate_prob=0.0)  # nothing hides the line
    styles = set()
    for index in range(8):
        image, table, sidecar = draw_chart(cfg, index)
        styles.add(sidecar["style"])
        face = background(image, sidecar)
        x, y = to_pixels(table, sidecar)
        inked = np.abs(image.astype(int) - face).sum(axis=2) > 40
        rows, cols = np.floor(y).astype(int), np.floor(x).astype(int)
        near = np.zeros(len(x), bool)
        for dr in (-1, 0, 1):
            for dc in (-1, 0, 1):
                r = np.clip(rows + dr, 0, image.shape[0] - 1)
                c = np.clip(cols + dc, 0, image.shape[1] - 1)
                near |= inked[r, c]
        assert near.all(), (index, sidecar["style"], np.flatnonzero(~near)[:10])
    assert len(styles) >= 4


def _ink_distance(image, table, sidecar, dx: float = 0.0, dy: float = 0.0):
    """(ink-weighted mean, max) distance in px from the plot's ink to the mapped polyline."""
    left, top, right, bottom = sidecar["plot_box"]
    darkness = np.abs(image.astype(int) - background(image, sidecar)).sum(axis=2)
    r0, r1 = int(np.ceil(top)) + 3, int(bottom) - 3  # inside the spines
    c0, c1 = int(np.ceil(left)) + 3, int(right) - 3
    rows, cols = np.nonzero(darkness[r0:r1, c0:c1] > 30)
    weight = darkness[r0:r1, c0:c1][rows, cols]
    x, y = to_pixels(table, sidecar)
    t = np.linspace(0, len(x) - 1, 20 * len(x))  # the straight segments between the points
    line = np.column_stack([np.interp(t, np.arange(len(x)), x), np.interp(t, np.arange(len(y)), y)])
    centres = np.column_stack([cols + c0 + 0.5, rows + r0 + 0.5])
    distance, _ = cKDTree(line + (dx, dy)).query(centres)
    return (distance * weight).sum() / weight.sum(), distance.max()


def test_every_inked_pixel_lies_on_the_mapped_curve_to_a_fraction_of_a_pixel():
    """One plain series (no grid, ticks outside, no legend): every inked pixel inside the plot is
    within half the line width plus antialiasing of the polyline the sidecar maps the CSV to, and
    the mapping fits the ink better than the same one shifted half a pixel either way."""
    cfg = charts(
        libraries=MATPLOTLIB,
        families={"plain": ["default", "seaborn-v0_8-white"], "ticks": ["seaborn-v0_8-ticks"]},
        held_out=[],
        series=(1, 1),
        grid_toggle_prob=0.0,
        tick_prob=0.0,
        marker_prob=0.0,
        dash_prob=0.0,
        annotate_prob=0.0,
        line_width_pt=(0.8, 0.8),
        points=256,
    )
    for index in range(4):
        image, table, sidecar = draw_chart(cfg, index)
        mean, furthest = _ink_distance(image, table, sidecar)
        assert furthest < sidecar["series"][0]["linewidth_px"] / 2 + 1.2, (index, furthest)
        for shift in ((0.5, 0), (-0.5, 0), (0, 0.5), (0, -0.5)):
            assert mean < _ink_distance(image, table, sidecar, *shift)[0], (index, shift)


def test_plot_box_is_the_drawn_axes():
    """Paint the axes pure green without spines: the green area is the sidecar's plot box."""
    cfg = charts(grid_toggle_prob=0.0, tint_prob=0.0)
    for index in (0, 5):
        plan = plan_chart(cfg, index)
        plan = dataclasses.replace(
            plan,
            axes_color=(0.0, 1.0, 0.0),
            grid_flip=False,
            ticks=("out", 0.0),  # nothing drawn inside the box but the (green) lines
            legend=None,
            annotate=False,
            extra={"axes.linewidth": 0.0, "axes.grid": False},
            series=tuple(dataclasses.replace(s, color=(0.0, 1.0, 0.0)) for s in plan.series),
        )
        image, sidecar = render_plan(plan)
        green = (image == (0, 255, 0)).all(axis=2)
        rows, cols = np.nonzero(green)
        left, top, right, bottom = sidecar["plot_box"]
        assert abs(cols.min() - left) <= 1 and abs(cols.max() + 1 - right) <= 1, sidecar
        assert abs(rows.min() - top) <= 1 and abs(rows.max() + 1 - bottom) <= 1, sidecar
        # and it is the figure's only green: nothing else was painted with it
        assert green[int(np.ceil(top)) : int(bottom), int(np.ceil(left)) : int(right)].all()


def _labels_are_where_the_sidecar_says(plan, image: np.ndarray, sidecar: dict) -> None:
    """Every tick label's box lies inside the image; drawn again with the labels transparent (the
    layout unchanged), the pixels that differ lie in those boxes, and every box holds some."""
    labels = sidecar["tick_labels"]
    for label in labels:
        left, top, right, bottom = label["box"]
        assert 0 <= left < right <= sidecar["width"], label
        assert 0 <= top < bottom <= sidecar["height"], label
    hidden = {"xtick.labelcolor": "none", "ytick.labelcolor": "none"}
    bare, again = render_plan(dataclasses.replace(plan, extra=hidden))
    assert again["plot_box"] == sidecar["plot_box"]  # the same layout
    assert again.get("panels") == sidecar.get("panels")
    drawn = (image != bare).any(axis=2)
    inside = np.zeros_like(drawn)
    for label in labels:
        left, top, right, bottom = label["box"]
        box = (slice(math.floor(top), math.ceil(bottom)), slice(math.floor(left), math.ceil(right)))
        assert drawn[box].any(), label
        inside[box] = True
    assert not (drawn & ~inside).any(), np.argwhere(drawn & ~inside)[:5]


def test_sidecar_names_each_tick_label_as_drawn():
    """Each chart's sidecar lists its major tick labels on both axes: the text matplotlib drew
    (a number within the axis' limits) and a box inside the image that holds what it drew. No
    offset y: its "1e6", which the labels' colour paints too, is no tick label."""
    cfg = charts(libraries=MATPLOTLIB, offset_y_prob=0.0)
    for index in range(6):
        plan = plan_chart(cfg, index)
        image, sidecar = render_plan(plan)
        labels = sidecar["tick_labels"]
        assert {label["axis"] for label in labels} == {"x", "y"}, index
        for label in labels:
            value = parse(label["text"])  # 0.5, −2 and a log axis's $\mathdefault{10^{2}}$
            low, high = sorted(sidecar["xlim" if label["axis"] == "x" else "ylim"])
            assert low - 1e-9 <= value <= high + 1e-9, (index, label)
        _labels_are_where_the_sidecar_says(plan, image, sidecar)


def _beside(label: dict, box: list[float]) -> bool:
    """Whether a tick label is one of the panel `box`'s: an x label just below it, a y label
    just left of it (within 25 px, the tick and its padding)."""
    left, top, right, bottom = box
    x0, y0, x1, y1 = label["box"]
    if label["axis"] == "x":
        return left - 1 <= (x0 + x1) / 2 <= right + 1 and 0 <= y0 - bottom < 25
    return top - 1 <= (y0 + y1) / 2 <= bottom + 1 and 0 <= left - x1 < 25


def test_every_panel_of_a_multi_panel_chart_has_its_tick_labels():
    """Several panels (with the base's backgrounds and grid styles): `panels` holds each panel's
    plot box, the first being plot_box, side by side without overlap; tick_labels lists the
    labels of every panel (each panel's box has labels left of and below it), each where the
    sidecar says."""
    cfg = charts(
        libraries=MATPLOTLIB,
        multi_panel_prob=1.0,
        background_prob=0.5,
        grid_style_prob=0.5,
        width_in=[4.0, 5.0],
    )
    layouts = set()
    for index in range(4):
        plan = plan_chart(cfg, index)
        image, sidecar = render_plan(plan)
        layouts.add(plan.layout)
        boxes = sidecar["panels"]
        assert len(boxes) == plan.layout[0] * plan.layout[1] == 1 + len(plan.panels) > 1
        assert boxes[0] == sidecar["plot_box"]
        for k, (left, top, right, bottom) in enumerate(boxes):
            assert 0 <= left < right <= sidecar["width"] and 0 <= top < bottom <= sidecar["height"]
            for other in boxes[k + 1 :]:
                assert (
                    other[0] >= right or other[2] <= left or other[1] >= bottom or other[3] <= top
                )
            mine = {label["axis"] for label in sidecar["tick_labels"] if _beside(label, boxes[k])}
            assert mine == {"x", "y"}, (index, k)
        _labels_are_where_the_sidecar_says(plan, image, sidecar)
    assert len(layouts) >= 2


def test_furniture_covers_what_the_grid_and_legend_draw(tmp_path):
    """One chart drawn bare and with a grid, a framed legend and an annotation: the pixels these
    change inside the plot box lie under the sidecar's furniture (but for the arrow, which the
    reader leaves to the curve's continuity), and the furniture covers little else."""
    cfg = charts(libraries=MATPLOTLIB, tint_prob=0.0)
    for index in range(4):
        bare = dataclasses.replace(
            plan_chart(cfg, index),
            style="default",
            legend=None,
            annotate=False,
            grid_flip=False,
            extra={"axes.grid": False},
        )
        furnished = dataclasses.replace(
            bare, legend=("upper right", True), annotate=True, extra={"axes.grid": True}
        )
        (plain, plain_sidecar), (image, sidecar) = render_plan(bare), render_plan(furnished)
        assert sidecar["plot_box"] == plain_sidecar["plot_box"]
        assert len(sidecar["furniture"]["boxes"]) == 2  # the legend and the annotation's text
        png = tmp_path / f"chart_{index:05d}.png"
        Image.fromarray(image).save(png)
        png.with_suffix(".json").write_text(json.dumps(sidecar))
        header = ",".join(["wavelength"] + [s["column"] for s in sidecar["series"]])
        np.savetxt(png.with_suffix(".csv"), bare.table, delimiter=",", header=header, comments="")
        truth = read_truth(png)
        left, top, right, bottom = truth.plot_box
        rows = slice(math.ceil(top + 2), math.floor(bottom - 2))
        cols = slice(math.ceil(left + 2), math.floor(right - 2))
        covered = _furniture_mask(
            truth.boxes,
            list(truth.lines),
            np.arange(rows.start, rows.stop) + 0.5,
            np.arange(cols.start, cols.stop) + 0.5,
        )
        changed = np.abs(image[rows, cols].astype(int) - plain[rows, cols]).max(axis=2) > 40
        assert changed.sum() > 1000
        assert (changed & ~covered).mean() < 0.03 * changed.mean()  # all but the arrow
        assert covered.mean() < 0.4  # little else: the legend's box, covered whole, is most of it


def test_series_colours_differ_when_the_first_is_forced_black():
    """grayscale's colour cycle starts with black: a forced-black first series must not share it
    with the second, or only a dash pattern would tell the two apart."""
    cfg = charts(series=[3, 3], black_prob=1.0, colormap_prob=0.0)
    plan = dataclasses.replace(plan_chart(cfg, 0), style="grayscale")
    assert plan.series[0].color == (0.0, 0.0, 0.0) and plan.series[1].color is None
    _, sidecar = render_plan(plan)
    colours = np.array([s["color"] for s in sidecar["series"]])
    gaps = np.abs(colours[:, None] - colours[None]).max(axis=2)
    assert gaps[np.triu_indices(3, 1)].min() > 50  # grey levels (0-255) between any two series


def test_styles_vary():
    cfg = charts()
    plans = [plan_chart(cfg, index) for index in range(40)]
    assert len({p.family for p in plans}) >= 3 and len({p.style for p in plans}) >= 6
    assert {len(p.series) for p in plans} == {1, 2, 3}
    assert any(s.marker for p in plans for s in p.series)
    assert any(s.linestyle != "-" for p in plans for s in p.series)
    assert len({p.font for p in plans}) == len(cfg.fonts)
    assert len({(p.width, p.height) for p in plans}) > 30
    assert all(180 <= p.width <= 360 and 136 <= p.height <= 270 for p in plans)
    for flag in ("grid_flip", "minor_ticks", "despine", "title", "legend", "annotate", "ticks"):
        assert len({bool(getattr(p, flag)) for p in plans}) == 2, flag
    # the held-out family looks different: a tinted figure, where the others paint white
    faces = {}
    for p in plans:
        if p.family not in faces:
            image, _ = render_plan(p)
            faces[p.family] = tuple(image[0, 0])
    assert faces["magazine"] != (255, 255, 255)
    assert faces["plain"] == (255, 255, 255)


def test_fonts_are_matplotlibs_own_copies():
    import matplotlib

    data = Path(matplotlib.get_data_path()).resolve()
    for font in {*charts().fonts, *base_charts().fonts}:
        assert data in Path(bundled_file(font)).resolve().parents


def test_held_out_families_get_their_fraction():
    cfg = charts(held_out=["magazine"], held_out_fraction=0.2)
    weights = family_weights(cfg)
    assert weights["magazine"] == pytest.approx(0.2)
    assert [weights[f] for f in ("plain", "classic", "gridded")] == pytest.approx([0.8 / 3] * 3)
    drawn = Counter(choose_style(chart_rng(cfg, index), cfg)[0] for index in range(400))
    assert abs(drawn["magazine"] / 400 - 0.2) < 0.05
    for family in ("plain", "classic", "gridded"):
        assert abs(drawn[family] / 400 - 0.8 / 3) < 0.07
    # no family held out: every family alike
    even = family_weights(charts(held_out=[]))
    assert list(even.values()) == pytest.approx([0.25] * 4)


def test_size_px_draws_the_same_chart_at_another_size():
    cfg = charts()
    image, table, sidecar = draw_chart(cfg, 3, size_px=(192, 144))
    assert image.shape == (144, 192, 3) and (sidecar["width"], sidecar["height"]) == (192, 144)
    assert np.array_equal(table, draw_chart(cfg, 3)[1])


def _error(mutate) -> str:
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    mutate(raw["data"]["charts"])
    with pytest.raises(ParamsError) as error:
        parse_params(raw)
    return str(error.value)


@pytest.mark.parametrize(
    ("mutate", "start", "says"),
    [
        (
            lambda c: c["families"]["plain"].append("no-such-style"),
            "params.yaml: data.charts.families: family 'plain': unknown style sheet "
            "'no-such-style'; accepts default, ",
            "ggplot",
        ),
        (
            lambda c: c["families"]["classic"].append("ggplot"),
            "params.yaml: data.charts.families: style sheet 'ggplot' is in families",
            "one family",
        ),
        (
            lambda c: c.update(held_out=["nope"]),
            "params.yaml: data.charts.held_out: 'nope' is neither a family in "
            "data.charts.families nor a library",
            "plain, classic, gridded, magazine, matplotlib, plotnine, vegalite",
        ),
        (
            lambda c: c.update(held_out=["plain", "classic", "gridded", "magazine"]),
            "params.yaml: data.charts.held_out: holds out every family",
            "at least one",
        ),
        (
            lambda c: c.update(fonts=["Arial"]),
            "params.yaml: data.charts.fonts: 'Arial' is not a font shipped with matplotlib",
            "DejaVu Sans",
        ),
        (
            lambda c: c.update(fonts=["cmr10"]),
            "params.yaml: data.charts.fonts: 'cmr10' is not a font shipped with matplotlib that "
            "draws tick labels",
            "DejaVu Sans Mono",
        ),
        (
            lambda c: c.update(dpi=[100, 72]),
            "params.yaml: data.charts.dpi: range [100, 72] is empty",
            "low <= high",
        ),
    ],
)
def test_bad_chart_params_name_their_key(mutate, start, says):
    message = _error(mutate)
    assert message.startswith(start) and says in message and "\n" not in message


def test_crop_is_checked_against_the_smallest_chart():
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    smallest = round(raw["data"]["charts"]["height_in"][0] * raw["data"]["charts"]["dpi"][0])
    raw["shards"]["crop"] = smallest
    parse_params(raw)
    raw["shards"]["crop"] = smallest + 1
    with pytest.raises(ParamsError, match=f"shards.crop: .* accepts at most {smallest}$"):
        parse_params(raw)


def base_charts() -> ChartParams:
    return base_chart_params(load_params(ROOT / "params.yaml"))


def test_base_charts_cover_what_users_draw():
    """40 of the base's matplotlib charts (planned, not drawn) span the wider ranges of
    base.chart_overrides, panels and faces included (matplotlib's alone: the other libraries
    draw one panel in their own themes), and none is from a held-out family or style sheet."""
    cfg = base_charts().model_copy(update={"libraries": {"matplotlib": 1.0}})
    default = charts()
    plans = [plan_chart(cfg, index) for index in range(40)]
    dpis = [p.dpi for p in plans]
    assert min(dpis) < 80 and max(dpis) > 160
    long_sides = [max(p.width, p.height) for p in plans]
    assert max(long_sides) <= cfg.max_px == 1024 and sum(side >= 900 for side in long_sides) >= 3
    assert min(long_sides) < 360  # small figures still
    assert sum(p.layout != (1, 1) for p in plans) >= 6
    assert {p.layout for p in plans} >= {(1, 1), (2, 2)} and len({p.layout for p in plans}) >= 4
    assert len({p.font for p in plans}) > len(default.fonts)
    assert min(p.font_pt for p in plans) < default.font_pt[0]
    assert max(p.font_pt for p in plans) > default.font_pt[1] + 2
    assert max(p.line_width_pt for p in plans) > default.line_width_pt[1] + 0.5
    assert sum(p.background is not None for p in plans) >= 6
    assert sum(p.grid is not None for p in plans) >= 6
    marked = {s.marker for p in plans for s in p.series if s.marker}
    assert marked - set(default.markers)
    held = {style for name in default.held_out for style in default.families.get(name, [])}
    assert not held & {p.style for p in plans} and not set(default.held_out) & set(cfg.families)
    # a planned background is what the figure shows: its corner is no longer white
    p = next(p for p in plans if p.background is not None and p.background.figure is not None)
    image, _ = render_plan(p)
    assert tuple(image[0, 0]) != (255, 255, 255)


def test_a_big_multi_panel_chart_draws_whole():
    """The largest chart the base draws: 4 panels on its widest figure at a high dpi, lowered
    to fit max_px on the long side, with every panel's tick labels."""
    cfg = base_charts().model_copy(
        update={
            "multi_panel_prob": 1.0,
            "panels": (4, 4),
            "width_in": (7.0, 7.0),
            "libraries": {"matplotlib": 1.0},  # the library that draws panels
        }
    )
    # the first chart whose dpi max_px lowered (most are: a 2 x 2 grid here is 9.9 in wide)
    plan = next(p for p in map(partial(plan_chart, cfg), range(20)) if p.width == cfg.max_px)
    image, sidecar = render_plan(plan)
    assert image.shape == (plan.height, 1024, 3) and sidecar["dpi"] < 1024 / 9.8
    assert len(sidecar["panels"]) == 4 and plan.layout == (2, 2)
    for box in sidecar["panels"]:
        axes = {label["axis"] for label in sidecar["tick_labels"] if _beside(label, box)}
        assert axes == {"x", "y"}, box


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ({"dpi": [200, 60]}, "base.chart_overrides.dpi: range [200, 60] is empty"),
        ({"fonts": ["Arial"]}, "base.chart_overrides.fonts: 'Arial' is not a font shipped"),
        ({"black_prob": 0.9}, "base.chart_overrides.black_prob: black_prob + colormap_prob"),
        ({"dpis": [60, 200]}, "base.chart_overrides.dpis: is not a data.charts key; accepts"),
        ({"seed": 3}, "base.chart_overrides.seed: is fixed for the base"),
        ({"families": {"all": ["fivethirtyeight"]}}, "base.chart_overrides.families: is fixed"),
        ({"height_in": [0.5, 1.0]}, "base.crop: 64 px is larger than the smallest chart (30 px)"),
    ],
)
def test_bad_base_chart_overrides_name_their_key(override, says):
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["base"]["chart_overrides"] |= override
    with pytest.raises(ParamsError) as error:
        parse_params(raw, "params.yaml")
    message = str(error.value)
    assert message.startswith(f"params.yaml: {says}") and "\n" not in message, message


def test_an_offset_x_draws_hertz_and_leaves_every_other_axis_choice_as_it_was():
    """offset_x_prob draws an ascending x in hertz (the wavelength grid times 10^6 or 10^9,
    titled in Hz) from a generator of its own: every other axis choice of every chart is the
    one drawn without it, so the default data's charts stay as they were."""
    cfg = charts(descending_x_prob=0.3, log_y_prob=0.3, offset_y_prob=0.3)
    hertz = cfg.model_copy(update={"offset_x_prob": 1.0})
    for index in range(40):
        plain, drawn = plan_axes(cfg, index), plan_axes(hertz, index)
        assert plain.x_power == 0 and dataclasses.replace(drawn, x_power=0) == plain
        # every ascending x in hertz; a descending one keeps its wavenumbers
        assert drawn.x_power == 0 if plain.x_descending else drawn.x_power in X_OFFSET_UNITS
    index = next(i for i in range(40) if plan_axes(hertz, i).x_power)
    one = hertz.model_copy(update={"libraries": {"matplotlib": 1.0}})
    _, table, sidecar = draw_chart(one, index)
    power = plan_axes(one, index).x_power
    assert 380 * 10.0**power <= table[:, 0].min() and table[:, 0].max() <= 850 * 10.0**power
    assert 380 * 10.0**power <= min(sidecar["xlim"]) and max(sidecar["xlim"]) <= 850 * 10.0**power


def test_the_axis_knobs_draw_what_the_sidecar_says_and_the_base_keeps_its_recipe():
    """A chart drawn with a descending x and a log y says so in its sidecar, and its limits
    put each tick label where its value maps (left to right high to low; the y in log10);
    the base's charts keep the recipe chart-base was made with (the knobs off), and its
    overrides may not switch them on."""
    cfg = charts(count=1, libraries={"matplotlib": 1.0}, descending_x_prob=1.0, log_y_prob=1.0)
    _, table, sidecar = draw_chart(cfg, 0)
    assert sidecar["axes"] == {
        "x": {"direction": "descending", "scale": "linear"},
        "y": {"direction": "ascending", "scale": "log"},
    }
    (x_left, x_right), (y_bottom, y_top) = sidecar["xlim"], sidecar["ylim"]
    assert x_left > x_right and 400 <= table[:, 0].min() and table[:, 0].max() <= 4000
    assert np.log10(y_top / y_bottom) >= 2  # decades, as planned
    left, top, right, bottom = sidecar["plot_box"]
    for label in sidecar["tick_labels"]:
        box_left, box_top, box_right, box_bottom = label["box"]
        if label["axis"] == "x":
            value = float(label["text"].replace("\u2212", "-"))
            at = left + (value - x_left) / (x_right - x_left) * (right - left)
            assert abs((box_left + box_right) / 2 - at) < 2.0, label
        else:  # matplotlib's 10^n: $\mathdefault{10^{n}}$
            power = int(label["text"].split("{")[-1].rstrip("}$").replace("\u2212", "-"))
            share = (power - np.log10(y_bottom)) / np.log10(y_top / y_bottom)
            assert abs((box_top + box_bottom) / 2 - (bottom - share * (bottom - top))) < 2.0, label
    params = parse_params(tiny_params())
    assert all(getattr(base_chart_params(params), knob) == 0.0 for knob in AXIS_KNOBS)
    raw = tiny_params()
    raw["base"]["chart_overrides"] = {"log_y_prob": 0.5}
    with pytest.raises(ParamsError, match="base.chart_overrides.log_y_prob"):
        parse_params(raw)
