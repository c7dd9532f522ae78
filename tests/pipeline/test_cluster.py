"""The SLURM profile: a dry run plans every stage with the resources the rules declare."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

BIN = Path(sys.executable).parent


def _dry_run(project: Path, *extra: str) -> dict[str, dict]:
    """{job name (rule@level): {"resources": {...}, "shell": str}} from a dry run's plan."""
    done = subprocess.run(
        [str(BIN / "snakemake"), "--profile", "workflow/profiles/slurm", "--dry-run", *extra],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    jobs = {}
    for block in re.split(r"\n(?=rule \w+:)", done.stdout):
        rule = re.match(r"rule (\w+):", block)
        resources = re.search(r"^\s+resources: (.*)$", block, re.M)
        if not rule or not resources:
            continue
        level = re.search(r"^\s+wildcards: level=(\w+)", block, re.M)
        shell = re.search(r"^Shell command: (.*)$", block, re.M)
        jobs[rule[1] + (f"@{level[1]}" if level else "")] = {
            "resources": dict(pair.split("=", 1) for pair in resources[1].split(", ")),
            "shell": shell[1] if shell else "",
        }
    return jobs


@pytest.fixture
def repo_copy(tmp_path) -> Path:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tmp_path / name)
    return tmp_path


@pytest.mark.engines
def test_slurm_dry_run_asks_cpus_for_data_and_gpus_for_training(repo_copy):
    jobs = _dry_run(repo_copy)
    assert len(jobs) == 16
    for name in ("generate", "index", "shard@easy", "shard@medium", "shard@hard"):
        resources = jobs[name]["resources"]
        assert resources["cpus_per_task"] == "8" and resources["slurm_partition"] == "cpu"
        assert "gpu" not in resources
    training = ["pretrain", "train@easy", "train@medium", "train@hard", "train_domains"]
    for name in training:
        resources = jobs[name]["resources"]
        assert resources["gpu"] == "1" and resources["slurm_partition"] == "gpu"
        assert resources["runtime"] == "120" and resources["mem_mb"] == "16000"
        assert jobs[name]["shell"].startswith(
            "python -m linefuse.launch --config_file workflow/accelerate/local.yaml "
            "--num_processes 1 "
        )
    assert jobs["train@hard"]["shell"].endswith(
        "-m linefuse.stages.train --level hard > logs/snakemake/train/hard.log 2>&1"
    )
    assert "gpu" not in jobs["evaluate"]["resources"]
    # each job writes its stdout and stderr to its own log: file, beside the DVC-declared logs/
    for name, job in jobs.items():
        if name != "all":
            assert re.search(r" > logs/snakemake/[\w/]+\.log 2>&1$", job["shell"]), name


@pytest.mark.engines
def test_process_count_from_params_reaches_the_launch_and_the_gpu_request(repo_copy):
    params = yaml.safe_load((repo_copy / "params.yaml").read_text())
    params["launch"] = {"processes": 4, "config": "workflow/accelerate/ddp.yaml"}
    (repo_copy / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    jobs = _dry_run(repo_copy)
    for name in ("pretrain", "train@easy", "train_domains"):
        assert jobs[name]["resources"]["gpu"] == "4"
        assert (
            "--config_file workflow/accelerate/ddp.yaml --num_processes 4 " in jobs[name]["shell"]
        )
    assert "gpu" not in jobs["shard@hard"]["resources"]
