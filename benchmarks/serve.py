"""A warm `linefuse serve` restoring a 1024 px chart at the default step (eval.steps), in a
project `dvc repro` built: its base, the curriculum's last adapter and their ONNX export, on the
runtime eval.runtime picks on this machine (auto: timed once, cached).

serve's app runs in process (FastAPI's TestClient: no socket). One request of the same size
warms it (the tile choice and, on ONNX Runtime, the session's plan for the tile's shape), then
`--posts` requests are timed, each end to end: the PNG decoded, straightened, restored in tiles,
encoded. The report names the machine, the runtime and the load: benchmarks/results/serve.json.

    cd PROJECT && python benchmarks/serve.py [--size 1024] [--posts 5]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _chart_png(params, size: int) -> bytes:
    """A size x size default chart (generate's renderer), Gaussian-blurred by 1.5 px, as PNG."""
    from PIL import Image
    from scipy import ndimage

    from linefuse.data.charts import draw_chart

    sharp = draw_chart(params.data.charts, 0, size_px=(size, size))[0]
    blurred = ndimage.gaussian_filter(sharp.astype(np.float64), (1.5, 1.5, 0))
    png = io.BytesIO()
    Image.fromarray(np.clip(np.rint(blurred), 0, 255).astype(np.uint8)).save(png, "PNG")
    return png.getvalue()


def main() -> None:
    from fastapi.testclient import TestClient

    from linefuse import paths
    from linefuse.hardware import machine_summary
    from linefuse.params.full import load_params
    from linefuse.serve.app import create_app

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--posts", type=int, default=5)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/serve.json")
    args = parser.parse_args()
    params = load_params(paths.PARAMS)
    png = _chart_png(params, args.size)
    before = os.getloadavg()[0]
    client = TestClient(create_app(params, paths.LORA_DIR, "cpu"))
    client.post("/restore", files={"file": ("warm.png", png)}).raise_for_status()
    restorer = client.app.state.service.restorers[params.train.restoring_level()]
    seconds = []
    for _ in range(args.posts):
        started = time.perf_counter()
        client.post("/restore", files={"file": ("chart.png", png)}).raise_for_status()
        seconds.append(time.perf_counter() - started)
    tile = restorer.tile_for(args.size, args.size)
    report = {
        "machine": machine_summary(),
        "runtime": restorer.runtime.value,
        "runtime_reason": restorer.runtime.reason,
        "size": args.size,
        "steps": params.eval.steps,
        "tile": tile or "whole",
        "tiles": restorer.tile_count(args.size, args.size),
        "posts": args.posts,
        "seconds_median": round(statistics.median(seconds), 2),
        "seconds": [round(s, 2) for s in seconds],
        "load_average": {"before": round(before, 2), "after": round(os.getloadavg()[0], 2)},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
