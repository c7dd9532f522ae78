"""pretrain and train@LEVEL: one readable training loop over accelerate.

pretrain trains the tiny base UNet fully on every level (and is the full fine-tune baseline);
train@LEVEL trains a LoRA adapter on that base, starting from the previous curriculum level's
adapter. The same command runs on a CPU or under `accelerate launch --num_processes N`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs, set_seed
from diffusers.optimization import get_cosine_schedule_with_warmup
from peft import set_peft_model_state_dict
from safetensors.torch import load_file

from linefuse import paths
from linefuse.data.bank import BankCrops
from linefuse.data.layout import SHARD_MANIFEST
from linefuse.data.readers import EmbeddedPairs
from linefuse.hardware import Choice, choose_device, choose_precision
from linefuse.params import Params
from linefuse.paths import fresh_config, unet_folder
from linefuse.stage import UserError, atomic_dir, atomic_file, write_json
from linefuse.train.base_batches import (
    TextTargets,
    device_pairs,
    label_pixel_weights,
    step_generator,
)
from linefuse.train.checkpoints import CheckpointStore, fingerprint, trim_step_log
from linefuse.train.diffusion import (
    clean_signal,
    noise_scheduler,
    noisy_and_target,
    restored_from,
    start_noise,
    weighted_loss,
)
from linefuse.train.label_reader import LabelReader, ctc_loss
from linefuse.train.model import (
    add_lora,
    build_unet,
    count_parameters,
    load_base,
    predict,
    quantize_frozen,
    save_adapter,
    save_base,
    unet_config,
)
from linefuse.train.telemetry import StepLogger, peak_memory_mb
from linefuse.train.trainset import BatchStream, map_dataset, shard_stream_urls

log = logging.getLogger("linefuse")
ADAPTER_WEIGHTS = "adapter_model.safetensors"


class TrainingDiverged(UserError):
    """The loss stopped being finite: stop, keep the last good checkpoint."""


class NonFiniteLoss(ArithmeticError):
    """A step's loss was inf or NaN; raised before its backward pass."""


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


def zero_prompt(unet: str) -> torch.Tensor:
    """The null prompt of pixel-space training: one token of zeros."""
    return torch.zeros(1, 1, unet_config(unet)["cross_attention_dim"])


def training_model(params: Params, job: Job, channels: int) -> torch.nn.Module:
    """pretrain's fresh UNet, or the base with a LoRA adapter (from the previous level's)."""
    unet = load_base(paths.BASE_DIR) if job.lora else build_unet(job.unet, channels)
    if params.optim.gradient_checkpointing:
        unet.enable_gradient_checkpointing()
    if not job.lora:
        return unet
    model = add_lora(unet, params.train.lora, job.unfreeze_blocks)
    if job.init_adapter is not None:
        set_peft_model_state_dict(model, load_file(job.init_adapter / ADAPTER_WEIGHTS))
    quantize_frozen(model, params.model.quantize_base)  # after LoRA: trainable parts stay exact
    return model


def _digest(tensors) -> str:
    digest = hashlib.sha256()
    for tensor in tensors:
        digest.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


@dataclass
class _Session:
    """One training run set up to take its first step: what the step loop and the finish share."""

    accelerator: Accelerator
    device: Choice
    precision: Choice
    store: CheckpointStore  # this run's checkpoints, keyed by its settings and input files
    stream: BatchStream
    prompt_table: torch.Tensor  # on the accelerator's device
    trainer: Trainer
    start_step: int  # 0, or the step of the checkpoint resumed from
    logger: StepLogger
    staging_logs: Path  # where the logs grow until they replace job.log_dir
    trainable_params: int
    total_params: int


@dataclass
class _Tally:
    """What the step loop saw: the samples (counted and hashed), the wait for data, the last
    log record and the loop's wall time."""

    seen: Any = field(default_factory=hashlib.sha256)  # over every batch's blurred input
    samples: int = 0
    wait_s: float = 0.0
    last: dict = field(default_factory=dict)
    seconds: float = 0.0


def run(params: Params, job: Job) -> dict:
    """Trains `job`, resuming from its last matching checkpoint; returns the final metrics."""
    started = time.perf_counter()
    session = _open_session(params, job)
    tally = _train_steps(params, job, session)
    accelerator = session.accelerator
    accelerator.wait_for_everyone()
    unwrapped = accelerator.unwrap_model(session.trainer.model)
    _write_rank_digest(session, tally, unwrapped)
    metrics = _run_metrics(params, job, session, tally, started)
    accelerator.wait_for_everyone()  # every rank's digest file is in staging_logs
    if accelerator.is_main_process:
        metrics["val_loss"], metrics["val_loss_unchanged"] = _validation_losses(
            params, job, unwrapped, session.trainer.noise, session.prompt_table, accelerator.device
        )
        _warn_if_barely_restoring(job, metrics["val_loss"], metrics["val_loss_unchanged"])
        session.logger.close(metrics)
        _save_outputs(params, job, unwrapped, metrics, session.staging_logs)
        session.store.clear()
    accelerator.wait_for_everyone()
    accelerator.end_training()
    return metrics


def _open_session(params: Params, job: Job) -> _Session:
    """The accelerator, the data, the model with its optimizer and schedule (prepared, and
    resumed from the last matching checkpoint) and the step logger. The order is part of the
    result: the seed is set before the data and the model draw from the global generators."""
    store_probe = CheckpointStore(job.name, "", params.optim.keep_checkpoints)
    accelerator, device, precision = make_accelerator(params, store_probe.root)
    log.info(
        "%s: device %s (%s); precision %s (%s)",
        job.name,
        accelerator.device,
        device.reason,
        precision.value,
        precision.reason,
    )
    set_seed(params.optim.seed)
    stream, prompt_table, channels, input_files = training_data(params, job, accelerator)
    store = _checkpoint_store(params, job, input_files)
    model = training_model(params, job, channels)
    trainable_params, total_params = count_parameters(model)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(params, trainable, job.lr)
    schedule = make_schedule(params, job, optimizer, accelerator.num_processes)
    model, optimizer, schedule = accelerator.prepare(model, optimizer, schedule)
    if params.optim.compile:
        model = torch.compile(model)
    if accelerator.device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    start_step = _resume(job, accelerator, store)
    noise = noise_scheduler(params.model)
    trainer = Trainer(params, accelerator, noise, model, optimizer, schedule, trainable)
    if job.charts_stream and params.base.text.ctc > 0:
        trainer.reader = label_reader(params.base.text.reader, accelerator.device)
    staging_logs = store.logs_dir()
    return _Session(
        accelerator=accelerator,
        device=device,
        precision=precision,
        store=store,
        stream=stream,
        prompt_table=prompt_table.to(accelerator.device),
        trainer=trainer,
        start_step=start_step,
        logger=_step_logger(params, job, accelerator, staging_logs, start_step),
        staging_logs=staging_logs,
        trainable_params=trainable_params,
        total_params=total_params,
    )


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
    params: Params, job: Job, accelerator: Accelerator, staging_logs: Path, start_step: int
) -> StepLogger:
    """The JSONL and DVCLive step log; a resumed run first drops the records past its step."""
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
    )


def _train_steps(params: Params, job: Job, session: _Session) -> _Tally:
    """The steps from the resumed one to job.steps, optim.grad_accum micro-batches each; a log
    record every optim.log_every steps and at the end, a checkpoint every optim.checkpoint_every
    (the last step's state is the model, saved by the caller)."""
    tally = _Tally()
    batches = session.stream.batches(skip=session.start_step * params.optim.grad_accum)
    session.trainer.model.train()
    loop_started = time.perf_counter()
    for step in range(session.start_step, job.steps):
        for micro in range(params.optim.grad_accum):
            _micro_step(job, session, tally, batches, step, micro)
        done = step + 1
        if done % params.optim.log_every == 0 or done == job.steps:
            lr = session.trainer.schedule.get_last_lr()[0]
            cached = params.loader.cache_gb
            extra = {"cache_hit_rate": session.stream.cache_hit_rate()} if cached else None
            tally.last = session.logger.flush(done, lr, extra)
        if done % params.optim.checkpoint_every == 0 and done < job.steps:
            session.store.save(session.accelerator, done)
    tally.seconds = time.perf_counter() - loop_started
    return tally


def _micro_step(job: Job, session: _Session, tally: _Tally, batches, step: int, micro: int) -> None:
    """One micro-batch fetched (the wait timed, the input hashed), trained on and logged; a
    loss that is not finite stops the run with TrainingDiverged."""
    waited = time.perf_counter()
    batch = next(batches)
    waited = time.perf_counter() - waited
    tally.wait_s += waited
    labels = None
    if job.charts_stream:  # sharp bank crops, degraded here on the training device
        rank = session.accelerator.process_index
        generator = step_generator(session.trainer.params, step, micro, rank)
        blurred, sharp, labels = device_pairs(
            session.trainer.params, batch, session.accelerator.device, generator
        )
        prompt_index = torch.zeros(len(blurred), dtype=torch.long)
    else:
        blurred, sharp, prompt_index = batch
    tally.seen.update(blurred.detach().float().cpu().numpy().tobytes())
    tally.samples += blurred.shape[0]
    prompts = session.prompt_table[prompt_index]
    try:
        loss, terms = training_step(
            session.trainer, blurred, sharp, prompts, step, micro, labels=labels
        )
    except NonFiniteLoss as error:
        kept = session.store.latest()
        raise TrainingDiverged(
            f"{job.name}: loss became {error} at step {step + 1}; "
            f"{f'kept the checkpoint at step {kept[1]}' if kept else 'no checkpoint yet'}"
            f"; lower the learning rate or use optim.precision: fp32"
        ) from None
    samples = blurred.shape[0] * session.accelerator.num_processes
    session.logger.add({"loss": float(loss.detach()), **terms}, samples, waited)


def _write_rank_digest(session: _Session, tally: _Tally, unwrapped: torch.nn.Module) -> None:
    """rank{i}.json in the logs: what this process trained on and the weights it ended with, so
    a test can hold runs (resumed, or on more processes) to the same samples and result."""
    weights_digest = _digest(p for p in unwrapped.parameters() if p.requires_grad)
    session.staging_logs.mkdir(parents=True, exist_ok=True)
    write_json(
        session.staging_logs / f"rank{session.accelerator.process_index}.json",
        {
            "samples_seen": tally.samples,
            "sample_digest": tally.seen.hexdigest()[:16],
            "trainable_weights_digest": weights_digest,
        },
    )


def _run_metrics(
    params: Params, job: Job, session: _Session, tally: _Tally, started: float
) -> dict:
    """The run's metrics file: loss, throughput, data wait, model size, device and memory."""
    accelerator, processes = session.accelerator, session.accelerator.num_processes
    loop_seconds = max(tally.seconds, 1e-9)
    steps_run = job.steps - session.start_step
    samples = steps_run * params.optim.grad_accum * params.optim.batch_size * processes
    return {
        "steps": job.steps,
        "resumed_from_step": session.start_step,
        "final_loss": tally.last.get("loss"),
        "lr_final": tally.last.get("lr"),
        "samples_per_s": samples / loop_seconds,
        "data_wait_fraction": tally.wait_s / loop_seconds,
        "trainable_params": session.trainable_params,
        "total_params": session.total_params,
        "trainable_fraction": session.trainable_params / session.total_params,
        "processes": processes,
        "device": str(accelerator.device),
        "device_reason": session.device.reason,
        "precision": session.precision.value,
        "precision_reason": session.precision.reason,
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


def make_schedule(params: Params, job: Job, optimizer, processes: int):
    """Cosine with warmup; accelerate steps a prepared schedule once per process, so its
    lengths are scaled by the process count."""
    return get_cosine_schedule_with_warmup(
        optimizer, params.optim.warmup_steps * processes, job.steps * processes
    )


def _untimed(name: str):
    return contextlib.nullcontext()


@dataclass
class Trainer:
    """What every step of a run shares: the prepared model, optimizer and schedule, the noise
    scheduler and the parameters that train. Built once by the loop, profile and the benchmark."""

    params: Params
    accelerator: Accelerator
    noise: object  # the diffusers noise scheduler
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    schedule: object  # the learning-rate schedule
    trainable: list[torch.nn.Parameter]
    reader: LabelReader | None = None  # frozen; its CTC loss reads the restored tick labels


def training_step(
    trainer: Trainer,
    blurred,
    sharp,
    prompt_embeds,
    step: int,
    micro: int,
    phase=_untimed,
    labels: TextTargets | None = None,
) -> tuple[torch.Tensor, dict]:
    """One micro-batch: loss, backward, and (on the last micro-batch) the optimizer step.
    `phase(name)` wraps forward, backward and optimizer step (the profiler times them); raises
    NonFiniteLoss before the backward pass of a loss that is not finite. `labels`, where the
    batch has them (the base's), add the text terms of params `base.text`."""
    params, accelerator, optimizer = trainer.params, trainer.accelerator, trainer.optimizer
    with accelerator.accumulate(trainer.model):
        with phase("forward"):
            rank = accelerator.process_index
            draw = step_draw(params, blurred, sharp, step, micro, rank)
            loss, terms = draw_loss(
                params, trainer.noise, trainer.model, draw, prompt_embeds, labels, trainer.reader
            )
        if not torch.isfinite(loss):
            raise NonFiniteLoss(float(loss.detach()))
        with phase("backward"):
            accelerator.backward(loss)
        with phase("optimizer step"):
            if accelerator.sync_gradients and params.optim.clip_grad_norm:
                accelerator.clip_grad_norm_(trainer.trainable, params.optim.clip_grad_norm)
            optimizer.step()
            trainer.schedule.step()
            optimizer.zero_grad(set_to_none=True)
    return loss, terms


@dataclass
class StepDraw:
    """What one micro-batch trains on: the condition, the clean signal, noise and timesteps."""

    condition: torch.Tensor
    x0: torch.Tensor
    noise: torch.Tensor
    timesteps: torch.Tensor


def step_draw(params: Params, blurred, sharp, step: int, micro: int, rank: int) -> StepDraw:
    """Noise, timesteps and identity pairs come from (seed, step, micro-batch, rank): a resumed
    run draws the same.

    An `optim.start_fraction` of the samples is drawn where the sampler starts (the last
    timestep, x_t at the prior's mean): what a 1-step restoration sees, and nothing else. The
    rest draw t from `optim.timestep_range` (diffusers' "range" timestep bias): a few-step
    sampler from the prior's mean visits only the noisiest. An `optim.identity_fraction` of the
    samples gets the sharp image as its own condition, so the model learns to leave a sharp
    input alone.
    """
    generator = torch.Generator().manual_seed(
        ((params.optim.seed * 1_000_003 + step) * 64 + micro) * 1024 + rank
    )
    batch = blurred.shape[0]
    identity = torch.rand(batch, generator=generator) < params.optim.identity_fraction
    condition = torch.where(identity.to(blurred.device)[:, None, None, None], sharp, blurred)
    x0 = clean_signal(condition, sharp, params.model)
    noise = torch.randn(x0.shape, generator=generator).to(x0.device, x0.dtype)
    low, high = params.optim.timestep_range
    timesteps = torch.randint(low, high, (batch,), generator=generator).to(x0.device)
    start = (torch.rand(batch, generator=generator) < params.optim.start_fraction).to(x0.device)
    if start.any():
        timesteps = timesteps.masked_fill(start, params.model.train_timesteps - 1)
        at_start = start_noise(x0, noise, params.model)
        noise = torch.where(start[:, None, None, None], at_start, noise)
    return StepDraw(condition, x0, noise, timesteps)


def draw_loss(
    params: Params,
    scheduler,
    model,
    draw: StepDraw,
    prompt_embeds,
    labels: TextTargets | None = None,
    reader: LabelReader | None = None,
) -> tuple[torch.Tensor, dict]:
    """The model's weighted loss on one draw; with `labels`, the tick labels' pixels weigh
    base.text.label_weight more and, with a `reader`, its CTC loss on the restored labels adds
    base.text.ctc times itself."""
    noisy, target = noisy_and_target(scheduler, draw.x0, draw.noise, draw.timesteps)
    prediction = predict(model, noisy, draw.condition, draw.timesteps, prompt_embeds)
    text = params.base.text
    weights = None
    if labels is not None and text.label_weight > 0:
        weights = label_pixel_weights(labels.mask, text.label_weight)
    loss, terms = weighted_loss(prediction, target, params.optim.loss, weights)
    if labels is not None and reader is not None and len(labels.boxes):
        restored = restored_from(prediction.float(), draw.condition.float(), params.model)
        ctc = ctc_loss(reader, restored, labels.boxes, labels.targets, labels.lengths)
        loss = loss + text.ctc * ctc
        terms["ctc"] = float(ctc.detach())
    return loss, terms


def label_reader(spec: str, device) -> LabelReader:
    """The frozen label reader base.text.reader names (shipped, or a local folder)."""
    folder = paths.unet_folder(spec)
    if not (folder / "config.json").is_file():
        raise UserError(
            f"base.text.reader: {spec} is neither a shipped label reader nor a folder with "
            f"config.json; run `linefuse label-reader` or set base.text.ctc: 0"
        )
    reader = LabelReader.from_pretrained(str(folder)).to(device).eval()
    reader.requires_grad_(False)
    return reader


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
        return run(params, job)
    manifest = paths.embeddings(job.levels[0]) / "manifest.json"
    channels = json.loads(manifest.read_text())["channels"] if manifest.is_file() else 3
    unet = build_unet(params.model.unet, channels)
    trainable, total = count_parameters(unet)
    metrics = {
        "steps": 0,
        "pretrained": params.model.unet,
        "pretrained_from": str(unet_folder(params.model.unet)),
        "total_params": total,
        "trainable_params": trainable,
    }
    with atomic_dir(job.out_dir) as tmp, atomic_dir(job.log_dir) as log_dir:
        save_base(unet, tmp, null_prompt(params, job.levels))
        write_json(log_dir / "copied.json", metrics)  # no steps to log: the base is pretrained
    write_json(job.metrics_path, metrics)
    return metrics
