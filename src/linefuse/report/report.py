"""report: reports/index.html, one static page over what evaluate wrote.

The page is index.html.j2 rendered by Jinja2 with autoescaping on, so every name and value taken
from eval.json, the CSVs or params.yaml reaches the page escaped. report.css is inlined and
samples.png embedded as a data: URI: the page works opened from disk and loads nothing (no
scripts, no fonts, no URLs). Nothing depends on the clock and every iteration has a fixed order,
so the same inputs give the same bytes.

It shows the headline (eval.json's `summary` and every other block), PSNR and SSIM per blur
domain x level x method, the line-fidelity errors, quality and latency per DDIM step count, the
samples, the params sections behind the numbers and the digests of its inputs. The training
curves are DVCLive plots (`dvc plots show`), not the report's.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from itertools import groupby
from pathlib import Path

import jinja2
import yaml
from markupsafe import Markup, escape
from PIL import Image

from linefuse.params import Params
from linefuse.paths import BY_DOMAIN_CSV, BY_STEPS_CSV, EVAL_JSON, REPORT_HTML, SAMPLES_PNG, adapter
from linefuse.stage import UserError, atomic_file

# BY_DOMAIN_CSV repeats eval.json's psnr/ssim for `dvc plots`: checked and digested, not read.
INPUTS = [EVAL_JSON, BY_DOMAIN_CSV, BY_STEPS_CSV, SAMPLES_PNG]
# The params.yaml sections the page shows: all that shape the numbers (loader and serve do not).
# dvc.yaml and workflow/rules/report.smk track the same list.
SECTIONS = ["data", "degrade", "shards", "model", "embed", "optim", "pretrain", "train", "eval"]
PACKAGES = ["linefuse", "torch", "diffusers", "peft", "numpy", "scikit-image"]
# eval.json's blocks with tables of their own (and psnr_gain_sN); the rest are summary cards
TABLED = {"psnr", "ssim", "chart", "chart_summary", "ocr_cer", "sweep", "summary", "held_out"}
GAIN_BLOCK = re.compile(r"psnr_gain_s\d+")
GROUP_LABELS = {
    "input": "blurred",
    "classical": "classical baselines",
    "model": "model · sN = N DDIM steps",
}
NA = ("–", "na", "")  # an empty cell: text, class, style


def check_inputs() -> None:
    """One line naming the first missing input and the stage that writes it."""
    missing = next((path for path in INPUTS if not path.is_file()), None)
    if missing is not None:
        raise UserError(f"{missing} is missing; run `linefuse evaluate` first")


def write_report(params: Params, params_path: Path) -> Path:
    """Renders reports/index.html from evaluate's outputs and params; returns its path."""
    check_inputs()
    try:
        report = json.loads(EVAL_JSON.read_text())
    except json.JSONDecodeError as error:
        raise UserError(
            f"{EVAL_JSON}: not valid JSON ({error.msg} at line {error.lineno}); "
            f"run `linefuse evaluate` again"
        ) from None
    with open(BY_STEPS_CSV, newline="") as handle:
        by_steps = list(csv.DictReader(handle))
    page = render(report, by_steps, SAMPLES_PNG.read_bytes(), params, params_path)
    with atomic_file(REPORT_HTML) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return REPORT_HTML


# ---------------------------------------------------------------------------------------------
# methods: evaluate's naming is the only source, so a new baseline shows up without an edit here


def method_group(name: str) -> str:
    """`input` is the blurred input, `model_*` the model (any adapter), the rest classical."""
    return "input" if name == "input" else "model" if name.startswith("model_") else "classical"


def _steps_of(name: str) -> int:
    found = re.search(r"_s(\d+)$", name)
    return int(found.group(1)) if found else 0


def method_order(names: Iterable[str]) -> list[str]:
    """input, the classical baselines by name, the plain model by step count, other adapters."""
    rank = {"input": 0, "classical": 1, "model": 2}
    return sorted(
        set(names),
        key=lambda n: (rank[method_group(n)], n != f"model_s{_steps_of(n)}", _steps_of(n), n),
    )


def method_label(name: str) -> str:
    """A label by rule, no table of names: drop `model_`, underscores become spaces."""
    return name.removeprefix("model_").replace("_", " ")


def _ordered(values: Iterable[str], preferred: list[str]) -> list[str]:
    """`values` in the order of `preferred` (params.yaml's), unknown ones after, sorted."""
    seen = set(values)
    return [v for v in preferred if v in seen] + sorted(seen - set(preferred))


# ---------------------------------------------------------------------------------------------
# tables: rows of domain x level, the view the template's `grid` macro draws


@dataclass
class Grid:
    caption: str
    note: str
    groups: list[tuple[str, int]]  # the first header row: (label, columns spanned)
    columns: list[tuple[str, str]]  # the second: (label, the key as a tooltip)
    rows: list[dict]  # domain and span (on a domain's first row), level, cells
    foot: list[tuple[str, str, str]] | None = None
    foot_label: str = ""
    css: str = ""


def marked(cell: dict, keys: list, digits: int, lower_is_better: bool = False) -> list[tuple]:
    """One row's cells as (text, class, style): the best shown value bold, the rest tinted by
    where they fall between the row's worst and best; compared as shown, so ties tie."""
    shown = {key: float(f"{cell[key]:.{digits}f}") for key in keys if cell.get(key) is not None}
    if not shown:
        return [NA] * len(keys)
    low, high = min(shown.values()), max(shown.values())
    out = []
    for key in keys:
        if key not in shown:
            out.append(NA)
            continue
        share = (shown[key] - low) / (high - low) if high > low else 1.0
        share = 1.0 - share if lower_is_better else share
        best = shown[key] == (low if lower_is_better else high)
        out.append((f"{shown[key]:.{digits}f}", "best" if best else "v", f"--t:{share:.2f}"))
    return out


def grid(
    table: dict,
    domains: list[str],
    levels: list[str],
    column_sets: list[list],
    digits: int,
    lower_is_better: bool = False,
) -> tuple[list[dict], list[list[float]]]:
    """The body rows of `table` ({domain: {level: {key: value}}}); the best is marked within
    each column set. Also returns every column's values, for a footer of means."""
    keys = [key for columns in column_sets for key in columns]
    rows, values = [], {key: [] for key in keys}
    for domain in _ordered(table, domains):
        cells = table[domain]
        for index, level in enumerate(_ordered(cells, levels)):
            cell = cells[level]
            row = [c for cols in column_sets for c in marked(cell, cols, digits, lower_is_better)]
            span = len(cells) if index == 0 else 0
            rows.append(dict(domain=domain, span=span, level=level, cells=row))
            for key in keys:
                if key in cells[level]:
                    values[key].append(cells[level][key])
    return rows, [values[key] for key in keys]


def score_grid(
    table: dict, domains: list[str], levels: list[str], digits: int, caption: str, unit: str
) -> Grid:
    """PSNR or SSIM: a column per method found in the table, grouped, with a row of means."""
    methods = method_order(n for by_level in table.values() for c in by_level.values() for n in c)
    groups = [
        (GROUP_LABELS[group], len(list(names)))
        for group, names in groupby(methods, key=method_group)
    ]
    rows, columns = grid(table, domains, levels, [methods], digits)
    means = {n: sum(v) / len(v) for n, v in zip(methods, columns, strict=True) if v}
    return Grid(
        caption,
        f"{unit}, best of each row in bold",
        groups,
        [(method_label(n), n) for n in methods],
        rows,
        marked(means, methods, digits),
        f"mean of {len(rows)} cells",
    )


def chart_grid(chart: dict, domains: list[str], levels: list[str]) -> Grid:
    """eval.json's `chart`: errors of the line read back from the image, and of its tick labels
    (ocr_cer), per figure and method."""
    cells = {
        d: {
            lv: {(f, n): v for n, figures in cell.items() for f, v in figures.items()}
            for lv, cell in by_level.items()
        }
        for d, by_level in chart.items()
    }
    keys = {key for by_level in cells.values() for cell in by_level.values() for key in cell}
    figures = sorted({f for f, _ in keys})
    methods = method_order(n for _, n in keys)
    sets = [[(f, n) for n in methods] for f in figures]
    rows, _ = grid(cells, domains, levels, sets, 3, lower_is_better=True)
    return Grid(
        "Errors of the line and the tick labels read back from the image",
        "lower is better, best of each row and figure in bold",
        [(f.replace("_", " "), len(methods)) for f in figures],
        [(method_label(n), n) for _ in figures for n in methods],
        rows,
        css=" compact",
    )


def ocr_grid(block: dict, levels: list[str], steps: int) -> Grid:
    """eval.json's ocr_cer: per level, the tick labels' character error rate in the input and the
    model's output (the better in bold), in the sharp chart (what Tesseract misreads anyway),
    and the labels read."""
    names = ["input", f"model_s{steps}"]
    rows, _ = grid({"every domain": block}, [], levels, [names], 3, lower_is_better=True)
    for row in rows:
        cell = block[row["level"]]
        sharp = NA if cell.get("sharp") is None else (f"{cell['sharp']:.3f}", "v", "")
        row["cells"] += [sharp, (str(cell.get("labels", "")), "v", "")]
    return Grid(
        "Tick labels read back by Tesseract",
        "character error rate, lower is better",
        [],
        [(method_label(n), n) for n in [*names, "sharp"]] + [("labels", "labels")],
        rows,
        css=" compact",
    )


def chart_summary_table(block: dict, steps: int) -> dict:
    """eval.json's chart_summary: per figure, the medians and means of the input, the model and
    the sharp image over every image, and how often the model's figure is below or above the
    input's."""
    model, names = f"model_s{steps}", ("input", f"model_s{steps}", "sharp")
    rows = [
        {
            "figure": figure.replace("_", " "),
            "images": entry["images"],
            "values": [entry.get(n, {}).get(stat) for stat in ("median", "mean") for n in names],
            "below": entry.get(f"{model}_below_input"),
            "above": entry.get(f"{model}_above_input"),
        }
        for figure, entry in sorted(block.items())
    ]
    return {"labels": [method_label(n) for n in names], "rows": rows}


def gain_grid(
    block: dict, domains: list[str], levels: list[str], confidence: float, caption: str
) -> Grid:
    """eval.json's psnr_gain_sN: each cell's sample count, mean gain and bootstrap interval."""
    rows = []
    for domain in _ordered(block, domains):
        for index, level in enumerate(_ordered(block[domain], levels)):
            cell = block[domain][level]
            bounds = [cell[k] for k in ("low", "high")]
            text = "–" if None in bounds else f"{bounds[0]:+.2f} … {bounds[1]:+.2f}"
            sign = "up" if cell["mean"] > 0 else "down" if cell["mean"] < 0 else "v"
            rows.append(
                dict(
                    domain=domain,
                    span=len(block[domain]) if index == 0 else 0,
                    level=level,
                    cells=[
                        (str(cell["samples"]), "v", ""),
                        (f"{cell['mean']:+.2f}", sign, ""),
                        (text, "v", ""),
                    ],
                )
            )
    return Grid(
        caption,
        f"dB, with its {confidence:.0%} bootstrap interval",
        [],
        [("images", "samples"), ("mean", "mean"), (f"{confidence:.0%} interval", "low … high")],
        rows,
        css=" compact",
    )


def steps_table(rows: list[dict[str, str]], sweep: dict) -> dict:
    """plots/psnr_vs_steps.csv: on the sweep's images, the model's PSNR per step count, its gain
    over the input and margin over the best classical baseline, and its time per megapixel."""
    out = [
        {
            "steps": row["steps"],
            "psnr": float(row["psnr"]),
            "gain": float(row["gain"]),
            "margin": float(row["margin"]),
            "latency": float(row["seconds_per_megapixel"]),
        }
        for row in rows
    ]
    return {
        "rows": out,
        "input": sweep.get("input_psnr"),
        "best": sweep.get("best_classical_psnr"),
        "samples": sweep.get("samples", 0),
    }


# ---------------------------------------------------------------------------------------------
# summary cards: every key of every block, whatever evaluate puts there


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


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def card(key: str, value: object) -> dict:
    """A value formatted by its key's name: dB for PSNR, signed and coloured for a gain or
    margin (more is better), × for a speed-up; anything else as JSON."""
    delta = re.search(r"gain|margin", key) is not None
    css = ""
    if not _is_number(value):
        text = json.dumps(value, sort_keys=True)
    elif re.search(r"psnr|gain|margin|_db\b|\bdb_", key):
        text = f"{value:+.2f} dB" if delta else f"{value:.2f} dB"
        css = (" up" if value > 0 else " down" if value < 0 else "") if delta else ""
    elif "speedup" in key:
        text = f"{value:.3g}×"
    else:
        text = str(value) if isinstance(value, int) else f"{value:.4g}"
    return {"key": key.partition(".")[2], "text": text, "css": css}


def summary_blocks(report: dict) -> list[dict]:
    """`summary` first, then the other blocks by name (per-domain means, few-step, machine)."""
    blocks = [("summary", report.get("summary", {}))]
    blocks += [
        (name, value)
        for name, value in sorted(report.items())
        if name not in TABLED and not GAIN_BLOCK.fullmatch(name)
    ]
    return [
        {
            "name": name,
            "cards": [
                card(f"{name}.{key}", value)
                for key, value in _flatten(block if isinstance(block, dict) else {name: block})
            ],
        }
        for name, block in blocks
    ]


# ---------------------------------------------------------------------------------------------
# samples, params, provenance


def samples_figure(png: bytes, rows: list[tuple[str, str]], steps: int) -> dict:
    """samples.png as a data: URI, scaled up by a whole factor (pixels stay sharp). Its rows
    (one per scored domain and level) are labelled when equally tall, as then they line up."""
    with Image.open(io.BytesIO(png)) as image:
        width, height = image.size
    scale = max(1, min(4, 320 // max(width, 1)))
    shown = min(width * scale, 360)
    return {
        "src": "data:image/png;base64," + base64.b64encode(png).decode("ascii"),
        "width": shown,
        "height": round(height * shown / max(width, 1)),
        "steps": steps,
        "labels": rows if rows and height % len(rows) == 0 else [],
    }


def params_sections(params: Params) -> list[str]:
    """The SECTIONS as validated (what the stages ran with), in the models' key order; leaf
    lists and mappings on one line, as params.yaml writes them."""
    values = params.model_dump(mode="json")
    dump = dict(sort_keys=False, default_flow_style=None, width=100, allow_unicode=True)
    return [yaml.safe_dump({section: values[section]}, **dump) for section in SECTIONS]


def provenance(params_path: Path, shown_params: str) -> dict:
    """Size and sha256 of each input and of the params shown; the versions of the packages."""
    contents = [(str(path), path.read_bytes()) for path in INPUTS]
    contents.append((f"{params_path} ({', '.join(SECTIONS)})", shown_params.encode()))
    files = [
        (name, f"{len(data):,} B", hashlib.sha256(data).hexdigest()) for name, data in contents
    ]
    installed = {dist.metadata["Name"].lower(): dist.version for dist in metadata.distributions()}
    versions = [f"{name} {installed[name]}" for name in PACKAGES if name in installed]
    return {"files": files, "versions": versions}


# ---------------------------------------------------------------------------------------------
# the page


def _breakable(key: str) -> Markup:
    """Long keys may wrap after an underscore or a dot (escaped first, then <wbr> added)."""
    text = str(escape(key))
    return Markup(re.sub(r"([_.])", r"\1<wbr>", text) if len(key) > 12 else text)


ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
ENV.filters["breakable"] = _breakable


def render(
    report: dict,
    by_steps: list[dict[str, str]],
    samples_png: bytes,
    params: Params,
    params_path: Path,
) -> str:
    """The page for these inputs; pure, so a test can render without a pipeline run."""
    domains, levels = list(params.degrade.domains), list(params.degrade.levels)
    steps = params.eval.steps
    psnr, ssim = report.get("psnr", {}), report.get("ssim", {})
    cells = sum(len(by_level) for by_level in psnr.values())
    methods = method_order(n for by_level in psnr.values() for c in by_level.values() for n in c)
    order = params.train.order()
    facts = [
        ("cells", f"{len(psnr)} domains × {len(levels)} levels = {cells} scored"),
        (
            "test images",
            f"≤ {params.eval.max_samples} per cell"
            if params.eval.max_samples
            else "the whole test split",
        ),
        ("adapter", f"{adapter(order[-1]).as_posix()} (curriculum: {' → '.join(order)})"),
        ("DDIM steps", f"{steps} (swept: {', '.join(map(str, params.eval.sweep.steps))})"),
        ("metric", f"{params.eval.metric.color}, crop border {params.eval.metric.crop_border}"),
        ("methods", str(len(methods))),
    ]
    scored = [(d, lv) for d in _ordered(psnr, domains) for lv in _ordered(psnr[d], levels)]
    held = report.get("held_out", {})
    held_out = held and {
        "cards": [card(f"summary.{k}", v) for k, v in _flatten(held.get("summary", {}))],
        "psnr": score_grid(held.get("psnr", {}), domains, levels, 2, "Held-out PSNR", "dB"),
        "gain": gain_grid(
            held.get(f"psnr_gain_s{steps}", {}),
            domains,
            levels,
            params.eval.interval.confidence,
            "Held-out PSNR gain of the model over the input",
        ),
        "chart_summary": chart_summary_table(held.get("chart_summary", {}), steps),
    }
    shown_params = params_sections(params)
    return ENV.get_template("index.html.j2").render(
        facts=facts,
        blocks=summary_blocks(report),
        psnr=score_grid(psnr, domains, levels, 2, "PSNR", "dB"),
        gain=gain_grid(
            report.get(f"psnr_gain_s{steps}", {}),
            domains,
            levels,
            params.eval.interval.confidence,
            "PSNR gain of the model over the input",
        ),
        ssim=score_grid(ssim, domains, levels, 4, "SSIM", "0–1"),
        held_out=held_out,
        chart=chart_grid(report.get("chart", {}), domains, levels),
        chart_summary=chart_summary_table(report.get("chart_summary", {}), steps),
        ocr=ocr_grid(report.get("ocr_cer", {}), levels, steps),
        steps=steps_table(by_steps, report.get("sweep", {})),
        samples=samples_figure(samples_png, scored, steps) if psnr else None,
        sections=", ".join(SECTIONS),
        params_path=str(params_path),
        params=shown_params,
        provenance=provenance(params_path, "\n".join(shown_params)),
        src={"eval": str(EVAL_JSON), "steps": str(BY_STEPS_CSV), "samples": str(SAMPLES_PNG)},
    )
