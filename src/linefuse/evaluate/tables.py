"""evaluate's tables: one split's per-image scores (scoring.Scores) reduced to the blocks of
reports/eval_detail.json: means per cell, each cell's gain interval, the pooled chart figures, the
tick labels' error rates, the summary; and the step sweep with its few-step comparison.

Method names carry their DDIM step count (model_s4), and so do the blocks that hold one model's
figures (psnr_gain_s4, summary.psnr_gain_s4): a file from another eval.steps never reads as this.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from linefuse.evaluate.baselines import CLASSICAL
from linefuse.evaluate.intervals import mean_interval, mean_of_means_interval
from linefuse.evaluate.scoring import Cell, Scores

if TYPE_CHECKING:
    from linefuse.params.full import Params


def _mean(values: list[float]) -> float:
    return round(float(np.mean(values)), 4)


def _finite_mean(values: list[float]) -> float | None:
    """The mean of the finite values (a chart whose line could not be read back gives NaN);
    None when there is none."""
    finite = [value for value in values if np.isfinite(value)]
    return _mean(finite) if finite else None


def _rounded(interval: dict) -> dict:
    return {k: v if v is None or isinstance(v, int) else round(v, 4) for k, v in interval.items()}


def _per_cell(cells: dict[str, dict[str, Cell]], value: Callable[[Cell], object]) -> dict:
    """{domain: {level: value(cell)}}, in the cells' order."""
    return {
        domain: {level: value(cell) for level, cell in by_level.items()}
        for domain, by_level in cells.items()
    }


def tables(scores: Scores, params: Params) -> dict:
    """One split's blocks: psnr, ssim and chart means per cell, psnr_gain_sN (each cell's sample
    count and interval), chart_summary, ocr_cer, the summary, psnr_by_domain_sN and sharp."""
    steps, cells = params.eval.steps, scores.cells
    model, base = f"model_s{steps}", f"base_s{steps}"
    report = {
        "psnr": _per_cell(cells, lambda c: {n: _mean(v) for n, v in c.psnr.items()}),
        "ssim": _per_cell(cells, lambda c: {n: _mean(v) for n, v in c.ssim.items()}),
    }
    gains = _per_cell(cells, lambda c: np.subtract(c.psnr[model], c.psnr["input"]).tolist())
    report[f"psnr_gain_s{steps}"] = _cell_intervals(gains, params)
    # what adapting bought: the adapted model's gain over the base it started from, alone
    adapted = _per_cell(cells, lambda c: np.subtract(c.psnr[model], c.psnr[base]).tolist())
    report[f"adapt_gain_s{steps}"] = _cell_intervals(adapted, params)
    report["chart"] = _per_cell(
        cells,
        lambda c: {
            name: {figure: _finite_mean(values) for figure, values in figures.items()}
            for name, figures in c.chart.items()
        },
    )
    report["chart_summary"] = _chart_summary(cells, model)
    if any(cell.ocr for by_level in cells.values() for cell in by_level.values()):
        report["ocr_cer"] = _ocr_by_level(cells)
        for domain, by_level in cells.items():
            for level, cell in by_level.items():
                for name, errors in cell.ocr.items():
                    report["chart"][domain][level][name]["ocr_cer"] = _pooled_cer(errors)
    if any(cell.digitized for by_level in cells.values() for cell in by_level.values()):
        report["digitized"] = _digitized_by_level(cells, model)
    cell_gains = [values for by_level in gains.values() for values in by_level.values()]
    report["summary"] = (
        _summary(report, params.degrade.levels, steps)
        | _headline_interval(cell_gains, report[f"psnr_gain_s{steps}"], steps, params)
        | _adapt_interval(adapted, steps, params)
    )
    report[f"psnr_by_domain_s{steps}"] = {
        domain: _mean([cell[model] for cell in by_level.values()])
        for domain, by_level in report["psnr"].items()
    }
    if scores.sharp_psnr:  # PSNR of the model's output against its own sharp input
        report["sharp"] = {
            "samples": len(scores.sharp_psnr),
            f"psnr_s{steps}": _mean(scores.sharp_psnr),
            f"min_psnr_s{steps}": round(min(scores.sharp_psnr), 4),
        }
    return report


def by_library(scored: dict[str, Scores], params: Params) -> dict:
    """Each plotting library's tables on the split it is scored on: the test split for a library
    the default data trains on, the held-out split for one held out (data.charts.held_out)."""
    held = set(params.data.charts.held_out)
    return {
        library: {"split": split} | tables(scores.of_library(library), params)
        for split, scores in scored.items()
        for library in scores.libraries()
        if (library in held) == (split == "held_out")
    }


def _cell_intervals(values: dict, params: Params) -> dict:
    """Each cell's sample count, mean and bootstrap interval of its per-image values."""
    interval, seed = params.eval.interval, params.eval.seed
    return {
        domain: {
            level: _rounded(mean_interval(cell, interval, seed)) for level, cell in by_level.items()
        }
        for domain, by_level in values.items()
    }


def _adapt_interval(adapted: dict, steps: int, params: Params) -> dict:
    """adapt_gain_sN: the mean over cells of the adapted model's gain over the base alone, and
    its interval (resampled within each cell, as the headline gain's)."""
    cells = [values for by_level in adapted.values() for values in by_level.values()]
    if not cells:
        return {}
    overall = _rounded(mean_of_means_interval(cells, params.eval.interval, params.eval.seed))
    return {
        f"adapt_gain_s{steps}": overall["mean"],
        f"adapt_gain_s{steps}_low": overall["low"],
        f"adapt_gain_s{steps}_high": overall["high"],
    }


def _pooled_cer(errors: list[tuple]) -> float | None:
    """The character error rate over many images' labels: their edits over their characters;
    None when any was not read (no Tesseract) or nothing was drawn."""
    edits, drawn = [e[0] for e in errors], sum(e[1] for e in errors)
    if not drawn or None in edits:
        return None
    return round(sum(edits) / drawn, 4)


def _ocr_by_level(cells: dict[str, dict[str, Cell]]) -> dict:
    """Per level, over its read images of every domain: the pooled character error rate of the
    tick labels of the input, the model and the sharp chart, and how many labels each read."""
    pooled = defaultdict(lambda: defaultdict(list))  # level -> name -> errors
    for by_level in cells.values():
        for level, cell in by_level.items():
            for name, errors in cell.ocr.items():
                pooled[level][name] += errors
    return {
        level: {name: _pooled_cer(errors) for name, errors in by_name.items()}
        | {"labels": sum(e[2] for e in by_name["input"])}
        for level, by_name in pooled.items()
    }


def _digitized_by_level(cells: dict[str, dict[str, Cell]], model: str) -> dict:
    """Per level, over its digitized charts of every domain: for the input, the model and the
    sharp chart, the share whose axes were calibrated, the median curve error (% of the y
    range; a chart not read counts as digitize.score.MISSED) and the mean of CHART-Info's
    task-6b line score (digitize/line_score.py; a chart not read scores 0); the share of charts
    where the model's error is below the input's; and the charts' count."""
    pooled = defaultdict(lambda: defaultdict(list))  # level -> name -> (calibrated, error, line)
    for by_level in cells.values():
        for level, cell in by_level.items():
            for name, readings in cell.digitized.items():
                if readings:  # a library's cells hold none where another library's were taken
                    pooled[level][name] += readings
    table = {}
    for level, by_name in pooled.items():
        row = {
            name: {
                "calibrated": round(float(np.mean([r[0] for r in readings])), 4),
                "curve_error_pct_median": round(float(np.median([r[1] for r in readings])), 4),
                "line_score_mean": round(float(np.mean([r[2] for r in readings])), 4),
            }
            for name, readings in by_name.items()
        }
        before, after = (np.array([r[1] for r in by_name[n]]) for n in ("input", model))
        row["model_lowers_error"] = round(float(np.mean(after < before)), 4)
        row["charts"] = len(before)
        table[level] = row
    return table


def _chart_summary(cells: dict[str, dict[str, Cell]], model: str) -> dict:
    """Each chart figure over every image of the split: mean and median of the input, the model
    and the sharp image, and the share of images where the model's figure is below or above the
    input's. A few charts whose blurred or restored peak falls below another one move a mean of
    peak positions far; the median and the paired shares say what a typical chart gets."""
    pooled = defaultdict(lambda: defaultdict(list))  # figure -> method -> values, image-aligned
    for by_level in cells.values():
        for cell in by_level.values():
            for name in ("input", model, "sharp"):
                for figure, values in cell.chart[name].items():
                    pooled[figure][name] += values
    summary = {}
    for figure, by_name in sorted(pooled.items()):
        entry = {}
        for name, values in by_name.items():
            finite = [value for value in values if np.isfinite(value)]
            entry[name] = {
                "mean": _finite_mean(values),
                "median": round(float(np.median(finite)), 4) if finite else None,
            }
        restored, blurred = (np.asarray(by_name[n], dtype=np.float64) for n in (model, "input"))
        both = np.isfinite(restored) & np.isfinite(blurred)
        entry["images"] = int(both.sum())
        if both.any():
            entry[f"{model}_below_input"] = round(float(np.mean(restored[both] < blurred[both])), 4)
            entry[f"{model}_above_input"] = round(float(np.mean(restored[both] > blurred[both])), 4)
        summary[figure] = entry
    return summary


def _headline_interval(
    cell_gains: list[list[float]], by_cell: dict, steps: int, params: Params
) -> dict:
    """The headline gain's interval (resampled within each cell), the sample count and the widest
    cell interval: how far the figures above could move with other test images."""
    if not cell_gains:
        return {}
    overall = _rounded(mean_of_means_interval(cell_gains, params.eval.interval, params.eval.seed))
    cells = [cell for by_level in by_cell.values() for cell in by_level.values()]
    widths = [(c["high"] - c["low"]) / 2 for c in cells if c["low"] is not None]
    return {
        f"psnr_gain_s{steps}_low": overall["low"],
        f"psnr_gain_s{steps}_high": overall["high"],
        "interval_confidence": params.eval.interval.confidence,
        "samples": overall["samples"],
        "min_cell_samples": min(c["samples"] for c in cells),
        f"max_interval_half_width_s{steps}": round(max(widths), 4) if widths else None,
    }


def _summary(report: dict, levels: list[str], steps: int) -> dict:
    """The headline: mean PSNR gain of the model over the input, its smallest cell, and the
    margin over the best classical baseline, per cell and per domain (means over its levels)."""
    model = f"model_s{steps}"
    gains, margins, domain_margins = [], [], []
    for by_level in report["psnr"].values():
        cells = [by_level[level] for level in levels if level in by_level]
        if not cells:
            continue
        gains += [cell[model] - cell["input"] for cell in cells]
        margins += [
            cell[model] - max(v for k, v in cell.items() if k in CLASSICAL) for cell in cells
        ]
        best_baseline = max(
            np.mean([cell[name] for cell in cells])
            for name in CLASSICAL
            if all(name in cell for cell in cells)
        )
        domain_margins.append(np.mean([cell[model] for cell in cells]) - best_baseline)
    if not gains:
        return {}
    summary = {
        f"psnr_gain_s{steps}": _mean(gains),
        f"min_psnr_gain_s{steps}": round(min(gains), 4),
        f"min_margin_over_best_baseline_s{steps}": round(min(margins), 4),
        f"min_domain_margin_over_best_baseline_s{steps}": round(float(min(domain_margins)), 4),
    }
    for kind in ("domain", "combined"):
        name = f"model_{kind}_s{steps}"
        scored = [cell for by_level in report["psnr"].values() for cell in by_level.values()]
        if extra := [cell for cell in scored if name in cell]:
            summary[f"psnr_gain_{kind}_s{steps}"] = _mean([c[name] - c["input"] for c in extra])
            summary[f"adapt_gain_{kind}_s{steps}"] = _mean(
                [c[name] - c[f"base_s{steps}"] for c in extra]
            )
    return summary


def sweep(swept: Scores, seconds_per_megapixel: Callable[[int], float], counts: list[int]) -> dict:
    """On the sweep's tiles, means over cells: the input's PSNR, the best classical baseline's
    (per cell) and the model's at each step count, with its seconds per megapixel."""
    by_cell = [cell for by_level in swept.cells.values() for cell in by_level.values()]
    means = [{name: float(np.mean(values)) for name, values in c.psnr.items()} for c in by_cell]
    if not means:
        return {}
    best = [max(v for n, v in cell.items() if n in CLASSICAL) for cell in means]
    out = {
        "samples": sum(len(cell.psnr["input"]) for cell in by_cell),
        "input_psnr": _mean([cell["input"] for cell in means]),
        "best_classical_psnr": _mean(best),
    }
    for count in counts:
        out[f"s{count}"] = {
            "psnr": _mean([cell[f"model_s{count}"] for cell in means]),
            "seconds_per_megapixel": seconds_per_megapixel(count),
        }
    return out


def few_step(sweep: dict, counts: list[int]) -> dict:
    """How close the fewest-step sampler (at most 4 DDIM steps) comes to the most steps swept,
    on the sweep's images: the PSNR shortfall (positive = few steps worse) and the speed-up."""
    few_steps = [count for count in counts if count <= 4]
    if not sweep or not few_steps or max(counts) <= max(few_steps):
        return {}
    few, reference = sweep[f"s{max(few_steps)}"], sweep[f"s{max(counts)}"]
    return {
        "steps": max(few_steps),
        "reference_steps": max(counts),
        "psnr_shortfall_db": round(reference["psnr"] - few["psnr"], 4),
        "speedup": round(
            reference["seconds_per_megapixel"] / max(few["seconds_per_megapixel"], 1e-9), 2
        ),
    }
