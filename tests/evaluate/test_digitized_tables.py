"""evaluate's digitize table: per level, pooled over domains, the share of charts calibrated,
the median curve error, the mean task-6b line score and how often the model lowered the error,
for the input, the model and the sharp chart; each library's cells kept to its own charts."""

from __future__ import annotations

from linefuse.evaluate.scoring import Cell
from linefuse.evaluate.tables import _digitized_by_level

MODEL = "model_s1"


def _cell(readings: dict[str, list[tuple[bool, float, float]]], libraries: list[str]) -> Cell:
    cell = Cell()
    for name, values in readings.items():
        cell.digitized[name] = list(values)
    cell.digitized_libraries = list(libraries)
    return cell


def test_a_level_pools_its_domains_charts():
    gaussian = _cell(
        {
            "input": [(False, 100.0, 0.0), (True, 4.0, 0.5)],
            MODEL: [(True, 1.0, 0.9), (True, 5.0, 0.6)],
            "sharp": [(True, 0.5, 1.0), (True, 0.7, 0.9)],
        },
        ["matplotlib", "plotnine"],
    )
    motion = _cell(
        {"input": [(True, 3.0, 0.7)], MODEL: [(True, 2.0, 0.8)], "sharp": [(True, 0.5, 0.95)]},
        ["matplotlib"],
    )
    table = _digitized_by_level({"gaussian": {"hard": gaussian}, "motion": {"hard": motion}}, MODEL)
    row = table["hard"]
    assert row["charts"] == 3
    assert row["input"] == {
        "calibrated": round(2 / 3, 4),
        "curve_error_pct_median": 4.0,
        "line_score_mean": 0.4,
    }
    assert row[MODEL] == {
        "calibrated": 1.0,
        "curve_error_pct_median": 2.0,
        "line_score_mean": round(2.3 / 3, 4),
    }
    assert row["sharp"]["curve_error_pct_median"] == 0.5
    assert row["sharp"]["line_score_mean"] == round(2.85 / 3, 4)
    assert row["model_lowers_error"] == round(2 / 3, 4)  # 1 < 100, 5 > 4, 2 < 3

    mine = gaussian.of_library("plotnine")
    assert mine.digitized == {
        "input": [(True, 4.0, 0.5)],
        MODEL: [(True, 5.0, 0.6)],
        "sharp": [(True, 0.7, 0.9)],
    }
    assert mine.digitized_libraries == ["plotnine"]


def test_a_library_with_no_chart_digitized_at_a_level_has_no_row_for_it():
    """One library's charts were the ones digitized at hard: the other's table has no hard row
    (not a row of NaN, which is no JSON), and its easy row is its own."""
    hard = _cell(
        {"input": [(True, 3.0, 0.5)], MODEL: [(True, 2.0, 0.6)], "sharp": [(True, 0.5, 0.9)]}, ["a"]
    )
    easy = _cell(
        {"input": [(True, 1.0, 0.8)], MODEL: [(True, 0.9, 0.8)], "sharp": [(True, 0.4, 0.9)]}, ["b"]
    )
    cells = {"gaussian": {"hard": hard.of_library("b"), "easy": easy.of_library("b")}}
    table = _digitized_by_level(cells, MODEL)
    assert set(table) == {"easy"} and table["easy"]["charts"] == 1
