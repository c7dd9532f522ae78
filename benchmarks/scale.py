"""The gain on large charts: the test charts drawn at 1x, 2x and 3x their size, each base's gain.

Users export figures at 2-4x our default charts' scale (300 dpi, high-density screenshots), so
a base must restore a chart drawn larger as well as the charts it was measured on (the bar:
the gain at 3x within 1 dB of the gain at 1x). Here:

- Charts: the default data's test split as `generate` draws it (data.charts): a chart of a
  held-out family or library is skipped by its plan, undrawn; the others are drawn, their PNG
  hashed as `index` hashes it, and kept where split_for says test; the first --charts of them
  by index, so the libraries come in the data's shares. Each is drawn again at s x its pixel
  size (draw_chart's size_px: the same figure in inches at s x the dpi, so fonts, line widths
  and layout scale with it); s = 1 is generate's chart itself. Every drawing is checked: its
  size is exactly s x, and its plot box (the sidecar's) within a few px of s x the 1x box.
- Degradation: degrade.py's recipe (params.degrade, every domain and level, numpy, seeded by
  item_rng(degrade.seed, chart id, domain, level) as the shard stage seeds evaluate's test
  pairs), with every length scaled by s: the Gaussian sigma, the motion length's range, the
  lowres factor, the scan's resampling blur and its grain's smoothing (degrade.GRAIN_SIGMA,
  passed to degrade.py's scan scaled). Angles, shear, contrast, noise, shading and JPEG
  quality stay (JPEG's 8 px blocks do too: compression is relatively milder at 3x). At s = 1
  every image is evaluate's.
- Restoring: each --bases entry (a zoo name such as chart-base, or a base folder) alone, on the
  CPU, built as base/scores.py's score_base builds it, through Restorer.restore_image as
  `linefuse restore` restores a file: straightened per eval.deskew, whole up to tiles.size and
  beyond it in tiles (tiles.tile auto, timed afresh into a temporary cache), eval.steps steps.
  The time counted is straightening plus restoring (straightening also apart); the first
  call's set-up and tile auto's timings are made untimed before it.
- Scores: PSNR (eval.metric) of the restoration and of the input against the sharp chart at
  that scale; the gain is their difference. Per base and scale: the mean over the domain x
  level cells of each cell's mean gain with evaluate's stratified bootstrap interval
  (eval.interval), per domain and per library means, and seconds per megapixel restored; per
  base the paired difference gain(3x) - gain(1x) over the same chart, domain and level, with
  its interval, and whether it is within 1 dB.

The report names the CPU: benchmarks/results/scale-<avx2|bf16>.json.

    python benchmarks/scale.py [--charts 24] [--bases chart-base DIR] [--levels easy hard]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# Run as a script, this file's folder leads sys.path, where benchmarks/onnx.py would stand for the
# `onnx` package: the folder is dropped.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
SCALES = (1, 2, 3)
BOX_TOLERANCE_PX = 3.0  # a drawing's plot box may stray this far (x s) from s x the 1x box
BAR_DB = 1.0  # the bar: the gain at 3x within this many dB of the gain at 1x


# --- charts -----------------------------------------------------------------------------------


def png_bytes(image: np.ndarray) -> bytes:
    """The PNG `generate` writes of a chart (data/charts/__init__.py's write_chart)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG", optimize=False, compress_level=6)
    return buffer.getvalue()


def test_charts(params, count: int) -> list[dict]:
    """The first `count` charts (by index) of the default data's test split: {index, id,
    library, family, image (1x), sidecar}."""
    from linefuse.data.charts import draw_chart
    from linefuse.data.charts.plan import plan_chart
    from linefuse.data.index import content_id, split_for

    charts = params.data.charts
    held = set(charts.held_out)
    found = []
    for index in range(charts.count):
        plan = plan_chart(charts, index)
        if {plan.family, plan.library} & held:  # the index puts it in held_out
            continue
        image, _, sidecar = draw_chart(charts, index)
        chart_id = content_id(png_bytes(image))
        if split_for(chart_id, params.data.split) != "test":
            continue
        found.append(
            {
                "index": index,
                "id": chart_id,
                "library": plan.library,
                "family": plan.family,
                "image": image,
                "sidecar": sidecar,
            }
        )
        if len(found) == count:
            break
    if len(found) < count:
        print(f"only {len(found)} test charts among data.charts.count = {charts.count}")
    return found


def draw_scaled(params, chart: dict, scale: int) -> tuple[np.ndarray, dict]:
    """(image, layout check) of the chart drawn at `scale` x its size: s x the dpi, the same
    inches. The check: the drawn size and the plot box against s x the 1x chart's."""
    from linefuse.data.charts import draw_chart

    sharp, base = chart["image"], chart["sidecar"]
    height, width = sharp.shape[:2]
    if scale == 1:
        image, sidecar = sharp, base
    else:
        image, _, sidecar = draw_chart(
            params.data.charts, chart["index"], (scale * width, scale * height)
        )
    if image.shape[:2] != (scale * height, scale * width):
        raise AssertionError(
            f"chart {chart['index']} ({chart['library']}) at {scale}x drew "
            f"{image.shape[1]}x{image.shape[0]}, not {scale * width}x{scale * height}"
        )
    box_off = max(
        abs(a - scale * b) for a, b in zip(sidecar["plot_box"], base["plot_box"], strict=True)
    )
    widths = [s["linewidth_px"] for s in sidecar["series"]]
    base_widths = [s["linewidth_px"] for s in base["series"]]
    check = {
        "size": [int(image.shape[1]), int(image.shape[0])],
        "dpi": round(float(sidecar["dpi"]), 3),
        "dpi_ratio": round(float(sidecar["dpi"]) / float(base["dpi"]), 4),
        "plot_box_off_px": round(float(box_off), 2),
        "line_width_ratio": round(float(np.mean(widths) / np.mean(base_widths)), 4),
    }
    if box_off > BOX_TOLERANCE_PX * scale:
        raise AssertionError(
            f"chart {chart['index']} ({chart['library']}) at {scale}x: its plot box is "
            f"{box_off:.1f} px from {scale} x the 1x box; the library does not scale its layout "
            "with the dpi"
        )
    return image, check


# --- the degradation, scaled ------------------------------------------------------------------


def scaled_level(domain: str, level, scale: int):
    """A degrade level with every length multiplied by `scale` (the scan's grain smoothing, not
    a param, is scaled in degrade_scaled)."""
    if scale == 1:
        return level
    if domain == "gaussian":
        return level.model_copy(update={"sigma": tuple(scale * v for v in level.sigma)})
    if domain == "motion":
        return level.model_copy(update={"length": tuple(scale * v for v in level.length)})
    if domain == "scan":
        return level.model_copy(update={"blur": scale * level.blur})
    if domain == "lowres":
        return level.model_copy(update={"factor": tuple(scale * v for v in level.factor)})
    if domain == "compression":
        return level  # JPEG quality is not a length
    raise ValueError(f"no scaling known for domain {domain!r}")


def degrade_scaled(
    params, image: np.ndarray, chart_id: str, domain: str, level: str, scale: int
) -> tuple[np.ndarray, dict]:
    """(image, drawn params) of the chart degraded in `domain` at `level` with the recipe scaled
    by `scale`; seeded as the shard stage seeds the test pair of (chart, domain, level), so
    scale 1 is evaluate's."""
    from linefuse.data import degrade as degrade_module
    from linefuse.data.degrade import degrade, item_rng

    rng = item_rng(params.degrade.seed, chart_id, domain, level)
    recipe = scaled_level(domain, params.degrade.level(domain, level), scale)
    if domain == "scan":  # the grain's smoothing is a length too, though not a param
        return degrade_module._scan(image, recipe, rng, degrade_module.GRAIN_SIGMA * scale)
    return degrade(image, domain, recipe, rng)


# --- scores -----------------------------------------------------------------------------------


def warm(restorer, image: np.ndarray, steps: int) -> int | str:
    """The tile `image` is restored in ("whole" if none), with what restore_image measures or
    allocates once (the first call's set-up, tile auto's timings, the tile batch) done untimed."""
    if not getattr(restorer, "warmed", False):
        restorer.restore_image(image[:64, :64], steps, deskew="never")
        restorer.warmed = True
    tile = restorer.tile_for(*image.shape[:2])
    if tile is None:
        return "whole"
    restorer.tile_batch(tile)
    return tile


def summary(
    params, cells: dict, by_library: dict, seconds: float, pixels: int, deskew: float
) -> dict:
    """One base at one scale: the mean of the cells' mean gains with its interval, per domain
    and library, and seconds per megapixel restored (straightening included, and apart)."""
    from linefuse.evaluate.intervals import mean_of_means_interval

    gains = {key: [g for g, _, _ in rows] for key, rows in cells.items()}
    found = mean_of_means_interval(list(gains.values()), params.eval.interval, params.eval.seed)
    domains = sorted({domain for domain, _ in cells}, key=params.degrade.domains.index)
    found["by_domain"] = {
        domain: float(np.mean([np.mean(g) for (d, _), g in gains.items() if d == domain]))
        for domain in domains
    }
    found["by_library"] = {lib: float(np.mean(g)) for lib, g in sorted(by_library.items())}
    found["input_psnr"] = float(np.mean([p for rows in cells.values() for _, p, _ in rows]))
    found["restored_psnr"] = float(np.mean([p for rows in cells.values() for _, _, p in rows]))
    found["seconds_per_megapixel"] = seconds / (pixels / 1e6)
    found["deskew_seconds_per_megapixel"] = deskew / (pixels / 1e6)
    found["megapixels"] = pixels / 1e6
    found["gains"] = {f"{domain}/{level}": g for (domain, level), g in gains.items()}
    return found


def difference(params, cells: dict[int, dict], high: int, low: int) -> dict | None:
    """gain(high x) - gain(low x), paired by chart, domain and level, with the stratified
    interval of its mean over the cells, and whether it is within BAR_DB."""
    from linefuse.evaluate.intervals import mean_of_means_interval

    if high not in cells or low not in cells:
        return None
    paired = [
        [a[0] - b[0] for a, b in zip(cells[high][key], cells[low][key], strict=True)]
        for key in cells[low]
    ]
    found = mean_of_means_interval(paired, params.eval.interval, params.eval.seed)
    found["within_bar"] = bool(abs(found["mean"]) <= BAR_DB)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(REPO / "params.yaml"))
    parser.add_argument("--charts", type=int, default=24, help="test charts (default 24)")
    parser.add_argument("--bases", nargs="+", default=["chart-base"], help="zoo names or folders")
    parser.add_argument("--scales", type=int, nargs="+", default=list(SCALES))
    parser.add_argument("--levels", nargs="+", help="degrade levels (default: every level)")
    parser.add_argument("--domains", nargs="+", help="degrade domains (default: every domain)")
    parser.add_argument("--out", help="default: benchmarks/results/scale-<avx2|bf16>.json")
    args = parser.parse_args()

    from linefuse import paths
    from linefuse.data.deskew import straighten
    from linefuse.evaluate.metrics import psnr
    from linefuse.hardware import machine_summary, native_bf16_flags
    from linefuse.inference.restorer import Restorer
    from linefuse.params.full import load_params

    started, load_before = time.perf_counter(), os.getloadavg()[0]
    params = load_params(args.params)
    levels = args.levels or list(params.degrade.levels)
    domains = args.domains or list(params.degrade.domains)
    metric, steps, seed = params.eval.metric, params.eval.steps, params.eval.seed
    charts = test_charts(params, args.charts)
    print(f"{len(charts)} test charts drawn ({time.perf_counter() - started:.0f} s)", flush=True)

    with tempfile.TemporaryDirectory() as cache:
        os.environ["LINEFUSE_CACHE"] = cache  # tile auto measures afresh, on this machine now
        restorers = {}
        for spec in args.bases:
            folder = paths.unet_folder(spec)
            restorers[spec] = Restorer.from_params(params, None, "cpu", base_dir=folder)
        # per base and scale: {(domain, level): [(gain, input psnr, restored psnr)]}, chart order
        cells = {spec: {s: {} for s in args.scales} for spec in args.bases}
        by_library = {spec: {s: {} for s in args.scales} for spec in args.bases}
        timing = {spec: {s: [0.0, 0, 0.0] for s in args.scales} for spec in args.bases}
        tiles = {spec: {s: {} for s in args.scales} for spec in args.bases}
        for number, chart in enumerate(charts, 1):
            chart["checks"] = {}
            for scale in args.scales:
                sharp, chart["checks"][str(scale)] = draw_scaled(params, chart, scale)
                for domain in domains:
                    for level in levels:
                        blurred, _ = degrade_scaled(
                            params, sharp, chart["id"], domain, level, scale
                        )
                        before = psnr(blurred, sharp, metric)
                        for spec, restorer in restorers.items():
                            tile = warm(restorer, blurred, steps)
                            t0 = time.perf_counter()
                            straight = straighten(blurred, params.eval.deskew)
                            t1 = time.perf_counter()
                            restored = restorer.restore_image(straight, steps, seed, deskew="never")
                            t2 = time.perf_counter()
                            timing[spec][scale][0] += t2 - t0
                            timing[spec][scale][1] += blurred.shape[0] * blurred.shape[1]
                            timing[spec][scale][2] += t1 - t0
                            after = psnr(restored, sharp, metric)
                            row = (after - before, before, after)
                            cells[spec][scale].setdefault((domain, level), []).append(row)
                            mine = by_library[spec][scale].setdefault(chart["library"], [])
                            mine.append(after - before)
                            count = tiles[spec][scale].setdefault(str(tile), 0)
                            tiles[spec][scale][str(tile)] = count + 1
            print(
                f"chart {number}/{len(charts)} (#{chart['index']}, {chart['library']}) done "
                f"({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
        runtimes = {spec: restorer.runtime.value for spec, restorer in restorers.items()}

    bases = {}
    for spec in args.bases:
        scales = {
            str(s): {
                **summary(params, cells[spec][s], by_library[spec][s], *timing[spec][s]),
                "tiles": tiles[spec][s],
            }
            for s in args.scales
        }
        bases[spec] = {
            "folder": str(paths.unet_folder(spec)),
            "runtime": runtimes[spec],
            "scales": scales,
            "gain_3x_minus_1x": difference(params, cells[spec], 3, 1),
            "gain_2x_minus_1x": difference(params, cells[spec], 2, 1),
        }
    kind = "bf16" if native_bf16_flags() else "avx2"
    out = Path(args.out or REPO / "benchmarks" / "results" / f"scale-{kind}.json")
    report = {
        "machine": machine_summary(),
        "load_average": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        "command": " ".join(["python benchmarks/scale.py", *sys.argv[1:]]),
        "seconds": round(time.perf_counter() - started, 1),
        "scales": args.scales,
        "levels": levels,
        "domains": domains,
        "steps": steps,
        "deskew": params.eval.deskew,
        "tiles": params.tiles.model_dump(),
        "metric": params.eval.metric.model_dump(),
        "bar_db": BAR_DB,
        "recipe_scaled": {
            "gaussian": "sigma x s",
            "motion": "length range x s (angle kept)",
            "scan": "blur x s, grain smoothing (degrade.GRAIN_SIGMA) x s (the rest kept)",
            "lowres": "factor x s",
            "compression": "quality kept (JPEG's 8 px blocks too)",
        },
        "charts": [
            {k: chart[k] for k in ("index", "id", "library", "family", "checks")}
            for chart in charts
        ],
        "charts_by_library": {
            lib: sum(c["library"] == lib for c in charts)
            for lib in sorted({c["library"] for c in charts})
        },
        "bases": bases,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")

    def interval(found: dict) -> str:
        if found["low"] is None:
            return f"{found['mean']:+6.2f}"
        return f"{found['mean']:+6.2f} [{found['low']:+.2f}, {found['high']:+.2f}]"

    print(
        f"{'base':14s} {'scale':>5s}  {'gain dB [95% CI]':24s} {'n':>4s}  {'s/MP':>6s}  by domain"
    )
    for spec, found in bases.items():
        for s, row in found["scales"].items():
            domains_text = " ".join(f"{d} {g:+.2f}" for d, g in row["by_domain"].items())
            print(
                f"{spec:14s} {s + 'x':>5s}  {interval(row):24s} {row['samples']:4d}  "
                f"{row['seconds_per_megapixel']:6.2f}  {domains_text}"
            )
        if found["gain_3x_minus_1x"]:
            diff = found["gain_3x_minus_1x"]
            verdict = "within" if diff["within_bar"] else "outside"
            print(f"{spec:14s} 3x-1x  {interval(diff):24s} ({verdict} {BAR_DB:g} dB)")
    print(f"wrote {out} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
