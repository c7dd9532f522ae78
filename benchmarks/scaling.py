"""Mean test gain against training compute, per backbone: how far more compute carries a model.

Compute is counted in units of the default pretrain (pretrain.steps x optim.batch_size training
pairs). Each backbone trains once from scratch on the base's recipe (params `base`: crops of the
chart bank degraded on the training device, its batch and learning rate; the points to 128x were
trained on charts drawn per pair, linefuse.data.stream.ChartPairs) with the learning rate held
constant after warmup, and is scored at every doubling of compute (1x, 2x, 4x, ...) on the
base's scoring charts (linefuse.base.scores: default charts it never trains on, whole,
every domain and level).
One constant-rate run scored along the way is an "anytime" curve: a run planned for one budget,
with a decaying rate, ends a little higher at that budget.

Every point is written to benchmarks/results/scaling.json as it finishes, with the training state
beside it in .linefuse/state/scaling-<backbone>; a rerun resumes where it stopped. It runs far
longer than the other benchmarks, so it is not in `make bench`:

    python benchmarks/scaling.py [--backbones tiny wide] [--max-multiple 128] [--budget-s 3600]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch
from diffusers.optimization import get_constant_schedule_with_warmup

from linefuse import paths
from linefuse.base.bank import BankCrops, build_bank
from linefuse.base.batches import device_pairs, step_generator
from linefuse.base.scores import score_base, scoring_charts
from linefuse.base.train import base_run_params
from linefuse.hardware import machine_summary
from linefuse.params.full import load_params
from linefuse.train.diffusion import noise_scheduler
from linefuse.train.model import build_unet, count_parameters, save_base, zero_prompt
from linefuse.train.run import make_accelerator, make_optimizer
from linefuse.train.step import Trainer, training_step
from linefuse.train.trainset import BatchStream

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "scaling.json"
PLOT = REPO / "benchmarks" / "results" / "scaling.png"


def read_results() -> dict:
    return json.loads(RESULTS.read_text()) if RESULTS.is_file() else {"points": []}


def write_results(results: dict) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    plot(results)


def plot(results: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 4), dpi=100)
    axes = figure.subplots()
    for backbone in sorted({p["backbone"] for p in results["points"]}):
        points = sorted(
            (p for p in results["points"] if p["backbone"] == backbone),
            key=lambda p: p["multiple"],
        )
        for split, style in (("test", "-o"), ("held_out", "--s")):
            axes.plot(
                [p["multiple"] for p in points],
                [p["scores"][split]["mean"] for p in points],
                style,
                label=f"{backbone} ({split})",
            )
    axes.set_xscale("log", base=2)
    axes.set_xlabel("training compute (x the default pretrain's pairs)")
    axes.set_ylabel("mean PSNR gain (dB)")
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(PLOT, metadata={"Software": None})


def train_and_score(params, backbone: str, multiples: list[int], budget_s: float) -> None:
    """Trains `backbone` to each multiple in turn, scoring and saving after each."""
    run_params = base_run_params(params)
    unit = params.pretrain.steps * params.optim.batch_size
    batch = run_params.optim.batch_size
    state_dir = paths.STATE_ROOT / f"scaling-{backbone}"
    accelerator, device, precision = make_accelerator(run_params, state_dir)
    unet = build_unet(backbone, 3)
    trainable = [p for p in unet.parameters() if p.requires_grad]
    optimizer = make_optimizer(run_params, trainable, params.base.lr)
    schedule = get_constant_schedule_with_warmup(optimizer, params.base.warmup_steps)
    unet, optimizer, schedule = accelerator.prepare(unet, optimizer, schedule)
    torch.backends.cudnn.benchmark = accelerator.device.type == "cuda"  # one crop size throughout
    trainer = Trainer(
        run_params, accelerator, noise_scheduler(params.model), unet, optimizer, schedule, trainable
    )
    step, results = 0, read_results()
    done = {p["multiple"] for p in results["points"] if p["backbone"] == backbone}
    progress = state_dir / "progress.json"
    if done and progress.is_file():
        accelerator.load_state(str(state_dir))
        step = json.loads(progress.read_text())["step"]
    stream = BatchStream(
        accelerator,
        run_params.loader,
        batch,
        params.optim.seed,
        dataset=BankCrops(run_params),
        shuffle=False,
    )
    batches = stream.batches(skip=step)
    prompt = zero_prompt(backbone).to(accelerator.device)
    charts = scoring_charts(params)
    started = time.perf_counter()
    for multiple in multiples:
        if multiple in done:
            continue
        target_steps = math.ceil(multiple * unit / batch)
        leg_started, leg_start_step = time.perf_counter(), step
        while step < target_steps:
            generator = step_generator(run_params, step, 0, 0)
            pair = device_pairs(run_params, next(batches), accelerator.device, generator)
            blurred, sharp, labels = pair
            prompts = prompt.expand(len(blurred), -1, -1)
            training_step(trainer, blurred, sharp, prompts, step, 0, labels=labels)
            step += 1
        train_s = time.perf_counter() - leg_started
        with tempfile.TemporaryDirectory() as folder:
            save_base(accelerator.unwrap_model(unet), Path(folder), prompt.cpu())
            scores = score_base(params, Path(folder), accelerator.device.type, charts)
        results["points"].append(
            {
                "backbone": backbone,
                "multiple": multiple,
                "pairs": step * batch,
                "steps": step,
                "batch": batch,
                "parameters": count_parameters(unet)[1],
                "train_seconds_this_leg": round(train_s, 1),
                "pairs_per_s": round((step - leg_start_step) * batch / train_s, 1),
                "score_charts": params.base.score_charts,
                "device": str(accelerator.device),
                "precision": precision.value,
                "scores": scores,
            }
        )
        results["machine"] = machine_summary()
        results["unit_pairs"] = unit
        write_results(results)
        shutil.rmtree(state_dir, ignore_errors=True)
        accelerator.save_state(str(state_dir))
        progress.write_text(json.dumps({"step": step}))
        print(
            f"{backbone} {multiple}x: test {scores['test']['mean']:+.2f} dB, held out "
            f"{scores['held_out'].get('mean', float('nan')):+.2f} dB, sharp worst "
            f"{scores['sharp']['worst']:.1f} dB ({step} steps, {train_s:.0f} s)",
            flush=True,
        )
        if time.perf_counter() - started > budget_s:
            print(f"{backbone}: budget of {budget_s:.0f} s spent; rerun to go on", flush=True)
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(REPO / "params.yaml"))
    parser.add_argument("--backbones", nargs="+", default=["tiny", "wide"])
    parser.add_argument("--max-multiple", type=int, default=128)
    parser.add_argument("--budget-s", type=float, default=3600.0, help="per backbone")
    args = parser.parse_args()
    params = load_params(args.params)
    multiples = [2**k for k in range(int(math.log2(args.max_multiple)) + 1)]
    torch.manual_seed(0)
    build_bank(params, workers=os.cpu_count() or 1)
    for backbone in args.backbones:
        train_and_score(params, backbone, multiples, args.budget_s)


if __name__ == "__main__":
    main()
