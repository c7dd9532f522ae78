"""The training stages' launcher: one local process runs the stage directly (no accelerate, no
torch before the stage's own imports), anything else is `accelerate launch` as declared."""

from __future__ import annotations

import sys

import pytest

from linefuse.launch import command

from conftest import ROOT

CONFIGS = ROOT / "workflow/accelerate"


def _argv(config: str, processes: int) -> list[str]:
    return [
        *("--config_file", str(CONFIGS / config), "--num_processes", str(processes)),
        *("--num_cpu_threads_per_process", "3", "-m", "linefuse.stages.train", "--level", "easy"),
    ]


def test_one_local_process_runs_the_stage_itself_with_accelerates_thread_count():
    run, environment = command(_argv("local.yaml", 1))
    assert run == [sys.executable, "-m", "linefuse.stages.train", "--level", "easy"]
    assert environment == {"OMP_NUM_THREADS": "3"}


@pytest.mark.parametrize(("config", "processes"), [("local.yaml", 2), ("ddp.yaml", 2)])
def test_several_processes_go_to_accelerate_launch_unchanged(config, processes):
    argv = _argv(config, processes)
    assert command(argv) == (["accelerate", "launch", *argv], {})
