"""pretrain, train@LEVEL and the base: one readable training loop over accelerate.

pretrain trains the tiny base UNet fully on every level (and is the full fine-tune baseline);
train@LEVEL trains a LoRA adapter on that base, starting from the previous curriculum level's
adapter; `linefuse base` trains the shipped base on the chart bank. The same command runs on a
CPU or under `accelerate launch --num_processes N`.

`train` reads top to bottom, as diffusers' training examples do: the set-up, then the steps
(train/step.py's `training_step` under `accelerator.accumulate`: draw, loss, backward, clip,
optimizer and schedule step; the profiler and the benchmarks run the same one), then the finish
(validation loss; model, metrics and logs saved together). What has an idea of its own is a
function beside it: the data, the model, the checkpoints.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs, set_seed
from diffusers.optimization import get_cosine_schedule_with_warmup
from peft import set_peft_model_state_dict

from linefuse import paths
from linefuse.data.bank import BankCrops
from linefuse.data.layout import SHARD_MANIFEST
from linefuse.data.readers import EmbeddedPairs
from linefuse.hardware import Choice, choose_device, choose_precision
from linefuse.inference.model import load_base
from linefuse.paths import fresh_config
from linefuse.stage import UserError, atomic_dir, atomic_file, work_done, write_json
from linefuse.train.base_batches import (
    TextTargets,
    device_pairs,
    step_generator,
)
from linefuse.train.checkpoints import CheckpointStore, fingerprint, trim_step_log
from linefuse.train.diffusion import (
    clean_signal,
    noise_scheduler,
    weighted_loss,
)
from linefuse.train.model import (
    ADAPTER_WEIGHTS,
    adapter_start,
    add_lora,
    build_unet,
    count_parameters,
    quantize_frozen,
    save_adapter,
    save_base,
    zero_prompt,
)
from linefuse.train.step import (
    LossNotFinite,
    Trainer,
    draw_loss,
    label_reader,
    step_draw,
    training_step,
)
from linefuse.train.telemetry import StepLogger, peak_memory_mb
from linefuse.train.trainset import BatchStream, map_dataset, shard_stream_urls

if TYPE_CHECKING:
    from linefuse.params.full import Params

log = logging.getLogger("linefuse")
# for tests: set to 1, each process writes rank{i}.json, what it trained on (see _RankDigest)
DIGESTS_ENV = "LINEFUSE_TRAIN_DIGESTS"


class TrainingDiverged(UserError):
    """The loss stopped being finite: stop, keep the last good checkpoint."""


@dataclass
class Job:
    """What one training stage does; built from params by `pretrain_job` or `train_job`."""

    name: str
    steps: int
    lr: float
    lr_key: str  # where params.yaml sets lr, for messages
    levels: list[str]
    out_dir: Path
    metrics_path: Path
    log_dir: Path
    lora: bool
    unet: str = ""  # what a full training starts from (model.unet; base.init or base.unet)
    charts_stream: bool = False  # reads the chart bank (the base) instead of the shards
    init_adapter: Path | None = None
    unfreeze_blocks: list[str] = field(default_factory=list)
    domain: str | None = None
    settings: dict = field(default_factory=dict)


def pretrain_job(params: Params) -> Job:
    return Job(
        name="pretrain",
        steps=params.pretrain.steps,
        lr=params.pretrain.lr,
        lr_key="pretrain.lr",
        levels=list(params.degrade.levels),
        out_dir=paths.BASE_DIR,
        metrics_path=paths.train_metrics("pretrain"),
        log_dir=paths.train_logs("pretrain"),
        lora=False,
        unet=params.model.unet,
        settings=params.model_dump(include={"model", "optim", "pretrain"}),
    )


def base_job(params: Params) -> Job:
    """The shipped base (`linefuse base`); `params` as `base_run_params` makes them."""
    return Job(
        name="base",
        steps=params.base.steps,
        lr=params.base.lr,
        lr_key="base.lr",
        levels=list(params.degrade.levels),
        out_dir=paths.zoo_model(params.base.name),
        metrics_path=paths.train_metrics("base"),
        log_dir=paths.train_logs("base"),
        lora=False,
        unet=params.base.init or params.base.unet,
        charts_stream=True,
        settings=params.model_dump(include={"data", "degrade", "shards", "model", "optim", "base"}),
    )


def train_job(params: Params, level: str) -> Job:
    order = params.train.order()
    before = params.train.predecessor(level)
    unfreeze = params.train.unfreeze
    hybrid = unfreeze.level is not None and order.index(level) >= order.index(unfreeze.level)
    return Job(
        name=f"train@{level}",
        steps=params.train.curriculum[level].steps,
        lr=params.train.curriculum[level].lr,
        lr_key=f"train.curriculum.{level}.lr",
        levels=params.train.training_levels(level),
        out_dir=paths.adapter(level),
        metrics_path=paths.train_metrics(level),
        log_dir=paths.train_logs(level),
        lora=True,
        init_adapter=paths.adapter(before) if before else None,
        unfreeze_blocks=list(unfreeze.blocks) if hybrid else [],
        settings={
            **params.model_dump(include={"model", "optim"}),
            "lora": params.train.lora.model_dump(),
            "level": level,
            "replay": params.train.replay,
            "ordered": params.train.ordered,
            "curriculum": params.train.curriculum[level].model_dump(),
        },
    )


def make_accelerator(params: Params, state_dir: Path) -> tuple[Accelerator, Choice, Choice]:
    """The accelerator on the device and precision chosen for this machine, and both choices."""
    device = choose_device(params.compute.device)
    precision = choose_precision(params.optim.precision, device.value)
    ddp = DistributedDataParallelKwargs(
        find_unused_parameters=False, gradient_as_bucket_view=True, static_graph=True
    )
    # cpu=True makes a multi-process launch use gloo (MULTI_CPU), also on a machine with a GPU
    accelerator = Accelerator(
        cpu=device.value == "cpu",
        mixed_precision={"fp32": "no"}.get(precision.value, precision.value),
        gradient_accumulation_steps=params.optim.grad_accum,
        kwargs_handlers=[ddp],
        project_dir=str(state_dir),
    )
    return accelerator, device, precision


def make_optimizer(params: Params, trainable: list[torch.nn.Parameter], lr: float):
    if params.optim.optimizer == "adamw8bit":
        try:
            import bitsandbytes
        except ImportError:
            raise UserError(
                "optim.optimizer: adamw8bit needs bitsandbytes and a CUDA GPU; "
                "pip install bitsandbytes, or use adamw"
            ) from None
        return bitsandbytes.optim.AdamW8bit(
            trainable, lr=lr, weight_decay=params.optim.weight_decay
        )
    return torch.optim.AdamW(trainable, lr=lr, weight_decay=params.optim.weight_decay)


def make_schedule(params: Params, job: Job, optimizer, processes: int):
    """Cosine with warmup; accelerate steps a prepared schedule once per process, so its
    lengths are scaled by the process count."""
    return get_cosine_schedule_with_warmup(
        optimizer, params.optim.warmup_steps * processes, job.steps * processes
    )


def training_data(
    params: Params, job: Job, accelerator: Accelerator
) -> tuple[BatchStream, torch.Tensor, int, list[Path]]:
    """The batch stream, the prompt embedding table, the channel count and the input files."""
    if job.charts_stream:
        stream = BatchStream(
            accelerator,
            params.loader,
            params.optim.batch_size,
            params.optim.seed,
            dataset=BankCrops(params),
            shuffle=False,
        )
        return stream, zero_prompt(job.unet), 3, []
    reader = params.loader.reader
    if reader == "embeddings":
        dirs = [paths.embeddings(level) for level in job.levels]
        manifests = [d / "manifest.json" for d in dirs]
        for manifest in manifests:
            if not manifest.is_file():
                raise UserError(
                    f"{manifest.parent} is missing; run `linefuse embed --level "
                    f"{manifest.parent.name}` first"
                )
        dataset = map_dataset(reader, dirs, "train", job.domain)
        prompts = EmbeddedPairs(dirs[0], "train").prompt_embeddings()
        channels = json.loads(manifests[0].read_text())["channels"]
        stream = BatchStream(
            accelerator, params.loader, params.optim.batch_size, params.optim.seed, dataset=dataset
        )
        return stream, prompts, channels, manifests
    if params.model.vae is not None:
        raise UserError(
            f"loader.reader: {reader} reads pixels; latent mode (model.vae set) "
            f"needs loader.reader: embeddings"
        )
    dirs = [paths.shards(level) for level in job.levels]
    manifests = [d / SHARD_MANIFEST for d in dirs if d.name not in params.loader.shard_urls]
    if reader == "lmdb":
        stream = BatchStream(
            accelerator,
            params.loader,
            params.optim.batch_size,
            params.optim.seed,
            dataset=map_dataset(reader, dirs, "train", job.domain),
        )
    elif job.domain is not None:
        raise UserError(
            "loader.reader: webdataset streams every domain; per-domain adapters "
            "(train.adapters: per_domain) need loader.reader: embeddings or lmdb"
        )
    else:
        stream = BatchStream(
            accelerator,
            params.loader,
            params.optim.batch_size,
            params.optim.seed,
            urls=shard_stream_urls(dirs, "train", params.loader.shard_urls),
        )
    return stream, null_prompt(params, job.levels), 3, manifests


def null_prompt(params: Params, levels: list[str]) -> torch.Tensor:
    """The empty prompt's embedding as training saw it: the embed stage's row for "" (a text
    encoder's, or zeros), or zeros when training reads pixels; pretrain saves it with the base."""
    if params.loader.reader == "embeddings":
        return EmbeddedPairs(paths.embeddings(levels[0]), "train").null_prompt()
    return zero_prompt(params.model.unet)


def training_model(params: Params, job: Job, channels: int) -> torch.nn.Module:
    """pretrain's fresh UNet, or the base with a LoRA adapter (from the previous level's)."""
    unet = load_base(paths.BASE_DIR) if job.lora else build_unet(job.unet, channels)
    if params.optim.gradient_checkpointing:
        unet.enable_gradient_checkpointing()
    if not job.lora:
        return unet
    model = add_lora(unet, params.train.lora, job.unfreeze_blocks)
    if job.init_adapter is not None:
        set_peft_model_state_dict(model, adapter_start(model, paths.BASE_DIR, job.init_adapter))
    quantize_frozen(model, params.model.quantize_base)  # after LoRA: trainable parts stay exact
    return model


def train(params: Params, job: Job) -> dict:
    """Trains `job`, resuming from its last matching checkpoint; returns the final metrics."""
    started, optim = time.perf_counter(), params.optim
    accelerator, device, precision = make_accelerator(params, CheckpointStore(job.name, "", 0).root)
    log.info("%s: device %s (%s)", job.name, accelerator.device, device.reason)
    log.info("%s: precision %s (%s)", job.name, precision.value, precision.reason)
    set_seed(optim.seed)  # before the data and the model: they draw from the global generators
    stream, prompt_table, channels, input_files = training_data(params, job, accelerator)
    store = _checkpoint_store(params, job, input_files)
    model = training_model(params, job, channels)
    sizes = count_parameters(model)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(params, trainable, job.lr)
    schedule = make_schedule(params, job, optimizer, accelerator.num_processes)
    model, optimizer, schedule = accelerator.prepare(model, optimizer, schedule)
    if optim.compile:
        model = torch.compile(model)
    if accelerator.device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    start_step = _resume(job, accelerator, store)
    noise = noise_scheduler(params.model)
    ctc = job.charts_stream and params.base.text.ctc > 0  # the base's CTC term reads its labels
    reader = label_reader(params.base.text.reader, accelerator.device) if ctc else None
    prompt_table = prompt_table.to(accelerator.device)
    logs = store.logs_dir()  # grow beside the checkpoints; replace job.log_dir at the end
    unwrapped = accelerator.unwrap_model(model)
    validate = partial(_validation_loss, params, job, unwrapped, noise, prompt_table, device.value)
    logger = _step_logger(params, job, accelerator, logs, start_step, validate)
    digest = _RankDigest() if os.environ.get(DIGESTS_ENV) == "1" else None

    trainer = Trainer(params, accelerator, noise, model, optimizer, schedule, trainable, reader)
    batches = stream.batches(skip=start_step * optim.grad_accum)
    model.train()
    wait_s, last, loop_started = 0.0, {}, time.perf_counter()
    for step in range(start_step, job.steps):
        for micro in range(optim.grad_accum):
            fetching = time.perf_counter()
            batch = next(batches)
            waited = time.perf_counter() - fetching
            wait_s += waited
            pair = _micro_batch(params, job, accelerator, batch, prompt_table, step, micro)
            blurred, sharp, prompts, labels = pair
            if digest is not None:
                digest.add(blurred)
            try:
                loss, terms = training_step(
                    trainer, blurred, sharp, prompts, step, micro, labels=labels
                )
            except LossNotFinite as error:
                raise _diverged(job, store, error.loss, step) from None
            samples = blurred.shape[0] * accelerator.num_processes
            logger.add({k: float(v) for k, v in {"loss": loss, **terms}.items()}, samples, waited)
        done = step + 1
        if done % optim.log_every == 0 or done == job.steps:
            hits = {"cache_hit_rate": stream.cache_hit_rate()} if params.loader.cache_gb else None
            last = logger.flush(done, schedule.get_last_lr()[0], hits)
        if done % optim.checkpoint_every == 0 and done < job.steps:
            store.save(accelerator, done)  # the last step's state is the model, saved below
    loop_s = time.perf_counter() - loop_started

    accelerator.wait_for_everyone()
    if digest is not None:
        digest.write(logs, accelerator.process_index, unwrapped)
    metrics = _loop_metrics(params, job, accelerator, start_step, last, wait_s, loop_s)
    metrics |= _model_and_machine(accelerator, device, precision, sizes, started)
    accelerator.wait_for_everyone()  # every rank's digest file is in the logs
    if accelerator.is_main_process:
        val = _validation_losses(params, job, unwrapped, noise, prompt_table, accelerator.device)
        metrics["val_loss"], metrics["val_loss_unchanged"] = val
        _warn_if_barely_restoring(job, *val)
        logger.close(metrics)
        _save_outputs(params, job, unwrapped, metrics, logs)
        store.clear()
    accelerator.wait_for_everyone()
    accelerator.end_training()
    return metrics


def _checkpoint_store(params: Params, job: Job, input_files: list[Path]) -> CheckpointStore:
    """The job's checkpoints, fingerprinted by its settings and every file it trains from (the
    data, and for an adapter the base and the adapter it starts from): a checkpoint of other
    inputs is never resumed."""
    adapter_files = [job.init_adapter / ADAPTER_WEIGHTS] if job.init_adapter else []
    if job.lora:
        adapter_files.append(paths.BASE_DIR / "diffusion_pytorch_model.safetensors")
    return CheckpointStore(
        job.name,
        fingerprint(job.settings, input_files + adapter_files),
        params.optim.keep_checkpoints,
    )


def _resume(job: Job, accelerator: Accelerator, store: CheckpointStore) -> int:
    """Loads the latest matching checkpoint into the prepared objects (stale ones are dropped
    first); returns its step, or 0 when there is none."""
    if accelerator.is_main_process:
        store.discard_stale()
    accelerator.wait_for_everyone()
    if (latest := store.latest()) is None:
        return 0
    folder, start_step = latest
    accelerator.load_state(str(folder))
    log.info("%s: resuming from %s (step %d)", job.name, folder, start_step)
    return start_step


def _step_logger(
    params: Params,
    job: Job,
    accelerator: Accelerator,
    staging_logs: Path,
    start_step: int,
    validate: Callable[[], float | None],
) -> StepLogger:
    """The JSONL and DVCLive step log, with the validation loss every optim.val_every steps; a
    resumed run first drops the records past its step."""
    # logs grow beside the checkpoints and replace job.log_dir with the model at the end
    if start_step > 0:
        trim_step_log(staging_logs, start_step)
    return StepLogger(
        staging_logs,
        job.name,
        params.optim.log_every,
        params.optim.memory_warn_fraction,
        accelerator.device,
        enabled=accelerator.is_main_process,
        resume=start_step > 0,
        validate=validate,
        validate_every=params.optim.val_every,
    )


def _micro_batch(
    params: Params, job: Job, accelerator: Accelerator, batch, prompt_table, step: int, micro: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, TextTargets | None]:
    """(blurred, sharp, prompt embeddings, tick labels) of one loader batch: the loader's pairs
    (no labels), or the base's sharp bank crops degraded here on the training device, from a
    generator seeded by (seed, step, micro-batch, rank)."""
    work_done()  # a unit of the stage's work: a micro-batch
    if not job.charts_stream:
        blurred, sharp, prompt_index = batch
        return blurred, sharp, prompt_table[prompt_index], None
    generator = step_generator(params, step, micro, accelerator.process_index)
    blurred, sharp, labels = device_pairs(params, batch, accelerator.device, generator)
    prompt_index = torch.zeros(len(blurred), dtype=torch.long)
    return blurred, sharp, prompt_table[prompt_index], labels


def _diverged(job: Job, store: CheckpointStore, loss: float, step: int) -> TrainingDiverged:
    """The one-line error of a loss that stopped being finite at `step` (0-based)."""
    kept = store.latest()
    return TrainingDiverged(
        f"{job.name}: loss became {loss} at step {step + 1}; "
        f"{f'kept the checkpoint at step {kept[1]}' if kept else 'no checkpoint yet'}"
        f"; lower the learning rate or use optim.precision: fp32"
    )


class _RankDigest:
    """Test bookkeeping, kept only where DIGESTS_ENV is 1: what this process trained on (every
    batch's blurred input, counted and hashed) and the trainable weights it ended with, written
    to rank{i}.json in the logs so a test can hold runs (resumed, or on more processes) to the
    same samples and result."""

    def __init__(self) -> None:
        self.seen, self.samples = hashlib.sha256(), 0

    def add(self, blurred: torch.Tensor) -> None:
        self.seen.update(blurred.detach().float().cpu().numpy().tobytes())
        self.samples += blurred.shape[0]

    def write(self, logs: Path, rank: int, model: torch.nn.Module) -> None:
        weights = hashlib.sha256()
        for tensor in (p for p in model.parameters() if p.requires_grad):
            weights.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
        logs.mkdir(parents=True, exist_ok=True)
        write_json(
            logs / f"rank{rank}.json",
            {
                "samples_seen": self.samples,
                "sample_digest": self.seen.hexdigest()[:16],
                "trainable_weights_digest": weights.hexdigest()[:16],
            },
        )


def _loop_metrics(
    params: Params,
    job: Job,
    accelerator: Accelerator,
    start_step: int,
    last: dict,
    wait_s: float,
    loop_s: float,
) -> dict:
    """What the steps did: the step reached, the final loss and rate from the last log record,
    the throughput and the share of the loop spent waiting for data."""
    loop_s = max(loop_s, 1e-9)
    samples = (job.steps - start_step) * params.optim.grad_accum * params.optim.batch_size
    samples *= accelerator.num_processes
    return {
        "steps": job.steps,
        "resumed_from_step": start_step,
        "final_loss": last.get("loss"),
        "lr_final": last.get("lr"),
        "samples_per_s": samples / loop_s,
        "data_wait_fraction": wait_s / loop_s,
    }


def _model_and_machine(
    accelerator: Accelerator, device: Choice, precision: Choice, sizes: tuple, started: float
) -> dict:
    """The model's size (trainable, total), what ran it and why, the run's time and memory."""
    trainable, total = sizes
    return {
        "trainable_params": trainable,
        "total_params": total,
        "trainable_fraction": trainable / total,
        "processes": accelerator.num_processes,
        "device": str(accelerator.device),
        "device_reason": device.reason,
        "precision": precision.value,
        "precision_reason": precision.reason,
        "seconds": time.perf_counter() - started,
        **peak_memory_mb(accelerator.device),
    }


def _save_outputs(
    params: Params, job: Job, unwrapped: torch.nn.Module, metrics: dict, staging_logs: Path
) -> None:
    """The model (adapter or base), the metrics file and the logs: all three outputs or none,
    each renamed into place only once all are written."""
    with (
        atomic_dir(job.out_dir) as model_dir,
        atomic_file(job.metrics_path) as metrics_file,
        atomic_dir(job.log_dir) as log_dir,
    ):
        if job.lora:
            save_adapter(unwrapped, model_dir)
        elif job.charts_stream:
            save_base(unwrapped, model_dir, zero_prompt(job.unet))
        else:
            save_base(unwrapped, model_dir, null_prompt(params, job.levels))
        metrics_file.write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
        shutil.copytree(staging_logs, log_dir, dirs_exist_ok=True)


@torch.no_grad()
def _validation_losses(
    params: Params, job: Job, model, scheduler, prompt_table, device
) -> tuple[float | None, float | None]:
    """Mean loss over the val split with fixed noise, the same draw for every run and level, and
    that of a model returning its input unchanged on the same draw (x0 prediction only; else
    None): what training has to beat."""
    if params.loader.reader != "embeddings" or job.charts_stream:
        return None, None
    dirs = [paths.embeddings(level) for level in job.levels]
    if not all((d / "val.safetensors").is_file() for d in dirs):
        return None, None
    dataset = map_dataset("embeddings", dirs, "val", job.domain)
    x0_prediction = params.model.prediction_type == "sample"
    model.eval()
    losses, unchanged = [], []
    for start in range(0, len(dataset), params.optim.batch_size):
        items = [
            dataset[i] for i in range(start, min(start + params.optim.batch_size, len(dataset)))
        ]
        blurred = torch.stack([item[0] for item in items]).to(device)
        sharp = torch.stack([item[1] for item in items]).to(device)
        prompts = prompt_table[torch.tensor([item[2] for item in items])]
        draw = step_draw(params, blurred, sharp, start, 0, 0)
        loss, _ = draw_loss(params, scheduler, model, draw, prompts)
        losses.append(float(loss) * len(items))
        if x0_prediction:
            same = clean_signal(draw.condition, draw.condition, params.model)
            unchanged.append(float(weighted_loss(same, draw.x0, params.optim.loss)[0]) * len(items))
    model.train()
    if not len(dataset):
        return None, None
    return sum(losses) / len(dataset), sum(unchanged) / len(dataset) if unchanged else None


def _validation_loss(
    params: Params, job: Job, model, scheduler, prompt_table, device
) -> float | None:
    """The validation loss alone, for the step log's val curve."""
    return _validation_losses(params, job, model, scheduler, prompt_table, device)[0]


BARELY_RESTORING = 0.98  # of the unchanged input's val loss: this close, next to nothing was learnt


def _warn_if_barely_restoring(job: Job, loss: float | None, unchanged: float | None) -> None:
    """A model stuck at returning its input (too high a learning rate can park it there) trains
    without error and scores a gain of 0; say so."""
    if loss is None or unchanged is None or loss < BARELY_RESTORING * unchanged:
        return
    log.warning(
        "%s: val loss %.4f is %.0f%% of what returning the input unchanged scores (%.4f): the "
        "model barely restores, or has collapsed to the identity; lower %s or train longer",
        job.name,
        loss,
        100 * loss / unchanged,
        unchanged,
        job.lr_key,
    )


def pretrain_or_copy(params: Params) -> dict:
    """pretrain: trains a base from scratch (model.unet: tiny); a pretrained one (a shipped model
    such as chart-base, or a local folder) is only widened where needed and saved."""
    job = pretrain_job(params)
    if fresh_config(params.model.unet):
        return train(params, job)
    manifest = paths.embeddings(job.levels[0]) / "manifest.json"
    channels = json.loads(manifest.read_text())["channels"] if manifest.is_file() else 3
    unet = build_unet(params.model.unet, channels)
    # named as params.yaml names it, not by where this clone keeps it: the same bytes in every
    # clone, so DVC's hash of models/base is the same wherever the project lives
    unet.register_to_config(_name_or_path=params.model.unet)
    trainable, total = count_parameters(unet)
    metrics = {
        "steps": 0,
        "pretrained": params.model.unet,
        "total_params": total,
        "trainable_params": trainable,
    }
    with atomic_dir(job.out_dir) as tmp, atomic_dir(job.log_dir) as log_dir:
        save_base(unet, tmp, null_prompt(params, job.levels))
        write_json(log_dir / "copied.json", metrics)  # no steps to log: the base is pretrained
    write_json(job.metrics_path, metrics)
    return metrics
