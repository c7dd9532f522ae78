"""evaluate's outputs, written together (all or none): reports/eval_detail.json, every table
(tables.py); metrics/eval.json, the headline drawn from it; the plots CSVs; reports/samples.png.

metrics/eval.json is what `dvc metrics show` and `dvc exp show` print, so it holds a few numbers
under short keys, the step count in `steps` rather than in the keys, in this order (DVC keeps a
file's key order in its columns):

- gain_db, gain_db_low, gain_db_high, samples: the test split's mean PSNR gain of the model over
  the input (the mean of the domain x level cells' means), its bootstrap interval, its images;
- adapt_gain_db, adapt_gain_db_low, adapt_gain_db_high: what adapting bought, the adapted model's
  mean PSNR gain over the base alone (no adapter), with its interval;
- worst_cell_gain_db: the smallest cell gain; sharp_worst_psnr: the model's worst PSNR on a chart
  that was sharp already (what a restoration must not harm);
- held_out.*: the same for the held-out split (when there is one), but its worst cell and the
  interval of its adapt_gain_db;
- lib.<library> (gain_db, adapt_gain_db, ocr_cer): each plotting library's mean gain, what
  adapting bought on it and its tick labels' error rate after the model, on the test split, or
  the held-out split for a held-out library (eval_detail.json's `libraries`: intervals, counts);
- domain_gain_db.<domain>: the mean over its levels of each cell's mean gain;
- few_step_shortfall_db: on the sweep's tiles, the PSNR the fewest steps (<= 4) lose against the
  most steps swept;
- curve_rmse_pct_median (.input, .model): the median over every test image of the curve read
  back against the chart's data (RMSE in percent of its range; the median peak position error
  is in the detail's chart_summary, peak_position_error);
- ocr_cer (.input, .model): the tick labels' character error rate, the mean over levels of each
  level's pooled rate (each level counts the same, as each cell does in gain_db);
- digitize_error_pct (.input, .model): the data read back with no sidecar (linefuse digitize):
  the mean over levels of each level's median curve error, in % of the y range (a chart whose
  axes it could not read counts as 100; the detail's `digitized` has the share calibrated);
- line_score (.input, .model): the same charts' CHART-Info task-6b line score (the field's: series
  matched one to one, digitize/line_score.py), the mean over levels of each level's mean (an
  unread chart scores 0; the sharp chart's in the detail's `digitized`);
- seconds_per_megapixel: restoring whole images at `steps` on this machine.

A figure evaluate could not make (no held-out family, no sweep, no Tesseract) is left out.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from linefuse.paths import (
    BY_DOMAIN_CSV,
    BY_STEPS_CSV,
    DIGITIZE_CSV,
    EVAL_DETAIL,
    EVAL_JSON,
    GAIN_CSV,
    OCR_CSV,
    SAMPLES_PNG,
)
from linefuse.stage import atomic_files

if TYPE_CHECKING:
    from linefuse.params.full import Params

PLOTS = [BY_DOMAIN_CSV, BY_STEPS_CSV, GAIN_CSV, OCR_CSV, DIGITIZE_CSV]
OUTPUTS = [*PLOTS, SAMPLES_PNG, EVAL_DETAIL, EVAL_JSON]


def write_outputs(detail: dict, showcase: dict, params: Params) -> None:
    """Every output of the stage from the tables and the samples, replaced at once."""
    levels, domains = params.degrade.levels, params.degrade.domains
    with atomic_files(OUTPUTS) as tmp:
        _write_scores(detail, levels, tmp[BY_DOMAIN_CSV])
        _write_steps(detail["sweep"], params.eval.sweep.steps, tmp[BY_STEPS_CSV])
        _write_gains(detail, domains, levels, params.eval.steps, tmp[GAIN_CSV])
        _write_ocr(detail, levels, params.eval.steps, tmp[OCR_CSV])
        _write_digitized(detail, levels, params.eval.steps, tmp[DIGITIZE_CSV])
        _write_samples(showcase, domains, levels, tmp[SAMPLES_PNG])
        tmp[EVAL_DETAIL].write_text(json.dumps(detail, indent=2, sort_keys=True) + "\n")
        # in the headline's own order: `dvc exp show` keeps it, so the mean gain comes first
        tmp[EVAL_JSON].write_text(json.dumps(headline(detail, params), indent=2) + "\n")


def _split_headline(block: dict, steps: int) -> dict:
    """gain_db and adapt_gain_db with their intervals, samples, worst_cell_gain_db,
    sharp_worst_psnr of one split."""
    summary, sharp = block.get("summary", {}), block.get("sharp", {})
    named = {
        "gain_db": summary.get(f"psnr_gain_s{steps}"),
        "gain_db_low": summary.get(f"psnr_gain_s{steps}_low"),
        "gain_db_high": summary.get(f"psnr_gain_s{steps}_high"),
        "adapt_gain_db": summary.get(f"adapt_gain_s{steps}"),
        "adapt_gain_db_low": summary.get(f"adapt_gain_s{steps}_low"),
        "adapt_gain_db_high": summary.get(f"adapt_gain_s{steps}_high"),
        "samples": summary.get("samples"),
        "worst_cell_gain_db": summary.get(f"min_psnr_gain_s{steps}"),
        "sharp_worst_psnr": sharp.get(f"min_psnr_s{steps}"),
    }
    return {key: value for key, value in named.items() if value is not None}


def _library_headline(block: dict, steps: int) -> dict:
    """gain_db, adapt_gain_db and the model's tick-label error rate (the mean over levels) of one
    library's tables; a figure it has not (labels not read) left out."""
    summary = block.get("summary", {})
    rates = [rate.get(f"model_s{steps}") for rate in block.get("ocr_cer", {}).values()]
    named = {
        "gain_db": summary.get(f"psnr_gain_s{steps}"),
        "adapt_gain_db": summary.get(f"adapt_gain_s{steps}"),
        "ocr_cer": round(float(np.mean(rates)), 4) if rates and None not in rates else None,
    }
    return {key: value for key, value in named.items() if value is not None}


def _by_method(pairs: dict, steps: int) -> dict | None:
    """{input, model} of a {input, model_sN, ...} entry; None when either is missing."""
    out = {"input": pairs.get("input"), "model": pairs.get(f"model_s{steps}")}
    return None if None in out.values() else out


def headline(detail: dict, params: Params) -> dict:
    """metrics/eval.json's content (the module's docstring), every number from `detail`."""
    steps = params.eval.steps
    out = _split_headline(detail, steps)  # the mean gain first: dvc exp show keeps this order
    if held := _split_headline(detail.get("held_out", {}), steps):
        # in the detail: the 40 leaves hold the libraries' and the data digitized
        for key in ("worst_cell_gain_db", "adapt_gain_db_low", "adapt_gain_db_high"):
            held.pop(key, None)
        out["held_out"] = held
    if libraries := detail.get("libraries"):
        out["lib"] = {name: _library_headline(b, steps) for name, b in libraries.items()}
    gains = detail.get(f"psnr_gain_s{steps}", {})
    out["domain_gain_db"] = {
        domain: round(float(np.mean([cell["mean"] for cell in by_level.values()])), 4)
        for domain, by_level in sorted(gains.items())
    }
    if "few_step" in detail:
        out["few_step_shortfall_db"] = detail["few_step"]["psnr_shortfall_db"]
    pooled = detail.get("chart_summary", {})
    # the 40 leaves hold the line score: the median peak error stays in the detail
    entry = pooled.get("curve_rmse_pct_of_range", {})
    medians = {
        name: entry[name]["median"] for name in ("input", f"model_s{steps}") if name in entry
    }
    if found := _by_method(medians, steps):
        out["curve_rmse_pct_median"] = found
    rates = detail.get("ocr_cer", {}).values()
    by_level = [_by_method(rate, steps) for rate in rates]
    if by_level and None not in by_level:
        out["ocr_cer"] = {
            name: round(float(np.mean([rate[name] for rate in by_level])), 4)
            for name in ("input", "model")
        }
    if rows := list(detail.get("digitized", {}).values()):
        out["digitize_error_pct"] = {
            short: round(float(np.mean([row[name]["curve_error_pct_median"] for row in rows])), 4)
            for short, name in (("input", "input"), ("model", f"model_s{steps}"))
        }
        out["line_score"] = {
            short: round(float(np.mean([row[name]["line_score_mean"] for row in rows])), 4)
            for short, name in (("input", "input"), ("model", f"model_s{steps}"))
        }
    if (seconds := detail["machine"].get(f"seconds_per_megapixel_s{steps}")) is not None:
        out["seconds_per_megapixel"] = seconds
    out["steps"] = steps
    return out


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _write_scores(detail: dict, levels: list[str], path: Path) -> None:
    """plots/psnr_by_domain_level.csv: the PSNR and SSIM of every method in every test cell."""
    rows = [
        [domain, level, name, value, detail["ssim"][domain][level][name]]
        for domain, by_level in detail["psnr"].items()
        for level in levels
        if level in by_level
        for name, value in by_level[level].items()
    ]
    _write_csv(path, ["domain", "level", "method", "psnr", "ssim"], rows)


def _write_steps(sweep: dict, counts: list[int], path: Path) -> None:
    """plots/psnr_vs_steps.csv: on the sweep's tiles, the model's PSNR per step count, its gain
    over the input, its margin over the best classical baseline and its time per megapixel."""
    rows = [
        [
            count,
            sweep[f"s{count}"]["psnr"],
            round(sweep[f"s{count}"]["psnr"] - sweep["input_psnr"], 4),
            round(sweep[f"s{count}"]["psnr"] - sweep["best_classical_psnr"], 4),
            sweep[f"s{count}"]["seconds_per_megapixel"],
        ]
        for count in counts
        if sweep
    ]
    _write_csv(path, ["steps", "psnr", "gain", "margin", "seconds_per_megapixel"], rows)


def _splits(detail: dict) -> list[tuple[str, dict]]:
    return [("test", detail)] + ([("held_out", detail["held_out"])] if "held_out" in detail else [])


def _write_gains(detail: dict, domains: list[str], levels: list[str], steps: int, path: Path):
    """plots/gain_by_cell.csv: each cell's mean PSNR gain with its interval, test then held-out,
    one bar per `cell` (split domain level) in `dvc plots show`; adapt_gain beside it, the
    adapted model's mean gain over the base alone."""
    rows = []
    for split, block in _splits(detail):
        gains = block.get(f"psnr_gain_s{steps}", {})
        adapted = block.get(f"adapt_gain_s{steps}", {})
        for domain in (d for d in domains if d in gains):
            for level in (lv for lv in levels if lv in gains[domain]):
                cell = gains[domain][level]
                bounds = ["" if cell[k] is None else cell[k] for k in ("low", "high")]
                adapt = adapted.get(domain, {}).get(level, {}).get("mean", "")
                label = f"{split} {domain} {level}"
                row = [label, split, domain, level, cell["samples"], cell["mean"], *bounds, adapt]
                rows.append(row)
    header = ["cell", "split", "domain", "level", "samples", "gain", "low", "high", "adapt_gain"]
    _write_csv(path, header, rows)


def _write_ocr(detail: dict, levels: list[str], steps: int, path: Path) -> None:
    """plots/ocr_cer_by_level.csv: per split and level, the tick labels' character error rate in
    the input, the model's output and the sharp chart (empty where not read), one bar each."""
    rows = []
    for split, block in _splits(detail):
        rates = block.get("ocr_cer", {})
        for level in (lv for lv in levels if lv in rates):
            for name in ("input", f"model_s{steps}", "sharp"):
                rate = rates[level].get(name)
                label = f"{split} {level} {name}"
                rows.append([label, split, level, name, "" if rate is None else rate])
    _write_csv(path, ["series", "split", "level", "method", "cer"], rows)


def _write_digitized(detail: dict, levels: list[str], steps: int, path: Path) -> None:
    """plots/digitize_error_by_level.csv: per split and level, the median curve error of the data
    digitized with no sidecar from the input, the model's output and the sharp chart, and the
    share of each calibrated, one bar each (empty where nothing was digitized)."""
    rows = []
    for split, block in _splits(detail):
        digitized = block.get("digitized", {})
        for level in (lv for lv in levels if lv in digitized):
            for name in ("input", f"model_s{steps}", "sharp"):
                read = digitized[level][name]
                label = f"{split} {level} {name}"
                rows.append(
                    [label, split, level, name, read["curve_error_pct_median"], read["calibrated"]]
                )
    _write_csv(path, ["series", "split", "level", "method", "error_pct", "calibrated"], rows)


def _write_samples(showcase: dict, domains: list[str], levels: list[str], path: Path) -> None:
    """One row per domain and level: blurred | (straightened, with eval.deskew) | restored |
    sharp, at a common height."""
    rows = []
    for domain in domains:
        for level in levels:
            if (domain, level) in showcase:
                rows.append(np.concatenate(showcase[(domain, level)], axis=1))
    if not rows:  # no test samples: a blank sheet, as the declared output must exist
        rows = [np.full((1, 1, 3), 255, np.uint8)]
    width = max(row.shape[1] for row in rows)
    rows = [
        np.pad(row, ((0, 2), (0, width - row.shape[1]), (0, 0)), constant_values=255)
        for row in rows
    ]
    Image.fromarray(np.concatenate(rows, axis=0)).save(path, format="PNG")
