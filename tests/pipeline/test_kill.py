"""Kill anywhere: SIGKILL a stage at a seeded random moment, rerun, and get the same bytes.

Each trial copies a project built from scratch (the engines' session build), deletes one
stage's outputs, starts the engine on that stage in its own process group and SIGKILLs the
group after a seeded delay. Then every output of the stage must be absent or complete (never
half-written at its final path), and a plain rerun must rebuild it byte-identical to the
uninterrupted build -- training resumes from its checkpoint -- with the same dvc.lock hashes.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import LEVELS, copy_project, file_digests
from test_engines import ENV, SNAKEMAKE, dvc_declarations, run

SEED = 0
TRIALS = 10
STAGES = [
    "generate",
    "index",
    *(f"{name}@{level}" for name in ("shard", "embed", "train") for level in LEVELS),
    "pretrain",
    "train_domains",
]


TIMINGS = {
    "samples_per_s",
    "data_wait_fraction",
    "peak_rss_mb",
    "seconds",
    "encode_seconds",
    "resumed_from_step",
    "cuda_max_allocated_mb",
}


def _without_timings(record):
    if isinstance(record, dict):
        return {k: _without_timings(v) for k, v in record.items() if k not in TIMINGS}
    return record


def _digest(project: Path, path: str) -> dict | None:
    """What must not change between runs: the bytes of data and models; for training logs and
    metrics, which also hold timings, every record less its timings."""
    target = project / path
    if not target.exists():
        return None
    files = (
        [target]
        if target.is_file()
        else sorted(
            p for p in target.rglob("*") if p.is_file() and p.name != ".snakemake_timestamp"
        )
    )
    found = {}
    for file in files:
        name = file.relative_to(target).as_posix() if target.is_dir() else ""
        if path.startswith("logs/") and file.name != "steps.jsonl":
            found[name] = "timings"  # DVCLive's files: present, content holds timings
        elif file.name == "steps.jsonl":
            found[name] = [
                _without_timings(json.loads(line)) for line in file.read_text().splitlines()
            ]
        elif file.suffix == ".json" and path.startswith(("metrics/", "logs/")):
            found[name] = _without_timings(json.loads(file.read_text()))
        else:
            found[name] = file_digests(file.parent)[file.name]
    return found


def _lock_outs(project: Path, stage: str) -> list:
    """dvc.lock's hashes of the stage's outputs, less the logs and metrics that hold timings."""
    lock = yaml.safe_load((project / "dvc.lock").read_text())["stages"][stage]
    return sorted(
        (out["path"], out.get("md5"), out.get("nfiles"))
        for out in lock["outs"]
        if not out["path"].startswith(("logs/", "metrics/train", "metrics/embed"))
    )


def _broken_dvc_files(project: Path) -> list[Path]:
    """The files DVC rewrites in place that a kill left empty or cut short, so that DVC refuses
    to read them: dvc.lock, and the read/write lock of outputs in use, .dvc/tmp/rwlock."""
    lock, rwlock = project / "dvc.lock", project / ".dvc" / "tmp" / "rwlock"
    done = subprocess.run(["dvc", "status"], cwd=project, env=ENV, capture_output=True, text=True)
    said = done.stdout + done.stderr
    broken = []
    if "dvc.lock' validation failed" in said or lock.stat().st_size == 0:
        broken.append(lock)
    if "Unable to read RWLock-file" in said:
        broken.append(rwlock)
    return broken


def _killed(command: list[str], project: Path, delay: float) -> bool:
    """Runs command in its own process group; SIGKILLs the group after delay. True if it was
    still running then (a real interruption), False if it had already finished."""
    process = subprocess.Popen(
        command,
        cwd=project,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return True


STARTUP_S = {"dvc": 1.0, "snakemake": 3.0}  # the engine's own start before the stage runs


def _trials(built: Path, engine: str) -> list[tuple[str, float]]:
    """(stage, seconds after the start to kill it), seeded: a uniform fraction of the engine's
    start-up plus the stage's own time in the uninterrupted build (from its log)."""
    log = (built.parent / f"{engine}.log").read_text()
    seconds = {
        name: float(took)
        for name, took in re.findall(r"linefuse (\S+): wrote .* in ([\d.]+)s", log)
    }
    rng = random.Random(f"{SEED}-{engine}")
    return [
        (stage, rng.uniform(0.2, 0.95) * (STARTUP_S[engine] + seconds[stage]))
        for stage in rng.sample(STAGES, TRIALS)
    ]


def _remove(project: Path, outs: list[str]) -> None:
    for out in outs:
        target = project / out
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)


def _outs(declarations: dict, stage: str) -> list[str]:
    return declarations[stage]["outs"]


@pytest.mark.engines
@pytest.mark.parametrize("half", [0, 1])
@pytest.mark.parametrize("engine", ["dvc", "snakemake"])
def test_killed_stages_rerun_to_the_same_bytes(engine_builds, tmp_path, engine, half):
    """Each engine's seeded trials, in two halves (alternate trials), so that two workers share
    them."""
    built = engine_builds[0] if engine == "dvc" else engine_builds[1]
    declarations = {
        address.split(":")[-1]: stage
        for address, stage in dvc_declarations(engine_builds[0]).items()
    }
    interrupted = emptied_locks = 0
    trials = list(enumerate(_trials(built, engine)))[half::2]
    for number, (stage, delay) in trials:
        project = copy_project(built, tmp_path / f"trial{number}")
        outs = _outs(declarations, stage)
        expected = {out: _digest(built, out) for out in outs}
        if engine == "dvc":
            command = ["dvc", "repro", "--no-run-cache", "--single-item", stage]
        else:
            command = [*SNAKEMAKE, outs[0]]
        _remove(project, outs)
        was_running = _killed(command, project, delay)
        interrupted += was_running
        print(
            f"{engine} trial {number}: {stage} killed at {delay:.2f}s "
            f"({'mid-stage' if was_running else 'after it finished'})"
        )
        for out in outs:  # absent, or complete and right: never half-written
            assert _digest(project, out) in (None, expected[out]), (stage, delay, out)

        if engine == "dvc":
            # DVC rewrites dvc.lock and .dvc/tmp/rwlock in place: a kill inside either write
            # leaves it empty or cut short, and every dvc command then fails to parse it. The
            # recovery (README): `git checkout dvc.lock` (or remove it), remove the rwlock, rerun.
            for broken in _broken_dvc_files(project):
                emptied_locks += 1
                broken.unlink()
            run(project, *command)
        else:  # Snakemake's recovery after a kill: drop its lock, redo what it marked incomplete
            run(project, *SNAKEMAKE, "--unlock", outs[0])
            run(project, *command[:-1], "--rerun-incomplete", outs[0])
        assert {out: _digest(project, out) for out in outs} == expected, (stage, delay)
        if engine == "dvc":
            assert _lock_outs(project, stage) == _lock_outs(built, stage), stage
        shutil.rmtree(project)
    print(
        f"{engine}: {interrupted} of {len(trials)} kills landed mid-stage; "
        f"{emptied_locks} left dvc.lock or .dvc/tmp/rwlock empty or cut short"
    )
    # the seeded delays must actually interrupt stages, or the test proves little
    assert interrupted >= len(trials) // 2, interrupted


@pytest.mark.engines
def test_a_second_clean_run_gives_the_same_lock_hashes(engine_builds, tmp_path):
    """The data half and the embeddings rebuilt from nothing: dvc.lock hashes unchanged."""
    built = engine_builds[0]
    project = copy_project(built, tmp_path / "again")
    shutil.rmtree(project / "data")
    shutil.rmtree(project / ".dvc" / "cache")
    stages = [
        "generate",
        "index",
        *(f"{n}@{level}" for n in ("shard", "embed") for level in LEVELS),
    ]
    log = run(project, "dvc", "repro", "--no-run-cache", *(f"embed@{level}" for level in LEVELS))
    assert all(f"Running stage '{stage}'" in log for stage in stages)
    for stage in stages:
        assert _lock_outs(project, stage) == _lock_outs(built, stage), stage
    metrics = [json.loads((p / "metrics/shard/hard.json").read_text()) for p in (built, project)]
    assert metrics[0] == metrics[1]
