"""The stage graph, declared once: STAGES.

dvc.yaml is written from it (`make dvc.yaml`, i.e. `python -m linefuse.pipeline`; a test fails
when the committed file is stale), and the Snakefile builds its rules from it each time Snakemake
reads it. Both engines get the same commands, inputs, outputs and params keys from here.

Each stage runs its own module, `python -m linefuse.stages.<command>`. Its code deps are not
listed by hand: they are that module's import closure inside src/linefuse (function-level imports
included, and modules named by their dotted path, as the chart registry names the drawers it
imports when asked), with the files those modules read (DATA_FILES). So `dvc repro` and Snakemake
rerun a stage whenever code it runs changes, and only then: the `linefuse` command line (cli.py)
is no stage's code.

Paths are written with `{level}` for a job's level; EachLevel stands for every level's path, and
Param for a path that params.yaml names. Both engines take the levels from params.yaml when they
run: DVC through `foreach`, Snakemake through its `{level}` wildcard.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from linefuse import paths
from linefuse.params import DOMAINS
from linefuse.report import report

PACKAGE = Path(__file__).resolve().parent
PACKAGE_PATH = Path("src/linefuse")  # the package in the project, as the engines name its files
DVC_YAML = Path("dvc.yaml")
STAGE_PACKAGE = "linefuse.stages"
# the training stages' start (linefuse/launch.py: `accelerate launch`'s arguments, which it runs
# where there is more than one process to start)
LAUNCHER = "src/linefuse/launch.py"
LAUNCH = (
    "python -m linefuse.launch --config_file {config} --num_processes {processes} "
    "--num_cpu_threads_per_process $(nproc) -m " + STAGE_PACKAGE
)

# The files besides Python that a module reads, so that stages running it depend on them too.
DATA_FILES = {
    "linefuse.train.model": ("src/linefuse/train/configs", "src/linefuse/zoo"),
    "linefuse.digitize.label_reader": ("src/linefuse/zoo",),
    "linefuse.digitize.label_onnx": ("src/linefuse/zoo",),
    "linefuse.report.report": (
        "src/linefuse/report/index.html.j2",
        "src/linefuse/report/report.css",
    ),
    "linefuse.report.readme": (
        "src/linefuse/report/readme_picture.md.j2",
        "src/linefuse/report/readme_run.md.j2",
    ),
    "linefuse.serve.app": ("src/linefuse/serve/page.html.j2",),
}


@dataclass(frozen=True)
class EachLevel:
    """`folder/{level}` for every level of `over`: DVC depends on the folder, Snakemake on each."""

    folder: Path
    over: str = "levels"  # levels (degrade.levels) | curriculum (train.curriculum's keys)


@dataclass(frozen=True)
class Param:
    """A path params.yaml names, by its dotted key ({level} filled in per job)."""

    key: str


@dataclass(frozen=True)
class Plot:
    """A plots file evaluate writes: its x and y columns, and DVC's template if not linear."""

    path: Path
    x: str
    y: str
    template: str | None = None


@dataclass(frozen=True)
class Stage:
    name: str
    command: str  # its module, linefuse.stages.<command> (and `linefuse <command>`, - for _)
    desc: str
    over: str | None = None  # one job per level: levels | curriculum
    inputs: tuple = ()  # data the stage reads: paths, EachLevel, Param
    params: tuple[str, ...] = ()
    outs: tuple[Path, ...] = ()  # cached outputs; a path without a suffix is a folder
    logs: tuple[Path, ...] = ()  # uncached outputs: run summaries and training logs
    metrics: tuple[Path, ...] = ()
    plots: tuple[Plot, ...] = ()
    launch: bool = False  # runs under `accelerate launch` (the training stages)
    workers: bool = False  # Snakemake passes --workers {threads}
    threads: int | None = None  # Snakemake's threads for the job; None: every core
    resources: dict = field(default_factory=dict)  # Snakemake's (the SLURM profile's) resources


LEVEL = "{level}"
CPU_JOB = {"cpus_per_task": 8, "mem_mb": 4000, "runtime": 30}
GPU_JOB = {"mem_mb": 16000, "runtime": 120}  # and gpu: launch.processes
TRAINING_PARAMS = ("compute", "model", "loader", "optim", "launch")
EACH_EMBEDDING = EachLevel(paths.EMBEDDINGS_DIR)

STAGES = (
    Stage(
        "generate",
        "generate",
        "render the synthetic charts, the default data",
        params=("data.charts",),
        outs=(paths.GENERATED_DIR,),
        workers=True,
        threads=8,
        resources=CPU_JOB,
    ),
    Stage(
        "index",
        "index",
        "list and split the images of data.source_dir",
        inputs=(Param("data.source_dir"),),
        params=(
            "data.source_dir",
            "data.min_side",
            "data.max_pixels",
            "data.split",
            "data.charts.held_out",
        ),
        outs=(paths.IMAGES_PARQUET, paths.REJECTS_PARQUET),
        logs=(paths.INDEX_METRICS,),
        workers=True,
        threads=8,
        resources=CPU_JOB,
    ),
    Stage(
        "shard",
        "shard",
        "degrade every indexed image into LMDB and WebDataset shards of one level",
        over="levels",
        inputs=(paths.IMAGES_PARQUET,),
        params=(
            "data.source_dir",
            "degrade.seed",
            "degrade.domains",
            *(f"degrade.{domain}.{LEVEL}" for domain in DOMAINS),
            "shards",
            "eval.deskew",
        ),
        outs=(paths.shards(LEVEL),),
        logs=(paths.shard_metrics(LEVEL),),
        workers=True,
        threads=8,
        resources=CPU_JOB,
    ),
    Stage(
        "embed",
        "embed",
        "precompute the model inputs (pixels or VAE latents) and the prompt table of one level",
        over="levels",
        inputs=(paths.shards(LEVEL), paths.IMAGES_PARQUET),
        params=(
            "compute",
            "model.unet",
            "model.vae",
            "model.text_encoder",
            "embed",
            "degrade.levels",  # --level must name one
        ),
        outs=(paths.embeddings(LEVEL),),
        logs=(paths.embed_metrics(LEVEL),),
    ),
    # evaluate runs last, but is declared before the training stages: `dvc exp show` orders its
    # metrics columns by stage, so the headline comes first
    Stage(
        "evaluate",
        "evaluate",
        "export the last curriculum adapter's model to ONNX; score it (and any per-domain "
        "ones) on test and held out; save the base as a LineFusePipeline",
        inputs=(
            EachLevel(paths.SHARDS_DIR),
            paths.IMAGES_PARQUET,
            Param("data.source_dir"),
            paths.BASE_DIR,
            EachLevel(paths.LORA_DIR, over="curriculum"),
            paths.DOMAIN_ADAPTERS_DIR,
        ),
        params=(
            "compute",
            "model",
            "eval",
            "tiles",
            "data.source_dir",
            "data.charts.held_out",  # which libraries are scored on the held-out split
            "degrade.levels",
            "degrade.domains",
            "train.curriculum",
            "optim.start_fraction",  # restoring in more steps than it trained for is warned of
        ),
        outs=(paths.EVAL_DETAIL, paths.PIPELINE_DIR, *paths.ONNX_EXPORTS),
        logs=(paths.SAMPLES_PNG,),
        metrics=(paths.EVAL_JSON,),
        plots=(
            Plot(paths.BY_DOMAIN_CSV, x="level", y="psnr"),
            Plot(paths.BY_STEPS_CSV, x="steps", y="psnr"),
            Plot(paths.GAIN_CSV, x="gain", y="cell", template="bar_horizontal"),
            Plot(paths.OCR_CSV, x="cer", y="series", template="bar_horizontal"),
            Plot(paths.DIGITIZE_CSV, x="error_pct", y="series", template="bar_horizontal"),
        ),
        workers=True,
    ),
    Stage(
        "pretrain",
        "pretrain",
        "train the base UNet on every level, or copy the pretrained one model.unet names",
        inputs=(EACH_EMBEDDING,),
        params=(*TRAINING_PARAMS, "pretrain", "degrade.levels"),
        outs=(paths.BASE_DIR,),
        logs=(paths.train_logs("pretrain"), paths.train_metrics("pretrain")),
        launch=True,
        resources=GPU_JOB,
    ),
    Stage(
        "train",
        "train",
        "train one curriculum level's LoRA adapter, from the one train.curriculum names",
        over="curriculum",
        inputs=(EACH_EMBEDDING, paths.BASE_DIR, Param(f"train.curriculum.{LEVEL}.init")),
        params=(
            *TRAINING_PARAMS,
            "train.lora",
            "train.unfreeze",
            "train.replay",
            "train.ordered",
            f"train.curriculum.{LEVEL}",
        ),
        outs=(paths.adapter(LEVEL),),
        logs=(paths.train_logs(LEVEL), paths.train_metrics(LEVEL)),
        launch=True,
        resources=GPU_JOB,
    ),
    Stage(
        "train_domains",
        "train_domains",
        "one adapter per blur domain and their merge (train.adapters: per_domain), else none",
        inputs=(EACH_EMBEDDING, paths.BASE_DIR),
        params=(
            *TRAINING_PARAMS,
            "degrade.levels",
            "train.lora",
            "train.adapters",
            "train.per_domain",
        ),
        outs=(paths.DOMAIN_ADAPTERS_DIR,),
        logs=(paths.train_logs("domains"), paths.train_metrics("domains")),
        launch=True,
        resources=GPU_JOB,
    ),
    Stage(
        "report",
        "report",
        "the HTML report of evaluate's tables and plots, with the params that made them",
        inputs=tuple(report.INPUTS),
        params=tuple(report.SECTIONS),  # the params.yaml sections the page shows
        logs=(paths.REPORT_HTML,),
        threads=1,
    ),
)


# --- code deps: the import closure of a stage's command -------------------------------------------


def _module_file(module: str) -> Path | None:
    relative = PACKAGE.joinpath(*module.split(".")[1:])
    for candidate in (relative.with_name(relative.name + ".py"), relative / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _walk(node: ast.AST):
    """ast.walk, less the body of an `if TYPE_CHECKING:` (imports for type hints only, which
    never run) and of a module's `__getattr__` (PEP 562: it runs only when code asks the module
    for a name it lacks, as `from linefuse import LineFusePipeline` does and no stage does)."""
    if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
        return
    test = node.test if isinstance(node, ast.If) else None
    if isinstance(test, ast.Name | ast.Attribute) and "TYPE_CHECKING" in (
        getattr(test, "id", None),
        getattr(test, "attr", None),
    ):
        for child in node.orelse:
            yield from _walk(child)
        return
    yield node
    for child in ast.iter_child_nodes(node):
        yield from _walk(child)


def _imports(nodes) -> set[str]:
    """The linefuse modules the import statements among `nodes` (walked in full, but for
    `if TYPE_CHECKING:` blocks) name, and those a string names whole ("linefuse.data.charts.
    plotnine_drawer": a module imported lazily by importlib, as data/charts/registry.py does)."""
    found = set()
    for node in (inner for outer in nodes for inner in _walk(outer)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            named = node.value.split(".")
            dotted = len(named) > 1 and all(part.isidentifier() for part in named)
            if dotted and named[0] == "linefuse" and _module_file(node.value):
                found.add(node.value)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "linefuse"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "linefuse":
            found.add(node.module)
            found |= {
                f"{node.module}.{a.name}"
                for a in node.names
                if _module_file(f"{node.module}.{a.name}")
            }
    return found


@cache
def _module_imports(module: str) -> frozenset[str]:
    return frozenset(_imports([ast.parse(_module_file(module).read_text())]))


def code_deps(command: str) -> list[str]:
    """Every file under src/linefuse that `python -m linefuse.stages.<command>` may run or read,
    project-relative: the modules it reaches (and their packages' __init__.py, unless empty), and
    their DATA_FILES."""
    modules, todo = set(), ["linefuse", f"{STAGE_PACKAGE}.{command}"]
    if _module_file(todo[-1]) is None:
        raise KeyError(f"{STAGE_PACKAGE} has no module for the stage command {command!r}")
    while todo:
        module = todo.pop()
        if module in modules or _module_file(module) is None:
            continue
        modules.add(module)
        todo += [".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)]
        todo += _module_imports(module)
    # an empty __init__.py runs nothing (and DVC warns about an empty dep); one with code counts
    ran = [_module_file(m) for m in modules]
    files = {(PACKAGE_PATH / f.relative_to(PACKAGE)).as_posix() for f in ran if f.stat().st_size}
    files |= {path for m in modules for path in DATA_FILES.get(m, ())}
    return sorted(files)


# --- dvc.yaml ------------------------------------------------------------------------------------


def _dvc_text(value: str, over: str | None) -> str:
    """{level} as DVC's foreach names it: ${item} over a list, ${key} over the curriculum's dict."""
    return value.replace(LEVEL, "${key}" if over == "curriculum" else "${item}")


def _dvc_input(item, over: str | None) -> str:
    if isinstance(item, EachLevel):
        return item.folder.as_posix()
    if isinstance(item, Param):
        if over == "curriculum" and item.key.startswith(f"train.curriculum.{LEVEL}."):
            return "${item." + item.key.rsplit(".", 1)[1] + "}"
        return "${" + item.key + "}"
    return _dvc_text(Path(item).as_posix(), over)


def _dvc_stage(stage: Stage) -> dict:
    over = stage.over
    command = f"python -m {STAGE_PACKAGE}.{stage.command}"
    if stage.launch:
        launch = LAUNCH.format(config="${launch.config}", processes="${launch.processes}")
        command = f"{launch}.{stage.command}"
    if over:
        command += f" --level {LEVEL}"
    deps = [_dvc_input(item, over) for item in stage.inputs]
    deps += code_deps(stage.command) + (["${launch.config}", LAUNCHER] if stage.launch else [])
    body = {"desc": stage.desc, "cmd": _dvc_text(command, over), "deps": deps}
    body["params"] = [_dvc_text(key, over) for key in stage.params]
    outs = [_dvc_text(p.as_posix(), over) for p in stage.outs]
    outs += [{_dvc_text(p.as_posix(), over): {"cache": False}} for p in stage.logs]
    body["outs"] = outs
    if stage.metrics:
        body["metrics"] = [{p.as_posix(): {"cache": False}} for p in stage.metrics]
    if stage.plots:
        body["plots"] = [
            {
                p.path.as_posix(): {"cache": False}
                | ({"template": p.template} if p.template else {})
                | {"x": p.x, "y": p.y}
            }
            for p in stage.plots
        ]
    if over:
        return {
            "foreach": "${train.curriculum}" if over == "curriculum" else "${degrade.levels}",
            "do": body,
        }
    return body


def training_plots(curriculum: list[str]) -> list[dict]:
    """DVCLive's step plots of pretrain and of each curriculum level (top-level `plots:`)."""
    folders = [paths.train_logs("pretrain")] + [paths.train_logs(level) for level in curriculum]
    return [{(folder / "dvclive/plots/metrics").as_posix(): {"x": "step"}} for folder in folders]


class _Dumper(yaml.SafeDumper):
    """Block lists indented under their key, as people write dvc.yaml."""

    def increase_indent(self, flow: bool = False, indentless: bool = False):
        return super().increase_indent(flow, False)


HEADER = """\
# Written by `make dvc.yaml` (python -m linefuse.pipeline) from the stage graph declared once in
# src/linefuse/pipeline.py, which the Snakefile reads too: edit that, not this file. Each stage's
# code deps are the import closure of its command. The top-level plots follow train.curriculum's
# levels in params.yaml when this was written.
"""


def dvc_yaml(curriculum: list[str]) -> str:
    stages = {stage.name: _dvc_stage(stage) for stage in STAGES}
    document = {"stages": stages, "plots": training_plots(curriculum)}
    body = yaml.dump(document, Dumper=_Dumper, sort_keys=False, width=1000)
    return HEADER + body


# --- Snakefile -----------------------------------------------------------------------------------

SNAKEFILE = Path("Snakefile")
SNAKE_HEADER = """\
# Written by `make dvc.yaml` (python -m linefuse.pipeline) from the stage graph declared once in
# src/linefuse/pipeline.py, as dvc.yaml is: edit that, not this file. One rule per stage, over the
# same params.yaml; a stage over levels is one rule with a {level} wildcard. `tracked` holds the
# params.yaml values a stage reads, so a changed value reruns its jobs (workflow/rules/common.smk).
# Each job's stdout and stderr go to its `log:` file under logs/snakemake/ (git-ignored). The
# training stages take every core: Snakemake sets OMP_NUM_THREADS to a job's threads, and torch's
# float results depend on the thread count, so a run here equals a `dvc repro` on this machine.


configfile: "params.yaml"


include: "workflow/rules/common.smk"
"""


def _snake_path(path) -> str:
    """An input as a rule names it: every level's (expand) for an EachLevel, params.yaml's value
    for a Param, else the path."""
    if isinstance(path, EachLevel):
        levels = "LEVELS" if path.over == "levels" else "CURRICULUM"
        return f'expand("{(path.folder / LEVEL).as_posix()}", level={levels})'
    if isinstance(path, Param):
        return f'param_input("{path.key}")'
    return f'"{Path(path).as_posix()}"'


def _snake_output(path: Path) -> str:
    return f'directory("{path.as_posix()}")' if not path.suffix else f'"{path.as_posix()}"'


def _snake_rule(stage: Stage) -> str:
    level = " --level {wildcards.level}" if stage.over else ""
    workers = " --workers {threads}" if stage.workers else ""
    command = f"python -m {STAGE_PACKAGE}.{stage.command}"
    inputs = [_snake_path(item) for item in stage.inputs]
    inputs += [f'"{dep}"' for dep in code_deps(stage.command)]
    resources = [f"{key}={value!r}" for key, value in stage.resources.items()]
    keys = [f'"{key}"' for key in stage.params]
    one_line = "tracked=tracked(" + ", ".join(keys) + ")"
    many = "tracked=tracked(\n" + "".join(f"            {key},\n" for key in keys) + "        )"
    params = [one_line if len(one_line) <= 88 else many]
    if stage.launch:
        command = LAUNCH.format(config="{input.launch}", processes="{params.processes}")
        command += f".{stage.command}"
        inputs += [f'"{LAUNCHER}"', 'launch=config["launch"]["config"]']
        params += ["processes=PROCESSES"]
        resources.append("gpu=PROCESSES")
    outs = stage.outs + stage.logs + stage.metrics + tuple(plot.path for plot in stage.plots)
    log = Path("logs/snakemake", stage.name)
    log = log / "{level}.log" if stage.over else log.with_suffix(".log")
    rule = stage.name.replace("-", "_")  # a rule is a Python name; `name:` keeps the stage's
    lines = [f"rule {rule}:", f'    """{stage.desc}"""']
    lines += [f'    name:\n        "{stage.name}"'] if rule != stage.name else []
    lines += ["    input:"]
    lines += [f"        {item}," for item in inputs]
    lines += ["    output:", *(f"        {_snake_output(out)}," for out in outs)]
    lines += ["    params:", *(f"        {param}," for param in params)]
    lines += ["    log:", f'        "{log.as_posix()}",']
    lines += [f"    threads: {stage.threads or 'workflow.cores'}"]
    if resources:
        lines += ["    resources:", *(f"        {resource}," for resource in resources)]
    lines += ["    shell:", f'        "{command}{level}{workers} > {{log}} 2>&1"']
    return "\n".join(lines) + "\n"


def snakefile() -> str:
    """The Snakefile: `rule all` over every stage's outputs, then one rule per stage."""
    targets = []
    for stage in STAGES:
        for out in stage.outs + stage.logs:
            levels = "LEVELS" if stage.over == "levels" else "CURRICULUM"
            path = f'"{out.as_posix()}"'
            targets.append(f"expand({path}, level={levels})" if stage.over else path)
    rule_all = "rule all:\n    input:\n" + "".join(f"        {t},\n" for t in targets)
    return "\n\n".join([SNAKE_HEADER, rule_all, *(_snake_rule(s) for s in STAGES)])


def main() -> int:
    params = yaml.safe_load(paths.PARAMS.read_text())
    DVC_YAML.write_text(dvc_yaml(list(params["train"]["curriculum"])))
    SNAKEFILE.write_text(snakefile())
    print(f"wrote {DVC_YAML} and {SNAKEFILE}: {len(STAGES)} stages", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
