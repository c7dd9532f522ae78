"""Restoring full-size charts with the shipped base: seconds against the chart size and steps,
and a 1024 px chart through `linefuse serve` (its app, in process) at 4 steps.

Each case runs in a process of its own, so its peak RSS is its own: it renders a size x size
chart (the generate stage's renderer), blurs it, and times `Restorer.restore_image` after the
model is loaded and the tile choice made, with params.yaml's `tiles` (`tile: auto` picks the
size per image from timings cached once per machine; one cache serves every case of a run) and
`model.unet`'s shipped weights. The serve case posts the chart's PNG to /restore at 4 steps with
tiles.tile auto and, for the figure before auto existed, fixed at tiles.size. The report names
the machine and its load: benchmarks/results/restore.json.

    python benchmarks/restore.py [--sizes 512 1024 2048] [--steps 1 4]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import chdir
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _chart(params, size: int) -> np.ndarray:
    from scipy import ndimage

    from linefuse.data.charts import draw_chart

    sharp = draw_chart(params.data.charts, 0, size_px=(size, size))[0]
    blurred = ndimage.gaussian_filter(sharp.astype(np.float64), (1.5, 1.5, 0))
    return np.clip(np.rint(blurred), 0, 255).astype(np.uint8)


def _project(params) -> None:
    """models/base (the shipped base) and models/lora/<last level> (a zero LoRA: merged, it
    costs what the base costs) in the current folder, as serve expects them."""
    from linefuse import paths
    from linefuse.inference.model import load_base
    from linefuse.train.model import add_lora, save_adapter

    shutil.copytree(paths.unet_folder(params.model.unet), paths.BASE_DIR)
    lora = add_lora(load_base(paths.BASE_DIR), params.train.lora)
    save_adapter(lora, paths.adapter(params.train.restoring_level()))


def run_case(size: int, steps: int) -> dict:
    from linefuse.inference.restorer import Restorer
    from linefuse.params.full import load_params

    params = load_params(REPO / "params.yaml")
    blurred = _chart(params, size)
    with tempfile.TemporaryDirectory() as project, chdir(project):
        _project(params)
        restorer = Restorer.from_params(params, None, "cpu")
        restorer.restore_image(blurred[:64, :64], 1)  # first-call allocations, untimed
        tile = restorer.tile_for(size, size)  # timed once per machine (cached), untimed here
        batch = restorer.tile_batch(tile) if tile else 1  # likewise
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
        "tile": tile or "whole",
        "tiles": restorer.tile_count(size, size),
        "tile_batch": batch,
        "tile_seconds_per_step": restorer.tile_costs.seconds,
        "batched_tile_seconds_per_step": restorer.tile_costs.batched,
    }


def run_serve(size: int, steps: int, tile: str) -> dict:
    """POST /restore of the chart's PNG to serve's app (FastAPI's TestClient: no socket), after
    one small warm-up request."""
    from fastapi.testclient import TestClient
    from PIL import Image

    from linefuse import paths
    from linefuse.params.full import load_params
    from linefuse.serve.app import create_app

    params = load_params(REPO / "params.yaml")
    if tile != "auto":
        params = params.model_copy(
            update={"tiles": params.tiles.model_copy(update={"tile": int(tile)})}
        )
    png = io.BytesIO()
    Image.fromarray(_chart(params, size)).save(png, "PNG")
    small = io.BytesIO()
    Image.fromarray(_chart(params, 64)).save(small, "PNG")
    with tempfile.TemporaryDirectory() as project, chdir(project):
        _project(params)
        client = TestClient(create_app(params, paths.LORA_DIR, "cpu"))
        client.post("/restore?steps=1", files={"file": ("w.png", small.getvalue())})
        service = client.app.state.service
        restorer = service.restorers[params.train.restoring_level()]
        chosen = restorer.tile_for(size, size)
        batch = restorer.tile_batch(chosen)
        started = time.perf_counter()
        reply = client.post(f"/restore?steps={steps}", files={"file": ("c.png", png.getvalue())})
        seconds = time.perf_counter() - started
        reply.raise_for_status()
    return {
        "size": size,
        "steps": steps,
        "tiles.tile": tile,
        "tile": chosen,
        "tile_batch": batch,
        "seconds": round(seconds, 2),
    }


def main() -> None:
    from linefuse.hardware import machine_summary
    from linefuse.params.full import load_params

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048])
    parser.add_argument("--steps", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/restore.json")
    parser.add_argument("--case", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(*args.case)))
        return
    if args.serve:
        print(json.dumps(run_serve(1024, 4, args.serve)))
        return
    params = load_params(REPO / "params.yaml")
    report = {
        "machine": {**machine_summary(), "python": platform.python_version()},
        "model": params.model.unet,
        "tiles": params.tiles.model_dump(),
        "load_average": {"before": round(os.getloadavg()[0], 2)},
        "cases": [],
        "serve_1024px_4_steps": [],
    }

    def child(env: dict, *argv: str) -> dict:
        done = subprocess.run(
            [sys.executable, __file__, *argv], capture_output=True, text=True, env=env
        )
        if done.returncode:
            raise SystemExit(done.stderr[-3000:])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        print(json.dumps(result), flush=True)
        return result

    def write() -> None:  # after every case, so a stopped run leaves what it measured
        report["load_average"]["after"] = round(os.getloadavg()[0], 2)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")

    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "LINEFUSE_CACHE": cache}
        for tile in ("auto", str(params.tiles.size)):
            report["serve_1024px_4_steps"].append(child(env, "--serve", tile))
            write()
        for steps in args.steps:
            for size in args.sizes:
                report["cases"].append(child(env, "--case", str(size), str(steps)))
                write()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
