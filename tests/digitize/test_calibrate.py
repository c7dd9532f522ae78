"""linefuse.digitize.calibrate: the axes people draw, from tick labels as read (no image, no
Tesseract): descending axes, thousands separators, scientific labels, log axes labelled
10^n however Tesseract reads them."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from linefuse.digitize.axes import Word
from linefuse.digitize.calibrate import (
    _candidates,
    _exponent_readings,
    _multiplier,
    _points_dropped,
    _separators_read_as_points,
    _spacing,
    fit_axis,
    parse,
)
from linefuse.digitize.outputs import _axis


def _x_words(positions, texts, readings=None):
    """The ticks read_ticks offers for x labels centred at `positions`, each word read as its
    text (and, where given, also as `readings[i]`)."""
    ticks = []
    for index, (position, text) in enumerate(zip(positions, texts, strict=True)):
        word = Word((position - 9.0, 200.0, position + 9.0, 208.0))
        read = [text] + ([readings[index]] if readings else [])
        ticks += _candidates("x", index, word, read)
    return ticks


def _y_words(positions, texts):
    ticks = []
    for index, (position, text) in enumerate(zip(positions, texts, strict=True)):
        word = Word((10.0, position - 4.0, 30.0, position + 4.0))
        ticks += _candidates("y", index, word, [text])
    return ticks


IR_PIXELS = [40.0, 80.0, 120.0, 160.0, 200.0, 240.0, 280.0, 320.0]
IR_LABELS = ["4000", "3500", "3000", "2500", "2000", "1500", "1000", "500"]


def test_parse_reads_the_forms_libraries_write():
    assert parse("1,000") == 1000.0 and parse("10,000") == 10000.0
    assert parse("-12,500.5") == -12500.0 - 0.5
    assert parse("1e+03") == parse("1E3") == parse("1000") == parse("1,000") == 1000.0
    assert parse("1e-3") == parse("0.001") == 0.001
    assert parse("\u22125") == parse("-5") == -5.0
    assert parse("10^3") == parse("10\u00b3") == 1000.0 and parse("10^-2") == 0.01
    # a decimal comma, or commas that separate no thousands, are no number (as before)
    for text in ("1,5", "1,00", "10,00,000", "1,000,0"):
        assert parse(text) is None, text
    # the existing forms are unchanged
    assert parse("150-") == 150.0 and parse("0.5") == 0.5 and parse("abc") is None


def test_a_descending_x_axis_is_read_as_drawn():
    """An IR spectrum's x axis, 4000 on the left to 500 on the right, every label read right:
    the reversed fit keeps all eight, and the axis says it descends."""
    axis = fit_axis("x", _x_words(IR_PIXELS, IR_LABELS))
    assert axis is not None and axis.scale == "linear"
    assert [t.text for t in axis.used] == IR_LABELS and axis.rejected == []
    assert axis.value(40.0) == pytest.approx(4000.0)
    assert axis.value(300.0) == pytest.approx(750.0)
    assert axis.pixel(2750.0) == pytest.approx(140.0)
    assert axis.direction == "descending" and axis.slope < 0
    described = _axis(axis)
    assert described["direction"] == "descending" and described["scale"] == "linear"
    ascending = fit_axis("x", _x_words(IR_PIXELS, IR_LABELS[::-1]))
    assert ascending.direction == "ascending" and _axis(ascending)["direction"] == "ascending"


def test_a_descending_y_axis_is_read_as_drawn():
    """A y axis whose values grow downwards (0 at the top, 50 at the bottom: depth, or an
    inverted magnitude axis)."""
    rows = [20.0, 60.0, 100.0, 140.0, 180.0, 220.0]
    labels = ["0", "10", "20", "30", "40", "50"]
    axis = fit_axis("y", _y_words(rows, labels))
    assert axis.direction == "descending" and axis.slope > 0
    assert axis.value(20.0) == pytest.approx(0.0, abs=1e-9)
    assert axis.value(200.0) == pytest.approx(45.0)
    upwards = fit_axis("y", _y_words(rows, labels[::-1]))
    assert upwards.direction == "ascending" and upwards.value(200.0) == pytest.approx(5.0)


@pytest.mark.parametrize("reverse", [False, True])
def test_a_misread_among_descending_labels_is_rejected_as_among_ascending(reverse):
    """The same misread (3000 read as 8000) on an axis drawn either way is rejected, and the
    axis maps its word to the true value."""
    labels = list(IR_LABELS[::-1] if reverse else IR_LABELS)
    misread = labels.index("3000")
    labels[misread] = "8000"
    axis = fit_axis("x", _x_words(IR_PIXELS, labels))
    assert [t.text for t in axis.rejected] == ["8000"]
    assert axis.value(IR_PIXELS[misread]) == pytest.approx(3000.0)
    assert axis.direction == ("ascending" if reverse else "descending")
    assert axis.residual == pytest.approx(0.0, abs=1e-9)


def test_two_misreads_that_descend_do_not_reverse_an_ascending_axis():
    """An ascending axis 400 ... 800 with two labels misread so that they descend (600 as 900,
    700 as 300): the usual direction keeps three labels, the reversed one only the two
    misreads, so the axis stays ascending and both misreads are rejected."""
    pixels = [20.0, 60.0, 100.0, 140.0, 180.0]
    axis = fit_axis("x", _x_words(pixels, ["400", "500", "900", "300", "800"]))
    assert axis.direction == "ascending"
    assert sorted(t.text for t in axis.rejected) == ["300", "900"]
    assert axis.value(100.0) == pytest.approx(600.0)


def test_a_descending_axis_needs_three_labels_that_agree():
    """Two labels fit a line either way: two that descend are no axis (as before), three are."""
    assert fit_axis("x", _x_words([50.0, 150.0], ["1000", "500"])) is None
    axis = fit_axis("x", _x_words([50.0, 150.0, 250.0], ["1000", "500", "0"]))
    assert axis.direction == "descending" and axis.value(100.0) == pytest.approx(750.0)


def test_a_descending_axis_confirmed_by_a_label_read_one_digit_off():
    """plotnine's three labels in small serif digits, 3000 read as 6000 by both readers: the
    reversed fit keeps 2000 and 1000, and the third word, one digit off the 3000 they imply,
    confirms it (an axis refused before); a one-digit label so misread confirms nothing."""
    pixels = [45.0, 102.5, 160.5]
    axis = fit_axis("x", _x_words(pixels, ["6000", "2000", "1000"], ["6000", "2000", "1000"]))
    assert axis.direction == "descending"
    assert [t.text for t in axis.used] == ["2000", "1000"]
    assert axis.value(45.0) == pytest.approx(3000.0, rel=0.01)
    assert fit_axis("x", _x_words(pixels, ["6", "2", "1"])) is None


def test_a_reversed_fit_the_misread_word_confirms_beats_an_ascending_pair():
    """3000, 2000, 1000 read by both readers as 6000, 2000, 1000, and the last also as 4000
    by Tesseract: the ascending pair 2000, 4000 and the descending pair 2000, 1000 keep two
    ticks each; only the descending one is confirmed by a word read one digit off (6000 for
    3000: the 0 the ascending pair implies there is not), so the axis descends."""
    pixels = [66.8, 126.8, 187.0]
    tesseract = _x_words(pixels, ["6000", "2000", "1000"], ["6000", "2000", "4000"])
    reader = [replace(t, by_label_reader=True) for t in _x_words(pixels, ["6000", "2000", "1000"])]
    axis = fit_axis("x", tesseract + reader)
    assert axis.direction == "descending"
    assert axis.value(66.8) == pytest.approx(3000.0, rel=0.01)


def test_a_word_the_other_fit_keeps_confirms_no_reversal():
    """y labels 0.5, 1.0, 1.5 with the top one cut to its 5, by both readers (and 0.5, its
    point put back, by Tesseract's): the reversed pair 1.0, 0.5 would imply 1.5 at the bottom
    word, read 0.5, one digit off; but that word is a tick the upward fit keeps, so it
    confirms no reversal and the axis stays ascending."""
    rows = [36.5, 75.5, 114.5]
    tesseract = _y_words(rows, ["5", "1.0", "0.5"])
    reader = [replace(t, by_label_reader=True) for t in tesseract]
    axis = fit_axis("y", tesseract + reader + [replace(tesseract[0], value=0.5)])
    assert axis.direction == "ascending"
    assert axis.value(114.5) == pytest.approx(0.5) and axis.value(75.5) == pytest.approx(1.0)


def test_thousands_separators_read_as_their_numbers():
    """Plotly and ggplot label 1,000 ... 5,000; Tesseract may also drop one comma."""
    pixels = [30.0, 70.0, 110.0, 150.0, 190.0]
    labels = ["1,000", "2,000", "3,000", "4000", "5,000"]
    axis = fit_axis("x", _x_words(pixels, labels))
    assert [t.value for t in axis.used] == [1000.0, 2000.0, 3000.0, 4000.0, 5000.0]
    assert axis.value(50.0) == pytest.approx(1500.0)
    # a word with its comma seen as a decimal point (a small glyph at the digits' foot) still
    # reads 1,000, not 1.000
    word = Word((20.0, 0.0, 40.0, 10.0), ((20, 0, 24, 10), (25, 8, 27, 11), (28, 0, 32, 10)))
    assert word.point == 1
    assert [t.value for t in _candidates("x", 0, word, ["1,000"])] == [1000.0]


@pytest.mark.parametrize(
    "labels",
    [
        ["0", "1e+03", "2e+03", "3e+03", "4e+03"],
        ["0", "1000", "2000", "3000", "4000"],
        ["0", "1E3", "2E3", "3E3", "4E3"],
    ],
)
def test_scientific_labels_read_as_their_plain_numbers(labels):
    pixels = [30.0, 70.0, 110.0, 150.0, 190.0]
    axis = fit_axis("x", _x_words(pixels, labels))
    assert axis.scale == "linear" and len(axis.used) == 5
    assert axis.value(90.0) == pytest.approx(1500.0)


def test_scientific_labels_with_a_misread_are_still_checked():
    """1e+03 ... 5e+03 with 3e+03 read as 8e+03: rejected, as 8000 among 1000 ... 5000."""
    pixels = [30.0, 70.0, 110.0, 150.0, 190.0]
    axis = fit_axis("x", _x_words(pixels, ["1e+03", "2e+03", "8e+03", "4e+03", "5e+03"]))
    assert [t.text for t in axis.rejected] == ["8e+03"]
    assert axis.value(110.0) == pytest.approx(3000.0)


@pytest.mark.parametrize(
    "labels",
    [
        ["10", "100", "1000", "10000"],
        ["1e+01", "1e+02", "1e+03", "1e+04"],
        ["10", "100", "1,000", "10,000"],
        ["10^1", "10^2", "10^3", "10^4"],
        ["101", "102", "103", "104"],  # matplotlib's 10 with a superscript, read on one line
    ],
)
def test_a_log_y_axis_in_each_librarys_labels(labels):
    rows = [190.0, 130.0, 70.0, 10.0]
    axis = fit_axis("y", _y_words(rows, labels))
    assert axis.scale == "log" and axis.direction == "ascending"
    assert [t.value for t in axis.used] == [10.0, 100.0, 1000.0, 10000.0]
    assert axis.value(160.0) == pytest.approx(10**1.5)
    assert axis.value(40.0) == pytest.approx(10**3.5)
    assert _axis(axis)["scale"] == "log"


def test_three_powers_read_on_one_line_make_a_log_axis():
    """The brief's case: words 101, 102, 103 at equal pixel steps are 10, 100, 1000; three
    ticks each way, and the log reading wins (calibrate._better)."""
    axis = fit_axis("x", _x_words([40.0, 120.0, 200.0], ["101", "102", "103"]))
    assert axis.scale == "log"
    assert axis.value(80.0) == pytest.approx(10**1.5)
    assert axis.value(200.0) == pytest.approx(1000.0)
    plain = fit_axis("x", _x_words([40.0, 120.0, 200.0], ["10", "100", "1000"]))
    assert plain.scale == "log" and plain.value(80.0) == pytest.approx(10**1.5)


def test_negative_powers_read_on_one_line_make_a_log_axis():
    """A decay on a log y, 10^-3 ... 10^0, read as 10-3, 10-2, 10-1 and 100: none of the
    first three is a number, so only the log fit reads them."""
    rows = [190.0, 130.0, 70.0, 10.0]
    axis = fit_axis("y", _y_words(rows, ["10-3", "10-2", "10-1", "100"]))
    assert axis.scale == "log"
    assert axis.value(190.0) == pytest.approx(1e-3)
    assert axis.value(40.0) == pytest.approx(10**-0.5)


def test_ggplots_powers_read_without_their_one_make_a_log_axis():
    """plotnine's 1e2 ... 1e5 on a log y at 5 px: the 1 is a glyph a pixel or two wide and
    Tesseract reads e3 or e+4 (no number); each is 10^n for log fits, and with the two read
    whole, four ticks at even steps make the log axis. A reading e999 is no float."""
    rows = [160.0, 120.0, 80.0, 40.0]
    axis = fit_axis("y", _y_words(rows, ["1e2", "e3", "e+4", "1e5"]))
    assert axis.scale == "log" and len(axis.used) == 4
    assert axis.value(100.0) == pytest.approx(10**3.5)
    (tick,) = _candidates("y", 0, Word((0.0, 0.0, 20.0, 8.0)), ["e999"])
    assert math.isnan(tick.value)


def test_a_descending_log_axis():
    axis = fit_axis("x", _x_words([40.0, 120.0, 200.0, 280.0], ["104", "103", "102", "101"]))
    assert axis.scale == "log" and axis.direction == "descending"
    assert axis.value(40.0) == pytest.approx(1e4) and axis.value(240.0) == pytest.approx(10**1.5)


def test_linear_axes_starting_10_stay_linear():
    """Linear labels that begin with 10 but step otherwise than one decade a tick stay linear:
    100, 105, 110 (powers 1, 10^5, and no power) and 10, 20, 30."""
    pixels = [40.0, 120.0, 200.0, 280.0]
    for labels in (["100", "105", "110", "115"], ["10", "20", "30", "40"]):
        axis = fit_axis("x", _x_words(pixels, labels))
        assert axis.scale == "linear", labels
        assert [t.text for t in axis.used] == labels
    # one label read as 10 then a digit on a linear axis changes nothing
    axis = fit_axis("x", _x_words(pixels, ["90", "100", "110", "120"], ["90", "102", "110", "120"]))
    assert axis.scale == "linear" and axis.value(80.0) == pytest.approx(95.0)


def test_a_word_read_only_as_a_power_is_a_candidate_of_log_fits_only():
    (tick,) = _candidates("y", 0, Word((0.0, 0.0, 20.0, 8.0)), ["10-3"])
    assert tick.power and tick.value == pytest.approx(1e-3) and tick.text == "10^-3"
    (tick,) = _candidates("y", 0, Word((0.0, 0.0, 20.0, 8.0)), ["abc"])
    assert math.isnan(tick.value) and not tick.power


def test_thousands_separators_read_as_points_are_separators():
    """matplotlib's 0, 2,500 ... 10,000 (a comma formatter) as both readers read it, on a chart
    drawn here: 2.500, 5.000, 7.500, 10.000. Three decimals where the values need one: the
    points are separators. Real three-decimal labels (0.125, 0.250; 1.000, 1.005) stay."""
    pixels = [71.0, 124.0, 176.0, 229.0, 282.0]
    ticks = _x_words(pixels, ["0", "2.500", "5.000", "7.500", "10.000"])
    ticks = _separators_read_as_points(ticks)
    axis = fit_axis("x", ticks + _points_dropped(ticks))
    assert [t.value for t in axis.used] == [0.0, 2500.0, 5000.0, 7500.0, 10000.0]
    assert [t.text for t in axis.used][1:] == ["2,500", "5,000", "7,500", "10,000"]
    for labels in (["0.000", "0.125", "0.250", "0.375"], ["1.000", "1.005", "1.010", "1.015"]):
        ticks = _x_words(pixels[:4], labels)
        assert _separators_read_as_points(ticks) == ticks, labels
        assert [t.text for t in fit_axis("x", ticks).used] == labels
    ticks = _x_words(pixels[:3], ["2.5", "5.0", "7.5"])  # one decimal: a decimal point
    assert _separators_read_as_points(ticks) == ticks


def test_separators_read_as_points_on_a_log_axis():
    """A log y labelled 0.1, 1, 10, 100, 1,000, 10,000 (a comma formatter, drawn here), the
    last two read 1.000 and 10.000: 0.1 needs one decimal, so they are thousands."""
    rows = [200.0, 165.0, 130.0, 95.0, 60.0, 25.0]
    ticks = _y_words(rows, ["0.1", "1", "10", "100", "1.000", "10.000"])
    axis = fit_axis("y", _separators_read_as_points(ticks))
    assert axis.scale == "log" and len(axis.used) == 6
    assert axis.value(25.0) == pytest.approx(1e4) and axis.value(112.5) == pytest.approx(10**1.5)


def test_two_ticks_no_third_confirms_must_imply_a_round_step():
    """plotnine's 0.75, 0.50, 0.25 read as 0.75, 5.50, 0.25: the pair 5.50 and 0.25 predicts
    10.75 at the top label, as like 0.75 as 0.50 is like 5.50, but a step of 5.25 between
    neighbouring labels, which no axis draws; the pair 0.75 and 0.25 steps by 0.25."""
    ticks = _y_words([55.0, 95.0, 135.0], ["0.75", "5.50", "0.25"])
    axis = fit_axis("y", ticks)
    assert sorted(t.text for t in axis.used) == ["0.25", "0.75"]
    assert axis.value(95.0) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("readings", "multiplier"),
    [
        (["1e7", "1e7"], 1e7),
        (["e7", "e7"], 1e7),
        (["", "1e-5"], 1e-5),
        (["166", "166"], 1e6),
        (["16", "16", "1e6"], 1e6),
        (["106", "1e6"], 1e6),
        (["e7", "1e^7"], 1e7),
        (["e2", "e7", "1e^7"], 1e7),
        (["e", "7"], 1.0),
        (["ee", "x"], 1.0),
    ],
)
def test_matplotlibs_offset_text_is_read_with_or_without_its_one(readings, multiplier):
    """matplotlib writes a y axis's multiplier as 1eN; the 1, two pixels wide in a small font,
    is often not read, its e is read as a 6 (166), a 0 (106) or not at all (16), the label
    reader writes 1e^N, and the multiplier is still 10^N, the exponent most readings read.
    What reads as no such text (a lone digit among them) is 1."""
    assert _multiplier(readings) == multiplier


@pytest.mark.parametrize(
    ("readings", "votes", "multiplier"),
    [
        (["", "", "-0"], ["1070"], 1.0),  # a plotnine legend's edge above the plot
        (["", "", "7", "1"], ["15", "0"], 1.0),  # a scan's specks above a y axis
        (["", "", "1"], ["1e6"], 1e6),  # motion blur: only the voter reads the e and the 6
        (["e2", "e", "10^7"], ["107"], 1e7),  # Tesseract misreads the 7; the voter's vote decides
        (["e7", "e", "07"], ["07"], 1e7),  # only Tesseract reads the e
        (["e7", "e", "1e3"], ["1e2", "1e^2"], 1e7),  # a 7 on the box's top line (seed 103, 77)
        (["ee", "e7", "1e^3"], ["10^0", "10^0"], 1e7),  # seed 111's chart 1
    ],
)
def test_a_voters_reading_of_an_offset_text_counts_where_a_reading_agrees_or_written_out(
    readings, votes, multiplier
):
    """A voter's (digitize_reader.voters) reading of what may be an offset text adds its vote
    to Tesseract's and the shipped reader's where one of theirs reads the same exponent: the
    voters misread alike (focus seed 103's chart 77, a 7 drawn onto the box's top line: both
    read 2, outvoting Tesseract's 7 and the reader's 3). Where none of theirs reads an exponent,
    a voter counts only written out (1e6), not in the forms a misread e leaves (107, 15):
    nothing checks an exponent as the fit checks a tick (dev seed 105's chart 23, where the
    voter read a legend's edge as 1070, had y scaled by 10^70)."""
    assert _multiplier(readings, votes) == multiplier


@pytest.mark.parametrize(
    ("readings", "votes", "multiplier"),
    [
        (["e1", "e11", "1e1"], ["1e1", "1e1"], 1e11),  # dev chart 66 in hertz: one reads 11
        (["e", "e", "1e1"], ["101", "1e11"], 1e11),  # chart 20: a voter's, written out
        (["e7", "e7", "1e37"], ["1e7", "1e3"], 1e7),  # dev2 chart 59: 37 is no 7 doubled
        (["1e1", "1e1"], ["1e1"], 10.0),  # no reading holds a doubled digit: 1e1 as read
    ],
)
def test_a_repeated_digit_read_once_is_read_twice_where_another_reading_has_it(
    readings, votes, multiplier
):
    """An x axis in hertz with matplotlib's 1e11 under it: Tesseract reads its two 1s, two
    pixels wide, as one (1e1) in most of its readings, and the vote took 10 for 10^11. Where a
    reading, or a voter's written out, holds the exponent with a digit doubled, that one is
    what was drawn; an exponent with another digit added (37 for 7) is no such reading."""
    assert _multiplier(readings, votes) == multiplier


def test_a_trailing_point_is_no_decimal_and_a_value_both_readers_read_wins():
    """plotnine's 100 and 50 (y, 61 px apart) read by Tesseract as 100. and 2. (a speck read as
    a point) and as 50 under the other darkening; the label reader reads 100 and 50. Both pairs
    fit two ticks with a round step (50; 98, within 3 % of 100): a point with no digit after it
    claims no decimal, and the value both readers read wins."""
    tesseract = _y_words([60.0, 121.0], ["100.", "2."])
    tesseract += _candidates("y", 1, Word((16.0, 117.0, 22.0, 125.0)), ["50"])
    reader = [
        replace(tick, by_label_reader=True) for tick in _y_words([60.0, 121.0], ["100", "50"])
    ]
    axis = fit_axis("y", tesseract + reader)
    assert sorted(t.value for t in axis.used) == [50.0, 100.0]
    assert axis.value(121.0) == pytest.approx(50.0)


def test_the_label_readers_value_wins_where_it_fits_clearly_closer():
    """A dev chart's 0.25 ... 1.25 (y) as Tesseract read them, points dropped (025, 050, 100,
    128: put back, 1.25 is 1.28, 2 px from its tick, near enough to stay in Tesseract's fit and
    tilt it by half a pixel), and as the label reader read them: as many ticks, fitted four
    times closer, so the reader's fit is kept."""
    positions = [67.5, 30.0, 49.0, 105.0, 86.5]
    read = [["0.75", ".7"], ["128"], ["10", "100"], ["025"], ["050", "0"]]
    tesseract = []
    for index, (position, texts) in enumerate(zip(positions, read, strict=True)):
        word = Word((13.0, position - 3.0, 27.0, position + 3.0))
        tesseract += _candidates("y", index, word, texts)
    tesseract += _points_dropped(tesseract)
    reader = [
        replace(tick, word=index, by_label_reader=True)
        for index, tick in enumerate(_y_words(positions, ["0.75", "1.25", "1.00", "0.25", "0.50"]))
    ]
    assert fit_axis("y", tesseract).value(30.0) > 1.26  # off by over 1 % of the range
    axis = fit_axis("y", tesseract + reader)
    assert sorted(t.value for t in axis.used) == [0.25, 0.5, 0.75, 1.0, 1.25]
    assert axis.value(30.0) == pytest.approx(1.25, abs=0.002)


def test_three_misread_ticks_that_step_unroundly_lose_to_a_round_step():
    """plotnine's 0, 500, 1000, 1500 (y, 34.25 px apart) as a dev chart's were read: 1000;
    600 or 800; 1500 or 1800; 0 by the label reader only. 0, 600 and 1800 lie on one line
    (a step of 600), as 0, 1000 and 1500 do (500): the round step wins."""
    read = [(95.5, ["1000"], ["1000"]), (129.5, ["800", "600"], ["800"])]
    read += [(61.0, ["1500", "1800"], ["1500"]), (164.0, ["/"], ["0"])]
    ticks = []
    for index, (position, tesseract, reader) in enumerate(read):
        word = Word((13.0, position - 3.0, 29.0, position + 3.0))
        ticks += _candidates("y", index, word, tesseract)
        ticks += [replace(t, by_label_reader=True) for t in _candidates("y", index, word, reader)]
    axis = fit_axis("y", ticks)
    assert sorted(t.value for t in axis.used) == [0.0, 1000.0, 1500.0]
    assert axis.value(129.5) == pytest.approx(500.0, abs=5.0)


def test_a_log_axis_with_a_label_misread_steps_by_the_labels_spacing():
    """matplotlib's 10^4, 10^3, 10^2, 10^1 (y, 54 px apart) as a dev chart's were read by
    Tesseract: 104; 10 with the exponent 2; 10 and 1; 10 or 107 and 2. 10^4, 10^2 and 10^1 fit
    a log line; the labels step one decade (their spacing), though the three are 108 and 55 px
    apart."""
    read = [(24.5, ["104"], []), (78.5, ["10"], ["2"]), (187.5, ["10"], ["1"])]
    read += [(132.5, ["10", "107"], ["2"])]
    ticks = []
    for index, (position, texts, exponents) in enumerate(read):
        word = Word((22.0, position - 5.0, 40.0, position + 5.0))
        ticks += _candidates("y", index, word, texts)
        ticks += _exponent_readings(exponents, ticks[-1])
    axis = fit_axis("y", ticks)
    assert axis.scale == "log"
    assert sorted(t.value for t in axis.used) == [10.0, 100.0, 10000.0]
    assert axis.value(78.5) == pytest.approx(1000.0, rel=0.05)


def _read_y(read):
    """The ticks read_ticks offers for y words: (row, Tesseract's texts, the label reader's
    texts, exponents Tesseract read alone) each."""
    ticks = []
    for index, (position, tesseract, reader, exponents) in enumerate(read):
        word = Word((3.0, position - 4.0, 18.0, position + 4.0))
        ticks += _candidates("y", index, word, tesseract)
        ticks += _exponent_readings(exponents, ticks[-1])
        ticks += [replace(t, by_label_reader=True) for t in _candidates("y", index, word, reader)]
    return ticks


def test_powers_the_label_reader_guesses_make_no_linear_axis():
    """matplotlib's 10^4 ... 10^1 (y, 58.7 px apart) at 3 px exponents, as a dev chart's were
    read: 107 or 10^4; 10^0; 10^0; 10^1, or an exponent alone read 4 or 8. 10^4 and 10^0 made
    a linear axis (10000 to 1, two ticks each way, and linear when in doubt); written powers
    are for log fits only, and of the log pairs that no third tick confirms, the one a decade a
    tick apart is the axis."""
    read = [(58.0, ["107"], ["10^4"], []), (117.0, [""], ["10^0"], [])]
    read += [(175.2, [""], ["10^0"], []), (234.0, [""], ["10^1"], ["4", "8"])]
    axis = fit_axis("y", _read_y(read))
    assert axis.scale == "log"
    assert sorted(t.value for t in axis.used) == [10.0, 10000.0]
    assert axis.value(117.0) == pytest.approx(1000.0, rel=0.02)


def test_a_log_axis_steps_a_decade_a_tick_unless_every_word_reads_wider():
    """matplotlib's 10^0 ... 10^3 (y, 43 px apart) as a dev chart's were read: 10^0; 10^5 or
    10^0; 10^3 or 10^5; 10^3, 10^13 or 10^1. Three misreads step two decades a tick (10^5,
    10^3, 10^1) and the bottom word disagrees; 10^0 and 10^1, a decade a tick, are the axis.
    plotnine's 1e2, 1e4, 1e6, all read alike, step two decades, though one exponent read
    alone (10^4 at 1e2) and 1e4 make a pair a decade a tick apart."""
    read = [(146.9, [""], ["10^0"], []), (17.9, [""], ["10^0"], ["5"])]
    read += [(60.9, [""], ["10^5"], ["3"]), (103.9, [""], ["10^1"], ["3", "13"])]
    axis = fit_axis("y", _read_y(read))
    assert axis.scale == "log"
    assert axis.value(60.9) == pytest.approx(100.0, rel=0.02)
    read = [(122.2, ["1e2"], ["1e2"], ["4"]), (37.2, ["1e6"], ["1e6"], [])]
    read += [(79.2, ["1e4"], ["1e4"], ["4"])]
    axis = fit_axis("y", _read_y(read))
    assert axis.scale == "log" and len(axis.used) == 3
    assert axis.value(100.7) == pytest.approx(1000.0, rel=0.02)


def test_the_label_readers_exponents_outweigh_tesseracts():
    """matplotlib's 10^5 ... 10^2 (y, 57.5 px apart, 3 px exponents) as a focus chart's (seed
    101, every y log, chart 62) were read: Tesseract the exponents alone 5, 6, 7 or 2, 3, and
    10^7 on the line too; the label reader 10^5, 10^4, 10^4, 10^5. Tesseract's 10^6 and 10^7
    (read twice) with the reader's last 10^5 made three ticks a decade apart, the wrong way
    round; the reader's 10^5 and 10^4, Tesseract agreeing on the first, are the axis:
    Tesseract's reading of a power counts half the reader's, once however many agree."""
    read = [(21.0, [""], ["10^5"], ["5"]), (136.0, [""], ["10^4"], ["6"])]
    read += [(78.5, ["10^7"], ["10^4"], ["7", "2"]), (193.0, [""], ["10^5"], ["3"])]
    axis = fit_axis("y", _read_y(read))
    assert axis.scale == "log"
    assert sorted(t.value for t in axis.used) == [10**4, 10**5]
    assert axis.value(136.0) == pytest.approx(1000.0, rel=0.02)


def test_one_power_tesseract_misread_leaves_a_linear_axis_linear():
    """A dev2 chart's restoration (chart 102, motion blur, medium), y labels 0 ... 2000 as read:
    Tesseract read one word 107, a power 10^7 to it, which with its 740 and 8 made a log line of
    three ticks. The readers' weights are for axes the label reader reads as powers; here it
    read none, and the linear axis through 0, 740, 1000 and 1500 stands."""
    read = [(41.75, ["1", "107"], ["120", "2000"], []), (57.25, ["e/"], ["1000"], [])]
    read += [(26.23, ["18", "1499"], ["1500", "2000"], []), (73.15, ["740"], ["750", "200"], [])]
    read += [(89.14, ["8"], ["600", "800"], []), (105.1, ["/"], ["260", "200"], [])]
    read += [(121.0, ["0", "9"], ["0"], [])]
    axis = fit_axis("y", _read_y(read))
    assert axis.scale == "linear"
    assert axis.value(57.25) == pytest.approx(1000.0, rel=0.02)


def test_two_powers_written_out_make_a_log_axis():
    """Two ticks fit any line, so a log axis needs a third word to tell it, unless the labels
    are powers of ten: 10^2 and 10^3 alone (the other words unread) are a decade apart on a
    log axis, as no linear axis writes its labels."""
    axis = fit_axis("y", _read_y([(100.0, [""], ["10^2"], []), (40.0, [""], ["10^3"], [])]))
    assert axis.scale == "log"
    assert axis.value(70.0) == pytest.approx(10**2.5)


def test_two_powers_in_scientific_notation_make_a_log_axis_not_a_linear_one():
    """plotnine's 1e6 ... 1e2 (y, 36.5 px apart, light theme, 5 px type) as a focus chart's
    (seed 105, chart 80) were read by the label reader: 1e0, 1e5, 1e0, 1e0, 1e2 from the top,
    Tesseract reading none. The pair 1e0, 1e5 made a linear axis as surely as 1e5, 1e2 made a
    log one (two ticks each, linear when in doubt); a linear axis in scientific notation writes
    one label with a mantissa of 1, so the powers of ten make the log axis."""
    read = [(5.5, [""], ["1e0"], []), (42.0, [""], ["1e5"], []), (78.5, [""], ["1e0"], [])]
    read += [(115.0, [""], ["1e0"], []), (151.5, [""], ["1e2"], [])]
    axis = fit_axis("y", _read_y(read))
    assert axis.scale == "log"
    assert axis.value(5.5) == pytest.approx(1e6, rel=0.02)
    scientific = [(5.5, ["3e+05"], [""], []), (42.0, ["2e+05"], [""], [])]
    scientific += [(78.5, ["1e+05"], [""], []), (115.0, ["0e+00"], [""], [])]
    assert fit_axis("y", _read_y(scientific)).scale == "linear"


def test_decimal_points_only_the_label_reader_read_make_the_axis():
    """plotnine's 0.5, 1.0, 1.5 (y, 45.5 px apart) as a chart's were read: Tesseract dropped
    every point (05, 10, 15), the label reader kept them. Both fits keep the three words, and
    the readings with their points are the axis. A reader that drops a digit from every label
    (100, 200, 300 where Tesseract reads 1000, 2000, 3000) reads no point and is outvoted."""
    read = [(60.5, ["15"], ["1.5"], []), (151.5, ["05"], ["0.5"], []), (106.0, ["10"], ["1.0"], [])]
    axis = fit_axis("y", _read_y(read))
    assert sorted(t.value for t in axis.used) == [0.5, 1.0, 1.5]
    assert axis.value(83.25) == pytest.approx(1.25)
    read = [(60.5, ["3000"], ["300"], []), (151.5, ["1000"], ["100"], [])]
    axis = fit_axis("y", _read_y(read + [(106.0, ["2000"], ["200"], [])]))
    assert sorted(t.value for t in axis.used) == [1000.0, 2000.0, 3000.0]


def test_the_label_readers_readings_that_keep_every_word_beat_tesseracts_in_part():
    """plotnine's 400 ... 700 (100 px apart) as a chart's were read by Tesseract: 40 or 0, 20,
    60, 70 or 0 (three in line, a step of 10), and by the label reader right. Tesseract's
    fit keeps three words and the reader's all four: one more, not CLEARLY_MORE, yet the axis
    read whole wins."""
    read = [(330.5, ["0", "40"], ["400"], []), (233.5, ["20"], ["500"], [])]
    read += [(137.5, ["60"], ["600"], []), (40.5, ["0", "70"], ["700"], [])]
    axis = fit_axis("y", _read_y(read))
    assert sorted(t.value for t in axis.used) == [400.0, 500.0, 600.0, 700.0]
    assert axis.value(185.5) == pytest.approx(550.0)


def _read_x(read):
    """The ticks read_ticks offers for x words: (column, Tesseract's texts, the label reader's
    texts) each."""
    ticks = []
    for index, (position, tesseract, reader) in enumerate(read):
        word = Word((position - 11.0, 186.0, position + 11.0, 195.0))
        ticks += _candidates("x", index, word, tesseract)
        ticks += [replace(t, by_label_reader=True) for t in _candidates("x", index, word, reader)]
    return ticks


def test_two_misread_points_set_no_decimals_on_an_axis_read_without_them():
    """matplotlib's crowded 4000 ... 500 on a descending x (classic style, focus set seed 103,
    chart 34), split at the tick marks and read with neighbours' digits: Tesseract read two
    words with a point, 135.00 and 115.00, and the axis's read decimals became two. Expected
    as 4000.00 ... 500.00, the true labels agreed less than the pair 135, 115 (a step of 5,
    their 13000 and 11000 read one point off); the labels with the pair's own decimals agree
    best, and the axis keeps seven words."""
    read = [(54.5, ["4000."], ["4000"]), (78.0, ["135.00", "13500."], ["5500"])]
    read += [(101.2, ["13000"], ["3000"]), (124.8, ["2500"], ["1500"])]
    read += [(148.0, ["2000"], ["8000"]), (172.0, ["11500", "115.00"], ["1500"])]
    read += [(195.0, ["11000"], ["1000"]), (218.5, ["500"], ["500"])]
    axis = fit_axis("x", _read_x(read))
    assert axis.direction == "descending"
    assert sorted(t.value for t in axis.used) == [500.0 * k for k in (1, 2, 3, 4, 5, 6, 8)]
    assert axis.value(78.0) == pytest.approx(3500.0, rel=0.005)


def test_a_log_axis_with_a_label_not_found_steps_by_its_labels_spacing():
    """Log focus set 107, chart 10: 10^4, 10^3 and 10^1 found, 10^2 not (45 px between
    decades). The steps between the words found, 45.5 and 90.5 px, are one and two spacings:
    the spacing is 45, not their median (68, a decade and a half), and the axis is log."""
    ticks = []
    for index, (position, power) in enumerate([(13.5, 4), (59.0, 3), (149.5, 1)]):
        word = Word((22.0, position - 5.0, 40.0, position + 5.0))
        ticks += _candidates("y", index, word, [f"10^{power}"])
    axis = fit_axis("y", ticks)
    assert axis.scale == "log" and len(axis.used) == 3
    assert axis.value(104.25) == pytest.approx(100.0, rel=0.02)


def test_a_log_axis_round_step_is_whole_decades():
    """Log focus set 117, chart 2: 10^1 and 10^0 read 43.5 px apart, and a piece of 10^-1's
    exponent read as 1 40.5 px under 10^0. That piece and 10^1 make a step of half a decade a
    spacing, round on a linear axis (5 times a power of ten) but no log axis's: the pair that
    steps a whole decade is the fit."""
    ticks = []
    for index, (position, text) in enumerate([(66.0, "10^0"), (22.5, "10^1"), (106.5, "1")]):
        word = Word((22.0, position - 4.0, 34.0, position + 4.0))
        ticks += _candidates("y", index, word, [text])
    axis = fit_axis("y", ticks)
    assert axis.scale == "log"
    assert sorted(t.value for t in axis.used) == [1.0, 10.0]


def test_labels_a_few_pixels_apart_set_no_spacing():
    """dev2 chart 113: 1500 found as two words, 1 and 500, 7.5 px apart among labels 28-29 px
    apart. Each step is close to a whole number of 7.5 px spacings (3.8, 3.9), yet the labels'
    spacing is their usual step: only a label or two not found (a step two or three times the
    smallest) make a longer one."""
    positions = np.array([31.75, 60.25, 89.0, 118.0, 140.5, 148.0, 176.0, 204.25])
    assert _spacing(positions) == pytest.approx(28.4, abs=0.5)
    assert _spacing(np.array([13.5, 59.0, 149.5])) == pytest.approx(45.3, abs=0.3)


def test_values_other_than_powers_of_ten_make_no_log_axis():
    """A restored chart of dev2 (chart 54, lowres at hard): its y labels read 0.5, 6.0 and 60,
    24 px apart, about a decade a spacing. A log axis labels powers of ten; such a line is
    misreads, and was read as a log axis 10^5 times off."""
    ticks = []
    for index, (position, text) in enumerate([(54.5, "0.5"), (78.5, "6.0"), (103.0, "60")]):
        word = Word((17.0, position - 4.0, 29.0, position + 4.0))
        ticks += _candidates("y", index, word, [text])
    axis = fit_axis("y", ticks)
    assert axis is None or axis.scale == "linear"
