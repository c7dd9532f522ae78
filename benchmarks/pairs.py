"""The base's training pairs: charts drawn and degraded in loader processes (ChartPairs) against a
chart bank cropped in loader processes and degraded as batched torch ops on the device.

In one run on one machine it builds a small bank (all cores), then measures for both paths the
pairs/s of the data alone and the data-wait fraction of a training-like loop (the tiny UNet,
forward and backward on each batch): time spent waiting for the next batch over the loop's time.
The new path's device degradation is timed apart (it runs on the training device, not the CPU
loader). Writes benchmarks/results/pairs-cpu.json, or pairs-<gpu>.json where a GPU is visible.

    python benchmarks/pairs.py [--charts 48] [--batch 64] [--batches 8]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from contextlib import chdir
from pathlib import Path

import torch
import yaml
from torch.utils.data import DataLoader

from linefuse.base.bank import BankCrops, build_bank
from linefuse.base.batches import device_generator
from linefuse.data.degrade_torch import degrade_batch, draw_plan
from linefuse.data.stream import ChartPairs
from linefuse.hardware import cpu_flags, machine_summary
from linefuse.params.full import load_params
from linefuse.stage import default_workers

REPO = Path(__file__).resolve().parents[1]


def old_batches(params, batch: int, workers: int):
    """ChartPairs as `linefuse base` reads it: in order, drawn and degraded in the workers."""
    loader = DataLoader(ChartPairs(params), batch_size=batch, num_workers=workers)
    for blurred, sharp, _ in loader:
        yield blurred, sharp


def new_batches(params, batch: int, workers: int, device: torch.device, timer: dict):
    """BankCrops from the loader, degraded on `device`; the degradation's time goes to timer."""
    loader = DataLoader(BankCrops(params), batch_size=batch, num_workers=workers)
    generator = torch.Generator().manual_seed(0)
    base = params.base
    for sharp, *_ in loader:
        started = time.perf_counter()
        sharp = sharp.to(device).float() / 255.0
        plan = draw_plan(len(sharp), params.degrade, base.light, base.light_fraction, generator)
        blurred = degrade_batch(sharp, plan, device_generator(generator, device))
        if device.type == "cuda":
            torch.cuda.synchronize()
        timer["degrade_s"] += time.perf_counter() - started
        yield blurred * 2 - 1, sharp * 2 - 1


def run_loop(batches, count: int, device: torch.device, train: bool, timer: dict) -> dict:
    """`count` batches after one warm-up; with `train`, a tiny-UNet step on each."""
    from linefuse.inference.model import predict
    from linefuse.train.model import build_unet

    unet = build_unet("tiny", 3).to(device) if train else None
    optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-4) if train else None
    batches = iter(batches)
    next(batches)  # warm-up: workers start, the first chart is drawn
    timer["degrade_s"] = 0.0
    wait = 0.0
    started = time.perf_counter()
    for _ in range(count):
        waited = time.perf_counter()
        blurred, sharp = next(batches)
        wait += time.perf_counter() - waited
        if train:
            prompts = torch.zeros(len(sharp), 1, 32, device=device)
            timesteps = torch.randint(0, 1000, (len(sharp),), device=device)
            noisy = torch.randn_like(sharp)
            loss = predict(unet, noisy, blurred, timesteps, prompts).square().mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
    elapsed = time.perf_counter() - started
    pairs = count * len(sharp)
    return {
        "pairs": pairs,
        "seconds": round(elapsed, 2),
        "pairs_per_s": round(pairs / elapsed, 1),
    } | ({"data_wait_fraction": round(wait / elapsed, 3)} if train else {})


def measure(charts: int, batch: int, count: int, device: torch.device) -> dict:
    workers = max(1, default_workers() - 1)  # base.workers auto: all cores but one
    with tempfile.TemporaryDirectory() as folder, chdir(folder):
        raw = yaml.safe_load((REPO / "params.yaml").read_text())
        raw["base"]["bank"]["charts"] = charts
        Path("params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        params = load_params("params.yaml")
        started = time.perf_counter()
        build_bank(params, workers=default_workers())
        bank_rate = charts / (time.perf_counter() - started)
        report = {"bank_charts_per_s": round(bank_rate, 2), "loader_workers": workers}
        for train in (False, True):
            name = "train_loop" if train else "data_only"
            timer = {"degrade_s": 0.0}
            old = run_loop(old_batches(params, batch, workers), count, device, train, {})
            new_path = new_batches(params, batch, workers, device, timer)
            new = run_loop(new_path, count, device, train, timer)
            new["degrade_on_device_fraction"] = round(timer["degrade_s"] / new["seconds"], 3)
            report[name] = {
                "old_chart_pairs": old,
                "new_bank_crops_torch": new,
                "pairs_per_s_ratio_new_to_old": round(new["pairs_per_s"] / old["pairs_per_s"], 2),
            }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--charts", type=int, default=48, help="charts in the benchmark's bank")
    parser.add_argument("--batch", type=int, default=64, help="pairs per batch")
    parser.add_argument("--batches", type=int, default=8, help="timed batches per path")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    report = {
        "machine": machine_summary(),
        "cpu_flags_bf16": sorted(cpu_flags() & {"avx512_bf16", "amx_bf16", "avx2", "avx512f"}),
        "device": str(device),
        "load_average_1_5_15_min": [round(v, 2) for v in os.getloadavg()],  # a shared machine?
        "batch": args.batch,
        "crop": load_params(REPO / "params.yaml").base.crop,
        "batches": args.batches,
        **measure(args.charts, args.batch, args.batches, device),
    }
    name = (
        "cpu"
        if device.type == "cpu"
        else re.sub(r"[^a-z0-9]+", "-", report["machine"]["gpu"].lower())
    )
    out = REPO / "benchmarks/results" / f"pairs-{name}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
