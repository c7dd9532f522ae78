"""Resumable training state, kept where DVC does not delete it before a rerun.

DVC removes a stage's declared outputs before running it again, so the full state (accelerate's
`save_state`: weights, optimizer, scheduler, RNG) lives in `.linefuse/state/<stage>/` instead.
Each checkpoint carries the fingerprint of what the stage was asked to do; a rerun resumes only
from a checkpoint with the same fingerprint, so a params change never resumes stale work.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from linefuse import paths

PROGRESS = "progress.json"


def fingerprint(settings: dict, files: list[Path]) -> str:
    """sha256 over the stage's settings and the files that identify its inputs."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for path in files:
        digest.update(str(path).encode())
        digest.update(hashlib.sha256(Path(path).read_bytes()).digest())
    return digest.hexdigest()


class CheckpointStore:
    def __init__(self, stage_name: str, fingerprint: str, keep: int):
        self.root = paths.STATE_ROOT / stage_name.replace("@", "-")
        self.fingerprint, self.keep = fingerprint, keep

    def _matching(self) -> list[tuple[int, Path]]:
        found = []
        for folder in self.root.glob("step-*"):
            progress = folder / PROGRESS
            if progress.is_file():
                state = json.loads(progress.read_text())
                if state.get("fingerprint") == self.fingerprint:
                    found.append((state["step"], folder))
        return sorted(found)

    def latest(self) -> tuple[Path, int] | None:
        """The newest complete checkpoint made for this fingerprint, and its step."""
        found = self._matching()
        return (found[-1][1], found[-1][0]) if found else None

    def logs_dir(self) -> Path:
        """Where a run's logs grow until it ends; kept for resuming with its checkpoints."""
        return self.root / "logs"

    def discard_stale(self) -> None:
        """Removes half-written checkpoints and those made for other settings or inputs (and
        the logs, unless a checkpoint to resume from remains)."""
        keep = {folder for _, folder in self._matching()}
        if keep:
            keep.add(self.logs_dir())
        for folder in self.root.glob("*"):
            if folder not in keep:
                shutil.rmtree(folder, ignore_errors=True)

    def save(self, accelerator, step: int) -> Path:
        """accelerate's save_state into a temporary folder, renamed when complete."""
        final = self.root / f"step-{step:08d}"
        tmp = self.root / f".tmp-step-{step:08d}"
        if accelerator.is_main_process:
            shutil.rmtree(tmp, ignore_errors=True)
        accelerator.wait_for_everyone()
        accelerator.save_state(str(tmp))
        accelerator.wait_for_everyone()  # every rank has written its RNG state before the rename
        if accelerator.is_main_process:
            (tmp / PROGRESS).write_text(json.dumps({"step": step, "fingerprint": self.fingerprint}))
            shutil.rmtree(final, ignore_errors=True)
            tmp.rename(final)
            self._prune()
        accelerator.wait_for_everyone()
        return final

    def _prune(self) -> None:
        found = self._matching()
        for _, old in found[: max(0, len(found) - self.keep)]:
            shutil.rmtree(old, ignore_errors=True)

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def trim_step_log(log_dir: Path, step: int) -> None:
    """Drops the records a killed run logged after the checkpoint it resumes from."""
    steps_file = log_dir / "steps.jsonl"
    if steps_file.is_file():
        kept = [
            line for line in steps_file.read_text().splitlines() if json.loads(line)["step"] <= step
        ]
        steps_file.write_text("".join(line + "\n" for line in kept))
