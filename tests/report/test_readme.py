"""make readme: README.md's picture and run figures come from the run's own outputs, the rest of
the README stays as it was, the same inputs give the same bytes, and a missing input is one
line naming the command that makes it."""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
from contextlib import chdir
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

from linefuse.paths import README_PICTURE, RUN_RECORD
from linefuse.report import run_record
from linefuse.report.readme import main, picture

from conftest import ROOT

OUTPUTS = ["metrics/eval.json", "reports/eval_detail.json", "reports/samples.png", "params.yaml"]
README = """# A project

Prose before.

<!-- picture: `make readme` writes this block -->
the old picture
<!-- /picture -->

## What the default run gives

<!-- run: `make readme` writes this block -->
old figures
<!-- /run -->

Prose after.
"""
WRITTEN = ["README.md", README_PICTURE]
BLOCK = re.compile(r"(<!-- (\w+):[^\n]*-->\n)(.*?)(<!-- /\2 -->)", re.S)


def _outside(text: str) -> str:
    """The README with each block's content taken out, markers kept."""
    return BLOCK.sub(r"\1\4", text)


def _block(text: str, name: str) -> str:
    return next(found[3] for found in BLOCK.finditer(text) if found[2] == name)


def _pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def _run_outputs(trained_project: Path, folder: Path) -> Path:
    """A project folder holding the built project's outputs, its params and README."""
    for name in OUTPUTS:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(trained_project / name, folder / name)
    (folder / "README.md").write_text(README)
    return folder


def test_the_readme_shows_the_run_it_describes(trained_project, tmp_path, capsys):
    project = _run_outputs(trained_project, tmp_path)
    headline = json.loads((project / "metrics/eval.json").read_text())
    detail = json.loads((project / "reports/eval_detail.json").read_text())
    params = yaml.safe_load((project / "params.yaml").read_text())
    with chdir(project):
        assert main([]) == 0
        written = [(project / name).read_bytes() for name in WRITTEN]
        assert main([]) == 0
    assert [(project / name).read_bytes() for name in WRITTEN] == written  # the same bytes
    assert capsys.readouterr().err == ""
    readme = written[0].decode()
    assert _outside(readme) == _outside(README)
    run = _block(readme, "run")
    gain = [headline[f"gain_db{end}"] for end in ("", "_low", "_high")]
    assert f"**{gain[0]:+.2f} ({gain[1]:+.2f} … {gain[2]:+.2f}) dB**" in run
    assert f"| test ({headline['samples']} images) |" in run
    assert f"| held out ({headline['held_out']['samples']} images) |" in run
    assert f"| {headline['sharp_worst_psnr']:.1f} dB |" in run
    curve = headline["curve_rmse_pct_median"]
    assert f"| {curve['input']:.2f} → {curve['model']:.2f} |" in run
    digitized = headline["digitize_error_pct"]  # the mean over levels, as the headline's
    assert f"| {digitized['input']:.2f} → {digitized['model']:.2f} |" in run
    worst = min(
        (cell["mean"], f"{domain} {level}")
        for domain, by_level in detail["psnr_gain_s1"].items()
        for level, cell in by_level.items()
    )
    assert f"| {worst[0]:+.2f} dB ({worst[1]}) |" in run
    for library, block in detail["libraries"].items():
        assert f"| {library} ({block['split'].replace('_', '-')}, " in run
    assert f"{detail['machine']['seconds_per_megapixel_s1']:.2f} s per megapixel" in run
    assert "wall time and commit are unknown" in run  # no record of this run: said, not guessed
    # the picture: samples.png's rows at the hardest level, one per domain, as its caption says
    domains, levels = params["degrade"]["domains"], params["degrade"]["levels"]
    sheet = _pixels((project / "reports/samples.png").read_bytes())
    tall = len(sheet) // (len(domains) * len(levels))
    last = [tall * ((index + 1) * len(levels) - 1) for index in range(len(domains))]
    assert np.array_equal(_pixels(written[1]), np.concatenate([sheet[y : y + tall] for y in last]))
    assert f"at the {levels[-1]} level" in _block(readme, "picture")
    assert f"rows {', '.join(domains)}:" in _block(readme, "picture")


def test_the_readme_states_the_time_make_repro_recorded(trained_project, tmp_path):
    """run_record times the command and records it only where it changed metrics/eval.json (a
    run DVC found cached keeps the record of the run that made the outputs); the README states
    a record only while eval.json is the one it recorded."""
    project = _run_outputs(trained_project, tmp_path)
    rewrite = "import pathlib; p = pathlib.Path('metrics/eval.json'); p.write_text(p.read_text()"
    with chdir(project):
        assert run_record.timed([sys.executable, "-c", rewrite + ")"]) == 0
        assert not RUN_RECORD.exists()
        assert run_record.timed([sys.executable, "-c", rewrite + " + ' ')"]) == 0
        record = json.loads(RUN_RECORD.read_text())
        assert main([]) == 0
        run = _block((project / "README.md").read_text(), "run")
        commit = record["commit"] or "no git commit"  # none where tmp_path is in no checkout
        assert f"(`make repro`) at {commit}" in run and "unknown" not in run
        assert f"**{round(record['seconds'])} s** on {record['cores']} cores" in run
        (project / "metrics/eval.json").write_text(json.dumps({"steps": 1}))
        assert run_record.read() is None  # another run's eval.json: the record is not its


def test_a_missing_output_is_one_line_naming_the_command(tmp_path, capsys):
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "README.md").write_text(README)
    with chdir(tmp_path):
        assert main([]) == 2
    err = capsys.readouterr().err
    assert err == "linefuse: error: metrics/eval.json is missing; run `make repro` first\n"
    assert (tmp_path / "README.md").read_text() == README


def test_the_picture_is_the_whole_sheet_where_its_rows_cannot_be_told_apart():
    """Rows of samples.png end in two white pixel rows; where they do not line up evenly, the
    picture is samples.png itself, with every row named."""
    rows = [("gaussian", "easy"), ("gaussian", "hard"), ("motion", "easy"), ("motion", "hard")]
    sheet = np.zeros((4 * 10, 6, 3), np.uint8)
    sheet[8:10] = sheet[18:20] = sheet[28:30] = sheet[38:40] = 255
    buffer = io.BytesIO()
    Image.fromarray(sheet).save(buffer, format="PNG")
    png, shown = picture(buffer.getvalue(), rows, "hard")
    assert shown == [("gaussian", "hard"), ("motion", "hard")]
    assert np.array_equal(_pixels(png), np.concatenate([sheet[10:20], sheet[30:40]]))
    sheet[38:40] = 0  # the last row has no separator: the rows are not told apart
    buffer = io.BytesIO()
    Image.fromarray(sheet).save(buffer, format="PNG")
    assert picture(buffer.getvalue(), rows, "hard") == (buffer.getvalue(), rows)
