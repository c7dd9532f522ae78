"""Restoring full-size charts: seconds and peak memory against the pixel count, tiled.

Each (size, steps) case runs in a process of its own, so its peak RSS is its own: it renders a
size x size chart (the generate stage's renderer), blurs it, and times `Restorer.restore_image`
after the model is loaded, with params.yaml's `tiles` and the default model's architecture
(`model.unet`, weights drawn at random: the cost of a step does not depend on them, and a merged
adapter costs nothing extra). The report names the machine and gives seconds per megapixel, so
sizes compare as ratios from one run: benchmarks/results/restore.json.

    python benchmarks/restore.py [--sizes 256 512 1024 2048] [--steps 1 4 25]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import chdir
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]


def run_case(size: int, steps: int) -> dict:
    from scipy import ndimage

    from linefuse.data.charts import draw_chart
    from linefuse.inference.restorer import Restorer
    from linefuse.params.full import load_params
    from linefuse.train.model import build_unet, save_base

    params = load_params(REPO / "params.yaml")
    sharp = draw_chart(params.data.charts, 0, size_px=(size, size))[0]
    blurred = ndimage.gaussian_filter(sharp.astype(np.float64), (1.5, 1.5, 0))
    blurred = np.clip(np.rint(blurred), 0, 255).astype(np.uint8)
    with tempfile.TemporaryDirectory() as project, chdir(project):
        torch.manual_seed(0)
        unet = build_unet(params.model.unet, 3)
        torch.nn.init.normal_(unet.conv_out.weight, std=0.02)  # a zero head would be a no-op
        save_base(unet, Path("models/base"), torch.zeros(1, 1, unet.config.cross_attention_dim))
        restorer = Restorer(params, None, "cpu")
        restorer.restore_image(blurred[:64, :64], 1)  # first-call allocations, untimed
        started = time.perf_counter()
        restorer.restore_image(blurred, steps)
        seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "size": size,
        "steps": steps,
        "seconds": round(seconds, 2),
        "seconds_per_megapixel": round(seconds / (size * size / 1e6), 2),
        "peak_rss_mb": round(peak_mb),
        "tile": params.tiles.size,
        "overlap": params.tiles.overlap,
        "tile_batch": params.tiles.batch_size,
    }


def main() -> None:
    from linefuse.hardware import machine_summary

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--steps", type=int, nargs="+", default=[1, 4, 25])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/restore.json")
    parser.add_argument("--case", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(*args.case)))
        return
    cases = []
    for steps in args.steps:
        for size in args.sizes:
            done = subprocess.run(
                [sys.executable, __file__, "--case", str(size), str(steps)],
                capture_output=True,
                text=True,
                check=True,
            )
            cases.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(cases[-1]), flush=True)
    ratios = {}
    for steps in args.steps:
        per_mp = {c["size"]: c["seconds_per_megapixel"] for c in cases if c["steps"] == steps}
        if 512 in per_mp and 2048 in per_mp:
            ratios[f"s{steps}"] = round(per_mp[2048] / per_mp[512], 3)
    report = {
        "machine": {
            **machine_summary(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        },
        "cases": cases,
        "time_per_pixel_2048_vs_512": ratios,
        "max_peak_rss_mb": max(c["peak_rss_mb"] for c in cases),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
