# The Snakefile's functions (`snakemake --lint` wants them apart from the rules). Each turns one
# stage of linefuse.pipeline.STAGES, the stage graph declared once, into a directive's value.
# Params are passed as `tracked=tracked(...)`, a {dotted key: value} mapping of the params.yaml
# keys a stage reads, so Snakemake reruns a job when one of those values changes; the keys read
# the same as the dvc.yaml stage's `params` list.
from functools import reduce
from pathlib import Path

from linefuse.params import parse_params
from linefuse.pipeline import LAUNCH, EachLevel, Param, code_deps

# the same validation as every stage: a bad params.yaml stops Snakemake before any job runs
PARAMS = parse_params(config)
LEVELS = config["degrade"]["levels"]
CURRICULUM = list(config["train"]["curriculum"])
PROCESSES = config["launch"]["processes"]


wildcard_constraints:
    level="|".join(sorted(set(LEVELS) | set(CURRICULUM))),


def lookup(dotted):
    return reduce(lambda node, part: node[part], dotted.split("."), config)


def tracked(*keys):
    """{key: value} for dotted params.yaml keys; `{level}` is filled from the job's wildcard."""

    def values(wildcards):
        level = getattr(wildcards, "level", None)
        return {key.format(level=level): lookup(key.format(level=level)) for key in keys}

    return values


def rule_inputs(stage):
    """The stage's data (every level's path for an EachLevel), its code and its launch config."""
    found = []
    for item in stage.inputs:
        if isinstance(item, EachLevel):
            levels = LEVELS if item.over == "levels" else CURRICULUM
            found += expand(str(item.folder / "{level}"), level=levels)
        elif isinstance(item, Param) and "{level}" in item.key:
            found.append(lambda wildcards, key=item.key: lookup(key.format(level=wildcards.level)))
        elif isinstance(item, Param):
            found.append(lookup(item.key))
        else:
            found.append(str(item))
    found += code_deps(stage.command)
    return found + ([config["launch"]["config"]] if stage.launch else [])


def rule_outputs(stage):
    return [
        directory(str(path)) if not Path(path).suffix else str(path)
        for path in stage.outs + stage.logs + stage.metrics + tuple(p.path for p in stage.plots)
    ]


def job_log(stage):
    log = Path("logs/snakemake", stage.name)
    return str(log / "{level}.log" if stage.over else log.with_suffix(".log"))


def job_resources(stage):
    """The SLURM profile's asks: the training stages one GPU per accelerate process."""
    return {**stage.resources, **({"gpu": PROCESSES} if stage.launch else {})}


def job_command(stage):
    """The stage's command as dvc.yaml runs it, for a job's level and threads. A params function:
    the rules are made in a loop, and a shell string naming `stage` would read the loop's last."""
    command = f"linefuse {stage.command}"
    if stage.launch:
        command = LAUNCH.format(config=config["launch"]["config"], processes=PROCESSES)
        command += f" {stage.command}"

    def for_job(wildcards, threads):
        level = f" --level {wildcards.level}" if stage.over else ""
        return command + level + (f" --workers {threads}" if stage.workers else "")

    return for_job


def final_outputs():
    """Every job's outputs: what `snakemake` with no target builds."""
    found = []
    for stage in STAGES:
        outputs = [str(out) for out in stage.outs + stage.logs]
        levels = LEVELS if stage.over == "levels" else CURRICULUM
        found += expand(outputs, level=levels) if stage.over else outputs
    return found
