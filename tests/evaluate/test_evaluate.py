"""evaluate and restore: metrics that agree with scikit-image, a model that beats its
input."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from contextlib import chdir
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
from PIL import Image
from scipy.ndimage import convolve
from skimage.color import rgb2ycbcr
from skimage.metrics import peak_signal_noise_ratio, structural_similarity
from skimage.restoration import richardson_lucy as skimage_richardson_lucy

from linefuse.data.degrade import blur_kernel
from linefuse.data.deskew import straighten
from linefuse.data.labels import readable
from linefuse.data.readers import LmdbPairs
from linefuse.digitize.score import MISSED
from linefuse.evaluate.baselines import CLASSICAL, baselines, richardson_lucy
from linefuse.evaluate.chart_metrics import chart_errors
from linefuse.evaluate.metrics import psnr, ssim
from linefuse.evaluate.scoring import first_per_domain, spread_per_domain
from linefuse.inference.model import load_null_prompt
from linefuse.inference.restorer import Restorer
from linefuse.params import DOMAINS
from linefuse.params.evaluation import MetricParams
from linefuse.params.full import load_params
from linefuse.stage import UserError
from linefuse.train.null_prompt import null_prompt

from conftest import LEVELS, file_digests, needs_tesseract, run_cli, tiny_params, write_params


def _noisy_pair(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    sharp = rng.integers(0, 256, (40, 52, 3), dtype=np.uint8)
    noise = rng.normal(0, 12, sharp.shape)
    return np.clip(sharp + noise, 0, 255).astype(np.uint8), sharp


def test_psnr_and_ssim_agree_with_scikit_image():
    test, reference = _noisy_pair()
    rgb = MetricParams(color="rgb", crop_border=0)
    assert abs(psnr(test, reference, rgb) - peak_signal_noise_ratio(reference, test)) < 1e-3
    expected = structural_similarity(
        reference,
        test,
        channel_axis=2,
        data_range=255,
        gaussian_weights=True,
        sigma=1.5,
        use_sample_covariance=False,
    )
    assert abs(ssim(test, reference, rgb) - expected) < 1e-4

    y = MetricParams(color="y", crop_border=4)
    y_ref, y_test = (rgb2ycbcr(image)[4:-4, 4:-4, 0] for image in (reference, test))
    assert (
        abs(psnr(test, reference, y) - peak_signal_noise_ratio(y_ref, y_test, data_range=255))
        < 1e-3
    )
    expected = structural_similarity(
        y_ref, y_test, data_range=255, gaussian_weights=True, sigma=1.5, use_sample_covariance=False
    )
    assert abs(ssim(test, reference, y) - expected) < 1e-4


def test_baselines_improve_over_the_input_on_gaussian_easy(tiny_project):
    pairs = LmdbPairs(tiny_project / "data/shards/easy", "test")
    evaluation = load_params(tiny_project / "params.yaml").eval
    settings, metric = evaluation.baselines, evaluation.metric
    gains = {name: [] for name in CLASSICAL}
    for index in range(len(pairs)):
        blurred, sharp, meta = pairs[index]
        if meta["domain"] != "gaussian":
            continue
        for name, image in baselines(blurred, "gaussian", meta["params"], settings).items():
            gains[name].append(psnr(image, sharp, metric) - psnr(blurred, sharp, metric))
    pairs.close()
    assert all(len(values) >= 2 for values in gains.values())
    assert np.mean(gains["wiener"]) > 0.5 and np.mean(gains["richardson_lucy"]) > 0.5, gains
    assert set(baselines(blurred, "compression", {"quality": 50}, settings)) == {"unsharp"}


@pytest.mark.parametrize(
    ("domain", "drawn"),
    [
        ("gaussian", {"sigma": 0.5}),
        ("gaussian", {"sigma": 2.5}),
        ("motion", {"length": 15, "angle": 30.0}),
    ],
)
def test_richardson_lucy_matches_scikit_image(tiny_project, domain, drawn):
    """Our torch Richardson-Lucy against scikit-image's, per channel on the same padded copy."""
    chart = sorted((tiny_project / "data/source").glob("*.png"))[0]
    sharp = np.asarray(Image.open(chart).convert("RGB"))
    kernel = blur_kernel(domain, drawn).astype(np.float32)
    blurred = np.stack(
        [convolve(sharp[..., c] / 255.0, kernel, mode="reflect") for c in range(3)], 2
    )
    blurred = np.clip(np.rint(blurred * 255), 0, 255).astype(np.uint8)
    pad = max(kernel.shape) // 2 + 1
    padded = np.pad(blurred / np.float32(255), ((pad, pad), (pad, pad), (0, 0)), mode="reflect")
    reference = np.stack(
        [skimage_richardson_lucy(padded[..., c], kernel, num_iter=30) for c in range(3)], axis=2
    )
    reference = np.clip(np.rint(reference[pad:-pad, pad:-pad] * 255), 0, 255).astype(np.uint8)
    ours = richardson_lucy(blurred, kernel, 30)
    difference = np.abs(ours.astype(int) - reference)
    assert difference.max() <= 1 and (difference > 0).mean() < 0.01
    rgb = MetricParams(color="rgb", crop_border=0)
    assert psnr(ours, sharp, rgb) == pytest.approx(psnr(reference, sharp, rgb), abs=0.01)


def test_chart_errors_see_a_moved_peak():
    sharp = np.full((60, 80, 3), 255, np.uint8)
    columns = np.arange(80)
    heights = (50 - 40 * np.exp(-(((columns - 30) / 4.0) ** 2))).astype(int)
    sharp[heights, columns] = 0
    assert chart_errors(sharp, sharp) == {"peak_position_error_px": 0.0, "integral_error": 0.0}
    moved = np.roll(sharp, 6, axis=1)
    errors = chart_errors(moved, sharp)
    assert errors["peak_position_error_px"] == pytest.approx(6.0)


def _detail(project: Path) -> dict:
    """reports/eval_detail.json: every table evaluate made."""
    return json.loads((project / "reports/eval_detail.json").read_text())


def _leaves(block: dict, prefix: str = "") -> dict[str, object]:
    """{dotted key: value} of every leaf, as `dvc metrics show` lists them."""
    out = {}
    for key, value in block.items():
        out |= (
            _leaves(value, f"{prefix}{key}.") if isinstance(value, dict) else {prefix + key: value}
        )
    return out


@pytest.fixture(scope="module")
def evaluated(trained_project) -> Path:
    """The shared build, evaluated by `dvc repro` (its workers: every core)."""
    return trained_project


def test_eval_json_is_the_headline_each_figure_from_the_detail(evaluated):
    """metrics/eval.json fits a screen: at most 40 numbers under short keys, the step count in
    `steps`, each one the detail file's own figure (or, for a domain and the tick labels, the mean
    of its cells or levels there)."""
    headline, detail = json.loads((evaluated / "metrics/eval.json").read_text()), _detail(evaluated)
    params = tiny_params()
    steps = params["eval"]["steps"]
    leaves = _leaves(headline)
    assert 20 <= len(leaves) <= 40, sorted(leaves)
    assert all(type(v) in (int, float) for v in leaves.values()), leaves
    assert max(len(key) for key in leaves) <= 30
    assert headline["steps"] == steps and not any(f"_s{steps}" in key for key in leaves)
    for block, split in ((headline, detail), (headline["held_out"], detail["held_out"])):
        summary = split["summary"]
        assert block["gain_db"] == summary[f"psnr_gain_s{steps}"]
        assert block["gain_db_low"] == summary[f"psnr_gain_s{steps}_low"] < block["gain_db"]
        assert block["gain_db_high"] == summary[f"psnr_gain_s{steps}_high"] > block["gain_db"]
        assert block["samples"] == summary["samples"] > 0
        worst = summary[f"min_psnr_gain_s{steps}"]
        assert worst < block["gain_db"]
        # the test split's worst cell is a headline; the held-out one's stays in the detail
        assert block.get("worst_cell_gain_db") == (worst if block is headline else None)
        assert block["sharp_worst_psnr"] == split["sharp"][f"min_psnr_s{steps}"]
        adapt = summary[f"adapt_gain_s{steps}"]
        assert block["adapt_gain_db"] == adapt
        if block is headline:  # the held-out interval stays in the detail
            assert block["adapt_gain_db_low"] == summary[f"adapt_gain_s{steps}_low"] < adapt
            assert block["adapt_gain_db_high"] == summary[f"adapt_gain_s{steps}_high"] > adapt
        else:
            assert "adapt_gain_db_low" not in block and "adapt_gain_db_high" not in block
    gains = detail[f"psnr_gain_s{steps}"]
    assert set(headline["domain_gain_db"]) == set(DOMAINS)
    for domain, gain in headline["domain_gain_db"].items():
        cells = [gains[domain][level]["mean"] for level in LEVELS]
        assert gain == pytest.approx(np.mean(cells), abs=1e-4)
        assert min(cells) - 1e-4 <= gain <= max(cells) + 1e-4
    assert headline["few_step_shortfall_db"] == detail["few_step"]["psnr_shortfall_db"]
    model = f"model_s{steps}"
    pooled = detail["chart_summary"]["curve_rmse_pct_of_range"]
    assert headline["curve_rmse_pct_median"] == {
        "input": pooled["input"]["median"],
        "model": pooled[model]["median"],
    }
    assert "peak_error_nm_median" not in headline  # in the detail: the leaves hold line_score
    if "ocr_cer" in detail:  # Tesseract was here
        for name, key in (("input", "input"), ("model", model)):
            rates = [detail["ocr_cer"][level][key] for level in LEVELS]
            assert headline["ocr_cer"][name] == pytest.approx(np.mean(rates), abs=1e-4)
    machine = detail["machine"][f"seconds_per_megapixel_s{steps}"]
    assert headline["seconds_per_megapixel"] == machine > 0
    # the per-cell tables travel as plots CSVs too: each cell's gain with its interval
    rows = list(csv.DictReader(open(evaluated / "plots/gain_by_cell.csv")))
    assert len(rows) == 2 * len(DOMAINS) * len(LEVELS)
    for row in rows:
        split = detail if row["split"] == "test" else detail["held_out"]
        cell = split[f"psnr_gain_s{steps}"][row["domain"]][row["level"]]
        assert row["cell"] == f"{row['split']} {row['domain']} {row['level']}"
        assert [int(row["samples"]), float(row["gain"])] == [cell["samples"], cell["mean"]]
        assert float(row["low"]) == cell["low"] and float(row["high"]) == cell["high"]
        adapted = split[f"adapt_gain_s{steps}"][row["domain"]][row["level"]]
        assert float(row["adapt_gain"]) == adapted["mean"]


def test_eval_detail_has_every_table(evaluated):
    report = _detail(evaluated)
    params = tiny_params()["eval"]
    model, sweep = f"model_s{params['steps']}", params["sweep"]["steps"]
    for metric in ("psnr", "ssim"):
        assert set(report[metric]) == set(DOMAINS)
        for domain, by_level in report[metric].items():
            assert set(by_level) == set(LEVELS)
            for cell in by_level.values():
                kernel = domain not in ("compression", "lowres")
                expected = {"input", "unsharp", model, f"base_s{params['steps']}"} | (
                    {"wiener", "richardson_lucy"} if kernel else set()
                )
                assert set(cell) == expected
                assert all(isinstance(v, float) for v in cell.values())
    assert set(report["sweep"]) == {"samples", "input_psnr", "best_classical_psnr"} | {
        f"s{n}" for n in sweep
    }
    assert report["sweep"]["samples"] == len(DOMAINS) * len(LEVELS) * params["sweep"]["samples"]
    speed = {n: report["sweep"][f"s{n}"]["seconds_per_megapixel"] for n in sweep}
    assert speed[max(sweep)] > speed[1] > 0
    assert report["machine"]["device"] == "cpu" and report["machine"]["cpu_model"]
    for name in ("psnr_by_domain_level.csv", "psnr_vs_steps.csv", "ocr_cer_by_level.csv"):
        assert (evaluated / "plots" / name).read_text().count("\n") > 3
    scan_cells = report["psnr"]["scan"].values()
    assert report[f"psnr_by_domain_s{params['steps']}"]["scan"] == pytest.approx(
        np.mean([cell[model] for cell in scan_cells]), abs=1e-3
    )
    few = report["few_step"]
    assert (few["steps"], few["reference_steps"]) == (4, max(sweep))
    shortfall = report["sweep"][f"s{max(sweep)}"]["psnr"] - report["sweep"]["s4"]["psnr"]
    assert few["psnr_shortfall_db"] == pytest.approx(shortfall, abs=1e-3)
    assert few["speedup"] == pytest.approx(speed[max(sweep)] / speed[4], rel=0.01)
    # whole test images (shards.test_crop: null): the 96 x 64 charts, one row per cell; with
    # eval.deskew, the input as the models got it beside the input as drawn
    grid = Image.open(evaluated / "reports/samples.png")
    panels = 3 if tiny_params()["eval"]["deskew"] == "never" else 4
    assert grid.size == (panels * 96, len(DOMAINS) * len(LEVELS) * (64 + 2))
    if panels == 4:
        sheet = np.asarray(grid.convert("RGB"))
        for top in range(0, sheet.shape[0], 64 + 2):
            drawn, given = sheet[top : top + 64, :96], sheet[top : top + 64, 96:192]
            assert np.array_equal(given, straighten(drawn, tiny_params()["eval"]["deskew"]))


def test_every_cell_has_its_sample_count_and_gain_interval(evaluated):
    """psnr_gain_sN: each cell counts every test image of its domain and level, its mean is the
    PSNR table's model minus input, and the bootstrap interval holds the mean."""
    report = _detail(evaluated)
    steps = tiny_params()["eval"]["steps"]
    block, summary = report[f"psnr_gain_s{steps}"], report["summary"]
    test_images = 0
    for level in LEVELS:
        pairs = LmdbPairs(evaluated / "data/shards" / level, "test")
        assert {shape[1:3] for shape in pairs.shapes} == {(64, 96)}  # whole, not cropped
        for domain in DOMAINS:
            cell = block[domain][level]
            count = sum(meta["domain"] == domain for meta in pairs.metas)
            assert cell["samples"] == count >= 2
            table = report["psnr"][domain][level]
            assert cell["mean"] == pytest.approx(
                table[f"model_s{steps}"] - table["input"], abs=2e-3
            )
            assert cell["low"] < cell["mean"] < cell["high"]
            test_images += count
    assert summary["samples"] == test_images
    assert summary["min_cell_samples"] == min(
        c["samples"] for by_level in block.values() for c in by_level.values()
    )
    low, high = summary[f"psnr_gain_s{steps}_low"], summary[f"psnr_gain_s{steps}_high"]
    assert low < summary[f"psnr_gain_s{steps}"] < high
    assert summary["interval_confidence"] == 0.95


def test_what_adapting_bought_is_the_adapter_against_the_base_alone(evaluated):
    """adapt_gain_sN: in every cell of both splits the base alone (no adapter) is scored beside
    the adapted model, and the cell's adapt gain is the PSNR table's model minus base, over the
    same images; the summary's mean is that of the cells, inside its interval."""
    report = _detail(evaluated)
    steps = tiny_params()["eval"]["steps"]
    model, base = f"model_s{steps}", f"base_s{steps}"
    for split in (report, report["held_out"]):
        means = []
        for domain, by_level in split[f"adapt_gain_s{steps}"].items():
            for level, cell in by_level.items():
                table = split["psnr"][domain][level]
                assert cell["mean"] == pytest.approx(table[model] - table[base], abs=2e-3)
                assert cell["samples"] == split[f"psnr_gain_s{steps}"][domain][level]["samples"]
                means.append(cell["mean"])
        assert len(means) == len(DOMAINS) * len(LEVELS)
        summary = split["summary"]
        assert summary[f"adapt_gain_s{steps}"] == pytest.approx(np.mean(means), abs=1e-3)
        low, high = summary[f"adapt_gain_s{steps}_low"], summary[f"adapt_gain_s{steps}_high"]
        assert low < summary[f"adapt_gain_s{steps}"] < high
    # the tiny curriculum trains on the base's own data: adapting moves it, both ways by cell
    assert report["summary"][f"adapt_gain_s{steps}"] != 0


def test_the_held_out_families_are_scored_apart(evaluated):
    """The held_out split (chart families never trained on) gets the same tables as the test
    split, counted from its own shards; the main tables never include it."""
    report = _detail(evaluated)
    steps = tiny_params()["eval"]["steps"]
    held = report["held_out"]
    assert {"psnr", "ssim", f"psnr_gain_s{steps}", "summary", "chart"} <= set(held)
    counted = 0
    for level in LEVELS:
        pairs = LmdbPairs(evaluated / "data/shards" / level, "held_out")
        for domain in DOMAINS:
            count = sum(meta["domain"] == domain for meta in pairs.metas)
            assert held[f"psnr_gain_s{steps}"][domain][level]["samples"] == count > 0
            counted += count
    assert held["summary"]["samples"] == counted
    # the sharp row: the model on each distinct sharp image of the split
    for block, split in ((report, "test"), (held, "held_out")):
        ids = {meta["image_id"] for meta in LmdbPairs(evaluated / "data/shards/easy", split).metas}
        assert block["sharp"]["samples"] == len(ids) > 0
        assert 20 < block["sharp"][f"min_psnr_s{steps}"] <= block["sharp"][f"psnr_s{steps}"] <= 100
    assert report["summary"]["samples"] + counted == sum(
        len(LmdbPairs(evaluated / "data/shards" / level, split))
        for level in LEVELS
        for split in ("test", "held_out")
    )


def test_each_library_is_scored_on_its_own_split(evaluated):
    """`libraries`: each plotting library's tables, the trained ones' from the test split and
    the held-out one's from the held-out split, each counting exactly its own images; the
    headline's lib.<library> reads them."""
    report, headline = _detail(evaluated), json.loads((evaluated / "metrics/eval.json").read_text())
    steps = tiny_params()["eval"]["steps"]
    index = pl.read_parquet(evaluated / "data/index/images.parquet")
    library_of = dict(zip(index["id"], index["library"], strict=True))
    held = set(tiny_params()["data"]["charts"]["held_out"])
    expected = {}
    for split in ("test", "held_out"):
        for level in LEVELS:
            for meta in LmdbPairs(evaluated / "data/shards" / level, split).metas:
                library = library_of[meta["image_id"]]
                if (library in held) == (split == "held_out"):
                    expected.setdefault(library, {"split": split, "samples": 0})["samples"] += 1
    assert set(expected) == {"matplotlib", "plotnine", "vegalite"}
    assert expected["vegalite"]["split"] == "held_out"
    assert set(report["libraries"]) == set(expected) == set(headline["lib"])
    for library, block in report["libraries"].items():
        summary = block["summary"]
        assert block["split"] == expected[library]["split"]
        assert summary["samples"] == expected[library]["samples"] > 0
        assert headline["lib"][library]["gain_db"] == summary[f"psnr_gain_s{steps}"]
        assert headline["lib"][library]["adapt_gain_db"] == summary[f"adapt_gain_s{steps}"]
        assert 20 < block["sharp"][f"min_psnr_s{steps}"] <= 100
    trained = [b for b in report["libraries"].values() if b["split"] == "test"]
    assert sum(b["summary"]["samples"] for b in trained) == report["summary"]["samples"]
    for library, block in report["libraries"].items():  # labels read: each library's apart
        rates = [rate[f"model_s{steps}"] for rate in block.get("ocr_cer", {}).values()]
        if rates and None not in rates:
            assert headline["lib"][library]["ocr_cer"] == pytest.approx(np.mean(rates), abs=1e-4)


def test_chart_summary_pools_every_image_of_the_split(evaluated):
    """chart_summary: each figure over all test images, the model paired with its input. The pooled
    mean is the sample-weighted mean of the cells' means, and the sharp chart read against itself
    has no peak or area error at all."""
    report = _detail(evaluated)
    steps = tiny_params()["eval"]["steps"]
    model, block = f"model_s{steps}", report[f"psnr_gain_s{steps}"]
    total = report["summary"]["samples"]
    for figure in ("peak_position_error_px", "integral_error"):  # defined on every image
        pooled = report["chart_summary"][figure]
        weighted = sum(
            report["chart"][domain][level][model][figure] * cell["samples"]
            for domain, by_level in block.items()
            for level, cell in by_level.items()
        )
        assert pooled["images"] == total
        assert pooled[model]["mean"] == pytest.approx(weighted / total, abs=1e-3)
        assert pooled["sharp"] == {"mean": 0.0, "median": 0.0}
        shares = pooled[f"{model}_below_input"] + pooled[f"{model}_above_input"]
        assert 0 < shares <= 1
    assert set(report["held_out"]["chart_summary"]) == set(report["chart_summary"])


def _labels_read(
    project: Path, split: str, level: str, per_domain: int | None, choose=spread_per_domain
) -> int:
    """The readable tick labels (from the sidecars) of `per_domain` pairs of each domain, as
    `choose` picks them: spread over the charts as OCR's sample is (evaluate/scoring), or the
    first of each domain where eval.max_samples cuts the split first."""
    index = pl.read_parquet(project / "data/index/images.parquet", columns=["id", "path"])
    paths = dict(index.iter_rows())
    metas = LmdbPairs(project / "data/shards" / level, split).metas
    count = 0
    for position in choose(metas, per_domain):
        source = project / "data/source" / paths[metas[position]["image_id"]]
        labels = json.loads(source.with_suffix(".json").read_text())["tick_labels"]
        count += sum(readable(label["text"]) for label in labels)  # what Tesseract may read
    return count


@needs_tesseract
def test_eval_json_reports_how_legible_the_tick_labels_are(evaluated):
    """ocr_cer: per level, the character error rate of the tick labels Tesseract reads in the
    input, the model's output and the sharp chart, over every label of the images read
    (eval.ocr.max_images of each domain, spread over the charts); per cell under chart. The
    tiny charts' 4-5 pt labels at 72 dpi are 3-4 px tall, so these rates are high: test_ocr.py
    judges the reading."""
    report = _detail(evaluated)
    params = tiny_params()["eval"]
    model, most = f"model_s{params['steps']}", params["ocr"]["max_images"]
    for block, split in ((report, "test"), (report["held_out"], "held_out")):
        assert set(block["ocr_cer"]) == set(LEVELS)
        for level, cell in block["ocr_cer"].items():
            assert set(cell) == {"input", model, "sharp", "labels"}
            assert cell["labels"] == _labels_read(evaluated, split, level, most) > 0
            for name in ("input", model, "sharp"):
                assert isinstance(cell[name], float) and cell[name] >= 0, (level, name)
                for domain in DOMAINS:
                    assert block["chart"][domain][level][name]["ocr_cer"] >= 0, (domain, name)


def _pairs_taken(project: Path, split: str, level: str, per_domain: int | None) -> int:
    """The pairs of the first `per_domain` of each domain in the level's split."""
    taken: dict[str, int] = {}
    for meta in LmdbPairs(project / "data/shards" / level, split).metas:
        taken[meta["domain"]] = taken.get(meta["domain"], 0) + 1
    return sum(count if per_domain is None else min(count, per_domain) for count in taken.values())


@needs_tesseract
def test_eval_json_reports_the_data_digitized_with_no_sidecar(evaluated):
    """digitized: per split and level, the input, the model's output and the sharp
    chart of eval.digitize.max_images pairs of each domain, digitized from their
    pixels and scored against the chart's data: the share calibrated, the median curve error
    (in % of the y range, MISSED for a chart not read), the mean task-6b line score and how
    often the model lowered the error; the headline's digitize_error_pct and line_score are the
    means over levels of the medians and of the means."""
    report = _detail(evaluated)
    params = tiny_params()["eval"]
    model, most = f"model_s{params['steps']}", params["digitize"]["max_images"]
    for block, split in ((report, "test"), (report["held_out"], "held_out")):
        assert set(block["digitized"]) == set(LEVELS)
        for level, row in block["digitized"].items():
            assert row["charts"] == _pairs_taken(evaluated, split, level, most) > 0
            assert set(row) == {"input", model, "sharp", "model_lowers_error", "charts"}
            assert 0 <= row["model_lowers_error"] <= 1
            for name in ("input", model, "sharp"):
                assert 0 <= row[name]["calibrated"] <= 1, (split, level, name)
                assert 0 <= row[name]["curve_error_pct_median"] <= MISSED, (split, level, name)
                assert 0 <= row[name]["line_score_mean"] <= 1, (split, level, name)
    headline = json.loads((evaluated / "metrics/eval.json").read_text())
    for short, name in (("input", "input"), ("model", model)):
        errors = [row[name]["curve_error_pct_median"] for row in report["digitized"].values()]
        assert headline["digitize_error_pct"][short] == pytest.approx(np.mean(errors), abs=1e-4)
        scores = [row[name]["line_score_mean"] for row in report["digitized"].values()]
        assert headline["line_score"][short] == pytest.approx(np.mean(scores), abs=1e-4)


def test_the_charts_digitized_are_spread_over_the_domains():
    """A split's samples come chart by chart, five domains each: 2 a domain are 10 images from
    10 charts where there are 10 (the first 2 of each domain would be 2 charts), and where there
    are fewer, each domain still gets its 2, from charts already taken."""
    domains = ["compression", "gaussian", "lowres", "motion", "scan"]
    metas = [{"image_id": f"chart{c}", "domain": d} for c in range(12) for d in domains]
    chosen = [metas[i] for i in spread_per_domain(metas, 2)]
    assert len(chosen) == 10 and len({m["image_id"] for m in chosen}) == 10
    assert sorted(m["domain"] for m in chosen) == sorted(domains * 2)
    few = [m for m in metas if m["image_id"] in {"chart0", "chart1", "chart2"}]
    chosen = [few[i] for i in spread_per_domain(few, 2)]
    assert sorted(m["domain"] for m in chosen) == sorted(domains * 2)
    assert spread_per_domain(few, None) == list(range(len(few)))


def test_without_tesseract_the_ocr_figures_are_null(evaluated, tmp_path, monkeypatch, caplog):
    """Where the tesseract program is missing evaluate still runs: one warning names the fix, and
    every ocr_cer figure is null beside the labels that would have been read."""
    pytesseract = pytest.importorskip("pytesseract")
    project = shutil.copytree(evaluated, tmp_path / "project", symlinks=True)
    params = tiny_params()
    params["eval"]["max_samples"] = 1
    write_params(project, params)
    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", "no-such-tesseract")
    assert run_cli(project, "evaluate", "--workers", "1") == 0
    warnings = [r.getMessage() for r in caplog.records if "tick labels" in r.getMessage()]
    assert len(warnings) == 1 and "apt-get install tesseract-ocr" in warnings[0]
    report = _detail(project)
    model = f"model_s{params['eval']['steps']}"
    assert "digitized" not in report  # nothing is digitized without Tesseract
    for level, cell in report["ocr_cer"].items():
        assert cell == {"input": None, model: None, "sharp": None, "labels": cell["labels"]}
        # max_samples 1: the first pair of each domain, every one of which OCR reads
        assert cell["labels"] == _labels_read(project, "test", level, 1, first_per_domain) > 0
    # the headline holds numbers only: the rates it could not make are left out, the rest stay
    headline = json.loads((project / "metrics/eval.json").read_text())
    assert (
        "ocr_cer" not in headline
        and headline["gain_db"] == report["summary"][f"psnr_gain_s{params['eval']['steps']}"]
    )


def test_scores_do_not_depend_on_the_worker_count(evaluated, tmp_path):
    """evaluate scores in forked workers (default: all cores; the fixture's 2); in one process
    every score is the same, only the timings differ."""
    project = tmp_path / "project"
    shutil.copytree(evaluated, project, symlinks=True)
    assert run_cli(project, "evaluate", "--workers", "1") == 0
    timed = {"machine", "sweep", "few_step"}
    one, many = (
        {k: v for k, v in _detail(p).items() if k not in timed} for p in (project, evaluated)
    )
    assert one == many and one["psnr"]
    headlines = [json.loads((p / "metrics/eval.json").read_text()) for p in (project, evaluated)]
    for headline in headlines:
        del headline["seconds_per_megapixel"]
    assert headlines[0] == headlines[1]
    for name in ("gain_by_cell.csv", "ocr_cer_by_level.csv", "psnr_by_domain_level.csv"):
        assert (project / "plots" / name).read_bytes() == (evaluated / "plots" / name).read_bytes()
    assert (project / "reports/samples.png").read_bytes() == (
        evaluated / "reports/samples.png"
    ).read_bytes()


def test_the_tiny_trained_model_beats_its_input(evaluated):
    """Seeded tiny run (160 pretrain + 3 x 10 LoRA steps, 32 px crops, 1 step): the mean PSNR
    gain and its interval's low end are above zero by a margin, and so is the gain on the sweep's
    tiles at every step count; an untrained model gains 0."""
    report = _detail(evaluated)
    steps = tiny_params()["eval"]["steps"]
    gains = [
        cell[f"model_s{steps}"] - cell["input"]
        for by_level in report["psnr"].values()
        for cell in by_level.values()
    ]
    assert np.mean(gains) > 0.3, gains
    assert report["summary"][f"psnr_gain_s{steps}_low"] > 0.25
    sweep = report["sweep"]
    # on the sweep's 15 tiles (one image per cell) every step count gains too
    for count in tiny_params()["eval"]["sweep"]["steps"]:
        assert sweep[f"s{count}"]["psnr"] - sweep["input_psnr"] > 0.2, count


def test_restore_cli_restores_any_size_and_skips_bad_files(trained_project, tmp_path, capsys):
    inputs = tmp_path / "in"
    (inputs / "sub").mkdir(parents=True)
    odd = np.random.default_rng(0).integers(0, 256, (37, 50, 3), dtype=np.uint8)
    Image.fromarray(odd).save(inputs / "odd.png")
    Image.fromarray(odd[:20, :33]).save(inputs / "sub" / "small.jpg")
    (inputs / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    out = tmp_path / "out"
    code = run_cli(
        trained_project,
        "restore",
        str(inputs),
        "--adapter",
        str(trained_project / "models/lora/hard"),
        "--steps",
        "2",
        "--out",
        str(out),
    )
    assert code == 0
    assert Image.open(out / "odd.png").size == (50, 37)
    assert Image.open(out / "sub" / "small.png").size == (33, 20)
    err = capsys.readouterr().err
    assert "skipped" in err and "broken.png" in err
    assert not (out / "broken.png").exists()


def _models_only(trained_project: Path, folder: Path) -> Path:
    """A folder holding only what restoring needs: models/ and params.yaml (no data/)."""
    folder.mkdir(parents=True)
    shutil.copytree(trained_project / "models", folder / "models")
    shutil.copy(trained_project / "params.yaml", folder / "params.yaml")
    return folder


def test_restore_needs_only_models_and_the_null_prompt_saved_with_them(trained_project, tmp_path):
    """The base carries the empty prompt's embedding that training used, so a folder without
    data/ restores the same bytes; the default adapter is the last curriculum level's."""
    saved = load_null_prompt(trained_project / "models/base")
    with chdir(trained_project):
        trained_with = null_prompt(load_params("params.yaml"), ["easy"])
    assert torch.equal(saved, torch.from_numpy(trained_with))
    source = sorted((trained_project / "data/source").glob("*.png"))[0]
    assert (
        run_cli(
            trained_project,
            "restore",
            str(source),
            "--adapter",
            "models/lora/hard",
            "--steps",
            "2",
            "--out",
            str(tmp_path / "full"),
        )
        == 0
    )
    bare = _models_only(trained_project, tmp_path / "bare")
    assert (
        run_cli(bare, "restore", str(source), "--steps", "2", "--out", str(tmp_path / "bare_out"))
        == 0
    )
    assert file_digests(tmp_path / "full") == file_digests(tmp_path / "bare_out")

    (bare / "models/base/null_prompt.safetensors").unlink()
    with chdir(bare), pytest.raises(UserError, match=r"null_prompt\.safetensors is missing"):
        Restorer.from_params(load_params("params.yaml"), None, "cpu")


def test_per_domain_adapters_are_scored_beside_the_curriculum(trained_project, tmp_path):
    """Each domain's own adapter on its cells (model_domain_sN), the merge on all
    (model_combined_sN)."""
    project = tmp_path / "project"
    shutil.copytree(trained_project, project, symlinks=True)
    params = tiny_params()
    params["train"].update(adapters="per_domain")
    params["train"]["per_domain"].update(domains=["gaussian", "scan"], steps=3)
    params["eval"].update(steps=4, max_samples=1)
    params["eval"]["sweep"].update(steps=[1, 4])
    params["eval"]["ocr"]["max_images"] = 0  # no Tesseract: the labels are not what is tested
    write_params(project, params)
    assert run_cli(project, "train-domains") == 0
    assert run_cli(project, "evaluate") == 0
    report = _detail(project)
    for domain, by_level in report["psnr"].items():
        for cell in by_level.values():
            assert ("model_domain_s4" in cell) == (domain in ("gaussian", "scan"))
            assert "model_combined_s4" in cell and "model_combined_s1" not in cell
    assert {"psnr_gain_domain_s4", "psnr_gain_combined_s4"} <= set(report["summary"])
    for kind in ("domain", "combined"):  # what each adapter bought over the base alone
        extra = [
            cell[f"model_{kind}_s4"] - cell["base_s4"]
            for by_level in report["psnr"].values()
            for cell in by_level.values()
            if f"model_{kind}_s4" in cell
        ]
        assert report["summary"][f"adapt_gain_{kind}_s4"] == pytest.approx(np.mean(extra), abs=1e-3)


def test_a_scoring_worker_that_dies_is_an_error_not_a_hang():
    """A scoring worker killed mid-task (out of memory, a signal) fails evaluate at once: the
    map raises instead of waiting for a result that never comes."""
    script = (
        "import os\n"
        "from concurrent.futures.process import BrokenProcessPool\n"
        "from linefuse.evaluate.scoring import scoring_map\n"
        "try:\n"
        "    with scoring_map(2) as mapper:\n"
        "        list(mapper(os._exit, [1, 1, 1]))\n"
        "except BrokenProcessPool:\n"
        "    print('broken')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "broken", done.stderr[-2000:]
