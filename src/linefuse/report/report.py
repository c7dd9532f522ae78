"""report: reports/index.html, one static page over what evaluate wrote.

The PSNR and SSIM tables per blur domain and level (best value per row highlighted), the
`summary` block whatever its keys, the three plots/*.csv drawn as inline SVG, the sample grid
(reports/samples.png, beside the page), the params.yaml sections behind the numbers and digests of
every input. No JavaScript, no fonts or styles from the network, and nothing that changes from run
to run (no clock): the same inputs give the same bytes.
"""

from __future__ import annotations

import csv
import hashlib
import html
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import yaml
from PIL import Image

from linefuse.params import Params
from linefuse.paths import BY_DOMAIN_CSV, BY_STEPS_CSV, CURVES_CSV, EVAL_JSON, REPORT_HTML, SAMPLES_PNG
from linefuse.stage import UserError, atomic_file

INPUTS = [EVAL_JSON, BY_DOMAIN_CSV, BY_STEPS_CSV, CURVES_CSV, SAMPLES_PNG]
# The params.yaml sections the page shows: all that shape the numbers (loader and serve do not).
# dvc.yaml and workflow/rules/report.smk track the same list.
SECTIONS = ["data", "degrade", "shards", "model", "embed", "optim", "pretrain", "train", "eval"]
PACKAGES = ["linefuse", "torch", "diffusers", "peft", "numpy", "scikit-image"]

CLASSICAL = ["wiener", "richardson_lucy", "unsharp"]
METHOD_LABELS = {"input": "input (blurred)", "wiener": "Wiener",
                 "richardson_lucy": "Richardson–Lucy", "unsharp": "unsharp mask"}
GROUP_LABELS = {"input": "input", "classical": "classical baselines",
                "model": "model · DDIM steps", "adapters": "per-domain adapters", "other": "other"}
MODEL_GREENS = ["#a3d9a5", "#5cb85f", "#2e8b3e", "#145a24", "#0b3b17"]
OTHER_COLOURS = ["#d6336c", "#7048e8", "#0c8599", "#e67700", "#5c940d", "#862e9c"]
FIXED_COLOURS = {"input": "#868e96", "wiener": "#1c7ed6", "richardson_lucy": "#ae3ec9",
                 "unsharp": "#f08c00"}


def missing_input() -> Path | None:
    return next((path for path in INPUTS if not path.is_file()), None)


def check_inputs() -> None:
    """One line naming the first missing input and the stage that writes it."""
    missing = missing_input()
    if missing is not None:
        raise UserError(f"{missing} is missing; run `linefuse evaluate` first")


def write_report(params: Params, params_path: Path) -> Path:
    """Renders reports/index.html from evaluate's outputs and params.yaml; returns its path."""
    check_inputs()
    try:
        report = json.loads(EVAL_JSON.read_text())
    except json.JSONDecodeError as error:
        raise UserError(f"{EVAL_JSON}: not valid JSON ({error.msg} at line {error.lineno}); "
                        f"run `linefuse evaluate` again") from None
    tables = {path: _read_csv(path) for path in (BY_DOMAIN_CSV, BY_STEPS_CSV, CURVES_CSV)}
    with Image.open(SAMPLES_PNG) as image:
        samples_size = image.size
    page = render(report, tables, samples_size, params, params_path.read_text(), params_path)
    with atomic_file(REPORT_HTML) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return REPORT_HTML


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


# ---------------------------------------------------------------------------------------------
# methods: order, labels, colours


def _steps_of(name: str) -> int | None:
    found = re.fullmatch(r".*_s(\d+)", name)
    return int(found.group(1)) if found else None


def _group(name: str) -> str:
    if name == "input":
        return "input"
    if name in CLASSICAL:
        return "classical"
    if re.fullmatch(r"model_s\d+", name):
        return "model"
    if name.startswith("model_"):
        return "adapters"
    return "other"


def method_order(names: Iterable[str]) -> list[str]:
    """input, the classical baselines, the model by step count, the other adapters, the rest."""
    rank = {"input": 0, "classical": 1, "model": 2, "adapters": 3, "other": 4}
    return sorted(set(names), key=lambda n: (rank[_group(n)], CLASSICAL.index(n) if n in CLASSICAL
                                             else 0, _steps_of(n) or 0, n))


def method_label(name: str) -> str:
    if name in METHOD_LABELS:
        return METHOD_LABELS[name]
    steps = _steps_of(name)
    if re.fullmatch(r"model_s\d+", name):
        return f"{steps}\u00a0step" + ("" if steps == 1 else "s")
    if name.startswith("model_domain_s"):
        return f"own domain\u00a0· {steps}"
    if name.startswith("model_combined_s"):
        return f"merged\u00a0· {steps}"
    return name


def method_colours(names: list[str]) -> dict[str, str]:
    models = [n for n in names if _group(n) == "model"]
    others = [n for n in names if n not in FIXED_COLOURS and n not in models]
    colours = dict(FIXED_COLOURS)
    for index, name in enumerate(models):
        position = index * (len(MODEL_GREENS) - 1) // (len(models) - 1) if len(models) > 1 else 2
        colours[name] = MODEL_GREENS[position]
    for index, name in enumerate(others):
        colours[name] = OTHER_COLOURS[index % len(OTHER_COLOURS)]
    return colours


def _dash(name: str) -> str | None:
    return "5 3" if _group(name) == "classical" else "2 2" if name == "input" else None


# ---------------------------------------------------------------------------------------------
# formatting


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


def _num(value: float) -> str:
    """A coordinate in the SVG: one decimal is plenty, and it keeps the bytes stable."""
    return f"{value:.1f}"


def _ordered(values: Iterable[str], preferred: list[str]) -> list[str]:
    """`values` in the order of `preferred`, unknown ones after, in their first-seen order."""
    seen = list(dict.fromkeys(values))
    return [v for v in preferred if v in seen] + [v for v in seen if v not in preferred]


# ---------------------------------------------------------------------------------------------
# tables


def score_table(table: dict, domains: list[str], levels: list[str], digits: int, unit: str,
                caption: str) -> str:
    """Rows domain × level, columns every method; the best of each row (and of the means)
    marked."""
    if not table:
        return f'<p class="empty">{esc(caption)}: no test samples were scored.</p>'
    domains = _ordered(table, domains)
    methods = method_order(n for by_level in table.values() for cell in by_level.values()
                           for n in cell)
    groups: list[tuple[str, int]] = []
    for name in methods:
        if groups and groups[-1][0] == _group(name):
            groups[-1] = (groups[-1][0], groups[-1][1] + 1)
        else:
            groups.append((_group(name), 1))
    head = ['<tr><th rowspan="2" class="key">domain</th><th rowspan="2" class="key">level</th>']
    head += [f'<th colspan="{span}" class="group">{esc(GROUP_LABELS[group])}</th>'
             for group, span in groups]
    head.append("</tr><tr>")
    head += [f'<th title="{esc(n)}">{esc(method_label(n))}<code>{_breakable(n)}</code></th>'
             for n in methods]
    head.append("</tr>")

    body, columns = [], {name: [] for name in methods}
    for domain in domains:
        rows = _ordered(table[domain], levels)
        for index, level in enumerate(rows):
            cell = table[domain][level]
            for name in methods:
                if name in cell:
                    columns[name].append(cell[name])
            first = (f'<th rowspan="{len(rows)}" class="domain">{esc(domain)}</th>'
                     if index == 0 else "")
            css = ' class="first"' if index == 0 else ""
            body.append(f"<tr{css}>{first}<th class='level'>{esc(level)}</th>"
                        f"{_value_cells(cell, methods, digits)}</tr>")
    means = {name: sum(values) / len(values) for name, values in columns.items() if values}
    foot = (f'<tr><th colspan="2" class="key">mean of {sum(map(len, table.values()))} cells</th>'
            f"{_value_cells(means, methods, digits)}</tr>")
    return (f'<table class="scores"><caption>{esc(caption)} <span class="unit">{esc(unit)}, '
            f'best of each row in bold</span></caption><thead>{"".join(head)}</thead>'
            f'<tbody>{"".join(body)}</tbody><tfoot>{foot}</tfoot></table>')


def _value_cells(cell: dict, methods: list[str], digits: int, lower_is_better: bool = False) -> str:
    shown = {name: _fmt(cell[name], digits) for name in methods if name in cell}
    if not shown:
        return "".join('<td class="na">–</td>' for _ in methods)
    values = {name: float(text) for name, text in shown.items()}
    best = (min if lower_is_better else max)(values.values())
    low, high = min(values.values()), max(values.values())
    out = []
    for name in methods:
        if name not in shown:
            out.append('<td class="na">–</td>')
            continue
        share = (values[name] - low) / (high - low) if high > low else 1.0
        if lower_is_better:
            share = 1.0 - share
        tint = f"--t:{share:.2f}"
        css = "best" if values[name] == best else "v"
        out.append(f'<td class="{css}" style="{tint}">{shown[name]}</td>')
    return "".join(out)


def chart_table(chart: dict, domains: list[str], levels: list[str]) -> str:
    """eval.json's `chart`: the line's peak-position and integral errors, lower is better."""
    if not chart:
        return ""
    domains = _ordered(chart, domains)
    names = method_order(n for by_level in chart.values() for cell in by_level.values()
                         for n in cell)
    figures = list(dict.fromkeys(f for by_level in chart.values() for cell in by_level.values()
                                 for by_figure in cell.values() for f in by_figure))
    head = ['<tr><th rowspan="2" class="key">domain</th><th rowspan="2" class="key">level</th>']
    head += [f'<th colspan="{len(names)}" class="group">{esc(f)}</th>' for f in figures]
    head.append("</tr><tr>")
    head += [f"<th>{esc(method_label(n))}<code>{_breakable(n)}</code></th>" for _ in figures
             for n in names]
    head.append("</tr>")
    body = []
    for domain in domains:
        rows = _ordered(chart[domain], levels)
        for index, level in enumerate(rows):
            first = (f'<th rowspan="{len(rows)}" class="domain">{esc(domain)}</th>'
                     if index == 0 else "")
            css = ' class="first"' if index == 0 else ""
            cells = "".join(_value_cells({n: chart[domain][level][n][f] for n in names
                                          if f in chart[domain][level].get(n, {})},
                                         names, 3, lower_is_better=True) for f in figures)
            body.append(f"<tr{css}>{first}<th class='level'>{esc(level)}</th>{cells}</tr>")
    return (f'<table class="scores compact"><caption>Errors of the line read back from the '
            f'image <span class="unit">lower is better, best of each row in bold</span></caption>'
            f'<thead>{"".join(head)}</thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


# eval.json's blocks that have their own tables and charts; any other block is shown as cards
TABLED = {"psnr", "ssim", "chart", "latency_ms_per_image", "summary"}


def summary_cards(report: dict) -> str:
    """Every key of eval.json's `summary`, whatever it holds, then any other block evaluate adds
    (a few-step comparison, per-domain means, ...) the same way; nested blocks are flattened."""
    blocks = [("summary", report.get("summary", {}))]
    blocks += [(name, value) for name, value in sorted(report.items()) if name not in TABLED]
    out = []
    for name, block in blocks:
        if not isinstance(block, dict):
            block = {name: block}
        cards = [f'<div class="card"><div class="value{_sign_class(f"{name}.{key}", value)}">'
                 f'{esc(_summary_value(f"{name}.{key}", value))}</div>'
                 f'<code>{_breakable(key)}</code></div>' for key, value in _flatten(block)]
        if name != "summary":
            out.append(f'<h3><code>{esc(name)}</code></h3>')
        out.append(f'<div class="cards">{"".join(cards)}</div>' if cards else
                   f'<p class="empty">The {esc(name)} block is empty (no test samples were '
                   f'scored).</p>')
    return "".join(out)


def _breakable(key: str) -> str:
    """The key with a line-break opportunity after each underscore or dot."""
    return re.sub(r"([_.])", r"\1<wbr>", esc(key)) if len(key) > 12 else esc(key)


def _flatten(block: dict, prefix: str = "") -> list[tuple[str, object]]:
    out = []
    for key, value in block.items():
        if isinstance(value, dict) and value:
            out += _flatten(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _delta(key: str) -> bool:
    """A difference where more is better (a gain, a margin): shown signed and coloured."""
    return re.search(r"gain|margin", key) is not None


def _summary_value(key: str, value: object) -> str:
    if not _is_number(value):
        return json.dumps(value, sort_keys=True)
    if re.search(r"psnr|gain|margin|_db\b|\bdb_", key):
        return f"{value:+.2f} dB" if _delta(key) else f"{value:.2f} dB"
    if "speedup" in key:
        return f"{value:.3g}×"
    if isinstance(value, int):
        return str(value)
    return f"{value:.4g}"


def _sign_class(key: str, value: object) -> str:
    if not _is_number(value) or not _delta(key):
        return ""
    return " up" if value > 0 else " down" if value < 0 else ""


def steps_table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return ""
    body = "".join(f"<tr><th>{esc(r['steps'])}</th><td>{_fmt(float(r['psnr']), 2)}</td>"
                   f"<td>{_fmt(float(r['latency_ms_per_image']), 1)}</td></tr>" for r in rows)
    return ('<table class="scores mini"><thead><tr><th>DDIM steps</th><th>mean PSNR (dB)</th>'
            f'<th>ms / image</th></tr></thead><tbody>{body}</tbody></table>')


# ---------------------------------------------------------------------------------------------
# SVG charts


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]
    colour: str
    dash: str | None = None
    label: str = ""
    markers: bool = True


@dataclass
class Axis:
    low: float
    high: float
    ticks: list[float]
    labels: list[str]
    log: bool = False
    categories: list[str] = field(default_factory=list)

    def scale(self, value: float, start: float, end: float) -> float:
        if self.categories:  # categories sit at 0..n-1, half a slot in from each end
            span = len(self.categories)
            return start + (value + 0.5) / span * (end - start)
        if self.log:
            low, high, value = math.log10(self.low), math.log10(self.high), math.log10(value)
        else:
            low, high = self.low, self.high
        return start + (value - low) / ((high - low) or 1.0) * (end - start)


def linear_axis(values: list[float], count: int = 5, pad: float = 0.04) -> Axis:
    low, high = min(values), max(values)
    if high - low < 1e-9:
        low, high = low - max(abs(low) * 0.05, 0.5), high + max(abs(high) * 0.05, 0.5)
    span = high - low
    low, high = low - span * pad, high + span * pad
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = min((m * magnitude for m in (1, 2, 2.5, 5, 10)),
               key=lambda step: abs((high - low) / step - count))
    start, end = math.floor(low / step) * step, math.ceil(high / step) * step
    ticks = [start + i * step for i in range(int(round((end - start) / step)) + 1)]
    digits = max(0, -math.floor(math.log10(step) + 1e-9)) + (1 if round(step / magnitude, 3) == 2.5
                                                             and step < 10 else 0)
    labels = [_fmt(t + 0.0, digits).replace("-0.0", "0.0") if digits else f"{round(t):d}"
              for t in ticks]
    return Axis(start, end, ticks, labels)


def log_axis(values: list[float], ticks: list[float] | None = None) -> Axis:
    positive = [v for v in values if v > 0]
    low, high = min(positive), max(positive)
    if ticks is None:
        first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
        if last == first:
            last += 1
        multiples = (1,) if last - first > 2 else (1, 2, 5)
        ticks = [m * 10.0 ** e for e in range(first, last + 1) for m in multiples]
        inside = [t for t in ticks if low / 1.0001 <= t <= high * 1.0001]
        below = [t for t in ticks if t < low] or [ticks[0]]
        above = [t for t in ticks if t > high] or [ticks[-1]]
        ticks = [max(below)] + inside + [min(above)]
        low, high = min(low, ticks[0]), max(high, ticks[-1])
    else:
        factor = (high / low) ** 0.06 if high > low else 1.5
        low, high = low / factor, high * factor
    return Axis(low, high, ticks, [f"{t:g}" for t in ticks], log=True)


def category_axis(categories: list[str]) -> Axis:
    return Axis(0, len(categories) - 1, list(range(len(categories))), categories,
                categories=categories)


def line_chart(series: list[Series], x: Axis, y: Axis, x_label: str, y_label: str,
               width: int = 400, height: int = 260, bands: list[tuple[float, float, str]] = (),
               reference: list[tuple[float, str, str]] = ()) -> str:
    """An SVG line chart: grid, ticks, axis labels, optional shaded x bands (label) and dashed
    horizontal reference lines (value, label, colour); each point has a hover title."""
    left, right, top, bottom = 54, 14, 14, 44
    x0, x1, y0, y1 = left, width - right, height - bottom, top

    def px(value: float) -> float:
        return x.scale(value, x0, x1)

    def py(value: float) -> float:
        return y.scale(value, y0, y1)

    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             f'role="img" aria-label="{esc(y_label)} against {esc(x_label)}" '
             f'xmlns="http://www.w3.org/2000/svg">']
    for start, end, label in bands:
        parts.append(f'<rect class="band" x="{_num(px(start))}" y="{y1}" '
                     f'width="{_num(px(end) - px(start))}" height="{y0 - y1}"/>'
                     f'<text class="band-label" x="{_num((px(start) + px(end)) / 2)}" '
                     f'y="{y1 + 11}" text-anchor="middle">{esc(label)}</text>')
    for tick, label in zip(y.ticks, y.labels):
        level = _num(py(tick))
        parts.append(f'<line class="grid" x1="{x0}" x2="{x1}" y1="{level}" y2="{level}"/>'
                     f'<text class="tick" x="{x0 - 6}" y="{_num(py(tick) + 3.5)}" '
                     f'text-anchor="end">{esc(label)}</text>')
    for tick, label in zip(x.ticks, x.labels):
        parts.append(f'<line class="grid v" x1="{_num(px(tick))}" x2="{_num(px(tick))}" y1="{y0}" '
                     f'y2="{y1}"/><text class="tick" x="{_num(px(tick))}" y="{y0 + 15}" '
                     f'text-anchor="middle">{esc(label)}</text>')
    parts.append(f'<path class="axis" d="M{x0} {y1}V{y0}H{x1}"/>')
    for index, (value, label, colour) in enumerate(reference):  # labels at alternate ends
        at, anchor = (x1 - 3, "end") if index % 2 == 0 else (x0 + 4, "start")
        parts.append(f'<line x1="{x0}" x2="{x1}" y1="{_num(py(value))}" y2="{_num(py(value))}" '
                     f'stroke="{colour}" stroke-width="1.2" stroke-dasharray="3 2"/>'
                     f'<text class="ref" x="{at}" y="{_num(py(value) - 4)}" text-anchor="{anchor}" '
                     f'fill="{colour}">{esc(label)}</text>')
    for line in series:
        if not line.points:
            continue
        path = " ".join(f"{'M' if i == 0 else 'L'}{_num(px(a))} {_num(py(b))}"
                        for i, (a, b) in enumerate(line.points))
        dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
        parts.append(f'<g><title>{esc(line.label or line.name)}</title><path d="{path}" '
                     f'fill="none" stroke="{line.colour}" stroke-width="2" '
                     f'stroke-linejoin="round"{dash}/>')
        if line.markers:
            for a, b in line.points:
                where = x.categories[int(a)] if x.categories else f"{a:g}"
                parts.append(f'<circle cx="{_num(px(a))}" cy="{_num(py(b))}" r="3" '
                             f'fill="{line.colour}"><title>{esc(line.label or line.name)} · '
                             f'{esc(where)}: {b:.4g}</title></circle>')
        parts.append("</g>")
    parts.append(f'<text class="label" x="{_num((x0 + x1) / 2)}" y="{height - 6}" '
                 f'text-anchor="middle">{esc(x_label)}</text>')
    parts.append(f'<text class="label" transform="translate(13 {_num((y0 + y1) / 2)}) rotate(-90)" '
                 f'text-anchor="middle">{esc(y_label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def legend(entries: list[tuple[str, str, str | None]]) -> str:
    """(label, colour, dash) as an HTML list of line swatches."""
    items = []
    for label, colour, dash in entries:
        stroke = f' stroke-dasharray="{dash}"' if dash else ""
        items.append(f'<li><svg width="26" height="10" aria-hidden="true"><line x1="1" x2="25" '
                     f'y1="5" y2="5" stroke="{colour}" stroke-width="2.5"{stroke}/></svg>'
                     f'{esc(label)}</li>')
    return f'<ul class="legend">{"".join(items)}</ul>'


def _no_data(title: str, source: Path) -> str:
    return (f'<figure class="plot"><figcaption>{esc(title)}</figcaption>'
            f'<p class="empty">{esc(source)} has no rows.</p></figure>')


def domain_charts(rows: list[dict[str, str]], domains: list[str], levels: list[str]) -> str:
    """plots/psnr_by_domain_level.csv: one small chart per domain, PSNR over the levels, a line
    per method, one shared legend."""
    if not rows:
        return _no_data("PSNR by blur domain and level", BY_DOMAIN_CSV)
    domains = _ordered((r["domain"] for r in rows), domains)
    levels = _ordered((r["level"] for r in rows), levels)
    methods = method_order(r["method"] for r in rows)
    colours = method_colours(methods)
    x = category_axis(levels)
    y = linear_axis([float(r["psnr"]) for r in rows])  # one scale for all panels: comparable
    panels = []
    for domain in domains:
        mine = [r for r in rows if r["domain"] == domain]
        series = []
        for name in methods:
            points = [(float(levels.index(r["level"])), float(r["psnr"]))
                      for r in mine if r["method"] == name]
            points.sort()
            series.append(Series(name, points, colours[name], _dash(name),
                                 label=f"{domain} · {method_label(name)}"))
        panels.append(f'<figure class="panel"><figcaption>{esc(domain)}</figcaption>'
                      f'{line_chart(series, x, y, "blur level", "PSNR (dB)", 228, 220)}</figure>')
    entries = [(method_label(n), colours[n], _dash(n)) for n in methods]
    return (f'<figure class="plot wide"><figcaption>PSNR by blur domain and level '
            f'<span class="src">{esc(BY_DOMAIN_CSV)}</span></figcaption>{legend(entries)}'
            f'<div class="panels">{"".join(panels)}</div></figure>')


def steps_charts(rows: list[dict[str, str]], by_domain: list[dict[str, str]]) -> str:
    """plots/psnr_vs_steps.csv: mean PSNR and latency per DDIM step count, with the input's and
    the best classical baseline's mean PSNR as references."""
    if not rows:
        return _no_data("PSNR and latency against DDIM steps", BY_STEPS_CSV)
    steps = [float(r["steps"]) for r in rows]
    psnr = [float(r["psnr"]) for r in rows]
    latency = [float(r["latency_ms_per_image"]) for r in rows]
    x = log_axis(steps, ticks=sorted(set(steps))) if min(steps) > 0 else linear_axis(steps)
    x.labels = [f"{t:g}" for t in x.ticks]
    cells: dict[tuple[str, str], dict[str, float]] = {}
    for r in by_domain:
        cells.setdefault((r["domain"], r["level"]), {})[r["method"]] = float(r["psnr"])
    inputs = [cell["input"] for cell in cells.values() if "input" in cell]
    best = [max(v for n, v in cell.items() if n in CLASSICAL) for cell in cells.values()
            if any(n in CLASSICAL for n in cell)]
    reference = []
    if inputs:
        reference.append((sum(inputs) / len(inputs), "input (blurred)", FIXED_COLOURS["input"]))
    if best:
        reference.append((sum(best) / len(best), "best classical baseline of each cell",
                          FIXED_COLOURS["unsharp"]))
    y = linear_axis(psnr + [value for value, _, _ in reference])
    green = MODEL_GREENS[2]
    quality = line_chart([Series("model", list(zip(steps, psnr)), green, label="model, mean PSNR")],
                         x, y, "DDIM steps (log scale)", "mean PSNR (dB)", reference=reference)
    cost_axis = log_axis(latency) if min(latency) > 0 else linear_axis(latency)
    cost = line_chart([Series("latency", list(zip(steps, latency)), "#495057",
                              label="ms per image")],
                      x, cost_axis, "DDIM steps (log scale)", "ms per image (log scale)"
                      if cost_axis.log else "ms per image")
    return (f'<figure class="plot"><figcaption>Quality against DDIM steps <span class="src">'
            f'{esc(BY_STEPS_CSV)}</span></figcaption>{quality}</figure>'
            f'<figure class="plot"><figcaption>Latency against DDIM steps <span class="src">'
            f'{esc(BY_STEPS_CSV)}</span></figcaption>{cost}{steps_table(rows)}</figure>')


def training_chart(rows: list[dict[str, str]]) -> str:
    """plots/training_curves.csv: loss against steps, the stages one after another (pretrain,
    then each curriculum level), each shaded and labelled."""
    if not rows:
        return _no_data("Training loss", CURVES_CSV)
    stages = list(dict.fromkeys(r["stage"] for r in rows))
    palette = ["#495057", "#1c7ed6", "#2e8b3e", "#d6336c", "#f08c00", "#7048e8", "#0c8599"]
    series, bands, offset = [], [], 0.0
    for index, name in enumerate(stages):
        points = [(float(r["step"]), float(r["loss"])) for r in rows if r["stage"] == name]
        last = max(step for step, _ in points)
        series.append(Series(name, [(offset + s, v) for s, v in points],
                             palette[index % len(palette)], markers=len(points) <= 40))
        if index % 2 == 1:
            bands.append((offset, offset + last, ""))
        offset += last
    losses = [v for line in series for _, v in line.points]
    wide_range = min(losses) > 0 and max(losses) / min(losses) > 8
    y = log_axis(losses) if wide_range else linear_axis(losses)
    x = linear_axis([0.0, offset], count=6, pad=0.0)
    chart = line_chart(series, x, y, "optimizer step (the stages one after another)",
                       "loss (log scale)" if y.log else "loss", width=1190, height=260, bands=bands)
    entries = [(name, line.colour, None) for name, line in zip(stages, series)]
    return (f'<figure class="plot wide"><figcaption>Training loss <span class="src">'
            f'{esc(CURVES_CSV)}</span></figcaption>{legend(entries)}{chart}</figure>')


# ---------------------------------------------------------------------------------------------
# samples, params, provenance


def samples_figure(size: tuple[int, int], domains: list[str], levels: list[str], steps: int) -> str:
    """The grid evaluate wrote: a row per domain and level, blurred | restored | sharp. Rows are
    labelled when they are equally tall (a fixed eval crop), as then their edges are known."""
    width, height = size
    rows = [(d, lvl) for d in domains for lvl in levels]
    scale = max(1, min(4, 320 // max(width, 1)))
    shown_width = min(width * scale, 360)
    labels = ""
    if rows and height % len(rows) == 0:
        labels = "".join(f'<div><b>{esc(d)}</b><span>{esc(lvl)}</span></div>' for d, lvl in rows)
        labels = f'<div class="sample-labels">{labels}</div>'
    heads = "".join(f"<span>{esc(t)}</span>" for t in ("blurred", "restored", "sharp"))
    return (f'<figure class="samples"><figcaption>Samples <span class="src">restored at {steps} '
            f'DDIM steps · {esc(SAMPLES_PNG)}</span></figcaption>'
            f'<div class="sample-grid{" labelled" if labels else ""}">'
            f'<div class="sample-heads" style="width:{shown_width}px">{heads}</div>{labels}'
            f'<img src="samples.png" alt="one test crop per blur domain and level: blurred, '
            f'restored at {steps} DDIM steps, sharp" width="{shown_width}" '
            f'height="{round(height * shown_width / max(width, 1))}"></div></figure>')


def params_text(text: str) -> str:
    """The SECTIONS of params.yaml as written (comments kept) when each reads back to the same
    values; otherwise as YAML dumped from the values."""
    raw = yaml.safe_load(text) or {}
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(r"[A-Za-z_][\w-]*\s*:", line)]
    blocks = {}
    for number, start in enumerate(starts):
        end = starts[number + 1] if number + 1 < len(starts) else len(lines)
        block = lines[start:end]
        while block and (not block[-1].strip() or block[-1].startswith("#")):
            block.pop()
        blocks[lines[start].split(":", 1)[0].strip()] = "\n".join(block)
    out = []
    for section in SECTIONS:
        if section not in raw:
            continue
        block = blocks.get(section)
        try:
            same = block is not None and yaml.safe_load(block) == {section: raw[section]}
        except yaml.YAMLError:
            same = False
        out.append(block if same else
                   yaml.safe_dump({section: raw[section]}, sort_keys=False).rstrip())
    return "\n\n".join(out)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def provenance(params_path: Path, shown_params: str) -> str:
    rows = [(str(path), f"{path.stat().st_size:,} B", _sha256(path)) for path in INPUTS]
    rows.append((f"{params_path} ({', '.join(SECTIONS)})", f"{len(shown_params.encode()):,} B",
                 hashlib.sha256(shown_params.encode()).hexdigest()))
    files = "".join(f"<tr><td><code>{esc(a)}</code></td><td class='num'>{esc(b)}</td>"
                    f"<td><code>{esc(c)}</code></td></tr>" for a, b, c in rows)
    versions = []
    for package in PACKAGES:
        try:
            version = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
        versions.append(f"<li><code>{esc(package)} {esc(version)}</code></li>")
    return (f'<table class="files"><thead><tr><th>input</th><th>size</th><th>sha256</th></tr>'
            f'</thead><tbody>{files}</tbody></table><ul class="versions">{"".join(versions)}</ul>')


# ---------------------------------------------------------------------------------------------
# the page


def render(report: dict, tables: dict[Path, list[dict[str, str]]], samples_size: tuple[int, int],
           params: Params, params_source: str, params_path: Path = Path("params.yaml")) -> str:
    domains, levels = list(params.degrade.domains), list(params.degrade.levels)
    steps = params.eval.shown_steps()
    shown_params = params_text(params_source)
    psnr, ssim = report.get("psnr", {}), report.get("ssim", {})
    cells = sum(len(by_level) for by_level in psnr.values())
    methods = method_order(n for by_level in psnr.values() for c in by_level.values() for n in c)
    final = params.train.order()[-1] if params.train.curriculum else "–"
    facts = [("cells", f"{len(psnr)} domains × {len(levels)} levels = {cells} scored"),
             ("test crops", f"≤ {params.eval.max_samples} per cell" if params.eval.max_samples
              else "the whole test split"),
             ("adapter", f"models/lora/{final} (curriculum: {' → '.join(params.train.order())})"),
             ("DDIM steps", ", ".join(map(str, params.eval.steps))),
             ("metric", f"{params.eval.metric.color}, "
                        f"crop border {params.eval.metric.crop_border}"),
             ("methods", str(len(methods)))]
    fact_list = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in facts)
    samples = samples_figure(samples_size, _ordered(psnr, domains) if psnr else domains,
                             levels, steps) if psnr else ""
    return PAGE.format(
        css=CSS,
        facts=fact_list,
        summary=summary_cards(report),
        psnr=score_table(psnr, domains, levels, 2, "dB", "PSNR"),
        ssim=score_table(ssim, domains, levels, 4, "0–1", "SSIM"),
        samples=samples or '<p class="empty">No samples: no test split was scored.</p>',
        domain_charts=domain_charts(tables[BY_DOMAIN_CSV], domains, levels),
        steps_charts=steps_charts(tables[BY_STEPS_CSV], tables[BY_DOMAIN_CSV]),
        training=training_chart(tables[CURVES_CSV]),
        chart=chart_table(report.get("chart", {}), domains, levels),
        params_sections=esc(", ".join(s for s in SECTIONS)),
        params_path=esc(params_path),
        params=esc(shown_params),
        provenance=provenance(params_path, shown_params),
    )


CSS = """
:root{--ink:#1f2328;--mute:#656d76;--line:#d0d7de;--soft:#f6f8fa;--good:46,139,62;--accent:#2e8b3e}
*{box-sizing:border-box}
body{margin:0;background:#fff;color:var(--ink);font:14px/1.45 system-ui,-apple-system,"Segoe UI",
Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1240px;margin:0 auto;padding:22px 24px 48px}
header{display:flex;flex-wrap:wrap;align-items:baseline;gap:4px 18px;border-bottom:3px solid
var(--accent);padding-bottom:10px;margin-bottom:14px}
h1{margin:0;font-size:26px;letter-spacing:-.01em}
header p{margin:0;color:var(--mute)}
h2{font-size:18px;margin:30px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace}
dl.facts{display:flex;flex-wrap:wrap;gap:6px 26px;margin:0 0 14px}
dl.facts div{display:flex;gap:6px}dl.facts dt{color:var(--mute)}
dl.facts dd{margin:0;font-weight:600}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(225px,1fr));gap:10px}
.card{border:1px solid var(--line);border-radius:8px;padding:10px 12px;background:var(--soft)}
.card .value{font-size:22px;font-weight:700;font-variant-numeric:tabular-nums}
.card .value.up{color:#1a7f37}.card .value.down{color:#cf222e}
.card code{font-size:11.5px;color:var(--mute);overflow-wrap:anywhere}
h3{font-size:13.5px;margin:14px 0 6px}h3 code{font-weight:600}
.split{display:flex;flex-wrap:wrap;gap:18px 24px;align-items:flex-start}
.split>.tables{flex:1 1 600px;min-width:min-content}
table.scores{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:0 0 22px;width:100%}
table.scores caption{text-align:left;font-weight:700;font-size:15px;padding:0 0 6px}
table.scores .unit,.src{font-weight:400;color:var(--mute);font-size:12.5px;margin-left:6px}
table.scores th,table.scores td{padding:4px 6px;border-bottom:1px solid #eaeef2;text-align:right}
table.scores thead th{font-size:12px;font-weight:600;vertical-align:bottom;border-bottom:2px solid
var(--line);line-height:1.2}
table.scores thead th code{display:block;font-weight:400;color:var(--mute);font-size:10.5px;
margin-top:2px}
table.scores th.group{text-align:center;color:var(--mute);font-weight:600;border-bottom:1px solid
var(--line)}
table.scores th.key,table.scores th.domain,table.scores th.level{text-align:left}
table.scores th.domain{vertical-align:top;font-weight:700}
table.scores th.level{font-weight:400;color:var(--mute)}
table.scores tbody tr.first>*{border-top:2px solid var(--line)}
table.scores td.v{background:rgba(var(--good),calc(var(--t) * .16))}
table.scores td.best{background:rgba(var(--good),.30);font-weight:700;color:#0b3b17}
table.scores td.na{color:#afb8c1;text-align:center}
table.scores tfoot th,table.scores tfoot td{border-top:2px solid var(--ink);border-bottom:0}
table.compact{width:auto}table.compact caption{white-space:nowrap}table.mini{width:auto;margin:8px 0 0}
.samples{margin:0;flex:0 0 auto}
.samples figcaption,.plot figcaption{font-weight:700;font-size:15px;margin-bottom:6px}
.sample-grid{display:grid;grid-template-columns:auto;gap:0 8px}
.sample-grid.labelled{grid-template-columns:88px auto}
.sample-heads{display:flex;grid-column:-2;font-size:11.5px;color:var(--mute)}
.sample-heads span{flex:1;text-align:center}
.sample-labels{display:flex;flex-direction:column;font-size:11.5px;white-space:nowrap}
.sample-labels div{flex:1 1 0;display:flex;flex-direction:column;justify-content:center;
text-align:right;line-height:1.15;border-top:1px solid #eaeef2}
.sample-labels div:nth-child(3n+1){border-top-color:var(--line)}
.sample-labels span{color:var(--mute)}
.samples img{display:block;image-rendering:pixelated;border:1px solid var(--line)}
.plots{display:flex;flex-wrap:wrap;gap:18px 28px}
.plot{margin:0}.plot.wide{flex-basis:100%}
.panels{display:flex;flex-wrap:wrap;gap:6px 10px}
.panel{margin:0}.panel figcaption{font-weight:600;font-size:13px;text-align:center;margin:0}
svg.chart{display:block;max-width:100%;height:auto;font-size:11px}
svg.chart .grid{stroke:#eaeef2}svg.chart .axis{fill:none;stroke:#57606a}
svg.chart .tick{fill:#57606a;font-size:10.5px}svg.chart .label{fill:var(--ink);font-size:11.5px}
svg.chart .ref{font-size:10.5px}svg.chart .band{fill:#f3f5f7}
ul.legend{display:flex;flex-wrap:wrap;gap:2px 16px;list-style:none;margin:0 0 6px;padding:0;
font-size:12px}
ul.legend li{display:flex;align-items:center;gap:5px}
pre.params{background:var(--soft);border:1px solid var(--line);border-radius:8px;padding:12px 14px;
font-size:12px;line-height:1.4;columns:2 460px;column-gap:28px;overflow:auto}
table.files{border-collapse:collapse;font-size:12.5px}
table.files th,table.files td{padding:3px 10px 3px 0;text-align:left;
border-bottom:1px solid #eaeef2}
table.files td.num{text-align:right}
ul.versions{display:flex;flex-wrap:wrap;gap:4px 18px;list-style:none;padding:0;font-size:12.5px}
.empty{color:var(--mute);font-style:italic}
footer{margin-top:28px;color:var(--mute);font-size:12px}
"""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="linefuse report">
<title>LineFuse evaluation report</title>
<style>{css}</style>
</head>
<body>
<main>
<header><h1>LineFuse evaluation</h1><p>restoring blurred charts: a diffusion UNet with LoRA
adapters against classical deblurring, per blur domain and level</p></header>
<dl class="facts">{facts}</dl>
<section id="summary"><h2>Summary <span class="src">metrics/eval.json</span></h2>
{summary}</section>
<section id="scores"><h2>Scores per blur domain and level
<span class="src">metrics/eval.json</span></h2>
<div class="split"><div class="tables">{psnr}{ssim}</div>{samples}</div></section>
<section id="plots"><h2>Plots <span class="src">plots/*.csv</span></h2>
<div class="plots">{steps_charts}{domain_charts}{training}</div></section>
<section id="chart-fidelity"><h2>Chart fidelity
<span class="src">metrics/eval.json · chart</span></h2>
{chart}</section>
<section id="params"><h2>Params <span class="src">{params_path}: {params_sections}</span></h2>
<pre class="params">{params}</pre></section>
<section id="provenance"><h2>Provenance</h2>{provenance}</section>
<footer>Written by <code>linefuse report</code> from the files above; the same inputs give the
same page, byte for byte. Open it straight from the file system; it loads nothing from the
network.</footer>
</main>
</body>
</html>
"""
