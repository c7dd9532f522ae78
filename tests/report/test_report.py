"""report: reports/index.html holds the real numbers, the steps table, the samples and the params;
it is the same bytes on every run, escapes whatever the inputs hold, and a headless Chromium draws
it (tables and the picture)."""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from linefuse.report.report import summary_blocks

from conftest import (
    CHROMIUM,
    ROOT,
    copy_project,
    needs_chromium,
    run_cli,
    tiny_params,
    write_params,
)

WINDOW = (1280, 2400)
PLOTS = ["plots/psnr_by_domain_level.csv", "plots/psnr_vs_steps.csv"]
CSS = ROOT / "src/linefuse/report/report.css"


class Tables(HTMLParser):
    """Every <table> as {caption: [[cell text, ...] per row]}, and each <td>'s class."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[tuple[str, str]]]] = {}
        self._rows: list | None = None
        self._caption: list[str] | None = None
        self._cell: list[str] | None = None
        self._class = ""
        self._in_code = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._rows, self._name = [], ""
        elif tag == "caption":
            self._caption = []
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th") and self._rows is not None:
            self._cell, self._class = [], dict(attrs).get("class", "")
        elif tag == "code":
            self._in_code = True

    def handle_endtag(self, tag):
        if tag == "table" and self._rows is not None:
            self.tables[self._name] = self._rows
            self._rows = None
        elif tag == "caption" and self._caption is not None:
            self._name, self._caption = " ".join("".join(self._caption).split()), None
        elif tag in ("td", "th") and self._cell is not None:
            self._rows[-1].append(("".join(self._cell).strip(), self._class))
            self._cell = None
        elif tag == "code":
            self._in_code = False

    def handle_data(self, data):
        if self._caption is not None:
            self._caption.append(data)
        elif self._cell is not None and not self._in_code:
            self._cell.append(data)


def _table(page: str, caption: str) -> list[list[tuple[str, str]]]:
    parser = Tables()
    parser.feed(page)
    return next(rows for name, rows in parser.tables.items() if name.startswith(caption))


def _flatten(block: dict, prefix: str = "") -> list[tuple[str, object]]:
    return [
        pair
        for key, value in block.items()
        for pair in (
            _flatten(value, f"{prefix}{key}.")
            if isinstance(value, dict) and value
            else [(f"{prefix}{key}", value)]
        )
    ]


def _check_chart_summary(rows: list, pooled: dict, model: str) -> None:
    """A chart-summary table's rows against the detail's block: figures, counts, medians, means."""
    assert [row[0][0] for row in rows] == [figure.replace("_", " ") for figure in sorted(pooled)]
    for row, (_, entry) in zip(rows, sorted(pooled.items()), strict=True):
        values = [
            entry[name][stat] for stat in ("median", "mean") for name in ("input", model, "sharp")
        ]
        assert [text for text, _ in row[1:8]] == [str(entry["images"])] + [
            f"{value:.3g}" for value in values
        ]
        shares = (entry[f"{model}_below_input"], entry[f"{model}_above_input"])
        assert [text for text, _ in row[8:]] == [f"{100 * share:.0f}%" for share in shares]


@pytest.fixture(scope="module")
def reported(dvc_build, tmp_path_factory) -> Path:
    """A copy of the DVC build with its report removed and written again by `linefuse report`."""
    project = copy_project(dvc_build, tmp_path_factory.mktemp("report") / "project")
    (project / "reports/index.html").unlink()
    assert run_cli(project, "report") == 0
    return project


def test_the_page_holds_the_real_numbers_plots_samples_and_params(reported, dvc_build):
    page = (reported / "reports/index.html").read_text()
    report = json.loads((reported / "reports/eval_detail.json").read_text())

    for metric, caption, digits in (("psnr", "PSNR", 2), ("ssim", "SSIM", 4)):
        rows = _table(page, caption)
        methods = [text for text, _ in rows[1]]  # the label row; keys are in <code>, skipped
        body = [row for row in rows[2:-1]]
        assert len(body) == sum(len(by_level) for by_level in report[metric].values()) == 15
        domain = None
        for row in body:
            if len(row) == len(methods) + 2:
                domain = row.pop(0)[0]
            level, values = row[0][0], row[1:]
            cell = report[metric][domain][level]
            assert len(values) == len(cell) or any(v == "–" for v, _ in values)
            shown = [float(v) for v, _ in values if v != "–"]
            assert [f"{v:.{digits}f}" for v in shown] == [v for v, _ in values if v != "–"]
            assert sorted(shown) == sorted(round(v, digits) for v in cell.values())
            best = [float(v) for v, css in values if css == "best"]
            assert best and all(b == max(shown) for b in best), (domain, level, values)
    steps = tiny_params()["eval"]["steps"]
    hard = report["psnr"]["gaussian"]["hard"][f"model_s{steps}"]
    assert f">{hard:.2f}</td>" in page
    # each cell's sample count, mean gain and interval, as the detail has them: over the input,
    # and what adapting bought, over the base alone
    for block, caption in (
        ("psnr_gain", "PSNR gain of the model over the input"),
        ("adapt_gain", "PSNR gain of the adapter over the base alone"),
    ):
        gains = report[f"{block}_s{steps}"]
        rows = _table(page, caption)[2:]
        assert len(rows) == 15
        domain = None
        for row in rows:
            if len(row) == 5:
                domain = row.pop(0)[0]
            cell = gains[domain][row[0][0]]
            interval = f"{cell['low']:+.2f} … {cell['high']:+.2f}"
            assert [text for text, _ in row[1:]] == [
                str(cell["samples"]),
                f"{cell['mean']:+.2f}",
                interval,
            ]

    shown = page.replace("<wbr>", "")  # line-break opportunities in long keys
    assert report["summary"]
    for key, value in _flatten(report["summary"]):
        assert f"<code>{key}</code>" in shown
        if "gain" in key or "margin" in key:
            assert f"{value:+.2f} dB</div>" in shown, key
    # the held-out chart families: their own summary, PSNR and gain tables
    held = report["held_out"]
    held_cells = sum(len(by_level) for by_level in held[f"psnr_gain_s{steps}"].values())
    assert held_cells and len(_table(page, "Held-out PSNR gain")[2:]) == held_cells
    assert len(_table(page, "Held-out PSNR ")[2:-1]) == held_cells
    assert f"{held['summary'][f'psnr_gain_s{steps}']:+.2f} dB</div>" in page
    # each plotting library: its split, images, gain and adapting with their intervals
    steps_key = f"s{steps}"
    rows = _table(page, "Each library on the split it is scored on")[1:]
    assert [row[0][0] for row in rows] == list(report["libraries"])
    for row, block in zip(rows, report["libraries"].values(), strict=True):
        summary = block["summary"]
        gain, low, high = (summary[f"psnr_gain_{steps_key}{end}"] for end in ("", "_low", "_high"))
        assert row[1][0] == block["split"].replace("_", "-")
        assert row[2][0] == str(summary["samples"])
        interval = f" ({low:+.2f} … {high:+.2f})" if low is not None else ""
        assert row[3][0] == f"{gain:+.2f}{interval}"
    # chart_summary: one row per figure, its image count, medians and means as the detail has them
    model = f"model_s{steps}"
    for pooled, caption in (
        (report["chart_summary"], "Over every test image"),
        (held["chart_summary"], "Held-out chart errors over every image"),
    ):
        _check_chart_summary(_table(page, caption)[2:], pooled, model)
    # ocr_cer: a row per level, the tick labels' error rate in the input, the model and the sharp
    # chart ("–" where Tesseract was missing) and the labels read
    rows = _table(page, "Tick labels read back by Tesseract")[2:]
    assert len(rows) == len(report["ocr_cer"]) == 3
    for row in rows:
        cell = report["ocr_cer"][row[-5][0]]
        rates = [cell[name] for name in ("input", model, "sharp")]
        assert [text for text, _ in row[-4:-1]] == ["–" if v is None else f"{v:.3f}" for v in rates]
        assert row[-1][0] == str(cell["labels"])
    # digitized: a row per level, the median curve error of the input, the model and the sharp
    # chart, the share of each calibrated, how often the model read closer, and the charts
    rows = _table(page, "Data read back with no sidecar (linefuse digitize)")[2:]
    assert len(rows) == len(report["digitized"]) == 3
    for row in rows:
        cell = report["digitized"][row[-9][0]]
        errors = [cell[name]["curve_error_pct_median"] for name in ("input", model, "sharp")]
        calibrated = [cell[name]["calibrated"] for name in ("input", model, "sharp")]
        shown_row = [text for text, _ in row[-8:]]
        assert shown_row[:3] == [f"{v:.2f}" for v in errors]
        assert shown_row[3:6] == [f"{v:.2f}" for v in calibrated]
        assert shown_row[6:] == [f"{cell['model_lowers_error']:.2f}", str(cell["charts"])]
    # every card has a plain name above its number; the key stays below it
    cards = [card for block in summary_blocks(report) for card in block["cards"]]
    assert cards and all(card["named"] for card in cards), [c["key"] for c in cards]
    assert page.count('<div class="name">') == len(cards) + len(_flatten(held["summary"]))
    tabled = {"psnr", "ssim", "chart", "chart_summary", "ocr_cer", "digitized", "sweep", "summary"}
    tabled |= {"held_out"}
    tabled |= {f"psnr_gain_s{steps}", f"adapt_gain_s{steps}", "libraries"}
    for block in set(report) - tabled:
        assert f"<code>{block}</code>" in shown  # any other block evaluate adds is shown too
        for key, _ in _flatten(report[block]) if isinstance(report[block], dict) else []:
            assert f"<code>{key}</code>" in shown, (block, key)
    for plot in PLOTS:
        assert plot in page
    # its numbers come from the detail file, named with its digest; the headline is not read
    detail = (reported / "reports/eval_detail.json").read_bytes()
    assert f"<code>{hashlib.sha256(detail).hexdigest()}</code>" in page
    assert "metrics/eval.json" not in page
    # the steps table: plots/psnr_vs_steps.csv row for row; no charts (the loss curves are
    # DVCLive's plots, and a chart of the scores would only repeat the tables)
    steps = [[text for text, _ in row] for row in _table(page, "The model per DDIM step")[1:]]
    csv_rows = list(csv.DictReader(open(reported / PLOTS[1])))
    swept = [str(count) for count in tiny_params()["eval"]["sweep"]["steps"]]
    assert [row[0] for row in steps] == [row["steps"] for row in csv_rows] == swept
    assert [row[1] for row in steps] == [f"{float(row['psnr']):.2f}" for row in csv_rows]
    assert [row[-1] for row in steps] == [
        f"{float(row['seconds_per_megapixel']):.2f}" for row in csv_rows
    ]
    assert "<svg" not in page and "training_curves" not in page
    # the samples travel inside the page, the CSS too: it works opened from anywhere
    embedded = page.split('<img src="data:image/png;base64,', 1)[1].split('"', 1)[0]
    assert base64.b64decode(embedded) == (reported / "reports/samples.png").read_bytes()
    assert CSS.read_text() in page
    params = yaml.safe_load((reported / "params.yaml").read_text())
    assert f"count: {params['data']['charts']['count']}" in page and "max_samples: null" in page
    assert "eval:" in page and "serve:" not in page
    # static: nothing fetched, no script, no clock
    assert "<script" not in page and "<link" not in page and 'src="http' not in page
    assert not re.search(r"https?:|url\(|@import", page)
    # the same bytes as DVC's own run of the stage in the engine build
    assert (reported / "reports/index.html").read_bytes() == (
        dvc_build / "reports/index.html"
    ).read_bytes()


def test_the_report_is_the_same_bytes_every_run(reported, tmp_path):
    project = copy_project(reported, tmp_path / "again")
    first = (project / "reports/index.html").read_bytes()
    assert run_cli(project, "report") == 0
    assert (project / "reports/index.html").read_bytes() == first
    assert not list((project / "reports").glob(".index.html.tmp-*"))


HOSTILE = '<script>alert("x")</script>'


def _synthetic(project: Path) -> Path:
    """Evaluate's outputs written by hand, with HTML in a params string, a method name, a domain
    and a summary key, and a baseline (bm3d) the report has never heard of."""
    params = tiny_params()
    params["data"]["source_dir"] = f"data/{HOSTILE}"
    write_params(project, params)
    methods = {
        "input": 20.0,
        "wiener": 21.0,
        "bm3d": 22.0,
        HOSTILE: 19.0,
        "model_s1": 21.5,
        "model_s25": 23.0,
        "model_domain_s25": 22.5,
    }
    cells = {
        domain: {
            level: {name: value + index for name, value in methods.items()}
            for index, level in enumerate(["easy", "medium", "hard"])
        }
        for domain in ("gaussian", HOSTILE)
    }
    report = {
        "psnr": cells,
        "ssim": {
            d: {lv: {n: v / 30 for n, v in cell.items()} for lv, cell in by.items()}
            for d, by in cells.items()
        },
        "chart": {},
        "sweep": {"samples": 2, "s1": {"psnr": 22.5, "seconds_per_megapixel": 1.0}},
        "summary": {"psnr_gain_s25": 3.0, HOSTILE: 1},
    }
    (project / "reports").mkdir()
    (project / "reports/eval_detail.json").write_text(json.dumps(report, indent=2, sort_keys=True))
    (project / "plots").mkdir()
    (project / "plots/psnr_by_domain_level.csv").write_text("domain,level,method,psnr,ssim\n")
    (project / "plots/psnr_vs_steps.csv").write_text(
        "steps,psnr,gain,margin,seconds_per_megapixel\n1,22.5,2.5,1.5,1.0\n25,24.0,4.0,3.0,20.0\n"
    )
    Image.new("RGB", (96, 6 * 34), (200, 100, 50)).save(project / "reports/samples.png")
    return project


def test_html_in_any_input_is_escaped_and_two_runs_are_the_same_bytes(tmp_path):
    project = _synthetic(tmp_path)
    assert run_cli(project, "report") == 0
    page = (project / "reports/index.html").read_text()
    assert "<script" not in page and 'alert("x")' not in page
    escaped = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;"
    assert f"source_dir: data/{escaped}" in page  # a params string
    assert f'<th title="{escaped}">{escaped}</th>' in page  # a method, in an attribute too
    assert f'class="domain">{escaped}</th>' in page  # a domain
    assert page.replace("<wbr>", "").count(f"<code>{escaped}</code>") == 1  # a summary key
    # the methods come from the detail: a new baseline is a classical column like any other
    groups = _table(page, "PSNR")[0][2:]  # after the domain and level headers
    assert [text for text, _ in groups] == [
        "blurred",
        "classical baselines",
        "model · sN = N DDIM steps",
    ]
    assert [text for text, _ in _table(page, "PSNR")[1]] == [
        "input",
        HOSTILE,
        "bm3d",
        "wiener",
        "s1",
        "s25",
        "domain s25",
    ]
    first = (project / "reports/index.html").read_bytes()
    assert run_cli(project, "report") == 0
    assert (project / "reports/index.html").read_bytes() == first


def test_a_missing_input_is_one_line_naming_the_file_and_the_fix(reported, tmp_path, capsys):
    write_params(tmp_path, tiny_params())
    capsys.readouterr()
    assert run_cli(tmp_path, "report") == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "linefuse: error: reports/eval_detail.json is missing; run `linefuse evaluate` first"
    ]
    project = copy_project(reported, tmp_path / "project")
    before = (project / "reports/index.html").read_bytes()
    (project / "reports/samples.png").unlink()
    assert run_cli(project, "report") == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "linefuse: error: reports/samples.png is missing; run `linefuse evaluate` first"
    ]
    assert (project / "reports/index.html").read_bytes() == before


def _chromium(page: Path, profile: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--force-color-profile=srgb",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            *flags,
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )


@needs_chromium
def test_headless_chromium_draws_the_tables_and_samples(reported, tmp_path):
    page = reported / "reports/index.html"
    shot = tmp_path / "report.png"
    done = _chromium(
        page, tmp_path / "profile", f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={shot}"
    )
    assert shot.is_file(), done.stderr[-3000:]
    image = np.asarray(Image.open(shot).convert("RGB"))
    assert image.shape[:2] == (WINDOW[1], WINDOW[0])
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 500  # not blank, not one flat colour

    # the tables, left of the samples: text and the tinted cells, so many non-white pixels
    tables = image[250:, :880]  # below the summary cards, whose height follows their text
    assert (tables.min(axis=2) < 200).mean() > 0.05
    best_green = np.all(np.abs(tables.astype(int) - (192, 220, 197)) <= 2, axis=2).sum()
    assert best_green > 2000, best_green  # the highlighted best cell of every row

    # the samples, drawn pixel for pixel (nearest-neighbour upscaling): most of the picture's
    # colours appear on the right of the page, which a broken image would not give
    samples = np.asarray(Image.open(reported / "reports/samples.png").convert("RGB"))
    wanted = {tuple(c) for c in np.unique(samples.reshape(-1, 3), axis=0)}
    drawn = {tuple(c) for c in np.unique(image[:, 880:].reshape(-1, 3), axis=0)}
    assert len(wanted & drawn) > 0.8 * len(wanted), (len(wanted & drawn), len(wanted))

    # what Chromium parsed is what was written: every table and the picture survived
    dom = _chromium(page, tmp_path / "profile2", "--dump-dom").stdout
    source = page.read_text()
    for tag in ("<table", "<tr", "<img", "<pre"):
        assert dom.count(tag) == source.count(tag) > 0, tag


def test_cards_that_can_alarm_say_what_their_figure_means():
    """A lead under 0 over the classical restorations names the cell (or domain) and the method
    that beat the model; an adapt gain whose interval holds 0 says so; a gain says nothing."""
    cell = {"input": 20.0, "wiener": 30.0, "richardson_lucy": 33.0, "unsharp": 21.0}
    report = {
        "psnr": {
            "gaussian": {"easy": {**cell, "model_s1": 31.0}, "hard": {**cell, "model_s1": 35.0}},
            "motion": {"easy": {**cell, "model_s1": 32.5}, "hard": {**cell, "model_s1": 32.0}},
        },
        "summary": {
            "psnr_gain_s1": 12.6,
            "min_margin_over_best_baseline_s1": -2.0,
            "min_domain_margin_over_best_baseline_s1": -0.75,
            "adapt_gain_s1": 0.01,
            "adapt_gain_s1_low": -0.02,
            "adapt_gain_s1_high": 0.04,
        },
    }
    cards = {card["key"]: card for card in summary_blocks(report)[0]["cards"]}
    kernel = "Richardson-Lucy, given the true blur kernel (which the model never sees),"
    assert cards["min_margin_over_best_baseline_s1"]["reading"] == (
        f"In gaussian easy, {kernel} restores better than the model."
    )
    assert cards["min_domain_margin_over_best_baseline_s1"]["reading"] == (
        f"In motion, {kernel} restores better than the model."
    )
    assert "holds 0" in cards["adapt_gain_s1"]["reading"]
    assert cards["psnr_gain_s1"]["reading"] is None and cards["psnr_gain_s1"]["named"]
