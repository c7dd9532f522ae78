"""The stages' entry modules (linefuse.stages): each reads only its own params sections, runs as
`python -m linefuse.stages.NAME` as the engines call it, and `linefuse NAME` runs the same."""

from __future__ import annotations

import importlib
import subprocess
import sys

from linefuse.params import Sections
from linefuse.pipeline import STAGES

from conftest import tiny_params, write_params


def test_each_stage_reads_the_params_sections_it_declares():
    """A stage validates (and so can read) exactly the sections of params.yaml whose keys it
    declares to the engines: its module's Sections model against pipeline.STAGES."""
    for stage in STAGES:
        module = importlib.import_module(f"linefuse.stages.{stage.command}")
        models = [
            value
            for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, Sections) and value is not Sections
        ]
        assert len(models) == 1, (stage.name, models)
        declared = {key.split(".")[0] for key in stage.params}
        assert set(models[0].model_fields) == declared, stage.name


def test_a_stage_module_and_the_linefuse_command_give_the_same_user_error(tmp_path):
    """No index yet: the shard module, as DVC runs it, and `linefuse shard` each print one line
    naming what is missing and the fix, and exit 2."""
    write_params(tmp_path, tiny_params())
    runs = [
        [sys.executable, "-m", "linefuse.stages.shard", "--level", "easy"],
        [sys.executable, "-m", "linefuse.cli", "shard", "--level", "easy"],
    ]
    for argv in runs:
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines()[-1] == (
            "linefuse: error: data/index/images.parquet is missing; run `linefuse index` first"
        )
