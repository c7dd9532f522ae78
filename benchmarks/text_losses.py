"""The base's text terms, each toggled alone at equal compute: what each buys in dB and CER.

Every variant starts from the same UNet (--init, the shipped base by default), trains the same
steps on the same pairs (the chart bank's crops degraded on the device, seeded by step) with the
same constant learning rate, and differs from the `none` variant in one term only:

- `label_weight`: the tick labels' pixels weigh 1 + W in the pixel loss (base.text.label_weight);
- `ctc`: the label reader's CTC loss on the restored labels (base.text.ctc);
- `laplacian`: the L1 of the error's Laplacian (optim.loss.laplacian);
- `all`: the three together.

Each is then scored as the model card scores the base (linefuse.base.scores: default
charts it never trained on, whole, every domain and level; PSNR gain and the tick labels'
character error rate read by Tesseract). Steps are equal across variants; the CTC variant also
runs the reader, so its wall time is reported beside. Results go to
benchmarks/results/text_losses-<device>.json, written after each variant; a rerun skips the
variants already there.

    python benchmarks/text_losses.py [--steps 200] [--batch 16] [--lr 2e-4] [--score-charts 12]
        [--bank-charts 400]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch
from diffusers.optimization import get_constant_schedule

from linefuse import paths
from linefuse.base.bank import BankCrops, build_bank
from linefuse.base.batches import device_pairs, step_generator
from linefuse.base.scores import score_base, scoring_charts
from linefuse.base.train import base_run_params
from linefuse.hardware import machine_summary
from linefuse.params.full import Params, load_params
from linefuse.train.diffusion import noise_scheduler
from linefuse.train.model import build_unet, save_base, zero_prompt
from linefuse.train.run import make_accelerator, make_optimizer
from linefuse.train.step import Trainer, label_reader, training_step
from linefuse.train.trainset import BatchStream

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ("none", "label_weight", "ctc", "laplacian", "all")


def variant_params(params: Params, variant: str, args) -> Params:
    """params with the variant's one term on (at the weight the flags give) and the rest off."""
    on = {"label_weight", "ctc", "laplacian"} if variant == "all" else {variant}
    text = params.base.text.model_copy(
        update={
            "label_weight": args.label_weight if "label_weight" in on else 0.0,
            "ctc": args.ctc if "ctc" in on else 0.0,
        }
    )
    loss = params.optim.loss.model_copy(
        update={"laplacian": args.laplacian if "laplacian" in on else 0.0}
    )
    base = params.base.model_copy(update={"text": text, "init": args.init})
    optim = params.optim.model_copy(update={"loss": loss})
    return base_run_params(params.model_copy(update={"base": base, "optim": optim}))


def train_variant(params: Params, args) -> tuple[torch.nn.Module, dict]:
    """The variant's model after args.steps steps of args.batch, and its training figures."""
    accelerator, device, precision = make_accelerator(params, paths.STATE_ROOT / "text-losses")
    torch.manual_seed(0)
    unet = build_unet(args.init, 3)
    trainable = [p for p in unet.parameters() if p.requires_grad]
    optimizer = make_optimizer(params, trainable, args.lr)
    schedule = get_constant_schedule(optimizer)
    unet, optimizer, schedule = accelerator.prepare(unet, optimizer, schedule)
    noise = noise_scheduler(params.model)
    trainer = Trainer(params, accelerator, noise, unet, optimizer, schedule, trainable)
    if params.base.text.ctc > 0:
        trainer.reader = label_reader(params.base.text.reader, accelerator.device)
    crops = BankCrops(params)
    stream = BatchStream(
        accelerator, params.loader, args.batch, params.optim.seed, dataset=crops, shuffle=False
    )
    batches = stream.batches()
    prompt = zero_prompt(args.init).to(accelerator.device)
    prompts = prompt.expand(args.batch, -1, -1)
    started, terms_sum = time.perf_counter(), {}
    for step in range(args.steps):
        generator = step_generator(params, step, 0, 0)
        blurred, sharp, labels = device_pairs(params, next(batches), accelerator.device, generator)
        _, terms = training_step(trainer, blurred, sharp, prompts, step, 0, labels=labels)
        for name, value in terms.items():
            terms_sum[name] = terms_sum.get(name, 0.0) + value
    seconds = time.perf_counter() - started
    figures = {
        "train_seconds": round(seconds, 1),
        "pairs": args.steps * args.batch,
        "pairs_per_s": round(args.steps * args.batch / seconds, 2),
        "mean_terms": {name: value / args.steps for name, value in terms_sum.items()},
        "device": str(accelerator.device),
        "precision": precision.value,
        "precision_reason": precision.reason,
    }
    return accelerator.unwrap_model(unet), figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(REPO / "params.yaml"))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--init", default="chart-base")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--label-weight", type=float, default=4.0)
    parser.add_argument("--ctc", type=float, default=0.05)
    parser.add_argument("--laplacian", type=float, default=0.5)
    parser.add_argument("--score-charts", type=int, default=12)
    parser.add_argument("--bank-charts", type=int, default=400)
    parser.add_argument("--suffix", default="", help="appended to each variant's name in the file")
    args = parser.parse_args()
    params = load_params(args.params)
    bank = params.base.bank.model_copy(update={"charts": args.bank_charts})
    params = params.model_copy(
        update={
            "base": params.base.model_copy(update={"score_charts": args.score_charts, "bank": bank})
        }
    )
    build_bank(params, workers=os.cpu_count() or 1)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    out = REPO / "benchmarks" / "results" / f"text_losses-{device}.json"
    results = json.loads(out.read_text()) if out.is_file() else {"variants": {}}
    charts = scoring_charts(params)
    if "init" not in results:  # the starting point, untrained: what every variant moves from
        results["init"] = score_base(params, paths.unet_folder(args.init), device, charts)
    for variant in args.variants:
        name = variant + args.suffix
        if name in results["variants"]:
            continue
        run_params = variant_params(params, variant, args)
        model, figures = train_variant(run_params, args)
        with tempfile.TemporaryDirectory() as folder:
            save_base(model, Path(folder), zero_prompt(args.init))
            scores = score_base(run_params, Path(folder), device, charts)
        settings = {k: v for k, v in vars(args).items() if k not in ("variants", "suffix")}
        results["variants"][name] = {**figures, "settings": settings, "scores": scores}
        results["machine"] = machine_summary()
        out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
        test = scores["test"]
        print(
            f"{name}: test {test['mean']:+.2f} dB, cer {test.get('cer')}, "
            f"{figures['train_seconds']:.0f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
