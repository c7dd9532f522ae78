"""readme: README.md's picture and figures, rewritten from the run the README describes.

python -m linefuse.report.readme [--params params.yaml]   (make readme, after make repro)

README.md holds two blocks that this writes, each between `<!-- NAME: ... -->` and
`<!-- /NAME -->`, from readme_NAME.md.j2; the rest of the file stays as it is:
- picture: docs/images/before_after.png, the rows of reports/samples.png at the hardest level (one
  test chart per blur domain; the whole sheet where its rows cannot be told apart), with a caption
  naming the rows and columns it shows;
- run: the headline of each split (metrics/eval.json; the curve and tick-label figures from
  reports/eval_detail.json, which holds them for the held-out split too), the weakest cell by
  name, each plotting library's figures (as the report tables them), the machine, and the wall
  time and commit `make repro` recorded of this run (run_record.py).
No clock: the same inputs give the same bytes.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
from pathlib import Path

import jinja2
import numpy as np
from PIL import Image

from linefuse.params import Sections, load_sections
from linefuse.params.degrade import DegradeParams
from linefuse.params.evaluation import EvalParams
from linefuse.paths import EVAL_DETAIL, EVAL_JSON, PARAMS, README, README_PICTURE, SAMPLES_PNG
from linefuse.report import run_record
from linefuse.report.report import Axes, library_rows, sample_heads
from linefuse.stage import UserError, atomic_file, guarded

INPUTS = [EVAL_JSON, EVAL_DETAIL, SAMPLES_PNG]
BLOCKS = ("picture", "run")
RUNTIMES = {"onnx": "ONNX Runtime"}  # machine.runtime's plain name, where it is not its own
SEPARATOR = 2  # the white pixel rows evaluate puts under each row of samples.png


class ReadmeSections(Sections):
    """The sections of params.yaml the README's blocks read: the order of the domains and
    levels, the step count and the columns of the samples."""

    degrade: DegradeParams
    eval: EvalParams


def check_inputs() -> None:
    """One line naming the first missing input and the command that makes it."""
    if not README.is_file():
        raise UserError(f"{README} is missing; run `make readme` in the project's root")
    missing = next((path for path in INPUTS if not path.is_file()), None)
    if missing is not None:
        raise UserError(f"{missing} is missing; run `make repro` first")


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise UserError(
            f"{path}: not valid JSON ({error.msg} at line {error.lineno}); run `make repro` again"
        ) from None


# -- the picture
def picture(png: bytes, rows: list[tuple[str, str]], level: str) -> tuple[bytes, list]:
    """samples.png's rows at `level` stacked, and which (domain, level) rows those are. The
    rows are told apart when equally tall, each ending in evaluate's white separator; else the
    picture is the whole sheet, all its rows."""
    with Image.open(io.BytesIO(png)) as opened:
        sheet = np.asarray(opened.convert("RGB"))
    tall = len(sheet) // len(rows) if rows else 0
    ends = [tall * (index + 1) for index in range(len(rows))]
    apart = tall > SEPARATOR and tall * len(rows) == len(sheet)
    apart = apart and all((sheet[end - SEPARATOR : end] == 255).all() for end in ends)
    chosen = [index for index, (_, shown) in enumerate(rows) if shown == level]
    if not apart or not chosen:
        return png, rows
    stacked = np.concatenate([sheet[tall * index : tall * (index + 1)] for index in chosen])
    buffer = io.BytesIO()
    Image.fromarray(stacked).save(buffer, format="PNG")
    return buffer.getvalue(), [rows[index] for index in chosen]


# -- the figures
def _worst_cell(gains: dict) -> dict | None:
    """The domain x level cell of a gain table with the lowest mean gain, and the cell count."""
    cells = [(cell["mean"], f"{d} {lv}") for d, by in gains.items() for lv, cell in by.items()]
    if not cells:
        return None
    gain, name = min(cells)
    return {"gain": gain, "name": name, "cells": len(cells)}


def _input_to_model(entries: list[dict], model: str) -> list | None:
    """[input, model]: the mean over `entries` (each {input, model_sN, ...}); None where one
    lacks either."""
    pairs = [(entry.get("input"), entry.get(model)) for entry in entries]
    if not pairs or any(None in pair for pair in pairs):
        return None
    return [sum(pair[index] for pair in pairs) / len(pairs) for index in (0, 1)]


def split_column(name: str, headline: dict, block: dict, steps: int) -> dict:
    """One split's figures: the headline's gain, interval, images and sharp chart; from its
    tables, the weakest cell, the median curve error of the input and the model (in % of the
    chart's range), the tick labels' error rate and the curve error of the data digitized with no
    sidecar (each the mean over levels, as the headline)."""
    model = f"model_s{steps}"
    curve = block.get("chart_summary", {}).get("curve_rmse_pct_of_range", {})
    medians = {key: entry["median"] for key, entry in curve.items() if isinstance(entry, dict)}
    return {
        "name": name,
        "samples": headline.get("samples"),
        "gain": [headline.get(f"gain_db{end}") for end in ("", "_low", "_high")],
        "worst": _worst_cell(block.get(f"psnr_gain_s{steps}", {})),
        "sharp": headline.get("sharp_worst_psnr"),
        "curve": _input_to_model([medians], model),
        "cer": _input_to_model(list(block.get("ocr_cer", {}).values()), model),
        "digitized": _input_to_model(
            [
                {name: row[name]["curve_error_pct_median"] for name in ("input", model)}
                for row in block.get("digitized", {}).values()
            ],
            model,
        ),
    }


# -- rendering
def _fixed(value: float | None, digits: int = 2, signed: bool = False) -> str:
    """A figure as the tables show it; a dash where the run has none."""
    if value is None:
        return "–"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _signed(value: float | None, digits: int = 2) -> str:
    return _fixed(value, digits, signed=True)


def _interval(figure: list) -> str:
    """[mean, low, high]: +0.57 (+0.53 … +0.61), the mean alone where there is no interval."""
    mean, low, high = map(_signed, figure)
    return mean if "–" in (low, high) else f"{mean} ({low} … {high})"


def _arrow(pair: list | None) -> str:
    """[input, model]: 0.98 → 0.97, a dash where either is missing."""
    return "–" if pair is None or None in pair else " → ".join(map(_fixed, pair))


def _duration(seconds: float) -> str:
    """16 min 52 s; 1 h 03 min."""
    minutes, rest = divmod(round(seconds), 60)
    if minutes >= 60:
        return f"{minutes // 60} h {minutes % 60:02d} min"
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent),
    autoescape=False,  # Markdown, from the run's own outputs
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
ENV.filters.update(
    fixed=_fixed, signed=_signed, interval=_interval, arrow=_arrow, duration=_duration
)


def render(
    headline: dict, detail: dict, png: bytes, record: dict | None, params: ReadmeSections
) -> tuple[dict[str, str], bytes]:
    """Each block's text and the picture's bytes for these inputs; pure, so a test can render
    without a run."""
    steps = params.eval.steps
    if headline.get("steps") != steps:
        raise UserError(
            f"params.yaml's eval.steps is {steps}, the run's {headline.get('steps')}; "
            "run `make repro` first"
        )
    axes = Axes(list(params.degrade.domains), list(params.degrade.levels), steps)
    rows = [(domain, level) for domain, _, level, _ in axes.walk(detail.get("psnr", {}))]
    shown_png, shown = picture(png, rows, axes.levels[-1])
    columns = [split_column("test", headline, detail, steps)]
    if "held_out" in headline and "held_out" in detail:
        columns.append(split_column("held out", headline["held_out"], detail["held_out"], steps))
    libraries = library_rows(detail.get("libraries", {}), steps)
    for row in libraries:
        gain, adapt = row["gain"][0], row["adapt"][0]
        row["base"] = None if None in (gain, adapt) else gain - adapt
    counts = {column["worst"]["cells"] for column in columns if column["worst"]}
    machine = detail.get("machine", {})
    confidence = detail.get("summary", {}).get("interval_confidence")
    context = {
        "picture": README_PICTURE.as_posix(),
        "samples": SAMPLES_PNG.as_posix(),
        "one_level": shown != rows,
        "level": axes.levels[-1],
        "rows": [f"{domain} {level}" for domain, level in shown],
        "domains": [domain for domain, _ in shown],
        "heads": [
            f"{head} ({steps} DDIM step{'s' if steps != 1 else ''})" if head == "restored" else head
            for head in sample_heads(params.eval.deskew)
        ],
        "steps": steps,
        "record": record,
        "machine": machine,
        "runtime": RUNTIMES.get(machine.get("runtime"), machine.get("runtime")),
        "speed": machine.get(f"seconds_per_megapixel_s{steps}"),
        "interval": f"{confidence:.0%} interval" if confidence else "interval",
        "columns": columns,
        "cells": counts.pop() if len(counts) == 1 else None,
        "libraries": libraries,
    }
    texts = {name: ENV.get_template(f"readme_{name}.md.j2").render(context) for name in BLOCKS}
    return texts, shown_png


def replace_block(text: str, name: str, body: str) -> str:
    """`text` with what lies between the block's markers replaced by `body`."""
    found = re.search(rf"<!-- {name}:[^\n]*-->\n(.*?)<!-- /{name} -->", text, re.S)
    if found is None:
        raise UserError(
            f"{README}: no `<!-- {name}: ... -->` ... `<!-- /{name} -->` block to write into; "
            f"put its markers back (git checkout {README})"
        )
    return text[: found.start(1)] + body + text[found.end(1) :]


def _write(path: Path, data: bytes) -> None:
    """Replaces the file at once, keeping its permissions; unchanged bytes are not rewritten."""
    if path.is_file() and path.read_bytes() == data:
        return
    mode = path.stat().st_mode & 0o777 if path.is_file() else 0o644
    with atomic_file(path) as tmp:
        tmp.write_bytes(data)
        tmp.chmod(mode)


def write_readme(params: ReadmeSections) -> None:
    """README.md's blocks and its picture, from the run's outputs (the module's docstring)."""
    check_inputs()
    headline, detail = _json(EVAL_JSON), _json(EVAL_DETAIL)
    texts, png = render(headline, detail, SAMPLES_PNG.read_bytes(), run_record.read(), params)
    readme = README.read_text(encoding="utf-8")
    for name in BLOCKS:
        readme = replace_block(readme, name, texts[name])
    _write(README_PICTURE, png)
    _write(README, readme.encode("utf-8"))
    print(f"linefuse: wrote {README} and {README_PICTURE} from the run's outputs")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m linefuse.report.readme")
    parser.add_argument("--params", default=str(PARAMS), help="params file (default: %(default)s)")
    args = parser.parse_args(argv)
    return guarded(lambda: write_readme(load_sections(ReadmeSections, args.params)), args)


if __name__ == "__main__":
    sys.exit(main())
