"""dvc.yaml and the Snakefile declare the same stages, and both engines build the same bytes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from linefuse.pipeline import DATA_FILES, STAGES, EachLevel, code_deps, dvc_yaml, snakefile

from conftest import LEVELS, ROOT, copy_project, file_digests, tiny_params, write_params

BIN = Path(sys.executable).parent
# The engines' stages run torch on one thread: the two builds run side by side beside the suite's
# other workers (conftest.dvc_build, snakemake_build), and on a shared core a second thread only
# waits on the first at each barrier. A kill test's rerun must match its build's bytes, so all
# runs share it.
ENV = {
    **os.environ,
    "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
    "DVC_NO_ANALYTICS": "1",
    "OMP_NUM_THREADS": "1",
}
# Snakemake sets a job's OMP_NUM_THREADS to its threads, at most --cores: one, as dvc's stages get
SNAKEMAKE = ("snakemake", "--cores", "1")

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
            wildcards = SimpleNamespace(level=level)
            fill = lambda text: re.sub(r"\{level[^}]*\}", level or "",
                                      str(text(wildcards) if callable(text) else text))
            params = rule.params.tracked(wildcards)
            cmd = rule.shellcmd.removesuffix(" > {log} 2>&1")
            cmd = cmd.replace("{wildcards.level}", level or "")
            if "{input.launch}" in cmd:
                cmd = cmd.replace("{input.launch}", str(rule.input.launch))
                cmd = cmd.replace("{params.processes}", str(rule.params.processes))
            stages[rule.name + (f"@{level}" if level else "")] = {
                "shell": rule.shellcmd,
                "cmd": cmd,
                "deps": sorted(fill(p) for p in rule.input),
                "outs": sorted(fill(p) for p in rule.output),
                "params": sorted(params),
                "log": sorted(fill(p) for p in rule.log),
            }
print(json.dumps(stages))
"""


def snakemake_declarations(project: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", SNAKEMAKE_DECLARATIONS, json.dumps(list(LEVELS))],
        cwd=project,
        env=ENV,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def dvc_declarations(project: Path) -> dict:
    from dvc.repo import Repo

    stages = {}
    with Repo(str(project)) as repo:
        for stage in repo.index.stages:
            params = [key for dep in stage.deps if hasattr(dep, "params") for key in dep.params]
            stages[stage.addressing] = {
                "cmd": stage.cmd,
                "deps": sorted(
                    str(dep.def_path) for dep in stage.deps if not hasattr(dep, "params")
                ),
                "outs": sorted(str(out.def_path) for out in stage.outs),
                "params": sorted(params),
            }
    return stages


LOG_REDIRECT = " > {log} 2>&1"  # every rule's shell command ends with it


def test_dvc_yaml_is_written_from_the_declaration():
    """dvc.yaml is what linefuse.pipeline writes from STAGES: edit that, then `make dvc.yaml`."""
    curriculum = list(yaml.safe_load((ROOT / "params.yaml").read_text())["train"]["curriculum"])
    assert (ROOT / "dvc.yaml").read_text() == dvc_yaml(curriculum), "stale: run `make dvc.yaml`"


def test_the_snakefile_is_written_from_the_declaration_as_rules():
    """The Snakefile is linefuse.pipeline's too, written out rule by rule: each stage's inputs
    (its code among them), outputs, params, log, threads, resources and command read as text."""
    text = (ROOT / "Snakefile").read_text()
    assert text == snakefile(), "stale: run `make dvc.yaml`"
    for stage in STAGES:
        assert f"\nrule {stage.name}:\n" in text
        rule = text.split(f"\nrule {stage.name}:\n", 1)[1].split("\nrule ", 1)[0]
        for dep in code_deps(stage.command):
            assert f'"{dep}",' in rule, (stage.name, dep)
        assert f"-m linefuse.stages.{stage.command}" in rule
    assert "for stage in STAGES" not in text


def _collapsed(name: str, deps: list[str]) -> list[str]:
    """Snakemake's every-level inputs (data/shards/easy, ...) as dvc.yaml names them: the folder."""
    stage = next(s for s in STAGES if s.name == name.split("@")[0])
    folders = {item.folder.as_posix() for item in stage.inputs if isinstance(item, EachLevel)}
    parents = [dep.rsplit("/", 1)[0] for dep in deps]
    return sorted(
        {parent if parent in folders else dep for dep, parent in zip(deps, parents, strict=True)}
    )


@pytest.mark.engines
def test_both_engines_declare_the_same_stages():
    """Both engines turn the one declaration into the same stage names, commands, inputs, outputs
    and params keys (Snakemake adds --workers, and sends each job's stdout and stderr to its own
    log: file under logs/snakemake/, which is none of the DVC outputs)."""
    from_snakemake = snakemake_declarations(ROOT)
    from_dvc = dvc_declarations(ROOT)
    dvc_outs = {out for stage in from_dvc.values() for out in stage["outs"]}
    logs = []
    for name, declared in from_snakemake.items():
        log = declared.pop("log")
        assert len(log) == 1 and log[0].startswith("logs/snakemake/"), (name, log)
        assert not any(log[0] == out or log[0].startswith(f"{out}/") for out in dvc_outs), name
        assert declared.pop("shell").endswith(LOG_REDIRECT), name
        declared["cmd"] = declared["cmd"].replace(" --workers {threads}", "")
        declared["deps"] = _collapsed(name, declared["deps"])
        logs += log
    for declared in from_dvc.values():
        declared["deps"] = sorted(set(declared["deps"]))
    assert len(set(logs)) == len(logs), logs  # one log file per job
    assert from_snakemake == from_dvc
    assert sorted(from_snakemake) == sorted(ALL_STAGES)


@pytest.mark.engines
def test_every_stage_depends_on_all_the_code_it_runs():
    """In both engines each stage lists the import closure of its command: the issue's examples
    (to_uint8, now in inference/restorer.py, sample() in inference/sampler.py,
    inference/model.py) for evaluate among them."""
    commands = {stage.name: stage.command for stage in STAGES}
    for declarations in (dvc_declarations(ROOT), snakemake_declarations(ROOT)):
        for name, declared in declarations.items():
            missing = set(code_deps(commands[name.split("@")[0]])) - set(declared["deps"])
            assert not missing, (name, missing)
    evaluate = code_deps("evaluate")
    for module in ("inference/restorer.py", "inference/sampler.py", "inference/model.py"):
        assert f"src/linefuse/{module}" in evaluate, module
    assert "src/linefuse/stages/evaluate.py" in evaluate
    # the command line and the schemas of sections evaluate does not read are none of its code
    for module in ("cli.py", "params/full.py", "params/base.py", "serve/settings.py"):
        assert f"src/linefuse/{module}" not in evaluate, module
    # evaluate restores through inference/ alone: no training code reruns it
    assert not [dep for dep in evaluate if dep.startswith("src/linefuse/train/")], evaluate
    assert "src/linefuse/train/configs" in code_deps("pretrain")  # what model.py reads


def test_every_file_the_package_reads_belongs_to_a_module():
    """A template, config or shipped model added to src/linefuse is a dep of the stages that
    import the module reading it (linefuse.pipeline.DATA_FILES), not of none."""
    package = ROOT / "src/linefuse"
    attached = {path for files in DATA_FILES.values() for path in files}
    for file in package.rglob("*"):
        if file.is_file() and file.suffix not in (".py", ".pyc"):
            relative = file.relative_to(ROOT).as_posix()
            assert any(relative == p or relative.startswith(f"{p}/") for p in attached), relative


def test_a_module_imported_by_its_dotted_path_is_a_dep():
    """The chart registry imports each library's drawer only when a chart asks for it
    (importlib, by the dotted path it names): every drawer is still code that generate runs."""
    from linefuse.data.charts.registry import DRAWERS

    generate = code_deps("generate")
    for library, module in DRAWERS.items():
        assert f"src/{module.replace('.', '/')}.py" in generate, library


# Snakemake's lint asks every rule for a conda env or a container. Here each job runs the
# project's own venv (`make install`), the interpreter and wheels `dvc repro` uses: a second
# copy of the software per rule (another torch build) would break the byte-identical outputs the
# two engines are held to above. Snakemake has no directive for a venv and no way to silence one
# lint (snakemake/snakemake#2085), so this finding alone is accepted, by name.
ACCEPTED_LINT = "Specify a conda environment or container for each rule."


@pytest.mark.engines
def test_snakemake_lint_finds_nothing_else():
    done = subprocess.run(
        [str(BIN / "snakemake"), "--lint"], cwd=ROOT, env=ENV, capture_output=True, text=True
    )
    said = done.stdout + done.stderr
    findings = re.findall(r"^    \* (.+?):?$", said, flags=re.MULTILINE)
    rules = re.findall(r"^Lints for rule (\w+)", said, flags=re.MULTILINE)
    assert findings and set(findings) == {ACCEPTED_LINT}, said
    assert len(findings) == len(rules) == 9, said  # one per rule, nothing about the files
    assert "Lints for snakefile" not in said, said


RUN_OUTPUTS = (
    "data/",
    "models/",
    "logs/",
    "metrics/",
    "plots/",
    "reports/",
    "dvc_plots/",
    "dvc.lock",
)


def make_project(where: Path, params: dict) -> Path:
    """A temporary copy of the repo (git init + the .dvc), on tiny params: its tracked files and
    new ones git does not ignore (a stage not committed yet), less what a pipeline run there
    wrote."""
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in (n for n in tracked if (ROOT / n).is_file() and not n.startswith(RUN_OUTPUTS)):
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, where / name)
    write_params(where, params)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], cwd=where, check=True)
    subprocess.run(git + ["add", "-A"], cwd=where, check=True)
    subprocess.run(git + ["commit", "-qm", "copy"], cwd=where, check=True)
    return where


def run(project: Path, *command: str, env: dict | None = None) -> str:
    done = subprocess.run(command, cwd=project, env=env or ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def outputs(project: Path) -> dict[str, str]:
    """Digests of the data and model outputs and the data metrics, less the engines' own files
    (Snakemake's directory markers, .dvcignore'd; DVC's .gitignore entries); embed and training
    metrics and logs hold timings, so they are left out."""
    found = {
        **file_digests(project / "data"),
        **file_digests(project / "models"),
        **{
            f"metrics/{k}": v
            for k, v in file_digests(project / "metrics").items()
            if k.startswith(("index", "shard/"))
        },
    }
    return {
        name: digest
        for name, digest in found.items()
        if not name.endswith((".snakemake_timestamp", ".gitignore"))
    }


def ran_dvc_stages(log: str) -> list[str]:
    return re.findall(r"Running stage '([^']+)'", log)


ALL_STAGES = [
    "generate",
    "index",
    *(f"shard@{level}" for level in LEVELS),
    *(f"embed@{level}" for level in LEVELS),
    "pretrain",
    *(f"train@{level}" for level in LEVELS),
    "train_domains",
    "evaluate",
    "report",
]


@contextmanager
def edited(projects: list[Path], *relatives: str):
    """The files `relatives` of each project with a comment line added, then as they were, their
    modification times too (Snakemake reruns what is older than its inputs)."""
    files = [project / relative for project in projects for relative in relatives]
    before = [(path.read_text(), path.stat()) for path in files]
    try:
        for path, (text, _) in zip(files, before, strict=True):
            path.write_text(text + ("\n{# edited #}\n" if path.suffix == ".j2" else "\n# edited\n"))
        yield
    finally:
        for path, (text, stat) in zip(files, before, strict=True):
            path.write_text(text)
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def stages_changed(project: Path) -> list[str]:
    """The stages `dvc status` names (as changed), sorted."""
    return sorted(re.findall(r"^(\S+):$", run(project, "dvc", "status"), re.M))


def dry_run_dvc(project: Path) -> list[str]:
    return sorted(re.findall(r"Running stage '([^']+)'", run(project, "dvc", "repro", "--dry")))


def dry_run_snakemake(project: Path) -> list[str]:
    log = run(project, *SNAKEMAKE, "--dry-run")
    jobs = re.findall(
        r"^(?:local)?rule (\w+):\n(?:\s+\w+: .*\n)*?\s+wildcards: level=(\w+)", log, re.M
    )
    plain = [
        name
        for name in re.findall(r"^(?:local)?rule (\w+):", log, re.M)
        if name in ("generate", "index", "pretrain", "train_domains", "evaluate", "report")
    ]
    return sorted([f"{name}@{level}" for name, level in jobs] + plain)


@pytest.mark.engines
def test_dvc_and_snakemake_build_identical_outputs_and_rerun_only_what_changed(
    engine_builds, tmp_path
):
    params = tiny_params()
    by_dvc, by_snakemake = (copy_project(built, tmp_path / built.name) for built in engine_builds)
    built = outputs(by_dvc)
    # two builds from nothing, byte for byte the same: a clean rebuild reproduces dvc.lock's hashes
    assert built == outputs(by_snakemake)
    # two clean runs on the CPU, identical metrics too (less the timings)
    scores = [
        json.loads((project / "reports/eval_detail.json").read_text())
        for project in (by_dvc, by_snakemake)
    ]
    steps = params["eval"]["steps"]
    for score in scores:  # timings
        del score["few_step"]["speedup"], score["machine"][f"seconds_per_megapixel_s{steps}"]
        for count in params["eval"]["sweep"]["steps"]:
            del score["sweep"][f"s{count}"]["seconds_per_megapixel"]
    assert scores[0] == scores[1] and scores[0]["psnr"]
    assert sum(name.endswith("data.mdb") for name in built) == len(LEVELS)
    assert sum(name.endswith("adapter_model.safetensors") for name in built) == len(LEVELS)

    assert ran_dvc_stages(run(by_dvc, "dvc", "repro")) == []
    assert "Nothing to be done" in run(by_snakemake, *SNAKEMAKE)
    shown = json.loads(run(by_dvc, "dvc", "metrics", "show", "--json").strip().splitlines()[-1])
    assert '"gain_db_low"' in json.dumps(shown) and '"domain_gain_db"' in json.dumps(shown)
    run(by_dvc, "dvc", "plots", "show", "-o", "dvc_plots")
    assert (by_dvc / "dvc_plots/index.html").stat().st_size > 1000

    params["train"]["curriculum"]["hard"]["steps"] = 12
    for project in (by_dvc, by_snakemake):
        write_params(project, params)
    assert ran_dvc_stages(run(by_dvc, "dvc", "repro")) == ["train@hard", "evaluate", "report"]
    log = run(by_snakemake, *SNAKEMAKE)
    assert re.findall(r"^\s*wildcards: level=(\w+)", log, re.M) == ["hard"]
    assert sorted(re.findall(r"^(?:local)?rule (\w+):", log, re.M)) == [
        "all",
        "evaluate",
        "report",
        "train",
    ]
    rebuilt = outputs(by_dvc)
    assert rebuilt == outputs(by_snakemake)
    changed = {name for name in built if built[name] != rebuilt.get(name)}
    # the hard adapter, and the export that merges it
    assert changed and all(name.startswith(("lora/hard/", "onnx/")) for name in changed), changed

    # an edit reruns what it touches, in both engines (DVC by the stages `dvc status` says
    # changed, Snakemake by the jobs it plans, downstream included)
    per_level = [f"{stage}@{level}" for stage in ("embed", "train") for level in LEVELS]
    importers = ["pretrain", "train_domains", "evaluate", *per_level]
    # (the command line, restore's included, and serve's schema are edited together: neither may
    # rerun a stage, so one probe of both says it of each)
    for modules, by_dvc_stages, by_snakemake_jobs in (
        (["cli.py", "serve/settings.py"], [], []),
        (["report/index.html.j2"], ["report"], ["report"]),
        (["evaluate/scoring.py"], ["evaluate"], ["evaluate", "report"]),
        (["inference/model.py"], importers, [*importers, "report"]),  # shared: all importers
    ):
        with edited([by_dvc, by_snakemake], *(f"src/linefuse/{m}" for m in modules)):
            assert stages_changed(by_dvc) == sorted(by_dvc_stages), modules
            assert dry_run_snakemake(by_snakemake) == sorted(by_snakemake_jobs), modules

    params["degrade"]["gaussian"]["hard"]["sigma"] = [2.0, 3.0]
    for project in (by_dvc, by_snakemake):
        write_params(project, params)
    # Of the data stages only shard@hard reruns (and the report, which shows `degrade`). DVC
    # decides on what follows once its output has changed; Snakemake plans that downstream up front.
    assert dry_run_dvc(by_dvc) == ["report", "shard@hard"]
    assert dry_run_snakemake(by_snakemake) == [
        "embed@hard",
        "evaluate",
        "pretrain",
        "report",
        "shard@hard",
        "train@easy",
        "train@hard",
        "train@medium",
        "train_domains",
    ]


IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s+(linefuse[\w.]*)$", re.M)


@pytest.mark.engines
def test_every_module_a_stage_imported_is_one_of_its_deps(snakemake_build):
    """Held to what ran: every linefuse module a Snakemake job imported (Python's -X importtime,
    in the job's log: file) is among the code deps its stage declares."""
    by_snakemake = snakemake_build
    commands = {stage.name: stage.command for stage in STAGES}
    checked = set()
    for log in (by_snakemake / "logs/snakemake").rglob("*.log"):
        relative = log.relative_to(by_snakemake / "logs/snakemake")
        name = relative.parts[0].removesuffix(".log")
        modules = set(IMPORTED.findall(log.read_text()))
        assert "linefuse.params" in modules, log  # the job ran with import times on
        files = set()
        for module in modules:
            path = Path("src", *module.split("."))
            package = path / "__init__.py"
            file = package if (ROOT / package).is_file() else path.with_suffix(".py")
            if (ROOT / file).stat().st_size:  # an empty __init__.py runs nothing
                files.add(file.as_posix())
        missing = files - set(code_deps(commands[name]))
        assert not missing, (name, missing)
        checked.add(name)
    assert checked == set(commands)
