"""Training throughput: LoRA vs full fine-tune, cached latents vs the VAE every step, data wait.

Each case runs in its own process (so its peak RSS is its own) on the same batch shape, and the
report compares them as ratios from one run on one machine: benchmarks/results/train.json.

    python benchmarks/train.py [--steps 8] [--batch 16] [--crop 64]
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

import torch
import yaml

REPO = Path(__file__).resolve().parents[1]


def tiny_vae():
    """A small AutoencoderKL with SD's shape (3 downsamplings' worth scaled to 2, 4 latent
    channels)."""
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    return (
        AutoencoderKL(
            block_out_channels=(32, 64, 64),
            layers_per_block=2,
            down_block_types=("DownEncoderBlock2D",) * 3,
            up_block_types=("UpDecoderBlock2D",) * 3,
            latent_channels=4,
            norm_num_groups=16,
            sample_size=64,
        )
        .eval()
        .requires_grad_(False)
    )


def run_case(case: str, steps: int, batch: int, crop: int) -> dict:
    """One case, in this process: `steps` timed optimizer steps after one warm-up step."""
    from linefuse.inference.model import predict
    from linefuse.params.full import load_params
    from linefuse.train.embed import encode_pixels
    from linefuse.train.model import add_lora, build_unet, count_parameters

    lora = load_params(REPO / "params.yaml").train.lora
    torch.manual_seed(0)
    pixels = torch.randint(0, 256, (batch, crop, crop, 3), dtype=torch.uint8)
    vae = tiny_vae() if case.startswith("latent") else None
    channels = 4 if vae else 3
    unet = build_unet("tiny", channels)
    model = unet if case == "full" else add_lora(unet, lora)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-4)
    cached = encode_pixels(vae, pixels) if vae else pixels.permute(0, 3, 1, 2).float() / 127.5 - 1
    prompts = torch.zeros(batch, 1, 32)

    def step() -> None:
        condition = encode_pixels(vae, pixels) if case == "latent_vae_every_step" else cached
        noisy = torch.randn_like(condition)
        timesteps = torch.randint(0, 1000, (batch,))
        loss = predict(model, noisy, condition, timesteps, prompts).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    elapsed = time.perf_counter() - started
    trainable_count, total = count_parameters(model)
    return {
        "samples_per_s": round(steps * batch / elapsed, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "trainable_params": trainable_count,
        "total_params": total,
    }


def data_wait_with_default_loader(steps: int) -> dict:
    """A real `linefuse pretrain` on the default data and loader params: its data-wait fraction."""
    from linefuse.cli import main as linefuse

    with tempfile.TemporaryDirectory() as folder, chdir(folder):
        params = yaml.safe_load((REPO / "params.yaml").read_text())
        params["pretrain"]["steps"] = steps
        Path("params.yaml").write_text(yaml.safe_dump(params))
        commands = [["generate"], ["index"]] + [
            [stage, "--level", level]
            for stage in ("shard", "embed")
            for level in params["degrade"]["levels"]
        ]
        for argv in commands + [["pretrain"]]:
            assert linefuse(argv) == 0, argv
        metrics = json.loads(Path("metrics/train/pretrain.json").read_text())
    return {key: round(metrics[key], 4) for key in ("data_wait_fraction", "samples_per_s")} | {
        "steps": steps,
        "loader": params["loader"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--crop", type=int, default=64)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/train.json"))
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.steps, args.batch, args.crop)))
        return

    cases = {}
    for case in ("full", "lora", "latent_cached", "latent_vae_every_step"):
        done = subprocess.run(
            [
                sys.executable,
                __file__,
                "--case",
                case,
                "--steps",
                str(args.steps),
                "--batch",
                str(args.batch),
                "--crop",
                str(args.crop),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        cases[case] = json.loads(done.stdout.strip().splitlines()[-1])
        print(case, cases[case], flush=True)
    rate = {case: figures["samples_per_s"] for case, figures in cases.items()}
    report = {
        "batch": args.batch,
        "crop": args.crop,
        "steps": args.steps,
        "cases": cases,
        "ratios": {
            "lora_vs_full_samples_per_s": round(rate["lora"] / rate["full"], 2),
            "lora_vs_full_peak_rss": round(
                cases["lora"]["peak_rss_mb"] / cases["full"]["peak_rss_mb"], 2
            ),
            "cached_latents_vs_vae_every_step": round(
                rate["latent_cached"] / rate["latent_vae_every_step"], 2
            ),
        },
        "default_loader": data_wait_with_default_loader(steps=30),
        "device": "cpu",
        "threads": torch.get_num_threads(),
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["ratios"], indent=2), json.dumps(report["default_loader"]))


if __name__ == "__main__":
    main()
