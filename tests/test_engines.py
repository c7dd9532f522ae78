"""dvc.yaml and the Snakefile declare the same stages, and both engines build the same bytes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LEVELS, ROOT, file_digests, tiny_params, write_params

BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1"}

SNAKEMAKE_DECLARATIONS = r"""
import json, re, sys
from pathlib import Path
from types import SimpleNamespace
from snakemake.api import SnakemakeApi
from snakemake.settings.types import OutputSettings, ResourceSettings

levels = json.loads(sys.argv[1])
stages = {}
with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(resource_settings=ResourceSettings(cores=1),
                            snakefile=Path("Snakefile").absolute(), workdir=Path(".").absolute())
    for rule in workflow._workflow.rules:
        if rule.name == "all":
            continue
        wildcard = "{level" in " ".join(map(str, rule.output))
        for level in levels if wildcard else [None]:
            fill = lambda text: re.sub(r"\{level[^}]*\}", level or "", str(text))
            params = rule.params.tracked(SimpleNamespace(level=level))
            stages[rule.name + (f"@{level}" if level else "")] = {
                "cmd": fill(rule.shellcmd.replace("{wildcards.level}", "{level}")),
                "deps": sorted(fill(p) for p in rule.input),
                "outs": sorted(fill(p) for p in rule.output),
                "params": sorted(params),
            }
print(json.dumps(stages))
"""


def snakemake_declarations(project: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", SNAKEMAKE_DECLARATIONS, json.dumps(list(LEVELS))],
                         cwd=project, env=ENV, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def dvc_declarations(project: Path) -> dict:
    from dvc.repo import Repo

    stages = {}
    with Repo(str(project)) as repo:
        for stage in repo.index.stages:
            params = [key for dep in stage.deps if hasattr(dep, "params") for key in dep.params]
            stages[stage.addressing] = {
                "cmd": stage.cmd,
                "deps": sorted(str(dep.def_path) for dep in stage.deps if not hasattr(dep, "params")),
                "outs": sorted(str(out.def_path) for out in stage.outs),
                "params": sorted(params),
            }
    return stages


def test_both_engines_declare_the_same_stages():
    """Same stage names, commands, inputs, outputs and params keys (Snakemake adds --workers)."""
    from_snakemake = snakemake_declarations(ROOT)
    for declared in from_snakemake.values():
        declared["cmd"] = declared["cmd"].replace(" --workers {threads}", "")
    assert from_snakemake == dvc_declarations(ROOT)
    assert set(from_snakemake) == {"generate", "index", *(f"shard@{level}" for level in LEVELS)}


def make_project(where: Path, params: dict) -> Path:
    """A temporary copy of the committed repo (git init + the committed .dvc), on tiny params."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    for name in tracked:
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, where / name)
    write_params(where, params)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], cwd=where, check=True)
    subprocess.run(git + ["add", "-A"], cwd=where, check=True)
    subprocess.run(git + ["commit", "-qm", "copy"], cwd=where, check=True)
    return where


def run(project: Path, *command: str) -> str:
    done = subprocess.run(command, cwd=project, env=ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def outputs(project: Path) -> dict[str, str]:
    """Digests of every output file, less Snakemake's directory markers (.dvcignore'd too)."""
    found = {**file_digests(project / "data"),
             **{f"metrics/{k}": v for k, v in file_digests(project / "metrics").items()}}
    return {name: digest for name, digest in found.items()
            if not name.endswith(".snakemake_timestamp")}


def ran_dvc_stages(log: str) -> list[str]:
    return re.findall(r"Running stage '([^']+)'", log)


@pytest.mark.engines
def test_dvc_and_snakemake_build_identical_outputs_and_rerun_only_what_changed(tmp_path):
    params = tiny_params()
    by_dvc = make_project(tmp_path / "dvc", params)
    by_snakemake = make_project(tmp_path / "snakemake", params)

    log = run(by_dvc, "dvc", "repro")
    assert ran_dvc_stages(log) == ["generate", "index", "shard@easy", "shard@medium", "shard@hard"]
    run(by_snakemake, "snakemake", "--cores", "2")
    built = outputs(by_dvc)
    assert built == outputs(by_snakemake)
    assert sum(name.endswith("data.mdb") for name in built) == len(LEVELS)

    assert ran_dvc_stages(run(by_dvc, "dvc", "repro")) == []
    assert "Nothing to be done" in run(by_snakemake, "snakemake", "--cores", "2")
    assert outputs(by_dvc) == built

    params["degrade"]["gaussian"]["hard"]["sigma"] = [2.0, 3.0]
    for project in (by_dvc, by_snakemake):
        write_params(project, params)
    assert ran_dvc_stages(run(by_dvc, "dvc", "repro")) == ["shard@hard"]
    log = run(by_snakemake, "snakemake", "--cores", "2")
    assert re.findall(r"^\s*wildcards: level=(\w+)", log, re.M) == ["hard"]
    assert sorted(re.findall(r"^(?:local)?rule (\w+):", log, re.M)) == ["all", "shard"]

    rebuilt = outputs(by_dvc)
    assert rebuilt == outputs(by_snakemake)
    changed = {name for name in built if built[name] != rebuilt.get(name)}
    assert changed and all(name.startswith(("shards/hard/", "metrics/shard/hard")) for name in changed)
    psnr = {level: json.loads((by_dvc / f"metrics/shard/{level}.json").read_text())["input_psnr"]
            for level in LEVELS}
    assert psnr["hard"]["gaussian"] < psnr["medium"]["gaussian"]
