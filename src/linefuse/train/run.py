"""What every training loop shares around its steps: `TrainingRun`.

pretrain (train/pretrain.py), each LoRA adapter (train/curriculum.py) and the base
(base/train.py) each read as their own loop: their data, their model, then the steps. Around
those steps they share one set-up and one finish, here: the accelerator on the device and
precision chosen for this machine, the optimizer and schedule, checkpoints to resume from, the
step log, and at the end the validation loss and the model, metrics and logs saved together.
The step itself is train/step.py's `training_step` (the profiler and the benchmarks run it too).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs, set_seed
from diffusers.optimization import get_cosine_schedule_with_warmup

from linefuse import paths
from linefuse.hardware import Choice, choose_device, choose_precision
from linefuse.stage import UserError, atomic_dir, atomic_file, work_done, write_json
from linefuse.train.checkpoints import CheckpointStore, fingerprint, trim_step_log
from linefuse.train.diffusion import clean_signal, noise_scheduler, weighted_loss
from linefuse.train.job import Job
from linefuse.train.model import count_parameters
from linefuse.train.step import LossNotFinite, Trainer, draw_loss, step_draw, training_step
from linefuse.train.telemetry import StepLogger, peak_memory_mb
from linefuse.train.trainset import BatchStream, map_dataset

if TYPE_CHECKING:
    from linefuse.params.full import Params

log = logging.getLogger("linefuse")
# for tests: set to 1, each process writes rank{i}.json, what it trained on (see _RankDigest)
DIGESTS_ENV = "LINEFUSE_TRAIN_DIGESTS"


class TrainingDiverged(UserError):
    """The loss stopped being finite: stop, keep the last good checkpoint."""


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


class TrainingRun:
    """One training job around its loop: `TrainingRun(params, job)` sets up the accelerator (and
    seeds the global generators the data and the model then draw from); `start(model, ...)`
    prepares the model, optimizer and schedule and resumes the last matching checkpoint; per
    micro-batch, `next_batch` and `micro_step`; per step, `end_step`; `finish(save)` validates
    and writes the model, the metrics and the logs, all or none."""

    def __init__(self, params: Params, job: Job, validates: bool = True):
        self.started, self.params, self.job = time.perf_counter(), params, job
        self.validates = validates  # a val split of the shards' embeddings to score at the end
        state_dir = CheckpointStore(job.name, "", 0).root
        self.accelerator, self.device, self.precision = make_accelerator(params, state_dir)
        log.info("%s: device %s (%s)", job.name, self.accelerator.device, self.device.reason)
        log.info("%s: precision %s (%s)", job.name, self.precision.value, self.precision.reason)
        set_seed(params.optim.seed)  # before the data and the model: they draw from the globals

    def start(
        self, model: torch.nn.Module, prompt_table: torch.Tensor, input_files: list[Path]
    ) -> Trainer:
        """Prepares `model` and resumes the checkpoint made for these settings and input files
        (`start_step`, 0 without one); returns the step's Trainer (its `reader` is unset)."""
        params, job, accelerator = self.params, self.job, self.accelerator
        self.store = CheckpointStore(
            job.name, fingerprint(job.settings, input_files), params.optim.keep_checkpoints
        )
        self.sizes = count_parameters(model)
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = make_optimizer(params, trainable, job.lr)
        schedule = make_schedule(params, job, optimizer, accelerator.num_processes)
        model, optimizer, self.schedule = accelerator.prepare(model, optimizer, schedule)
        if params.optim.compile:
            model = torch.compile(model)
        if accelerator.device.type == "cuda":
            torch.backends.cudnn.benchmark = True
        self.start_step = _resume(job, accelerator, self.store)
        noise = noise_scheduler(params.model)
        self.prompt_table = prompt_table.to(accelerator.device)
        self.logs = self.store.logs_dir()  # grow beside the checkpoints; job.log_dir at the end
        self.unwrapped = accelerator.unwrap_model(model)
        validate = self._validation_loss if self.validates else lambda: None
        self.logger = _step_logger(params, job, accelerator, self.logs, self.start_step, validate)
        self.digest = _RankDigest() if os.environ.get(DIGESTS_ENV) == "1" else None
        self.trainer = Trainer(
            params, accelerator, noise, model, optimizer, self.schedule, trainable
        )
        self.wait_s, self.last, self.loop_started = 0.0, {}, time.perf_counter()
        model.train()
        return self.trainer

    def next_batch(self, batches: Iterator) -> tuple[object, float]:
        """The loader's next batch (a unit of the stage's work) and the seconds waited for it."""
        fetching = time.perf_counter()
        batch = next(batches)
        waited = time.perf_counter() - fetching
        self.wait_s += waited
        work_done()
        return batch, waited

    def micro_step(
        self, blurred, sharp, prompts, step: int, micro: int, waited: float, labels=None
    ):
        """training_step on one micro-batch, logged; a loss that stops being finite ends the run
        with one line (TrainingDiverged)."""
        if self.digest is not None:
            self.digest.add(blurred)
        try:
            loss, terms = training_step(
                self.trainer, blurred, sharp, prompts, step, micro, labels=labels
            )
        except LossNotFinite as error:
            raise _diverged(self.job, self.store, error.loss, step) from None
        samples = blurred.shape[0] * self.accelerator.num_processes
        self.logger.add({k: float(v) for k, v in {"loss": loss, **terms}.items()}, samples, waited)

    def end_step(self, done: int, stream: BatchStream) -> None:
        """After `done` steps: the log every optim.log_every, a checkpoint every
        optim.checkpoint_every (the last step's state is the model, saved by `finish`)."""
        optim = self.params.optim
        if done % optim.log_every == 0 or done == self.job.steps:
            hits = (
                {"cache_hit_rate": stream.cache_hit_rate()} if self.params.loader.cache_gb else None
            )
            self.last = self.logger.flush(done, self.schedule.get_last_lr()[0], hits)
        if done % optim.checkpoint_every == 0 and done < self.job.steps:
            self.store.save(self.accelerator, done)

    def finish(self, save: Callable[[torch.nn.Module, Path], None]) -> dict:
        """The metrics; on the main process the validation losses, then `save(model, folder)`,
        the metrics file and the logs renamed into place together; the checkpoints cleared."""
        params, job, accelerator = self.params, self.job, self.accelerator
        loop_s = time.perf_counter() - self.loop_started
        accelerator.wait_for_everyone()
        if self.digest is not None:
            self.digest.write(self.logs, accelerator.process_index, self.unwrapped)
        metrics = _loop_metrics(
            params, job, accelerator, self.start_step, self.last, self.wait_s, loop_s
        )
        metrics |= _model_and_machine(
            accelerator, self.device, self.precision, self.sizes, self.started
        )
        accelerator.wait_for_everyone()  # every rank's digest file is in the logs
        if accelerator.is_main_process:
            val = self._validation_losses() if self.validates else (None, None)
            metrics["val_loss"], metrics["val_loss_unchanged"] = val
            _warn_if_barely_restoring(job, *val)
            self.logger.close(metrics)
            _save_outputs(job, self.unwrapped, save, metrics, self.logs)
            self.store.clear()
        accelerator.wait_for_everyone()
        accelerator.end_training()
        return metrics

    def _validation_loss(self) -> float | None:
        """The validation loss alone, for the step log's val curve."""
        return self._validation_losses()[0]

    def _validation_losses(self) -> tuple[float | None, float | None]:
        return validation_losses(
            self.params,
            self.job,
            self.unwrapped,
            self.trainer.noise,
            self.prompt_table,
            self.accelerator.device,
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
    job: Job,
    unwrapped: torch.nn.Module,
    save: Callable[[torch.nn.Module, Path], None],
    metrics: dict,
    staging_logs: Path,
) -> None:
    """The model (`save` writes it: an adapter or a base), the metrics file and the logs: all
    three outputs or none, each renamed into place only once all are written."""
    with (
        atomic_dir(job.out_dir) as model_dir,
        atomic_file(job.metrics_path) as metrics_file,
        atomic_dir(job.log_dir) as log_dir,
    ):
        save(unwrapped, model_dir)
        metrics_file.write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
        shutil.copytree(staging_logs, log_dir, dirs_exist_ok=True)


@torch.no_grad()
def validation_losses(
    params: Params, job: Job, model, scheduler, prompt_table, device
) -> tuple[float | None, float | None]:
    """Mean loss over the val split with fixed noise, the same draw for every run and level, and
    that of a model returning its input unchanged on the same draw (x0 prediction only; else
    None): what training has to beat."""
    if params.loader.reader != "embeddings":
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
