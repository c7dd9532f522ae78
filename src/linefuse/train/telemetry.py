"""Training logs: every N steps to a JSONL file and to DVCLive, with memory watched.

DVCLive writes `<log dir>/dvclive/` (metrics.json, plots/metrics/*.tsv) that `dvc exp show` and
`dvc plots show` read; it never edits dvc.yaml (dvcyaml=None) and leaves experiments to DVC.
"""

from __future__ import annotations

import json
import logging
import resource
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import torch
from dvclive import Live

log = logging.getLogger("linefuse")


def peak_memory_mb(device: torch.device) -> dict[str, float]:
    """Peak process RSS, and CUDA's max allocated on a GPU."""
    figures = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if device.type == "cuda":
        figures["cuda_max_allocated_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return figures


class StepLogger:
    """Accumulates per-step figures and writes their means every `every` steps (main process)."""

    def __init__(
        self,
        log_dir: Path,
        stage_name: str,
        every: int,
        memory_warn_fraction: float,
        device: torch.device,
        enabled: bool,
        resume: bool,
        validate: Callable[[], float | None] | None = None,
        validate_every: int = 0,
    ):
        """`validate()`, every `validate_every` steps that are log steps, adds the validation
        loss (None: there is no val split) to the record as val_loss."""
        self.every, self.device, self.enabled, self.stage_name = every, device, enabled, stage_name
        self.validate, self.validate_every = validate, validate_every
        self.warn_fraction, self.warned = memory_warn_fraction, False
        self.window: dict[str, list[float]] = {}
        self.window_started = time.perf_counter()
        self.samples = 0
        self.wait = 0.0
        if enabled:
            log_dir.mkdir(parents=True, exist_ok=True)
            self.jsonl = open(log_dir / "steps.jsonl", "a" if resume else "w")
            self.live = Live(
                dir=str(log_dir / "dvclive"), resume=resume, save_dvc_exp=False, dvcyaml=None
            )

    def add(self, terms: dict[str, float], samples: int, data_wait_s: float) -> None:
        for name, value in terms.items():
            self.window.setdefault(name, []).append(value)
        self.samples += samples
        self.wait += data_wait_s

    def flush(self, step: int, lr: float, extra: dict | None = None) -> dict:
        """Writes one record for the steps since the last flush and returns it."""
        elapsed = max(time.perf_counter() - self.window_started, 1e-9)
        record = {
            "step": step,
            "lr": lr,
            **{name: sum(vals) / len(vals) for name, vals in self.window.items()},
            "samples_per_s": self.samples / elapsed,
            "data_wait_fraction": min(1.0, self.wait / elapsed),
            **peak_memory_mb(self.device),
            **(extra or {}),
        }
        due = self.validate_every and step % self.validate_every == 0
        if self.enabled and self.validate is not None and due:
            if (val_loss := self.validate()) is not None:
                record["val_loss"] = val_loss
        self._watch_memory()
        if self.enabled:
            self.jsonl.write(json.dumps(record) + "\n")
            self.jsonl.flush()
            for name, value in record.items():
                if name != "step" and isinstance(value, (int, float)):
                    self.live.log_metric(f"train/{name}", value, plot=True)
            self.live.step = step
            self.live.next_step()
            log.info(
                "%s: step %d loss %.5f lr %.2e %.1f samples/s data-wait %.1f%%",
                self.stage_name,
                step,
                record.get("loss", float("nan")),
                lr,
                record["samples_per_s"],
                100 * record["data_wait_fraction"],
            )
        self.window, self.samples, self.wait = {}, 0, 0.0
        self.window_started = time.perf_counter()
        return record

    def _watch_memory(self) -> None:
        used = psutil.Process().memory_info().rss / psutil.virtual_memory().total
        if self.device.type == "cuda":
            free, total = torch.cuda.mem_get_info(self.device)
            used = max(used, 1 - free / total)
        if used > self.warn_fraction and not self.warned:
            log.warning(
                "%s: memory use %.0f%% passed optim.memory_warn_fraction=%.2f; lower "
                "optim.batch_size or enable optim.gradient_checkpointing",
                self.stage_name,
                100 * used,
                self.warn_fraction,
            )
            self.warned = True

    def close(self, summary: dict) -> None:
        if self.enabled:
            for name, value in summary.items():
                if isinstance(value, (int, float)):
                    self.live.summary[name] = value
            self.live.make_summary()
            self.live.end()
            self.jsonl.close()
