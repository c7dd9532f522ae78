"""The digitize example in docs/serving.md and the README: a default chart drawn at a user's
size, Gaussian-blurred at the medium level, restored by the run's model and digitized, as
`linefuse digitize` does; writes docs/images/digitize_input.png and digitize_overlay.png and
prints the CSV's first rows and the error against the chart's data.

    cd PROJECT && python benchmarks/digitize_example.py [--chart 9] [--size 640 420]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    from linefuse import paths
    from linefuse.data.charts import draw_chart
    from linefuse.data.degrade import degrade, item_rng
    from linefuse.digitize.chart import digitize
    from linefuse.digitize.outputs import csv_text, overlay
    from linefuse.digitize.score import curve_error
    from linefuse.inference.restorer import Restorer
    from linefuse.params.full import load_params

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chart", type=int, default=9)
    parser.add_argument("--size", type=int, nargs=2, default=(640, 420))
    args = parser.parse_args()
    params = load_params(paths.PARAMS)
    sharp, table, sidecar = draw_chart(params.data.charts, args.chart, size_px=tuple(args.size))
    level = params.degrade.level("gaussian", "medium")
    blurred, _ = degrade(sharp, "gaussian", level, item_rng(0, "example", args.chart))
    restorer = Restorer.from_params(params, paths.adapter(params.train.restoring_level()))
    straightened, restored = restorer.restore_pair(blurred, params.eval.steps)
    images = REPO / "docs/images"
    Image.fromarray(blurred).save(images / "digitize_input.png")
    for name, image, restored_from in (
        ("blurred", blurred, None),
        ("restored", restored, straightened),
    ):
        try:
            read = digitize(image, restored_from)
        except Exception as why:  # noqa: BLE001 - the example says why a chart was not read
            print(f"{name}: not read: {why}")
            continue
        span = abs(sidecar["ylim"][1] - sidecar["ylim"][0])
        errors = [
            min(curve_error(s.x, s.y, table[:, 0], table[:, k], span) for s in read.series)
            for k in range(1, table.shape[1])
        ]
        print(f"{name}: {len(read.series)} series, curve error {np.round(errors, 2)} % of range")
        if name == "restored":
            overlay(restored, read).save(images / "digitize_overlay.png")
            print("\n".join(csv_text(read).splitlines()[:6]))


if __name__ == "__main__":
    main()
