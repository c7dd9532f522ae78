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

A backbone may name where it starts, `deep:chart-base` (deep initialised from chart-base where
shapes match, as base.window.init does). On a CPU, `--results` keeps the points apart from the
GPU's, `--bank-charts` trains on the bank's first N charts (both backbones of one file on the
same ones) and `--score-at` scores only those multiples:

    python benchmarks/scaling.py --backbones tiny deep deep:chart-base --max-multiple 8 \
        --score-at 8 --bank-charts 256 --results benchmarks/results/scaling-cpu.json
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


def read_results(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {"points": []}


def write_results(path: Path, results: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    plot(results, path.with_suffix(".png"))


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 4), dpi=100)
    axes = figure.subplots()
    for backbone in sorted({p["backbone"] for p in results["points"]}):
        points = sorted(
            (p for p in results["points"] if p["backbone"] == backbone and "scores" in p),
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
    figure.savefig(path, metadata={"Software": None})


def train_and_score(
    params, spec: str, multiples: list[int], budget_s: float, results_path: Path, scored
) -> None:
    """Trains backbone `spec` (a config name, or name:init) to each multiple in turn, scoring
    (where `scored` holds the multiple) and saving after each."""
    from linefuse.inference.model import load_base
    from linefuse.paths import unet_folder
    from linefuse.train.model import init_from

    backbone, _, init = spec.partition(":")
    run_params = base_run_params(params)
    unit = params.pretrain.steps * params.optim.batch_size
    batch = run_params.optim.batch_size
    state_dir = paths.STATE_ROOT / f"scaling-{spec.replace(':', '-')}"
    accelerator, device, precision = make_accelerator(run_params, state_dir)
    unet = build_unet(backbone, 3)
    if init:
        init_from(unet, load_base(unet_folder(init)))
    trainable = [p for p in unet.parameters() if p.requires_grad]
    optimizer = make_optimizer(run_params, trainable, params.base.lr)
    schedule = get_constant_schedule_with_warmup(optimizer, params.base.warmup_steps)
    unet, optimizer, schedule = accelerator.prepare(unet, optimizer, schedule)
    torch.backends.cudnn.benchmark = accelerator.device.type == "cuda"  # one crop size throughout
    trainer = Trainer(
        run_params, accelerator, noise_scheduler(params.model), unet, optimizer, schedule, trainable
    )
    step, results = 0, read_results(results_path)
    done = {p["multiple"] for p in results["points"] if p["backbone"] == spec}
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
    charts = scoring_charts(params, os.cpu_count() or 1) if scored else []
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
        point = {
            "backbone": spec,
            "multiple": multiple,
            "pairs": step * batch,
            "steps": step,
            "batch": batch,
            "bank_charts": params.base.bank.charts,
            "parameters": count_parameters(unet)[1],
            "train_seconds_this_leg": round(train_s, 1),
            "pairs_per_s": round((step - leg_start_step) * batch / train_s, 1),
            "score_charts": params.base.score_charts,
            "device": str(accelerator.device),
            "precision": precision.value,
        }
        if multiple in scored:
            with tempfile.TemporaryDirectory() as folder:
                save_base(accelerator.unwrap_model(unet), Path(folder), prompt.cpu())
                point["scores"] = score_base(params, Path(folder), accelerator.device.type, charts)
        results["points"].append(point)
        results["machine"] = machine_summary()
        results["unit_pairs"] = unit
        write_results(results_path, results)
        shutil.rmtree(state_dir, ignore_errors=True)
        accelerator.save_state(str(state_dir))
        progress.write_text(json.dumps({"step": step}))
        scores = point.get("scores")
        print(
            f"{spec} {multiple}x: "
            + (
                f"test {scores['test']['mean']:+.2f} dB, held out "
                f"{scores['held_out'].get('mean', float('nan')):+.2f} dB, sharp worst "
                f"{scores['sharp']['worst']:.1f} dB "
                if scores
                else "not scored "
            )
            + f"({step} steps, {train_s:.0f} s)",
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
    parser.add_argument("--results", default=str(RESULTS), help="default: %(default)s")
    parser.add_argument("--bank-charts", type=int, help="default: base.bank.charts")
    parser.add_argument("--score-at", type=int, nargs="+", help="default: every multiple")
    args = parser.parse_args()
    params = load_params(args.params)
    if args.bank_charts:
        bank = params.base.bank.model_copy(update={"charts": args.bank_charts})
        params = params.model_copy(update={"base": params.base.model_copy(update={"bank": bank})})
    multiples = [2**k for k in range(int(math.log2(args.max_multiple)) + 1)]
    scored = set(args.score_at or multiples)
    torch.manual_seed(0)
    build_bank(params, workers=os.cpu_count() or 1)
    for backbone in args.backbones:
        train_and_score(params, backbone, multiples, args.budget_s, Path(args.results), scored)


if __name__ == "__main__":
    main()
