"""Training speed per precision on this machine: fp32, bf16 and (on a GPU) fp16.

Each precision runs in a process of its own (accelerate fixes autocast once per process) through
the real training step: accelerate's mixed precision over `linefuse.train.step.training_step`
(the training loop's step), on the default model (`model.unet` from params.yaml, full fine-tune as
in pretrain, the costliest stage) at the default batch size and crop. The report names the machine
(CPU model and flags, GPU), what `optim.precision: auto` picks here and why, and whether that is
the fastest measured: benchmarks/results/precision.json.

    python benchmarks/precision.py [--steps 6] [--out benchmarks/results/precision.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


def run_case(precision: str, steps: int) -> dict:
    """`steps` timed optimizer steps at `precision`, after two untimed warm-up steps."""
    from linefuse.params.full import load_params
    from linefuse.train.diffusion import noise_scheduler
    from linefuse.train.model import build_unet
    from linefuse.train.run import make_accelerator
    from linefuse.train.step import Trainer, training_step

    params = load_params(REPO / "params.yaml")
    params = params.model_copy(
        update={"optim": params.optim.model_copy(update={"precision": precision})}
    )
    with tempfile.TemporaryDirectory() as state_dir:  # the accelerator saves nothing there
        accelerator, _, chosen = make_accelerator(params, Path(state_dir))
    batch, crop = params.optim.batch_size, params.shards.crop
    torch.manual_seed(0)
    model = build_unet(params.model.unet, 3)
    torch.nn.init.normal_(model.conv_out.weight, std=0.02)  # a zero head makes backward trivial
    trainable = list(model.parameters())
    optimizer = torch.optim.AdamW(trainable, lr=1e-4)
    constant = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    model, optimizer, constant = accelerator.prepare(model, optimizer, constant)
    trainer = Trainer(
        params, accelerator, noise_scheduler(params.model), model, optimizer, constant, trainable
    )
    blurred = torch.rand(batch, 3, crop, crop, device=accelerator.device) * 2 - 1
    sharp = blurred.clamp(-0.5, 0.5)
    prompts = torch.zeros(batch, 1, model.config.cross_attention_dim, device=accelerator.device)

    def step(index: int) -> None:
        training_step(trainer, blurred, sharp, prompts, index, 0)

    for index in range(2):
        step(index)
    if accelerator.device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for index in range(steps):
        step(index)
    if accelerator.device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - started
    return {
        "samples_per_s": round(steps * batch / elapsed, 2),
        "steps": steps,
        "batch": batch,
        "crop": crop,
        "device": str(accelerator.device),
        "autocast": chosen.value,
    }


def auto_follows_the_rule(auto: str, fastest: str, cases: dict) -> bool:
    """docs/pipeline.md's rule, checked on this run: `auto` picks the fastest precision, except
    that on a GPU it may pick bf16 where fp16 is the fastest (bf16 needs no loss scaling), as
    long as bf16 beats fp32 there."""
    if auto == fastest:
        return True
    speed = {name: case["samples_per_s"] for name, case in cases.items()}
    return auto == "bf16" and fastest == "fp16" and speed["bf16"] > speed["fp32"]


def main() -> None:
    from linefuse.hardware import choose_device, choose_precision, machine_summary

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/precision.json"))
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.steps)))
        return

    device = choose_device("auto")
    precisions = ["fp32", "bf16"] + (["fp16"] if device.value == "cuda" else [])
    cases = {}
    for precision in precisions:
        done = subprocess.run(
            [sys.executable, __file__, "--case", precision, "--steps", str(args.steps)],
            capture_output=True,
            text=True,
            check=True,
        )
        cases[precision] = json.loads(done.stdout.strip().splitlines()[-1])
        print(precision, cases[precision], flush=True)
    auto = choose_precision("auto", device.value)
    fastest = max(cases, key=lambda name: cases[name]["samples_per_s"])
    report = {
        "machine": machine_summary(),
        "device": device.value,
        "auto": {"picks": auto.value, "reason": auto.reason},
        "cases": cases,
        "ratio_to_fp32": {
            name: round(case["samples_per_s"] / cases["fp32"]["samples_per_s"], 2)
            for name, case in cases.items()
        },
        "fastest": fastest,
        "auto_is_fastest_or_bf16_on_gpu": auto_follows_the_rule(auto.value, fastest, cases),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({key: report[key] for key in ("auto", "ratio_to_fp32", "fastest")}, indent=2))
    if not report["auto_is_fastest_or_bf16_on_gpu"]:
        sys.exit(f"auto picks {auto.value}, but {fastest} is the fastest here: the rule fails")


if __name__ == "__main__":
    main()
