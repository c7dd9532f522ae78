"""`linefuse base-land`'s verdict protects every set it reads: the sharp charts of the drawn-unlike
set's trained part count beside the score set's, the thresholds are params.yaml's
(base.window.ship), the ledger's sharp_worst is the value the verdict read, and the weights are
paired with the base `model.unet` names, whatever base.name the window trains.

score_base is replaced by reports of fixed numbers (the verdict's inputs, in score_base's shape),
so each case is exact and takes no restoring; tests/base/test_window.py lands a real window."""

from __future__ import annotations

import json
import lzma
import shutil

import numpy as np
import pytest

from linefuse import paths
from linefuse.base import land
from linefuse.base.land import land_window, verdict
from linefuse.base.scores import _split_summary
from linefuse.params import ParamsError
from linefuse.params.full import Params, parse_params
from linefuse.stage import UserError

from conftest import ROOT, tiny_params

SHIPPED = ROOT / "src/linefuse/zoo/chart-base"
OFFERED = b"the weights the window offers"
# the candidate's worst sharp chart on each part that is not the drawn set's trained part: the
# score set's test part (read by the verdict) and the held-out parts (never read; the drawn set's
# lower than any floor, to show it)
SCORE_TEST_WORST, SCORE_HELD_WORST, DRAWN_HELD_WORST = 58.0, 61.0, 12.0


def _params(model_unet: str = "chart-base", name: str = "chart-base", **ship) -> Params:
    raw = tiny_params()
    raw["model"]["unet"] = model_unet
    raw["base"]["name"] = name
    raw["base"]["window"]["ship"].update(ship)
    return parse_params(raw)


def _floor() -> float:
    return _params().base.window.ship.sharp_floor_db


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A zoo with the shipped base, an empty ledger and a window's OUT folder offering weights."""
    zoo, windows, out = tmp_path / "zoo", tmp_path / "base_windows" / "chart-base", tmp_path / "out"
    shutil.copytree(SHIPPED, zoo / SHIPPED.name)
    windows.mkdir(parents=True)
    ledger = {"init": "chart-base", "init_note": "test", "init_pairs": 1000, "windows": []}
    (windows / "ledger.json").write_text(json.dumps(ledger))
    offered = out / paths.WINDOW_CANDIDATE_DIR
    offered.mkdir(parents=True)
    (offered / paths.CONFIG_FILE).write_text((SHIPPED / paths.CONFIG_FILE).read_text())
    (offered / paths.WEIGHTS_FILE).write_bytes(OFFERED)
    (out / paths.WINDOW_STATE_FILE).write_bytes(b"stable state")
    record = {
        "stable_state": {"windows": 7},
        "start_state": {"pairs": 0},
        "candidate_pairs": 5000,
        "date": "2026-12-01",
        "gpu": "NVIDIA H200",
        "device": "cuda",
        "minutes": 8.0,
        "summary": {"pairs_per_s": 14000.0, "step_share": 0.9},
    }
    (out / "record.json").write_text(json.dumps(record))
    monkeypatch.setattr(paths, "ZOO_DIR", zoo)
    monkeypatch.setattr(paths, "BASE_WINDOWS_DIR", windows.parent)
    return tmp_path


def _scored(monkeypatch, drawn_worst: float) -> list:
    """score_base replaced: on both sets the candidate restores each image 0.2-0.3 dB better than
    the shipped base, and its worst sharp chart on the drawn set's trained part is `drawn_worst`.
    Returns the (folder, chart set) of each call."""
    calls = []

    def score_base(params, folder, device, charts, read_labels=True):
        calls.append((folder, charts))
        rng = np.random.default_rng(len(charts))  # one set's images, for both models
        cells = {
            (domain, level): rng.normal(4.0, 1.5, 4)
            for domain in params.degrade.domains
            for level in params.degrade.levels
        }
        offered = folder.name == paths.WINDOW_CANDIDATE_DIR
        shift = 0.25 if offered else 0.0
        worst = {
            ("score", "test"): SCORE_TEST_WORST,
            ("score", "held_out"): SCORE_HELD_WORST,
            ("drawn", "test"): drawn_worst,
            ("drawn", "held_out"): DRAWN_HELD_WORST,
        }
        report = {}
        for split in ("test", "held_out"):
            spread = np.linspace(-0.05, 0.05, 4) if offered else 0.0  # a paired interval
            gains = {cell: list(g + shift + spread) for cell, g in cells.items()}
            sharp = worst[charts, split] if offered else 50.0
            report[split] = {
                **_split_summary(params, gains),
                "cer": None,
                "sharp": {"mean": 60.0, "worst": sharp},
            }
        report["sharp"] = {"mean": 60.0, "worst": min(r["sharp"]["worst"] for r in report.values())}
        return report

    def scoring_charts(params, workers=1, charts=None, count=None):
        return "drawn" if charts is not None else "score"

    monkeypatch.setattr(land, "score_base", score_base)
    monkeypatch.setattr(land, "scoring_charts", scoring_charts)
    return calls


def _landed(project, name: str = "chart-base") -> tuple[dict, dict]:
    """The ledger row and the scores base-land wrote for base `name`."""
    windows = paths.base_windows(name)
    (row,) = json.loads((windows / "ledger.json").read_text())["windows"]
    return row, json.loads((windows / f"scores-{row['window']}.json").read_text())


def test_a_drawn_unlike_sharp_chart_under_the_floor_does_not_ship(project, monkeypatch):
    """Window 6's case: better on every image of both sets, its score set's sharp charts kept,
    but a sharp chart drawn unlike the default data comes back at 22 dB: it does not ship, the
    verdict names sharp_kept, and the ledger's sharp worst is the 22 dB the verdict read."""
    assert 22.0 < _floor()
    _scored(monkeypatch, drawn_worst=22.0)
    land_window(_params(), project / "out", workers=1)
    row, scores = _landed(project)
    checks = {k: v for k, v in row["verdict"].items() if isinstance(v, bool)}
    assert checks == {
        "test_beaten": True,
        "drawn_not_lost": True,
        "sharp_kept": False,
        "ships": False,
    }
    assert row["shipped"] is False and scores["verdict"] == row["verdict"]
    assert row["sharp_worst"] == row["verdict"]["sharp_worst"] == 22.0
    assert row["verdict"]["sharp_worst_by_part"] == {"test": SCORE_TEST_WORST, "drawn": 22.0}
    # the shipped weights stay, the offer is dropped (its scores stay), the state is landed;
    # the card lists what was read
    zoo = paths.ZOO_DIR / SHIPPED.name
    assert (zoo / paths.WEIGHTS_FILE).read_bytes() == (SHIPPED / paths.WEIGHTS_FILE).read_bytes()
    windows = paths.base_windows("chart-base")
    assert not (windows / paths.WINDOW_CANDIDATE_DIR).exists()
    landed = windows / f"{paths.WINDOW_STATE_FILE}{paths.PACKED}"
    assert lzma.decompress(landed.read_bytes()) == b"stable state"
    assert "| 22.0 | no |" in (zoo / paths.CARD_FILE).read_text()


@pytest.mark.parametrize("above", [0.0, 3.0])
def test_a_drawn_unlike_sharp_chart_at_the_floor_ships(project, monkeypatch, above):
    """The same window with the drawn set's worst sharp chart at the floor or above it ships; the
    held-out sharp charts (the drawn set's at 12 dB) are not read, and the ledger's sharp worst
    is the lower of the two trained parts'."""
    worst = _floor() + above
    _scored(monkeypatch, drawn_worst=worst)
    land_window(_params(), project / "out", workers=1)
    row, scores = _landed(project)
    assert row["verdict"]["ships"] is True and row["shipped"] is True
    assert row["sharp_worst"] == scores["verdict"]["sharp_worst"] == min(SCORE_TEST_WORST, worst)
    zoo = paths.ZOO_DIR / SHIPPED.name
    assert (zoo / paths.WEIGHTS_FILE).read_bytes() == OFFERED
    assert not (paths.base_windows("chart-base") / paths.WINDOW_CANDIDATE_DIR).exists()


def test_the_thresholds_are_params_yaml_s():
    """base.window.ship decides: the same scores ship or not as its two values move."""
    found = {"test": {"low": 0.1, "mean": 0.2}, "drawn": {"mean": -0.03}}
    sharp = {"test": SCORE_TEST_WORST, "drawn": 22.0}
    default = _params()
    judged = verdict(default, found, sharp)
    assert judged["held_to"] == default.base.window.ship.model_dump()
    assert judged["sharp_kept"] is False and judged["ships"] is False
    assert judged["drawn_not_lost"] is (0.03 <= default.base.window.ship.drawn_tolerance_db)
    lower = verdict(_params(sharp_floor_db=22.0, drawn_tolerance_db=0.05), found, sharp)
    assert lower["sharp_kept"] and lower["ships"] and lower["sharp_worst"] == 22.0
    tighter = verdict(_params(sharp_floor_db=22.0, drawn_tolerance_db=0.02), found, sharp)
    assert not tighter["drawn_not_lost"] and not tighter["ships"]
    # a part with no trained chart reads no sharp chart: nothing is kept
    missing = verdict(
        _params(sharp_floor_db=22.0), found, {"test": SCORE_TEST_WORST, "drawn": None}
    )
    assert missing["sharp_worst"] is None and not missing["sharp_kept"]


@pytest.mark.parametrize("drawn_worst", [22.0, 55.0])
def test_a_new_layout_is_paired_with_the_default_base_and_first_ships_as_its_own(
    project, monkeypatch, drawn_worst
):
    """A window of a base with a name of its own (no zoo folder yet) is scored against the base
    model.unet names, on both sets; weights that ship create linefuse/zoo/<base.name> with its
    card, and the default base is left as it was either way."""
    calls = _scored(monkeypatch, drawn_worst=drawn_worst)
    default = paths.ZOO_DIR / SHIPPED.name
    before = {p.name: p.read_bytes() for p in default.iterdir()}
    land_window(_params(name="chart-deep"), project / "out", workers=1)
    row, scores = _landed(project, "chart-deep")
    # the new base's own ledger, started for it: nothing landed in chart-base's
    ledger = json.loads((paths.base_windows("chart-deep") / "ledger.json").read_text())
    assert ledger["init_pairs"] == 0 and "where shapes match" in ledger["init_note"]
    assert (
        json.loads((paths.base_windows("chart-base") / "ledger.json").read_text())["windows"] == []
    )
    offered = project / "out" / paths.WINDOW_CANDIDATE_DIR
    assert calls == [(offered, "score"), (default, "score"), (offered, "drawn"), (default, "drawn")]
    assert scores["shipped_base"] == SHIPPED.name
    assert {p.name: p.read_bytes() for p in default.iterdir()} == before
    new = paths.ZOO_DIR / "chart-deep"
    assert row["shipped"] is (drawn_worst >= _floor())
    if row["shipped"]:
        assert (new / paths.WEIGHTS_FILE).read_bytes() == OFFERED
        card = (new / paths.CARD_FILE).read_text()
        assert "# LineFuse chart-deep" in card
        assert f"| {min(SCORE_TEST_WORST, drawn_worst):.1f} | yes |" in card
    else:
        assert not new.exists()


def test_a_model_unet_with_no_weights_is_one_line_before_scoring(project, monkeypatch):
    """model.unet: tiny (an architecture, trained from scratch) has no weights to pair with."""
    monkeypatch.setattr(land, "score_base", pytest.fail)
    with pytest.raises(UserError, match=r"^model.unet: tiny names no trained base") as caught:
        land_window(_params(model_unet="tiny"), project / "out", workers=1)
    assert "\n" not in str(caught.value)
    assert (
        json.loads((paths.base_windows("chart-base") / "ledger.json").read_text())["windows"] == []
    )


@pytest.mark.parametrize(
    "key,value,accepts",
    [
        ("sharp_floor_db", 0.0, "greater than 0"),
        ("sharp_floor_db", float("inf"), "finite number"),
        ("drawn_tolerance_db", -0.05, "greater than or equal to 0"),
        ("drawn_tolerance_db", "small", "valid number"),
    ],
)
def test_a_bad_ship_threshold_names_its_key(key, value, accepts):
    with pytest.raises(ParamsError) as caught:
        _params(**{key: value})
    message = str(caught.value)
    assert "\n" not in message and accepts in message, message
    assert message.startswith(f"params.yaml: base.window.ship.{key}: "), message


def test_a_missing_ship_threshold_is_named():
    raw = tiny_params()
    del raw["base"]["window"]["ship"]["sharp_floor_db"]
    with pytest.raises(ParamsError) as caught:
        parse_params(raw)
    assert str(caught.value) == (
        "params.yaml: base.window.ship.sharp_floor_db: missing; this key is required"
    )
