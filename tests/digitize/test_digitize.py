"""linefuse.digitize: charts read from their pixels alone, scored against their sidecars."""

from __future__ import annotations

import csv
import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import matplotlib
import numpy as np
import pytest
from PIL import Image

from linefuse.data.charts import draw_chart, write_chart
from linefuse.data.charts.plan import plan_axes
from linefuse.digitize import calibrate
from linefuse.digitize.axes import (
    Word,
    _labels_alone,
    _marks,
    _offset_word,
    _split_at_ticks,
    find_frame,
)
from linefuse.digitize.calibrate import GAMMAS, Tick, fit_axis, read_ticks
from linefuse.digitize.chart import Unreadable, digitize, digitize_many
from linefuse.digitize.label_onnx import read_labels
from linefuse.digitize.outputs import csv_text, digitize_files
from linefuse.digitize.score import score
from linefuse.digitize.sets import dev2_chart_params, dev_chart_params
from linefuse.params.full import load_params

from conftest import ROOT, figure_pixels, needs_tesseract, run_cli

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
CHARTS = sorted(FIXTURES.glob("chart_*.png"))  # sharp dev charts (test_sets.FIXTURE_NUMBERS)


def _pixels(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"))


@needs_tesseract
def test_generated_charts_are_calibrated_and_their_curves_read():
    """Each dev fixture (both dev libraries; ascending, descending and log axes) is read with
    the scale and direction its sidecar records, calibrated, its curves within 1.5 % of the y
    range (in decades on a log axis) and its series matched one to one (task-6b >= 0.9)."""
    results = digitize_many([_pixels(path) for path in CHARTS])
    libraries, kinds = set(), set()
    for path, result in zip(CHARTS, results, strict=True):
        assert not isinstance(result, Unreadable), f"{path.name}: {result}"
        scores = score(result, path)
        assert scores["calibrated"], (path.name, scores)
        assert scores["curve_error"] < 1.5, (path.name, scores)
        assert scores["line_score"] >= 0.9, (path.name, scores)
        sidecar = json.loads(path.with_suffix(".json").read_text())
        libraries.add(sidecar["library"])
        for name, axis in (("x", result.x_axis), ("y", result.y_axis)):
            drawn = sidecar["axes"][name]
            assert (axis.scale, axis.direction) == (drawn["scale"], drawn["direction"]), path.name
            kinds.add((name, axis.scale, axis.direction))
        assert 0.3 < result.confidence <= 1.0
    assert libraries == {"matplotlib", "plotnine"}  # the dev set's: the held-out one is not
    assert {("x", "linear", "descending"), ("y", "log", "ascending")} <= kinds


def test_every_tick_label_is_found_as_one_word():
    """In each dev fixture, every tick label its sidecar records is one word of the frame's,
    as wide as the label's ink at least (70 % of its drawn box), and no word is no label:
    plotnine's labels that touch their tick marks (1), 1-px decimal points (1.5 at 6 px: 1),
    matplotlib's tick marks standing off the box's edge (97), a 10^4 beside a rotated axis
    title (111) and a chart framed by no line whose spike is one (89)."""
    for path in CHARTS:
        frame = find_frame(_pixels(path))
        sidecar = json.loads(path.with_suffix(".json").read_text())
        for axis, words in (("x", frame.x_words), ("y", frame.y_words)):
            boxes = [label["box"] for label in sidecar["tick_labels"] if label["axis"] == axis]
            assert len(words) == len(boxes), (path.name, axis, [w.box for w in words])
            for left, top, right, bottom in boxes:
                inside = [
                    w
                    for w in words
                    if left - 1 <= w.centre[0] <= right + 1 and top - 1 <= w.centre[1] <= bottom + 1
                ]
                assert len(inside) == 1, (path.name, axis, (left, top, right, bottom))
                assert inside[0].box[2] - inside[0].box[0] >= 0.7 * (right - left), path.name


@needs_tesseract
def test_a_log_axis_is_fitted_as_log():
    x = np.linspace(400, 700, 200)
    y = 10 ** (1 + 2 * np.exp(-(((x - 550) / 40) ** 2)))

    def draw(ax):
        ax.semilogy(x, y, color="tab:blue")
        ax.set_ylim(10, 1000)
        ax.set_yticks([10, 100, 1000], ["10", "100", "1000"])
        ax.minorticks_off()

    result = digitize(figure_pixels(draw))
    assert result.y_axis.scale == "log"
    assert result.x_axis.scale == "linear"
    for tick in result.y_axis.used:
        assert result.y_axis.value(tick.position) == pytest.approx(tick.value, rel=0.02)
    (series,) = result.series
    # the peak, 10^3 at 550 nm, read within a few percent on the log axis
    assert series.y.max() == pytest.approx(1000, rel=0.1)
    assert series.x[series.y.argmax()] == pytest.approx(550, abs=5)


@needs_tesseract
def test_an_offset_text_tesseract_cannot_read_is_read_by_the_label_reader(monkeypatch):
    """matplotlib's 1e6 above a y axis in millions: its 1 is two pixels wide and its e a
    speck, and where Tesseract reads no multiplier there (7 or 16, on dev-recipe charts), the
    label reader's reading of the word gives it."""
    x = np.linspace(400, 700, 200)

    def draw(ax):
        ax.plot(x, 1e6 * (1 + 4 * np.exp(-(((x - 550) / 40) ** 2))), color="tab:blue")

    pixels = figure_pixels(draw)
    frame = find_frame(pixels)
    assert frame.y_offset is not None
    ((_, _, (_, multiplier)),) = read_ticks([(pixels, frame)])
    assert multiplier == 1e6
    tesseract = calibrate.read_pages

    def offset_unread(pages):  # each page's last lines are its offset text's (read_ticks)
        read = tesseract(pages)
        return [page[: -len(GAMMAS)] + [("7", 0.0)] * len(GAMMAS) for page in read]

    monkeypatch.setattr(calibrate, "read_pages", offset_unread)
    ((_, _, (_, multiplier)),) = read_ticks([(pixels, frame)])
    assert multiplier == 1e6


def test_the_shipped_reader_reads_matplotlibs_powers_of_ten():
    """matplotlib labels a log axis 10 with a superscript exponent, 2-3 px tall at 100 dpi:
    the label reader reads them as 10^n (the digitize reader's alphabet has the caret)."""
    x = np.linspace(400, 700, 200)

    def draw(ax):
        ax.semilogy(x, 10 ** (1 + 2 * np.exp(-(((x - 550) / 40) ** 2))), color="tab:blue")
        ax.set_ylim(10, 1000)
        ax.minorticks_off()

    pixels = figure_pixels(draw)
    boxes = np.array([word.box for word in find_frame(pixels).y_words], np.float32)
    assert sorted(read_labels(pixels, boxes)) == ["10^1", "10^2", "10^3"]


@needs_tesseract
def test_tesseracts_10_is_no_value_where_the_reader_reads_a_power():
    """Dev chart 75: 10^-1, 10^0 and 10^1 on a log y, which Tesseract reads as 107, 10 and 10
    (exponents missed). Where the label reader reads 10^n, Tesseract's 10 there is the base
    alone, no candidate: the axis is fitted to the powers, not to 10, 10, 10^7."""
    result = digitize(_pixels(FIXTURES / "chart_00075.png"))
    assert result.y_axis.scale == "log"
    assert sorted(t.value for t in result.y_axis.used) == pytest.approx([0.1, 1.0, 10.0])


def test_each_label_is_placed_between_its_centre_and_its_tick_mark():
    """A word's position is the mean of its centre and its tick mark's (snapped to a pixel by
    Agg: the value within half a pixel of the mark's column's left edge); at 100 dpi both
    matplotlib axes' labels land within 0.4 px of where it put their values (their centres
    alone: up to half a pixel off)."""
    x = np.linspace(400, 700, 200)
    figure, ax = plt.subplots(figsize=(3.2, 2.4), dpi=100)
    ax.plot(x, 30000 * np.exp(-(((x - 550) / 40) ** 2)), color="tab:blue")
    ax.set_ylim(0, 30000)
    figure.tight_layout()
    figure.canvas.draw()
    pixels = np.asarray(figure.canvas.buffer_rgba())[..., :3].copy()
    truth = (
        [ax.transData.transform((v, 0))[0] for v in ax.get_xticks()],
        [pixels.shape[0] - ax.transData.transform((400, v))[1] for v in ax.get_yticks()],
    )
    plt.close(figure)
    frame = find_frame(pixels)
    for axis, words in enumerate((frame.x_words, frame.y_words)):
        assert len(words) >= 4 and all(word.tick is not None for word in words[1:-1])
        for word in words:
            assert np.abs(np.array(truth[axis]) - word.position(axis)).min() <= 0.4


def test_a_misread_label_is_rejected_by_the_residual():
    positions = [20.0, 60.0, 100.0, 140.0, 180.0]
    texts = ["400", "500", "800", "700", "800"]  # the third label, 600, read as 800
    ticks = [
        Tick(p, float(t), t, (p - 5, 0, p + 5, 8), word=i)
        for i, (p, t) in enumerate(zip(positions, texts, strict=True))
    ]
    axis = fit_axis("x", ticks)
    assert axis.scale == "linear"
    assert [t.text for t in axis.rejected] == ["800"] and axis.rejected[0].position == 100.0
    assert axis.value(100.0) == pytest.approx(600.0)
    assert axis.residual == pytest.approx(0.0, abs=1e-9)
    assert axis.confidence == pytest.approx(0.8)


def test_two_agreeing_ticks_of_three_and_a_garbled_one():
    ticks = [
        Tick(10.0, 0.0, "0", (0, 0, 1, 1), 0),
        Tick(50.0, 80.5, "80.5", (0, 0, 1, 1), 1),  # 0.5 with a stray glyph: not round
        Tick(90.0, 1.0, "1", (0, 0, 1, 1), 2),
    ]
    axis = fit_axis("x", ticks)
    assert [t.value for t in axis.used] == [0.0, 1.0]
    assert axis.value(50.0) == pytest.approx(0.5)


def _ticks(positions, texts, by_label_reader=False, first_word=0) -> list[Tick]:
    return [
        Tick(p, float(t), t, (p - 5, 0, p + 5, 8), first_word + i, by_label_reader)
        for i, (p, t) in enumerate(zip(positions, texts, strict=True))
    ]


def test_a_misread_near_its_true_value_is_dropped_by_the_refit():
    """A chart's x labels at their words' centres as Tesseract read them (two readings of the
    word at 130): 750 read as 730 lies within the tolerance of the pair the most labels agree
    with, yet tilts the least-squares line; the refit drops it, and every tick kept is one
    drawn."""
    positions = [47.0, 63.0, 80.5, 97.0, 113.5, 130.0, 130.0, 147.5, 164.0, 180.5, 197.0]
    texts = ["400", "450", "500", "350", "600", "60", "650", "700", "730", "300", "50"]
    words = [0, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9]
    ticks = [
        Tick(p, float(t), t, (p - 5, 0, p + 5, 8), w)
        for p, t, w in zip(positions, texts, words, strict=True)
    ]
    axis = fit_axis("x", ticks)
    assert [t.text for t in axis.used] == ["400", "450", "500", "600", "650", "700"]
    assert axis.value(164.0) == pytest.approx(750.0, abs=5.0)


def test_the_fit_whose_labels_match_the_readings_wins():
    """A restored chart's y labels (20 to 120; a val chart at hard Gaussian blur): Tesseract
    reads all six, the label reader reads 120 as 1.20. So read_ticks also offers every whole
    number read over 100 (a dropped point), and that fit keeps as many ticks, more of them read
    with a point. Its labels would read 0.20 ... 1.20, not what was read: the fit on the
    numbers as read wins."""
    positions = [33.5, 65.0, 97.0, 129.0, 161.0, 193.0]
    drawn = ["120", "100", "80", "60", "40", "20"]
    ticks = _ticks(positions, drawn) + [Tick(33.5, 1.2, "1.20", (0, 0, 1, 1), 0, True)]
    ticks += [Tick(t.position, t.value / 100, t.text, t.box, t.word) for t in ticks[:6]]
    axis = fit_axis("y", ticks)
    assert [t.value for t in axis.used] == [120.0, 100.0, 80.0, 60.0, 40.0, 20.0]


def test_a_point_read_with_no_digit_before_it_makes_no_tenths():
    """A y axis 0 ... 120 as Tesseract read it on a sharp default chart: 120 as 12, 20 also as
    .1. A reading with a point would offer every whole number read with its point put back
    (read_ticks' _points_dropped); from .1 that is an axis ten times too small, which 12 agrees
    with. Labels show their leading zero (0.1), so .1 offers nothing: the axis reads 0 to 120."""
    from linefuse.digitize.calibrate import _points_dropped

    positions = [10.5, 30.5, 50.5, 50.5, 109.5, 109.5, 129.5, 90.0]
    texts = ["12", "100", "80", "30", "20", ".1", "0", "0"]
    words = [0, 1, 2, 2, 3, 3, 4, 6]
    ticks = [
        Tick(p, float(t), t, (0, p - 4, 10, p + 4), w)
        for p, t, w in zip(positions, texts, words, strict=True)
    ]
    assert _points_dropped(ticks) == []
    axis = fit_axis("y", ticks + _points_dropped(ticks))
    assert axis.value(10.5) == pytest.approx(120.0, abs=1.0)
    assert "12" not in [t.text for t in axis.used]


def test_a_point_read_in_one_word_alone_makes_no_decimals():
    """A dev chart's x labels 450 ... 800 restored from a scan at the medium level: Tesseract
    reads each whole, the label reader reads a speck the restoration drew in 650 as a point
    (6.50). Offering every whole number with that point put back (4.50 ... 8.00) would give a
    fit keeping all eight words, one more than the labels as drawn. A point read in one word
    of many is a speck: points are put back only where two words or more are read with one."""
    from linefuse.digitize.calibrate import _points_dropped

    positions = [53.5, 85.0, 116.0, 147.5, 179.0, 210.5, 242.0, 273.0]
    texts = ["450", "500", "550", "600", "6.50", "700", "750", "800"]
    ticks = [
        Tick(p, float(t), t, (p - 7, 0, p + 7, 6), w, t == "6.50")
        for w, (p, t) in enumerate(zip(positions, texts, strict=True))
    ]
    assert _points_dropped(ticks) == []
    axis = fit_axis("x", ticks + _points_dropped(ticks))
    assert axis.value(179.0) == pytest.approx(650.0, abs=3.0)
    two = [replace(t, text="7.00", value=7.0) if t.text == "700" else t for t in ticks]
    assert len(_points_dropped(two)) == 6  # two words read with a point: the others' put back


def test_evenly_spaced_labels_in_a_ratio_of_two_are_no_log_axis():
    """10000, 20000, 40000 evenly spaced fit a log line, but log axes label whole decades: it
    is a linear axis with a misread label (30000 read as 40000)."""
    axis = fit_axis("y", _ticks([174.0, 94.0, 14.0], ["10000", "20000", "40000"]))
    assert axis.scale == "linear" and [t.text for t in axis.used] == ["10000", "20000"]
    decades = fit_axis("y", _ticks([174.0, 94.0, 14.0], ["10", "100", "1000"]))
    assert decades.scale == "log"


def test_the_label_reader_wins_where_it_reads_clearly_more_labels():
    """Tesseract reads three of six labels as one digit each (4, 5, 6: a consistent but
    wrong axis); the label reader reads all six: its axis is kept."""
    positions = [58.0, 100.0, 142.0, 184.0, 226.0, 268.0]
    truth = ["450", "500", "550", "600", "650", "700"]
    tesseract = _ticks(positions[::2], ["4", "5", "6"])
    tesseract = [Tick(t.position, t.value, t.text, t.box, 2 * t.word) for t in tesseract]
    reader = _ticks(positions, truth, by_label_reader=True)
    axis = fit_axis("x", tesseract + reader)
    assert [t.text for t in axis.used] == truth
    # where it reads only one more, Tesseract's three agreeing labels stand
    axis = fit_axis("x", tesseract + reader[:4])
    assert [t.text for t in axis.used] == ["4", "5", "6"]


@needs_tesseract
def test_the_label_reader_decides_where_tesseract_agrees_on_two_ticks_only():
    """A restored chart's x labels (400 to 700; a val chart at hard low-resolution blur):
    Tesseract's readings agree on two ticks only (560 and 660 for 500 and 600), which any line
    fits; with the label reader's readings the fit keeps as many, 500 and 600, and that one is
    kept. (Where Tesseract agrees on three or more, see the test above.)"""
    tesseract = [
        (56.5, "600", 0),
        (121.0, "560", 1),
        (121.0, "660", 1),
        (185.0, "660", 2),
        (255.5, "10", 4),
    ]
    reader = [(56.5, "800", 0), (121.0, "500", 1), (185.0, "600", 2), (243.5, "7", 3)]
    reader += [(255.5, "0", 4)]
    ticks = [Tick(p, float(t), t, (p - 9, 0, p + 9, 8), w) for p, t, w in tesseract]
    ticks += [Tick(243.5, math.nan, "/", (234.5, 0, 252.5, 8), 3)]
    ticks += [Tick(p, float(t), t, (p - 9, 0, p + 9, 8), w, True) for p, t, w in reader]
    axis = fit_axis("x", ticks)
    assert sorted(t.text for t in axis.used) == ["500", "600"]
    assert axis.value(56.5) == pytest.approx(400.0, abs=1.0)


@needs_tesseract
def test_a_restoration_is_read_with_the_labels_of_the_input_it_came_from():
    """A restoration that smeared every tick label (each word blurred where it stands) is read
    with the input it was restored from: the label reader reads each word there too, at the box
    found in the restoration, and both axes come back whole; without the input, not."""
    from scipy.ndimage import gaussian_filter

    def draw(ax):
        x = np.linspace(0, 50, 60)
        ax.plot(x, 300 + 4 * x)

    original = figure_pixels(draw)
    smeared = original.copy()
    for word in find_frame(original).x_words + find_frame(original).y_words:
        left, top, right, bottom = (round(v) for v in word.box)
        patch = smeared[top : bottom + 1, left : right + 1].astype(float)
        smeared[top : bottom + 1, left : right + 1] = gaussian_filter(patch, (2.5, 2.5, 0))
    paired = digitize(smeared, original)
    assert sorted(t.value for t in paired.x_axis.used) == [0, 10, 20, 30, 40, 50]
    assert sorted(t.value for t in paired.y_axis.used) == [300, 350, 400, 450, 500]
    assert paired.y_axis.value(paired.y_axis.pixel(425.0)) == pytest.approx(425.0)
    alone = digitize(smeared)
    assert len(alone.x_axis.used) < 6 and len(alone.y_axis.used) < 5


@needs_tesseract
def test_crowded_x_labels_are_split_at_their_tick_marks():
    """Ten labels at 5.5 pt on a 2.1 in figure leave gaps between labels no wider than those
    between digits (one word without the split): the words are split at the major tick marks
    (minor ones ignored), one a label, and the axis reads 400 to 850."""

    def draw(ax):
        ax.plot(np.linspace(400, 850, 50), np.linspace(0, 1, 50))
        ax.set_xlim(400, 850)
        ax.set_xticks(np.arange(400, 851, 50))
        ax.minorticks_on()
        ax.tick_params(labelsize=5.5)

    pixels = figure_pixels(draw, size=(2.1, 1.6), dpi=100)
    frame = find_frame(pixels)
    assert len(frame.x_words) == 10
    result = digitize(pixels)
    assert result.x_axis.value(result.x_axis.pixel(400.0)) == pytest.approx(400.0)
    assert {t.value for t in result.x_axis.used} <= set(range(400, 851, 50))
    assert len(result.x_axis.used) >= 5


@needs_tesseract
def test_labels_drawn_over_each_other_are_cut_between_their_tick_marks():
    """Ten 8 pt labels on a 2.4 in figure run into each other (matplotlib draws
    400450500...850 as one line of touching digits) and their in-and-out tick marks stand a
    row beyond the spine's anti-aliasing: the line is cut at the midpoints between the tick
    marks, the ticks on the left and right spines (hidden in them) added at the marks' spacing,
    and the axis reads 400 to 850."""

    def draw(ax):
        ax.plot(np.linspace(400, 850, 50), np.linspace(0, 1, 50))
        ax.set_xlim(400, 850)
        ax.set_xticks(np.arange(400, 851, 50))
        ax.tick_params(direction="inout", length=3, labelsize=8)

    pixels = figure_pixels(draw, size=(2.4, 2.0), dpi=100)
    assert len(find_frame(pixels).x_words) == 10
    result = digitize(pixels)
    assert result.x_axis.value(result.x_axis.pixel(400.0)) == pytest.approx(400.0)
    assert {t.value for t in result.x_axis.used} <= set(range(400, 851, 50))
    assert len(result.x_axis.used) >= 5


def test_a_ticks_share_of_a_crowded_word_that_is_specks_alone_is_no_word():
    """A word across two tick marks whose second tick's share is a 2 x 2 speck (a blurred
    label's cut-off edge: two degraded plotnine charts of a 2,000-chart digitize reader's
    training set have one) raised IndexError, so digitize read such a chart as "no chart
    found: IndexError" and `linefuse digitize-reader` stopped. The speck is no word; the
    word's digit is one."""
    digit, speck = (8, 0, 14, 6), (28, 4, 30, 6)
    word = Word((8.0, 0.0, 30.0, 6.0), (digit, speck))
    split = _split_at_ticks([word], np.array([10.0, 30.0]))
    assert [w.box for w in split] == [(8.0, 0.0, 14.0, 6.0)]


def _box_to_the_bottom_edge() -> np.ndarray:
    """A framed plot area whose bottom spine is the image's last row: no room for x labels."""
    pixels = np.full((120, 160, 3), 255, np.uint8)
    pixels[10, 20:150] = pixels[119, 20:150] = pixels[10:, 20] = pixels[10:, 149] = 0
    return pixels


@pytest.mark.parametrize(
    ("name", "pixels", "reason"),
    [
        ("white", np.full((150, 200, 3), 255, np.uint8), "no axis"),
        ("noise", np.random.default_rng(0).integers(0, 256, (150, 200, 3), np.uint8), "no axis"),
        ("tiny", np.zeros((10, 10, 3), np.uint8), "too small"),
        ("box to the bottom edge", _box_to_the_bottom_edge(), "no tick labels found on the x"),
    ],
)
def test_unreadable_inputs_say_why(name, pixels, reason):
    with pytest.raises(Unreadable, match=reason):
        digitize(pixels)


@needs_tesseract
def test_a_bar_chart_is_unreadable():
    pixels = figure_pixels(lambda ax: ax.bar([1, 2, 3, 4], [3, 5, 2, 4]))
    with pytest.raises(Unreadable, match="bars"):
        digitize(pixels)


@needs_tesseract
def test_digitize_files_writes_three_files_and_names_the_unreadable(tmp_path, capsys):
    inputs = tmp_path / "in"
    inputs.mkdir()
    Image.open(CHARTS[0]).save(inputs / "chart.png")
    Image.new("RGB", (200, 150), "white").save(inputs / "white.png")
    (inputs / "broken.png").write_bytes(b"not an image")
    summary = digitize_files([inputs], tmp_path / "out")
    assert summary["charts"] == 3 and summary["digitized"] == 1
    assert set(summary["unreadable"]) == {str(inputs / "white.png"), str(inputs / "broken.png")}
    printed = capsys.readouterr()
    assert "white.png: unreadable: no axis" in printed.out + printed.err
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "chart.csv",
        "chart.json",
        "chart.overlay.png",
    ]
    header, *rows = (out / "chart.csv").read_text().splitlines()
    assert header == "series,x,y" and len(rows) > 100
    axes = json.loads((out / "chart.json").read_text())
    assert axes["x"]["scale"] == axes["y"]["scale"] == "linear"
    assert axes["x"]["direction"] == axes["y"]["direction"] == "ascending"
    assert len(axes["x"]["ticks_used"]) >= 3 and 0 < axes["confidence"] <= 1
    assert axes["read_from"] == axes["axes_from"] == "image"
    overlay = Image.open(out / "chart.overlay.png")
    assert overlay.width > Image.open(CHARTS[0]).width


@needs_tesseract
def test_a_chart_with_no_frame_is_found_from_its_tick_labels():
    x = np.linspace(400, 700, 300)
    y = 0.2 + np.exp(-(((x - 520) / 15) ** 2))

    def draw(ax):
        ax.plot(x, y, color="tab:red")
        ax.set_xlim(400, 700)
        ax.set_ylim(0, 1.4)
        for spine in ax.spines.values():
            spine.set_visible(False)

    result = digitize(figure_pixels(draw))
    assert not len(result.x_axis.rejected) and len(result.x_axis.used) >= 3
    (series,) = result.series
    inside = (series.x > 420) & (series.x < 680)
    truth = 0.2 + np.exp(-(((series.x[inside] - 520) / 15) ** 2))
    assert np.median(np.abs(series.y[inside] - truth)) < 0.02  # of a 1.4 range


def _words_at(words, sidecar: dict, axis: str) -> bool:
    """Whether the words are the sidecar's tick labels of `axis`, one each, their centres along
    the axis within 1.5 px (a label's drawn box holds its font's ascent and descent) and across
    it within the label's box (not a tick mark beside it)."""
    along, across = (0, 1) if axis == "x" else (1, 0)
    found = sorted(words, key=lambda w: w.centre[along])
    boxes = [label["box"] for label in sidecar["tick_labels"] if label["axis"] == axis]
    drawn = sorted(boxes, key=lambda box: box[along] + box[along + 2])
    return len(found) == len(drawn) and all(
        abs(w.centre[along] - (box[along] + box[along + 2]) / 2) <= 1.5
        and box[across] - 1.5 <= w.centre[across] <= box[across + 2] + 1.5
        for w, box in zip(found, drawn, strict=True)
    )


@pytest.mark.slow  # plotnine starts up: seconds
def test_labels_past_the_inner_grid_lines_are_found_alone():
    """dev2 chart 13, plotnine's theme_minimal (grid lines, no axis lines) in a 5 px font: the
    curves hide the outer grid lines, so the lines found frame the inner grid and what lies
    under it is the curves' bits, not tick labels (they do not step evenly). The labels are
    found alone, farther out, and the y labels are the column left of the first x label, not
    the curves' bits stacked beside it."""
    params = load_params(ROOT / "params.yaml")
    image, _, sidecar = draw_chart(dev2_chart_params(params), 13)
    frame = find_frame(image)
    assert _words_at(frame.x_words, sidecar, "x") and _words_at(frame.y_words, sidecar, "y")


def _log_focus_chart(seed: int, index: int):
    """Chart `index` of the focus set drawn with seed `seed`, every y axis log (the image and
    its sidecar)."""
    recipe = dev_chart_params(load_params(ROOT / "params.yaml"), seed)
    image, _, sidecar = draw_chart(recipe.model_copy(update={"log_y_prob": 1.0}), index)
    return image, sidecar


@pytest.mark.slow  # plotnine starts up: seconds
@pytest.mark.parametrize(("seed", "index"), [(113, 18), (117, 8)])
def test_y_labels_left_of_a_frame_of_grid_lines_are_found_alone(seed, index):
    """theme_minimal with a log y (log focus sets 113 and 117): no line marks the panel's left
    edge, so the lines' box starts at the first vertical grid line and what stands beside it is
    a curve's bits, one or two words. The labels 1e1 ... 1e4, a column of four evenly spaced
    words left of that box, are the y labels; the rotated title's letters beside them stack
    evenly too, but closer than labels stand (LABEL_SPACING)."""
    image, sidecar = _log_focus_chart(seed, index)
    frame = find_frame(image)
    assert _words_at(frame.y_words, sidecar, "y") and _words_at(frame.x_words, sidecar, "x")


@pytest.mark.slow  # plotnine starts up: seconds
def test_y_labels_stand_left_of_the_first_x_label():
    """Log focus set 117, chart 24: no grid line found, and a dotted series' dots stack evenly
    in a right-aligned column inside the plot, six of them against four labels. Labels stand
    left of the plot, so left of the first x label's centre."""
    image, sidecar = _log_focus_chart(117, 24)
    frame = find_frame(image)
    assert _words_at(frame.y_words, sidecar, "y")


@needs_tesseract
def test_right_aligned_labels_whose_ink_ends_two_pixels_apart_are_one_column(tmp_path):
    """Log focus set 115, chart 6: 4 px serif labels 1e1 ... 1e5, right-aligned, their ink
    ending up to two pixels apart (a 1's and a 5's right bearings differ); one pixel apart
    split them into columns too short to step evenly, and a title's letters were taken."""
    recipe = dev_chart_params(load_params(ROOT / "params.yaml"), 115)
    write_chart(recipe.model_copy(update={"log_y_prob": 1.0}), tmp_path, 6)
    png = tmp_path / "chart_00006.png"
    scored = score(digitize(np.asarray(Image.open(png).convert("RGB"))), png)
    assert scored["calibrated"] and scored["line_score"] > 0.9


def test_a_curve_meeting_the_edge_is_no_tick_mark():
    """Ticks pointing into the box are as long as one another; a curve or a line meeting the
    box's edge runs farther in. Seven 4 px marks 21 px apart and one 48 px run (dev2 chart 23,
    matplotlib's classic style): the marks are the ticks, not the run (the longest)."""
    lengths = np.zeros(200, dtype=int)
    lengths[[22, 43, 64, 85, 106, 127, 148]] = 4
    lengths[160:164] = 48
    marks = _marks(lengths, lengths.astype(float))
    assert marks.tolist() == [22.0, 43.0, 64.0, 85.0, 106.0, 127.0, 148.0]  # crisp: snapped


def test_labels_split_under_a_framed_box_are_found_whole_beside_it():
    """A descending x drawn in matplotlib's grayscale style (focus set seed 101, chart 57):
    its labels 3000 ... 500 split at tick marks into pieces that do not step evenly. They are
    found whole, alone, and keep the box the spines frame (to a pixel and a half), not the
    rougher one their words imply."""
    recipe = dev_chart_params(load_params(ROOT / "params.yaml"), 101)
    image, _, sidecar = draw_chart(recipe.model_copy(update={"descending_x_prob": 1.0}), 57)
    frame = find_frame(image)
    assert _words_at(frame.x_words, sidecar, "x")
    assert np.allclose(frame.box, sidecar["plot_box"], atol=1.5)


def test_two_y_labels_alone_are_aligned_to_the_pixel():
    """No line frames the plot and two y labels stand beside it (no spacing to tell them by):
    the pair right-aligned to the pixel is taken, not two bits of a curve nearer the x labels
    whose right edges differ by one (restorations draw such bits by a plot's left edge)."""
    text = np.zeros((200, 300), dtype=bool)

    def word(left: int, top: int, glyphs: int, width: int = 5) -> None:
        for k in range(glyphs):
            text[top : top + 8, left + k * (width + 1) : left + k * (width + 1) + width] = True

    for left in (100, 160, 220):  # x labels: three evenly spaced words of three digits
        word(left, 180, 3)
    word(49, 40, 2)  # y labels ending at column 60
    word(49, 110, 2)
    word(88, 60, 1, width=2)  # a curve's bits ending at columns 90 and 91
    word(89, 75, 1, width=2)
    x_words, y_words = _labels_alone(text)
    assert len(x_words) == 3
    assert sorted(w.box for w in y_words) == [(49.0, 40.0, 60.0, 48.0), (49.0, 110.0, 60.0, 118.0)]


def test_a_row_of_tick_marks_is_no_row_of_labels():
    """Tick marks standing off the plot (1 px wide, a digit tall) step as evenly as labels; the
    labels under them do not where the last is drawn flush with the plot's end (Vega-Lite's).
    Found alone, the tick marks are no x labels (they were read as a row of 1s)."""
    text = np.zeros((200, 320), dtype=bool)
    for k in range(6):  # tick marks every 40 px
        text[150:157, 60 + 40 * k] = True
    for left in (52, 92, 132, 172, 212, 236):  # labels of three digits, the last one moved in
        for d in range(3):
            text[165:173, left + 6 * d : left + 6 * d + 5] = True
    for top in (40, 80, 120):  # y labels
        text[top : top + 8, 20:31] = True
    x_words, _ = _labels_alone(text)
    assert all(w.box[2] - w.box[0] > 2 for w in x_words)


def test_without_tesseract_each_framed_chart_says_how_to_install_it(monkeypatch):
    import linefuse.digitize.chart as digitize_module

    monkeypatch.setattr(digitize_module, "missing", lambda: "tesseract is not on PATH: install")
    white = np.full((150, 200, 3), 255, np.uint8)
    chart, blank = digitize_many([_pixels(CHARTS[0]), white])
    assert isinstance(chart, Unreadable) and "tesseract is not on PATH" in str(chart)
    assert isinstance(blank, Unreadable) and "no axis" in str(blank)


@needs_tesseract
def test_the_cli_digitizes_a_folder_and_names_each_file_it_cannot_read(tmp_path, capsys):
    """--no-restore on a folder (two charts in a subfolder, a corrupt file, a blank frame) and a
    path that is not there: each chart's CSV, axes JSON and overlay under its relative name,
    the same as digitize_many reads the two (their labels on one Tesseract page, as the CLI
    reads a batch); one line per file it could not read; exit 0."""
    inputs = tmp_path / "in"
    (inputs / "sub").mkdir(parents=True)
    for path in CHARTS[:2]:
        shutil.copy(path, inputs / "sub" / path.name)
    (inputs / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    Image.new("RGB", (300, 200), "white").save(inputs / "white.png")
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    out, missing = tmp_path / "out", tmp_path / "missing.png"
    argv = [str(inputs), str(missing), "--no-restore", "--out", str(out)]
    assert run_cli(tmp_path, "digitize", *argv) == 0
    together = digitize_many([_pixels(path) for path in CHARTS[:2]])  # one call, as the CLI's
    for path, expected in zip(CHARTS[:2], together, strict=True):
        stem = out / "sub" / path.stem
        pixels = _pixels(path)
        assert stem.with_suffix(".csv").read_text() == csv_text(expected)
        rows = list(csv.DictReader(stem.with_suffix(".csv").open()))
        assert len(rows) > 100 and rows[0].keys() == {"series", "x", "y"}
        axes = json.loads(stem.with_suffix(".json").read_text())
        assert axes["x"]["scale"] == "linear" and len(axes["x"]["ticks_used"]) >= 2
        overlay = Image.open(f"{stem}.overlay.png")
        assert overlay.size == (3 * pixels.shape[1], 3 * pixels.shape[0])
        assert not Path(f"{stem}.restored.png").exists()
    err = capsys.readouterr().err
    assert f"{inputs / 'broken.png'}: unreadable: cannot open the image" in err
    assert f"{inputs / 'white.png'}: unreadable: no axis" in err
    assert f"{missing}: unreadable: no such file or folder" in err
    assert "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["sub"]


@needs_tesseract
def test_grid_lines_a_legend_frame_and_dark_ticks_are_no_series():
    """A light grid whose line at y = 1 a series runs along (so the frame misses that line), a
    framed legend, and black tick marks inside the box (a dark colour whose blend covers the
    purple line's pixels in part): two series read, each where it was drawn."""
    x = np.linspace(400, 700, 300)
    flat = 1.0 + 1.2 * np.exp(-(((x - 620) / 15) ** 2))  # on the grid line at 1 but its peak
    peaked = 0.3 + 2.0 * np.exp(-(((x - 500) / 25) ** 2))

    def draw(ax):
        ax.plot(x, flat, color="#7a68a6", lw=2, label="flat")
        ax.plot(x, peaked, color="tab:orange", lw=2, label="peaked")
        ax.set_ylim(0, 2.5)
        ax.set_xlim(400, 700)
        ax.grid(True, color="#c5cad0", lw=1)
        ax.minorticks_on()
        ax.tick_params(which="both", direction="in", length=5, top=True, right=True)
        ax.legend(loc="upper left", frameon=True, edgecolor="#c5cad0")

    result = digitize(figure_pixels(draw, size=(4.0, 3.0)))
    assert len(result.series) == 2, [s.colour for s in result.series]
    for series, truth in zip(
        sorted(result.series, key=lambda s: s.colour[0]), (flat, peaked), strict=True
    ):
        assert np.median(np.abs(series.y - np.interp(series.x, x, truth))) < 0.03


@needs_tesseract
def test_a_restoration_that_cannot_be_read_gives_way_to_its_input():
    """Restoring never makes a readable chart unreadable: where the restoration cannot be read
    (here a blank image) and its input can, the input's reading is returned, marked as such;
    where neither can, the restoration's reason stands."""
    sharp = _pixels(CHARTS[0])
    blank = np.full_like(sharp, 255)
    fallen_back, neither = digitize_many([blank, blank], [sharp, blank])
    assert fallen_back.read_from == "input"
    assert score(fallen_back, CHARTS[0])["calibrated"]
    assert isinstance(neither, Unreadable) and "no axis" in str(neither)
    assert digitize_many([sharp], [blank])[0].read_from == "image"


# dev chart 29 scanned at hard (as benchmarks/digitize_restored.py degrades and straightens it),
# and its restoration by the default run's model at ae9418a; the chart's sidecar and CSV beside
RESTORED = FIXTURES / "restored"


@needs_tesseract
def test_a_restoration_whose_labels_cannot_be_fitted_is_traced_on_its_inputs_axes():
    """A restoration whose lines can be followed but whose y labels cannot be fitted, even with
    its input's readings beside them ('/', '00', '10'), has its own lines mapped through the axes
    its input is read on alone: closer to the truth than the blurred input's own lines."""
    given, restored = (
        _pixels(RESTORED / f"chart_00029.hard-scan.{kind}.png") for kind in ("input", "restored")
    )
    truth = RESTORED / "chart_00029.png"
    assert isinstance(digitize_many([restored])[0], Unreadable)
    (result,) = digitize_many([restored], [given])
    assert (result.read_from, result.axes_from) == ("image", "input")
    assert score(result, truth)["calibrated"]
    assert score(result, truth)["curve_error"] < 0.5 * score(digitize(given), truth)["curve_error"]


@needs_tesseract
def test_a_restorations_series_are_mapped_by_its_inputs_surer_axes():
    """A restoration can redraw every x label wrong and alike (400 ... 700 as 40 ... 70; here
    one of them also illegible): on its own it reads as a sure, wrong axis. Its input's labels,
    as drawn, are read more surely, so they give the axes and the restoration's curve is mapped
    through them. A restoration read more surely than its input, or as surely as the same
    axes, keeps its own."""
    x = np.linspace(400.0, 700.0, 200)
    y = np.sin(x / 40.0)

    def chart(label):
        def draw(ax):
            ax.plot(x, y, color="tab:blue")
            ax.set_xticks([400, 450, 500, 550, 600, 650, 700])
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(label))

        return figure_pixels(draw, size=(4.0, 3.0))

    drawn = chart(lambda v, _: f"{v:g}")
    redrawn = chart(lambda v, _: "x!" if v == 550 else f"{v / 10:g}")
    assert digitize(redrawn).series[0].x.max() == pytest.approx(70.0, abs=0.5)  # as redrawn
    smudged = chart(lambda v, _: "x!" if v == 550 else f"{v:g}")  # one label lost, none wrong
    restored, kept, same = digitize_many([redrawn, drawn, smudged], [drawn, redrawn, drawn])
    assert (restored.axes_from, restored.read_from) == ("input", "image")
    assert kept.axes_from == same.axes_from == "image"
    assert same.confidence < digitize(drawn).confidence
    (series,) = restored.series
    assert np.median(np.abs(series.y - np.interp(series.x, x, y))) < 0.03
    assert series.x.min() == pytest.approx(400.0, abs=5.0)
    assert series.x.max() == pytest.approx(700.0, abs=5.0)


@needs_tesseract
def test_an_inputs_axis_whose_points_the_restoration_lost_maps_its_series():
    """A restoration can lose every y label's decimal point (0.2 ... 1.0 redrawn as 2 ... 10)
    and read surer than its blurred input, one of whose labels is lost: the input's y axis, a
    power of ten off with more of its labels pointed, maps the restoration's series all the
    same. An input that lost the points, however sure, gives no restoration that shows them its
    y axis."""
    x = np.linspace(400.0, 700.0, 200)
    y = 0.6 + 0.35 * np.sin(x / 40.0)

    def chart(label):
        def draw(ax):
            ax.plot(x, y, color="tab:blue")
            ax.set_yticks([0.2, 0.4, 0.6, 0.8, 1.0])
            ax.set_ylim(0.1, 1.05)
            ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(label))

        return figure_pixels(draw, size=(4.0, 3.0))

    pointed = chart(lambda v, _: "x!" if round(v, 1) == 0.4 else f"{v:.1f}")
    pointless = chart(lambda v, _: f"{v * 10:.0f}")
    assert digitize(pointless).confidence > digitize(pointed).confidence
    restored, kept = digitize_many([pointless, pointed], [pointed, pointless])
    assert restored.axes_from == "input"
    for result in (restored, kept):
        (series,) = result.series
        assert np.median(np.abs(series.y - np.interp(series.x, x, y))) < 0.01
        assert series.x.min() == pytest.approx(400.0, abs=5.0)


def test_an_offset_text_is_one_word_above_the_lines_that_go_on_past_the_box():
    """matplotlib's offset text (1e7) above the box's left edge: a serif 1 spaced off its e
    (wider than a label's digits are apart) is one word with it, a title centred over the box
    on its line is none of it, the spine and a grid line going on above the box's top (a grid
    line under the axes' own top) are no text, and a 7 drawn down onto the top line (the
    classic style's) is still found. A box at the image's top has no room for one."""
    text = np.zeros((200, 300), dtype=bool)
    box = (40.0, 30.0, 280.0, 180.0)
    text[30, 40:281] = True  # the box's top, a grid line
    text[18:181, 40] = True  # the left spine, going on above it
    text[22:30, 120] = True  # a grid line going on above it
    text[12:21, 43:45] = True  # 1, then e and 7
    text[14:21, 49:55] = True
    text[12:21, 56:62] = True
    text[8:17, 140:200] = True  # the title
    assert _offset_word(text, box).box == (43.0, 12.0, 62.0, 21.0)
    text[21:30, 56:62] = True  # the 7 reaching down onto the top line
    assert _offset_word(text, box).box == (43.0, 12.0, 62.0, 29.0)
    assert _offset_word(text, (40.0, 1.0, 280.0, 180.0)) is None


@needs_tesseract
@pytest.mark.parametrize("seed, index", [(103, 4), (103, 77), (113, 22), (125, 36), (127, 24)])
def test_offset_texts_in_serif_fonts_on_the_box_and_over_open_frames_are_read(seed, index):
    """Focus-set charts (every y offset): seed 103's chart 4, a STIX 1 e7 (grayscale style), and
    chart 77, a 1e7 drawn onto the box's top line (classic style), give their multipliers; their
    words were a lone 1 and no word. Seed 113's chart 22, a serif 1e7 whose 1 stands a bare row
    above the box's top line, was a word without its 1 (e7, read 7: no exponent), the 1 taken
    for a grid line going on above the box. Seed 125's chart 36 and seed 127's chart 24
    (grayscale: no top spine) write theirs three bare rows above the left spine's top, which the
    spine's run, bridged across them, reached: the box's top was the text's, and no word was
    above it."""
    recipe = dev_chart_params(load_params(ROOT / "params.yaml"), seed)
    recipe = recipe.model_copy(update={"offset_y_prob": 1.0})
    image, _, _ = draw_chart(recipe, index)
    frame = find_frame(image)
    ((_, _, (_, multiplier)),) = read_ticks([(image, frame)])
    assert multiplier == 10.0 ** plan_axes(recipe, index).power


@needs_tesseract
@pytest.mark.parametrize("index", [14, 20])
def test_an_x_axis_in_hertz_is_read_with_its_offset_text(index):
    """Dev charts drawn with every x in hertz (offset_x_prob): matplotlib labels chart 14's x
    with mantissas and writes "1e8" under the axis's right end, chart 20's "1e11" (which
    Tesseract reads 1e1, and a voter 1e11: calibrate._multiplier). The word is found there and
    read, and the x axis maps the plot box's ends to the drawn limits; without it the x was read
    10^8 and 10^11 times too small, a reading no fit could doubt."""
    recipe = dev_chart_params(load_params(ROOT / "params.yaml"))
    recipe = recipe.model_copy(update={"offset_x_prob": 1.0})
    image, _, sidecar = draw_chart(recipe, index)
    (result,) = digitize_many([image])
    assert plan_axes(recipe, index).x_power  # drawn in hertz
    assert result.x_axis.multiplier == 10.0 ** math.floor(math.log10(max(sidecar["xlim"])))
    left, _, right, _ = sidecar["plot_box"]
    low, high = sidecar["xlim"]
    read = result.x_axis.value(np.array([left, right]))
    assert np.allclose(read, [low, high], rtol=0, atol=0.01 * (high - low))


@needs_tesseract
@pytest.mark.parametrize("axis", ["x", "y"])
def test_a_negative_power_keeps_its_minus_sign(axis):
    """A pulse over 5 microseconds (x) and a signal of microvolts (y): matplotlib writes 1e−6
    at the axis's end, its minus a bar one pixel high, too flat for a glyph. Without it the
    exponent was a word apart from its 1e (x: the word was the lone 6, read as no multiplier)
    or read without its sign (y: 1e6, every value 10^12 too large). The bar joins the word and
    makes the exponent negative whatever the readers make of it."""
    t = np.linspace(0, 5e-6, 300) if axis == "x" else np.linspace(400, 700, 300)
    pulse = np.exp(-(((np.arange(300) - 150) / 30) ** 2))

    def draw(ax):
        ax.plot(t, pulse * (1.0 if axis == "x" else 3e-6), color="tab:blue")

    frame = find_frame(pixels := figure_pixels(draw))
    assert (frame.x_offset if axis == "x" else frame.y_offset).minus
    (result,) = digitize_many([pixels])
    assert (result.x_axis if axis == "x" else result.y_axis).multiplier == 1e-6


def test_tick_marks_pointing_into_a_coloured_panel_split_crowded_labels():
    """Focus-set chart 21 (seed 103, every y offset): matplotlib's classic style draws its tick
    marks into the plot, here a pink panel, and its x labels 400 ... 750 touch. Against the
    page the whole panel is ink; against the panel the marks are found, and the labels are
    split at them, one word each."""
    recipe = dev_chart_params(load_params(ROOT / "params.yaml"), 103)
    image, _, sidecar = draw_chart(recipe.model_copy(update={"offset_y_prob": 1.0}), 21)
    assert _words_at(find_frame(image).x_words, sidecar, "x")


@needs_tesseract
def test_a_power_tesseract_reads_on_one_line_is_no_plain_number():
    """Focus-set chart 5 (seed 107, seaborn's paper style, a log y labelled 10^0 ... 10^4 with
    3 px exponents): Tesseract reads 10^2 as 107, which lies 0.03 decades from it, nearer the
    fit than the label reader's 10^2, and tilted the axis by 1 %. Where the reader reads a
    power, Tesseract's 10n in that word is that power misread (a candidate 10^n), not the
    number 107: every tick kept is a whole decade."""
    image, _, _ = draw_chart(dev_chart_params(load_params(ROOT / "params.yaml"), 107), 5)
    (result,) = digitize_many([image])
    assert result.y_axis.scale == "log" and len(result.y_axis.used) == 5
    assert all(math.log10(t.value).is_integer() for t in result.y_axis.used)


@pytest.mark.slow  # plotnine starts up: seconds
def test_thick_short_tick_marks_are_no_row_of_labels():
    """dev2 chart 65, plotnine's theme_gray: its tick marks are three pixels square under the
    grey panel, apart from its edge. As wide as a narrow digit and a digit tall, they were taken
    for the first line of x labels (read as 1s, no two agreeing). A glyph that starts at the
    box's edge no taller than that is a tick mark, and the labels under them are found."""
    image, _, sidecar = draw_chart(dev2_chart_params(load_params(ROOT / "params.yaml")), 65)
    assert _words_at(find_frame(image).x_words, sidecar, "x")


@pytest.mark.slow  # plotnine starts up: seconds
@pytest.mark.parametrize("index", [9, 23])
def test_lines_run_on_into_labels_of_another_colour_leave_the_frame_its_lines(index):
    """Focus-set charts (seed 105, every y offset, plotnine): chart 9's theme_dark panel runs
    on, bridged, into the x labels under it in some columns, and chart 23's light grid lines
    run on through their tick marks into the y labels. Those runs were the longest, and the
    panel's other columns and the frame's lines fell short of LINE_SPAN of them: the box
    missed the panel's right part and ended at a grid line above the x labels (read as '0.'
    and '1'). Measured in its own colour no line is that long, so the box is the panel's and
    the x labels are found under it."""
    recipe = dev_chart_params(load_params(ROOT / "params.yaml"), 105)
    image, _, sidecar = draw_chart(recipe.model_copy(update={"offset_y_prob": 1.0}), index)
    frame = find_frame(image)
    assert np.allclose(frame.box[1::2], sidecar["plot_box"][1::2], atol=3.0)  # a border 3 px wide
    assert _words_at(frame.x_words, sidecar, "x")


@pytest.mark.slow  # plotnine starts up: seconds
def test_a_frame_of_grid_lines_alone_reaches_the_panels_right_and_top():
    """dev chart 53, plotnine's theme_minimal: no spine, and the panel reaches past its last
    grid lines on the right and at the top, where the curves go on. The box ended at those
    grid lines and the curves' last fifth was not read; it now reaches where the other way's
    grid lines end (x labels and y labels stay outside it)."""
    image, _, sidecar = draw_chart(dev_chart_params(load_params(ROOT / "params.yaml")), 53)
    frame = find_frame(image)
    left, top, right, bottom = sidecar["plot_box"]
    assert frame.box[2] == pytest.approx(right, abs=1.5)
    assert frame.box[1] == pytest.approx(top, abs=1.5)
    assert _words_at(frame.x_words, sidecar, "x") and _words_at(frame.y_words, sidecar, "y")


def test_a_frame_reaches_where_most_grid_lines_end():
    """dev chart 21, matplotlib's grayscale style: the right spine lies on the image's last
    column and is not found, so the frame's last vertical line is a grid line 113 px short of
    the panel's right edge; the horizontal grid lines run on to it, but for two that the legend
    drawn over them ends early. Most of them end at the panel's edge, and so does the box."""
    image, _, sidecar = draw_chart(dev_chart_params(load_params(ROOT / "params.yaml")), 21)
    frame = find_frame(image)
    assert frame.box[2] == pytest.approx(sidecar["plot_box"][2], abs=1.5)


@pytest.mark.slow  # plotnine starts up: seconds
def test_labels_found_alone_keep_the_panel_that_grid_lines_reach():
    """dev chart 38, theme_minimal: its lowest grid line lies far above the x labels, so the
    lines' box has no labels under it and the labels are found alone. The box they imply ended
    at the last x label and the top y label, 47 px short of the panel's right edge, where both
    curves go on; the grid lines reach the panel's right and top edges, and so does the box."""
    image, _, sidecar = draw_chart(dev_chart_params(load_params(ROOT / "params.yaml")), 38)
    frame = find_frame(image)
    assert not len(frame.line_rows) and not len(frame.line_cols)  # the labels-alone box
    assert np.allclose(frame.box, sidecar["plot_box"], atol=3.5)


def _decade_rows(sidecar: dict) -> np.ndarray:
    """The pixel rows of a log y axis's decades, as the sidecar's plot box and limits place
    them."""
    _, top, _, bottom = sidecar["plot_box"]
    low, high = np.log10(sidecar["ylim"])
    decades = np.arange(np.ceil(low - 1e-9), np.floor(high + 1e-9) + 1)
    return bottom + (decades - low) / (high - low) * (top - bottom)


@pytest.mark.parametrize(("seed", "index"), [(119, 11), (121, 9)])
def test_each_y_label_of_a_classic_log_axis_finds_its_tick_mark(seed, index):
    """matplotlib's classic style, log y. Chart 9 of log focus set 121: its ticks point 2 px
    out of the box, through the spine's anti-aliased column, the box's edge, so the 1 px left
    beyond it was too short to be a mark. Chart 11 of set 119: its x labels are found alone
    beside the lines' box (the ticks they label were not looked for), and its lowest decade's
    tick lies on the box's corner, hidden in the x axis's spine; evenly spaced marks go on at
    their step to the box's edges. Each label is placed at its tick, within a pixel of its
    decade."""
    image, sidecar = _log_focus_chart(seed, index)
    frame = find_frame(image)
    decades = _decade_rows(sidecar)
    assert len(frame.y_words) == len(decades)
    ticks = sorted(w.tick for w in frame.y_words if w.tick is not None)
    assert len(ticks) == len(decades) and np.allclose(ticks, np.sort(decades), atol=1.0)


def test_tick_marks_are_narrow_and_a_runs_centre_is_its_longest_columns():
    """A curve meeting the edge as long as the ticks but 25 columns wide is no tick mark (it
    had been one of six, and made them step unevenly); a log axis's minor ticks crowd the
    major one below them into one run (classic style, log focus set 107, chart 25), whose
    centre is the major's column."""
    lengths = np.zeros(200, dtype=int)
    lengths[7:32] = 6  # the curve
    lengths[[100, 127, 154, 181]] = 6
    lengths[[128, 129, 130]] = 2  # minor ticks beside a major
    marks = _marks(lengths, lengths.astype(float))
    assert marks.tolist() == [100.0, 127.0, 154.0, 181.0]


@pytest.mark.slow  # plotnine starts up: seconds
def test_short_tick_marks_whose_first_row_is_faint_are_no_labels():
    """Log focus set 123, chart 25, plotnine's theme_gray: 3 px tick marks under the panel,
    their first row too faint to count as text, start two rows under the box's edge, not one;
    they were taken for the x labels (read as / and 8). The labels under them are found."""
    image, sidecar = _log_focus_chart(123, 25)
    assert _words_at(find_frame(image).x_words, sidecar, "x")
