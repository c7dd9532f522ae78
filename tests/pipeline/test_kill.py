"""Kill mid-stage: SIGKILL a stage at a seeded point of its work, rerun, and get the same bytes.

Each trial copies a project built from scratch (the engines' session build), deletes one
stage's outputs and starts the engine on that stage in its own process group, with
LINEFUSE_PAUSE_AT naming the stage and a seeded count of its work units (charts, files, images,
batches, training steps; the uninterrupted build's log says how many it did). The stage stops
itself there and says so; the test SIGKILLs the group. So every kill lands mid-stage, at the
same point of the work on any machine, however fast or loaded. Then every output of the stage
must be absent or complete (never half-written at its final path), and the engine's documented
recovery and a rerun must rebuild it byte-identical to the uninterrupted build -- training
resumes from its checkpoint -- with the same dvc.lock hashes. Every kind of stage is killed
under each engine, the level of a stage over levels drawn by the seed.
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

from linefuse.stage import PAUSE_ENV

from conftest import LEVELS, copy_project, file_digests
from test_engines import ENV, SNAKEMAKE, dvc_declarations, run

SEED = 0
STAGES = ["generate", "index", "shard", "embed", "pretrain", "train", "train_domains"]
# train_domains trains nothing unless train.adapters asks for per-domain adapters, and the
# suite's params do not: it writes its empty outputs in one go, so it has no middle to kill
NO_MIDDLE_HERE = {"train_domains"}
OVER_LEVELS = {"shard", "embed", "train"}


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
    to read them: dvc.lock, and the read/write lock of outputs in use, .dvc/tmp/rwlock. Each is
    read as DVC reads it, with its own parsers (in this process: a `dvc status` costs seconds)."""
    from dvc.schema import COMPILED_LOCKFILE_SCHEMA
    from dvc.utils.strictyaml import YAMLSyntaxError, YAMLValidationError, load

    lock, rwlock = project / "dvc.lock", project / ".dvc" / "tmp" / "rwlock"
    broken = []
    try:
        load(str(lock), COMPILED_LOCKFILE_SCHEMA)
    except (YAMLSyntaxError, YAMLValidationError):
        broken.append(lock)
    if rwlock.is_file():
        try:
            json.loads(rwlock.read_text())
        except json.JSONDecodeError:  # DVC's RWLockFileCorruptedError
            broken.append(rwlock)
    return broken


def _kill_when_paused(
    command: list[str], project: Path, output: Path, stage_log: Path, stage: str, units: int
) -> None:
    """Runs command in its own process group, its output to `output`, the stage set to stop
    itself after `units` work units; once the stage logs in `stage_log` that it paused,
    SIGKILLs the group."""
    stage_log.unlink(missing_ok=True)  # the uninterrupted build's lines, in a copied project
    with output.open("w") as sink:
        process = subprocess.Popen(
            command,
            cwd=project,
            env={**ENV, PAUSE_ENV: f"{stage}:{units}"},
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    paused = f"linefuse {stage}: paused after {units} work units"
    while not (stage_log.is_file() and paused in stage_log.read_text()):
        assert process.poll() is None, f"{stage} ended before it paused: {output.read_text()}"
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert f"linefuse {stage}: wrote" not in stage_log.read_text()


def _trials(built: Path, engine: str) -> list[tuple[str, int]]:
    """(stage, work units after which it is killed), one per kind of stage, seeded: the level of
    a stage over levels, and a count short of the units the stage did in the uninterrupted build
    (its log's last line says how many)."""
    log = (built.parent / f"{engine}.log").read_text()
    units = {
        name: int(count)
        for name, count in re.findall(r"linefuse (\S+): wrote .*; (\d+) work units", log)
    }
    rng = random.Random(f"{SEED}-{engine}")
    stages = [f"{kind}@{rng.choice(LEVELS)}" if kind in OVER_LEVELS else kind for kind in STAGES]
    assert not any(units.get(stage) for stage in NO_MIDDLE_HERE), "kill train_domains too"
    stages = [stage for stage in stages if stage not in NO_MIDDLE_HERE]
    for stage in stages:
        assert units.get(stage, 0) >= 2, f"{stage} did {units.get(stage)} work units: no middle"
    return [(stage, rng.randint(1, units[stage] - 1)) for stage in stages]


def _remove(project: Path, outs: list[str]) -> None:
    for out in outs:
        target = project / out
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)


def _job_log(stage: str) -> str:
    """Where Snakemake sends a job's output (the Snakefile's log: directive)."""
    name, _, level = stage.partition("@")
    return f"logs/snakemake/{name}/{level}.log" if level else f"logs/snakemake/{name}.log"


@pytest.mark.engines
@pytest.mark.parametrize("half", [0, 1])
@pytest.mark.parametrize("engine", ["dvc", "snakemake"])
def test_killed_stages_rerun_to_the_same_bytes(request, tmp_path, engine, half):
    """Each engine's seeded trials, in two halves (alternate trials), so that two workers share
    them; each on its engine's build (the fixture named for it, so DVC's trials need not wait
    for the SLURM build)."""
    built = request.getfixturevalue(f"{engine}_build")
    declarations = {
        address.split(":")[-1]: stage for address, stage in dvc_declarations(built).items()
    }
    emptied_locks = 0
    trials = list(enumerate(_trials(built, engine)))[half::2]
    for number, (stage, units) in trials:
        project = copy_project(built, tmp_path / f"trial{number}")
        outs = declarations[stage]["outs"]
        expected = {out: _digest(built, out) for out in outs}
        output = tmp_path / f"trial{number}.log"
        if engine == "dvc":
            # --force: a stage whose outputs DVC holds in its cache (generate's) would be
            # checked out from there, not run
            command = ["dvc", "repro", "--force", "--no-run-cache", "--single-item", stage]
            stage_log = output  # DVC passes the stage's lines on
        else:
            command = [*SNAKEMAKE, outs[0]]
            stage_log = project / _job_log(stage)  # Snakemake sends them to the job's log:
        _remove(project, outs)
        _kill_when_paused(command, project, output, stage_log, stage, units)
        print(f"{engine} trial {number}: {stage} killed after {units} work units")
        for out in outs:  # absent, or complete and right: never half-written
            assert _digest(project, out) in (None, expected[out]), (stage, units, out)

        if engine == "dvc":
            # DVC rewrites dvc.lock and .dvc/tmp/rwlock in place: a kill inside either write
            # leaves it empty or cut short, and every dvc command then fails to parse it. The
            # recovery (docs/pipeline.md): `git checkout dvc.lock` (or remove it), remove the
            # rwlock, rerun.
            for broken in _broken_dvc_files(project):
                emptied_locks += 1
                broken.unlink()
            run(project, *command)
        else:  # Snakemake's recovery after a kill: drop its lock, redo what it marked incomplete
            run(project, *SNAKEMAKE, "--unlock", outs[0])
            run(project, *command[:-1], "--rerun-incomplete", outs[0])
        assert {out: _digest(project, out) for out in outs} == expected, (stage, units)
        if engine == "dvc":
            assert _lock_outs(project, stage) == _lock_outs(built, stage), stage
        shutil.rmtree(project)
    print(f"{engine}: {emptied_locks} kills left dvc.lock or .dvc/tmp/rwlock empty or cut short")
