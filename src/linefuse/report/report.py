"""report: reports/index.html, one static page over what evaluate wrote: its summary blocks, the
tables per blur domain x level, quality and latency per DDIM step count, the samples, the params
behind the numbers and the digests of its inputs (the training curves are DVCLive's plots).

index.html.j2 is rendered with autoescaping on, so every name and value taken from the inputs
reaches the page escaped; report.css and samples.png travel inside it, so it loads nothing. No
clock and a fixed order everywhere: the same inputs give the same bytes.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib import metadata
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2
import yaml
from markupsafe import Markup, escape
from PIL import Image

from linefuse.paths import BY_DOMAIN_CSV, BY_STEPS_CSV, EVAL_DETAIL, REPORT_HTML, SAMPLES_PNG
from linefuse.paths import adapter as adapter_path
from linefuse.stage import UserError, atomic_file

if TYPE_CHECKING:
    from linefuse.params.full import Params

# BY_DOMAIN_CSV repeats the detail's psnr/ssim for `dvc plots`: checked and digested, not read.
INPUTS = [EVAL_DETAIL, BY_DOMAIN_CSV, BY_STEPS_CSV, SAMPLES_PNG]
# The params.yaml sections the page shows: all that shape the numbers (loader and serve do not).
# The report stage (linefuse.pipeline) tracks this list.
SECTIONS = ["data", "degrade", "shards", "model", "embed", "optim", "pretrain", "train", "eval"]
PACKAGES = ["linefuse", "torch", "diffusers", "peft", "numpy", "scikit-image"]
# the detail's blocks with tables of their own (and the gain blocks); the rest are summary cards
TABLED = {
    "psnr",
    "ssim",
    "chart",
    "chart_summary",
    "ocr_cer",
    "digitized",
    "sweep",
    "summary",
    "held_out",
    "libraries",
}
GAIN_BLOCK = re.compile(r"(psnr|adapt)_gain_s\d+")
GROUP_LABELS = dict(
    input="blurred", classical="classical baselines", model="model · sN = N DDIM steps"
)
MODELS = ("model_", "base_")  # the adapted model's methods, and the base's alone
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
        report = json.loads(EVAL_DETAIL.read_text())
    except json.JSONDecodeError as error:
        raise UserError(
            f"{EVAL_DETAIL}: not valid JSON ({error.msg} at line {error.lineno}); "
            f"run `linefuse evaluate` again"
        ) from None
    by_steps = list(csv.DictReader(BY_STEPS_CSV.read_text().splitlines()))
    page = render(report, by_steps, SAMPLES_PNG.read_bytes(), params, params_path)
    with atomic_file(REPORT_HTML) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return REPORT_HTML


# -- methods: evaluate's naming is the only source, so a new baseline shows up without an edit here
def method_group(name: str) -> str:
    """`input` is the blurred input, MODELS the model (any adapter) and the base alone."""
    return "input" if name == "input" else "model" if name.startswith(MODELS) else "classical"


def method_order(names: Iterable[str]) -> list[str]:
    """input, the classical baselines by name, the plain model by step count, other adapters."""
    rank = {"input": 0, "classical": 1, "model": 2}

    def key(name: str) -> tuple:
        steps = int(found.group(1)) if (found := re.search(r"_s(\d+)$", name)) else 0
        return rank[method_group(name)], name != f"model_s{steps}", steps, name

    return sorted(set(names), key=key)


def method_label(name: str) -> str:
    """A label by rule, no table of names: drop `model_`, underscores become spaces."""
    return name.removeprefix("model_").replace("_", " ")


def _methods(table: dict) -> list[str]:
    """Every method of a {domain: {level: {method: value}}} table, in method_order."""
    return method_order(n for by_level in table.values() for c in by_level.values() for n in c)


def _ordered(values: Iterable[str], preferred: list[str]) -> list[str]:
    """`values` in the order of `preferred` (params.yaml's), unknown ones after, sorted."""
    seen = set(values)
    return [v for v in preferred if v in seen] + sorted(seen - set(preferred))


# -- tables: rows of domain x level, the view the template's `grid` macro draws
@dataclass(frozen=True)
class Axes:
    """What orders and names the tables: params.yaml's domains and levels, the model's steps."""

    domains: list[str]
    levels: list[str]
    steps: int

    def walk(self, table: dict) -> Iterator[tuple]:
        """(domain, span: its row count on its first row else 0, level, cell) of a table."""
        for domain in _ordered(table, self.domains):
            by_level = table[domain]
            for index, level in enumerate(_ordered(by_level, self.levels)):
                yield domain, len(by_level) if index == 0 else 0, level, by_level[level]

    def rows(self, table: dict, cells: Callable[[dict], list]) -> list[dict]:
        """The template's rows of `table`: domain, span, level and cells(cell)."""
        return [
            dict(domain=domain, span=span, level=level, cells=cells(cell))
            for domain, span, level, cell in self.walk(table)
        ]


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

    def tinted(value: float) -> tuple:
        share = (value - low) / (high - low) if high > low else 1.0
        share = 1.0 - share if lower_is_better else share
        best = value == (low if lower_is_better else high)
        return f"{value:.{digits}f}", "best" if best else "v", f"--t:{share:.2f}"

    return [tinted(shown[key]) if key in shown else NA for key in keys]


def _marked_sets(column_sets: list[list], digits: int, lower: bool = False) -> Callable:
    """A row's cells: marked() within each column set."""
    return lambda cell: [c for keys in column_sets for c in marked(cell, keys, digits, lower)]


def score_grid(table: dict, axes: Axes, digits: int, caption: str, unit: str) -> Grid:
    """PSNR or SSIM: a column per method found in the table, grouped, with a row of means."""
    methods = _methods(table)
    groups = [(GROUP_LABELS[g], len(list(ns))) for g, ns in groupby(methods, key=method_group)]
    rows = axes.rows(table, _marked_sets([methods], digits))
    cells = [cell for *_, cell in axes.walk(table)]
    columns = {n: [cell[n] for cell in cells if n in cell] for n in methods}
    means = {n: sum(v) / len(v) for n, v in columns.items() if v}
    labels, foot = [(method_label(n), n) for n in methods], marked(means, methods, digits)
    note = f"{unit}, best of each row in bold"
    return Grid(caption, note, groups, labels, rows, foot, f"mean of {len(rows)} cells")


def chart_grid(chart: dict, axes: Axes) -> Grid:
    """The detail's `chart`: errors of the line and tick labels read back, per figure, method."""

    def flat(cell: dict) -> dict:  # {(figure, method): value}
        return {(f, n): v for n, figures in cell.items() for f, v in figures.items()}

    keys = {key for by_level in chart.values() for c in by_level.values() for key in flat(c)}
    figures, methods = sorted({f for f, _ in keys}), method_order(n for _, n in keys)
    marks = _marked_sets([[(f, n) for n in methods] for f in figures], 3, lower=True)
    return Grid(
        "Errors of the line and the tick labels read back from the image",
        "lower is better, best of each row and figure in bold",
        [(f.replace("_", " "), len(methods)) for f in figures],
        [(method_label(n), n) for _ in figures for n in methods],
        axes.rows(chart, lambda cell: marks(flat(cell))),
        css=" compact",
    )


def ocr_grid(block: dict, axes: Axes) -> Grid:
    """The detail's ocr_cer: per level, the tick labels' character error rate of the input and
    the model (the better in bold), of the sharp chart (misread anyway), and the labels read."""
    names = ["input", f"model_s{axes.steps}"]
    rows = Axes([], axes.levels, axes.steps).rows(
        {"every domain": block}, _marked_sets([names], 3, lower=True)
    )
    for row in rows:
        cell = block[row["level"]]
        sharp = NA if cell.get("sharp") is None else (f"{cell['sharp']:.3f}", "v", "")
        row["cells"] += [sharp, (str(cell.get("labels", "")), "v", "")]
    columns = [(method_label(n), n) for n in [*names, "sharp"]] + [("labels", "labels")]
    note = "character error rate, lower is better"
    return Grid("Tick labels read back by Tesseract", note, [], columns, rows, css=" compact")


def digitized_grid(block: dict, axes: Axes) -> Grid:
    """The detail's digitized: per level, the median curve error of the data read with no
    sidecar from the input and the model (the better in bold) and from the sharp chart, the
    share of each whose axes were calibrated, how often the model read closer, and the charts."""
    model = f"model_s{axes.steps}"
    names = ["input", model]
    errors = {
        level: {name: row[name]["curve_error_pct_median"] for name in names}
        for level, row in block.items()
    }
    rows = Axes([], axes.levels, axes.steps).rows(
        {"every domain": errors}, _marked_sets([names], 2, lower=True)
    )
    for row in rows:
        cell = block[row["level"]]
        row["cells"].append((f"{cell['sharp']['curve_error_pct_median']:.2f}", "v", ""))
        row["cells"] += [
            (f"{cell[name]['calibrated']:.2f}", "v", "") for name in ("input", model, "sharp")
        ]
        row["cells"] += [
            (f"{cell['model_lowers_error']:.2f}", "v", ""),
            (str(cell["charts"]), "v", ""),
        ]
    columns = [(method_label(n), n) for n in [*names, "sharp"]]
    columns += [(f"calibrated: {method_label(n)}", n) for n in ("input", model, "sharp")]
    columns += [("model closer", "model_lowers_error"), ("charts", "charts")]
    note = "median curve error, % of the y range (100: axes not read), lower is better"
    caption = "Data read back with no sidecar (linefuse digitize)"
    return Grid(caption, note, [], columns, rows, css=" compact")


def chart_summary_table(block: dict, steps: int) -> dict:
    """The detail's chart_summary: per figure, the medians and means of the input, the model and
    the sharp image over every image, and how often the model is below or above the input."""
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


def library_rows(libraries: dict, steps: int) -> list[dict]:
    """The detail's `libraries`: per plotting library, the split it is scored on, its images,
    the mean gain and what adapting bought (each with its interval), the tick labels' error rate
    of the input and the model (the mean over levels; None where not read) and the worst sharp
    chart through the model."""

    def rate(block: dict, name: str) -> float | None:
        rates = [level.get(name) for level in block.get("ocr_cer", {}).values()]
        return sum(rates) / len(rates) if rates and None not in rates else None

    rows = []
    for library, block in libraries.items():
        summary = block.get("summary", {})
        rows.append(
            {
                "library": library,
                "split": block["split"].replace("_", "-"),
                "samples": summary.get("samples"),
                "gain": [summary.get(f"psnr_gain_s{steps}{end}") for end in ("", "_low", "_high")],
                "adapt": [
                    summary.get(f"adapt_gain_s{steps}{end}") for end in ("", "_low", "_high")
                ],
                "cer": [rate(block, "input"), rate(block, f"model_s{steps}")],
                "sharp": block.get("sharp", {}).get(f"min_psnr_s{steps}"),
            }
        )
    return rows


def _gain_cells(cell: dict) -> list[tuple]:
    """A psnr_gain_sN cell: its sample count, its mean gain (signed, coloured), its interval."""
    bounds = [cell[k] for k in ("low", "high")]
    text = "–" if None in bounds else f"{bounds[0]:+.2f} … {bounds[1]:+.2f}"
    sign = "up" if cell["mean"] > 0 else "down" if cell["mean"] < 0 else "v"
    return [(str(cell["samples"]), "v", ""), (f"{cell['mean']:+.2f}", sign, ""), (text, "v", "")]


def gain_grid(block: dict, axes: Axes, confidence: float, caption: str) -> Grid:
    """A gain block (psnr_gain_sN, adapt_gain_sN): per cell its images, mean and interval."""
    columns = [
        ("images", "samples"),
        ("mean", "mean"),
        (f"{confidence:.0%} interval", "low … high"),
    ]
    note = f"dB, with its {confidence:.0%} bootstrap interval"
    return Grid(caption, note, [], columns, axes.rows(block, _gain_cells), css=" compact")


def steps_table(rows: list[dict[str, str]], sweep: dict) -> dict:
    """plots/psnr_vs_steps.csv: on the sweep's images, the model's PSNR per step count, its gain
    over the input and margin over the best classical baseline, and its time per megapixel."""
    names = {"psnr": "psnr", "gain": "gain", "margin": "margin", "latency": "seconds_per_megapixel"}
    return {
        "rows": [{"steps": r["steps"]} | {k: float(r[c]) for k, c in names.items()} for r in rows],
        "input": sweep.get("input_psnr"),
        "best": sweep.get("best_classical_psnr"),
        "samples": sweep.get("samples", 0),
    }


# -- summary cards: every key of every block, whatever evaluate puts there
def _flatten(block: dict, prefix: str = "") -> list[tuple[str, object]]:
    pairs = []
    for key, value in block.items():
        nested = isinstance(value, dict) and value
        pairs += _flatten(value, f"{prefix}{key}.") if nested else [(f"{prefix}{key}", value)]
    return pairs


# each card's plain name, by its block and key in metrics/eval.json (which keep theirs)
CARD_NAMES = {
    r"summary\.psnr_gain_s\d+": "mean PSNR gain over the input",
    r"summary\.(psnr|adapt)_gain_s\d+_low": "… its interval, low end",
    r"summary\.(psnr|adapt)_gain_s\d+_high": "… its interval, high end",
    r"summary\.min_psnr_gain_s\d+": "the weakest cell's gain over the input",
    r"summary\.min_margin_over_best_baseline_s\d+": "the weakest cell's lead over the best "
    "classical restoration",
    r"summary\.min_domain_margin_over_best_baseline_s\d+": "the weakest domain's lead over the "
    "best classical restoration",
    r"summary\.adapt_gain_s\d+": "what training on this data added to the base",
    r"summary\.psnr_gain_domain_s\d+": "mean gain with each domain's own adapter",
    r"summary\.adapt_gain_domain_s\d+": "what each domain's own adapter added to the base",
    r"summary\.psnr_gain_combined_s\d+": "mean gain with the domain adapters merged",
    r"summary\.adapt_gain_combined_s\d+": "what the merged adapters added to the base",
    r"summary\.interval_confidence": "confidence of every interval",
    r"summary\.samples": "images scored",
    r"summary\.min_cell_samples": "images in the smallest cell",
    r"summary\.max_interval_half_width_s\d+": "the widest cell interval, half its width",
    r"psnr_by_domain_s\d+\.(?P<domain>\w+)": "mean PSNR of the restored {domain} charts",
    r"sharp\.samples": "sharp charts put through the model",
    r"sharp\.psnr_s\d+": "a sharp chart through the model: mean PSNR",
    r"sharp\.min_psnr_s\d+": "a sharp chart through the model: worst PSNR",
    r"few_step\.steps": "the fewest DDIM steps compared",
    r"few_step\.reference_steps": "against this many steps",
    r"few_step\.psnr_shortfall_db": "PSNR the fewer steps give up",
    r"few_step\.speedup": "how much faster the fewer steps are",
    r"machine\.seconds_per_megapixel_s\d+": "seconds to restore a megapixel on this machine",
    r"machine\.device": "device the model ran on",
    r"machine\.device_reason": "why that device",
    r"machine\.runtime": "what ran the model (ONNX Runtime or torch)",
    r"machine\.runtime_reason": "why that runtime",
    r"machine\.cpu_model": "this machine's CPU",
}
# the classical restorations by their names in metrics/eval.json, for the cards' readings
BASELINE_WORDS = {
    "wiener": "Wiener deconvolution, given the true blur kernel (which the model never sees),",
    "richardson_lucy": "Richardson-Lucy, given the true blur kernel (which the model never sees),",
    "unsharp": "unsharp masking",
}


def card_name(key: str) -> str | None:
    """The plain name of a card's `block.key`, or None where CARD_NAMES has none."""
    for pattern, name in CARD_NAMES.items():
        if found := re.fullmatch(pattern, key):
            return name.format(**found.groupdict())
    return None


def card_reading(key: str, value: object, split: dict) -> str | None:
    """One line on what a figure that can alarm means, from its split's tables (`split`): a
    lead under 0 names the cell and the classical method that beat the model; an adapt gain
    whose interval holds 0 says where the gain comes from."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    if re.fullmatch(r"summary\.adapt_gain_s\d+", key):
        summary, name = split.get("summary", {}), key.partition(".")[2]
        low, high = summary.get(f"{name}_low"), summary.get(f"{name}_high")
        if low is not None and high is not None and low <= 0 <= high:
            return "Its interval holds 0: on data like the base's, the gain is the base's own."
        return None
    steps = re.search(r"margin_over_best_baseline_s(\d+)$", key)
    if steps is None or value >= 0:
        return None
    model, leads = f"model_s{steps[1]}", []
    for domain, by_level in split.get("psnr", {}).items():
        groups = [[cell] for cell in by_level.values()]  # a cell's lead, or its domain's mean
        places = [f"{domain} {level}" for level in by_level]
        if "domain_margin" in key:
            groups, places = [list(by_level.values())], [domain]
        for cells, place in zip(groups, places, strict=True):
            means = {n: sum(c.get(n, math.nan) for c in cells) / len(cells) for n in cells[0]}
            best = max((n for n in BASELINE_WORDS if n in means), key=means.get, default=None)
            if best is not None and model in means:
                leads.append((means[model] - means[best], place, best))
    if not leads:
        return None
    _, place, best = min(leads)
    return f"In {place}, {BASELINE_WORDS[best]} restores better than the model."


def card(key: str, value: object, split: dict | None = None) -> dict:
    """A value formatted by its key's name: dB for PSNR, signed and coloured for a gain or
    margin (more is better), × for a speed-up; anything else as JSON. With its plain name, the
    key as metrics/eval.json has it, and a reading where the figure can alarm."""
    delta = re.search(r"gain|margin", key) is not None
    css = ""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        text = json.dumps(value, sort_keys=True)
    elif re.search(r"psnr|gain|margin|_db\b|\bdb_", key):
        text = f"{value:+.2f} dB" if delta else f"{value:.2f} dB"
        css = (" up" if value > 0 else " down" if value < 0 else "") if delta else ""
    elif "speedup" in key:
        text = f"{value:.3g}×"
    else:
        text = str(value) if isinstance(value, int) else f"{value:.4g}"
    name = card_name(key)
    return {
        "key": key.partition(".")[2],
        "name": name or key.partition(".")[2].replace("_", " "),
        "named": name is not None,
        "reading": card_reading(key, value, split or {}),
        "text": text,
        "css": css,
    }


def _cards(name: str, block: object, split: dict) -> list[dict]:
    pairs = _flatten(block if isinstance(block, dict) else {name: block})
    return [card(f"{name}.{key}", value, split) for key, value in pairs]


def summary_blocks(report: dict) -> list[dict]:
    """`summary` first, then the other blocks by name (per-domain means, few-step, machine)."""
    untabled = [n for n in sorted(report) if n not in TABLED and not GAIN_BLOCK.fullmatch(n)]
    blocks = [("summary", report.get("summary", {}))] + [(n, report[n]) for n in untabled]
    return [{"name": name, "cards": _cards(name, block, report)} for name, block in blocks]


# -- samples, params, provenance
def sample_heads(deskew: str) -> list[str]:
    """samples.png's columns (evaluate's showcase): the input as drawn, as the models got it
    when eval.deskew is on, the restoration and the sharp chart."""
    return ["blurred", *(["straightened"] if deskew != "never" else []), "restored", "sharp"]


def samples_figure(png: bytes, rows: list[tuple[str, str]], steps: int, deskew: str) -> dict:
    """samples.png as a data: URI, scaled up by a whole factor (pixels stay sharp). Its rows
    (one per scored domain and level) are labelled when equally tall, as then they line up; its
    columns are headed, the input as the models got it among them when eval.deskew is on."""
    with Image.open(io.BytesIO(png)) as image:
        width, height = image.size
    scale = max(1, min(4, 320 // max(width, 1)))
    shown = min(width * scale, 360)
    return {
        "src": "data:image/png;base64," + base64.b64encode(png).decode("ascii"),
        "width": shown,
        "height": round(height * shown / max(width, 1)),
        "steps": steps,
        "heads": sample_heads(deskew),
        "labels": rows if rows and height % len(rows) == 0 else [],
    }


def params_sections(params: Params) -> list[str]:
    """The SECTIONS as validated (what the stages ran with), leaf lists and mappings inline."""
    values = params.model_dump(mode="json")
    dump = dict(sort_keys=False, default_flow_style=None, width=100, allow_unicode=True)
    return [yaml.safe_dump({section: values[section]}, **dump) for section in SECTIONS]


def provenance(params_path: Path, shown_params: str) -> dict:
    """Size and sha256 of each input and of the params shown; the versions of the packages."""
    contents = [(str(path), path.read_bytes()) for path in INPUTS]
    contents.append((f"{params_path} ({', '.join(SECTIONS)})", shown_params.encode()))
    files = [(n, f"{len(d):,} B", hashlib.sha256(d).hexdigest()) for n, d in contents]
    installed = {dist.metadata["Name"].lower(): dist.version for dist in metadata.distributions()}
    versions = [f"{name} {installed[name]}" for name in PACKAGES if name in installed]
    return {"files": files, "versions": versions}


# -- the page
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


def _facts(psnr: dict, params: Params) -> list[tuple[str, str]]:
    """The run in a few lines above the tables: what was scored, with what."""
    levels, steps, order = params.degrade.levels, params.eval.steps, params.train.order()
    cells, most = sum(len(by_level) for by_level in psnr.values()), params.eval.max_samples
    return [
        ("cells", f"{len(psnr)} domains × {len(levels)} levels = {cells} scored"),
        ("test images", f"≤ {most} per cell" if most else "the whole test split"),
        ("adapter", f"{adapter_path(order[-1]).as_posix()} (curriculum: {' → '.join(order)})"),
        ("DDIM steps", f"{steps} (swept: {', '.join(map(str, params.eval.sweep.steps))})"),
        ("metric", f"{params.eval.metric.color}, crop border {params.eval.metric.crop_border}"),
        ("methods", str(len(_methods(psnr)))),
    ]


def _split(block: dict, axes: Axes, confidence: float, held_out: bool = False) -> dict:
    """One split's PSNR table, gain table and chart summary (the test split or the held-out)."""
    prefix = "Held-out " if held_out else ""
    gain = f"{prefix}PSNR gain of the model over the input"
    adapt = f"{prefix}PSNR gain of the adapter over the base alone"
    return {
        "psnr": score_grid(block.get("psnr", {}), axes, 2, f"{prefix}PSNR", "dB"),
        "gain": gain_grid(block.get(f"psnr_gain_s{axes.steps}", {}), axes, confidence, gain),
        "adapt": gain_grid(block.get(f"adapt_gain_s{axes.steps}", {}), axes, confidence, adapt),
        "chart_summary": chart_summary_table(block.get("chart_summary", {}), axes.steps),
    }


def render(report: dict, by_steps: list, png: bytes, params: Params, params_path: Path) -> str:
    """The page for these inputs; pure, so a test can render without a pipeline run."""
    axes = Axes(list(params.degrade.domains), list(params.degrade.levels), params.eval.steps)
    psnr, confidence, held = report.get("psnr", {}), params.eval.interval.confidence, {}
    if block := report.get("held_out", {}):
        held = {"cards": _cards("summary", block.get("summary", {}), block)}
        held |= _split(block, axes, confidence, held_out=True)
    scored = [(d, lv) for d, _, lv, _ in axes.walk(psnr)]
    shown_params = params_sections(params)
    return ENV.get_template("index.html.j2").render(
        **_split(report, axes, confidence),
        facts=_facts(psnr, params),
        blocks=summary_blocks(report),
        ssim=score_grid(report.get("ssim", {}), axes, 4, "SSIM", "0–1"),
        held_out=held,
        libraries=library_rows(report.get("libraries", {}), axes.steps),
        chart=chart_grid(report.get("chart", {}), axes),
        ocr=ocr_grid(report.get("ocr_cer", {}), axes),
        digitized=digitized_grid(report.get("digitized", {}), axes),
        steps=steps_table(by_steps, report.get("sweep", {})),
        samples=samples_figure(png, scored, axes.steps, params.eval.deskew) if psnr else None,
        sections=", ".join(SECTIONS),
        params_path=str(params_path),
        params=shown_params,
        provenance=provenance(params_path, "\n".join(shown_params)),
        src={"eval": str(EVAL_DETAIL), "steps": str(BY_STEPS_CSV), "samples": str(SAMPLES_PNG)},
    )
