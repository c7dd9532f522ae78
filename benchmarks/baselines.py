"""Richardson-Lucy, evaluate's torch version against scikit-image's: seconds and pixel agreement.

Draws the default charts (the generate stage's renderer, params.yaml's data.charts), blurs each
with a Gaussian or motion kernel of every degrade level (degrade's own draws), and restores it
with both, in one process, so the speed-up is a ratio from one run on one machine. Writes
benchmarks/results/baselines.json.

    python benchmarks/baselines.py [--charts 10]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch
from skimage.restoration import richardson_lucy as skimage_richardson_lucy

REPO = Path(__file__).resolve().parents[1]


def scikit_image(blurred: np.ndarray, kernel: np.ndarray, iterations: int) -> np.ndarray:
    """What evaluate ran before: scikit-image per channel, on the same padded copy."""
    from linefuse.evaluate.baselines import _padded, _unpadded_uint8

    pixels, pad = _padded(blurred, kernel)
    channels = [
        skimage_richardson_lucy(pixels[..., c], kernel, num_iter=iterations) for c in range(3)
    ]
    return _unpadded_uint8(np.stack(channels, axis=2), pad)


def main() -> None:
    from linefuse.data.charts import draw_chart
    from linefuse.data.degrade import blur_kernel, degrade, item_rng
    from linefuse.evaluate.baselines import richardson_lucy
    from linefuse.hardware import machine_summary
    from linefuse.params.full import load_params

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--charts", type=int, default=10)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/baselines.json")
    args = parser.parse_args()
    params = load_params(REPO / "params.yaml")
    iterations = params.eval.baselines.richardson_lucy_iterations
    seconds = {"scikit_image": 0.0, "torch": 0.0}
    worst, differing, pixels, images = 0, 0, 0, 0
    for index in range(args.charts):
        sharp = draw_chart(params.data.charts, index)[0]
        for domain in ("gaussian", "motion"):
            for level in params.degrade.levels:
                settings = getattr(params.degrade, domain)[level]
                blurred, drawn = degrade(sharp, domain, settings, item_rng(0, index, domain, level))
                kernel = blur_kernel(domain, drawn).astype(np.float32)
                started = time.perf_counter()
                reference = scikit_image(blurred, kernel, iterations)
                seconds["scikit_image"] += time.perf_counter() - started
                started = time.perf_counter()
                ours = richardson_lucy(blurred, kernel, iterations)
                seconds["torch"] += time.perf_counter() - started
                difference = np.abs(ours.astype(int) - reference)
                worst = max(worst, int(difference.max()))
                differing += int((difference > 0).sum())
                pixels += difference.size
                images += 1
    report = {
        "machine": {
            **machine_summary(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        },
        "images": images,
        "iterations": iterations,
        "seconds": {name: round(value, 2) for name, value in seconds.items()},
        "speedup": round(seconds["scikit_image"] / seconds["torch"], 2),
        "max_grey_level_difference": worst,
        "differing_fraction": round(differing / pixels, 6),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
