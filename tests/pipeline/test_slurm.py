"""The SLURM profile on a real one-node cluster (workflow/slurm/local_cluster.sh): the engines'
Snakemake build (conftest.snakemake_build) runs through it, so here every stage was an sbatch job
with the resources its rule declares, its outputs equal DVC's build byte for byte, a second run
submits nothing, and a training job cancelled mid-stage is named and resumed to the same bytes.

The cluster needs root and Debian's packages (the machines `make test` runs on have both): a
cluster that cannot start fails the build, it never skips.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from linefuse.stage import PAUSE_ENV

from conftest import ROOT, copy_project
from test_engines import ENV, outputs, run

CLUSTER = ROOT / "workflow/slurm/local_cluster.sh"
# what a user of this 2-core, GPU-less cluster sets, as they would set their own site's:
# one core a job, no GPU asked for by the training rules, jobs tracked without accounting
RULES = ["generate", "index", "shard", "embed", "pretrain", "train", "train_domains", "evaluate"]
SITE = [
    "--set-resources",
    *(f"{rule}:cpus_per_task=1" for rule in [*RULES, "report"]),
    *(f"{rule}:gpu=0" for rule in ("embed", "pretrain", "train", "train_domains")),
    # a command line's --set-resources replaces the profile's whole list: its partitions again
    *(f"{rule}:slurm_partition=gpu" for rule in ("embed", "pretrain", "train", "train_domains")),
    "--slurm-init-seconds-before-status-checks",
    "1",
    "--seconds-between-status-checks",
    "2",
]
# four jobs in flight: the levels' jobs are submitted together, and the plugin, which polls less
# often the longer no job ends, finds them ended in one poll
SLURM = ("snakemake", "--profile", "workflow/profiles/slurm", "--jobs", "4", "--cores", "1", *SITE)
STARTED_HERE = "slurm_started"  # beside the engines' builds: this run started the cluster
RUNNING = Path("/tmp/linefuse-slurm/slurmctld.pid")  # the script's scratch folder


def start_cluster() -> None:
    started = subprocess.run([str(CLUSTER), "start"], capture_output=True, text=True)
    assert started.returncode == 0, f"the SLURM cluster did not start: {started.stderr}"


def stop_cluster() -> None:
    if RUNNING.exists():
        subprocess.run([str(CLUSTER), "stop"], capture_output=True, text=True, check=True)


def jobs_in(project: Path, first: int = 0) -> dict[str, dict[str, str]]:
    """{rule or rule/level: scontrol's record} of every job run in `project` (its working
    folder: the jobs of other tests running beside this one are not its), numbered `first` or
    later, as SLURM keeps them (MinJobAge: an hour), the last of each rule winning; the plugin
    names each job's rule and wildcards in its comment."""
    shown = subprocess.run(
        ["scontrol", "-o", "show", "job"], capture_output=True, text=True, check=True
    ).stdout
    records = [dict(re.findall(r"(\w+)=(\S+)", line)) for line in shown.splitlines()]
    found = {}
    for record in sorted(records, key=lambda record: int(record["JobId"])):
        mine = record.get("WorkDir") == str(project) and int(record["JobId"]) >= first
        if mine and record.get("Comment", "").startswith("rule_"):
            rule, _, level = record["Comment"].removeprefix("rule_").partition("_wildcards_")
            found[f"{rule}/{level}" if level else rule] = record
    return found


@pytest.fixture(scope="session")
def slurm_build(snakemake_build):
    """The engines' Snakemake build (made through sbatch) and its jobs as SLURM recorded them."""
    return snakemake_build, jobs_in(snakemake_build)


@pytest.mark.engines
def test_every_stage_runs_as_a_slurm_job_to_the_local_bytes(slurm_build, dvc_build, tmp_path):
    project, jobs = slurm_build
    assert set(jobs) >= {"generate", "index", "pretrain", "evaluate", "report"}
    assert {f"shard/{level}" for level in ("easy", "medium", "hard")} <= set(jobs)
    assert {f"train/{level}" for level in ("easy", "medium", "hard")} <= set(jobs)
    for rule, shown in jobs.items():
        assert shown["JobState"] == "COMPLETED", (rule, shown["JobState"])
        assert shown["NumCPUs"] == "1", rule
        training = rule.split("/")[0] in ("pretrain", "train", "train_domains")
        on_gpu = rule.split("/")[0] in ("embed", "pretrain", "train", "train_domains")
        # the rules' declarations (linefuse.pipeline): mem_mb, runtime and the partition
        assert shown["MinMemoryNode"] == ("16000M" if training else "4000M"), rule
        assert shown["TimeLimit"] == ("02:00:00" if training else "00:30:00"), rule
        assert shown["Partition"] == ("gpu" if on_gpu else "cpu"), rule
        assert "gres" not in shown.get("TRES", ""), rule  # no GPU asked of a GPU-less cluster
    assert outputs(project) == outputs(dvc_build)  # DVC's build
    project = copy_project(project, tmp_path / "again")
    again = run(project, *SLURM)
    assert not jobs_in(project) and "Nothing to be done" in again


@pytest.mark.engines
def test_a_cancelled_training_job_is_named_and_a_rerun_resumes_it_to_the_same_bytes(
    slurm_build, tmp_path
):
    """scancel train@medium once it has trained 7 micro-batches (its checkpoint at step 5 is
    written): the workflow fails naming the job and its log, nothing half-written is left at the
    adapter's path, and a rerun resumes from the checkpoint to the uninterrupted build's bytes."""
    built, _ = slurm_build
    project = copy_project(built, tmp_path / "project")
    adapter = "models/lora/medium"
    expected = outputs(built)
    shutil.rmtree(project / adapter)
    output = tmp_path / "cancelled.log"
    with output.open("w") as sink:
        process = subprocess.Popen(
            [*SLURM, adapter],
            cwd=project,
            env={**ENV, PAUSE_ENV: "train@medium:7"},
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    job_log = project / "logs/snakemake/train/medium.log"
    paused = "linefuse train@medium: paused after 7 work units"
    while not (job_log.is_file() and paused in job_log.read_text()):
        assert process.poll() is None, output.read_text()
        time.sleep(0.2)
    job = jobs_in(project)["train/medium"]["JobId"]
    subprocess.run(["scancel", job], check=True)
    try:
        assert process.wait(timeout=300) != 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    said = output.read_text()
    assert re.search(rf"Error in rule train:.*\n(.*\n)*?.*{job}", said), said[-3000:]
    assert "logs/snakemake/train/medium.log" in said
    assert not (project / adapter).exists()  # absent, never half-written
    run(project, *SLURM, "--rerun-incomplete", adapter)
    assert "resuming from" in job_log.read_text()
    assert jobs_in(project, int(job) + 1)["train/medium"]["JobState"] == "COMPLETED"
    assert {k: v for k, v in outputs(project).items() if k.startswith(adapter)} == {
        k: v for k, v in expected.items() if k.startswith(adapter)
    }
