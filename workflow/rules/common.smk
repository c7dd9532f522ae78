# The Snakefile's helpers (`snakemake --lint` wants them apart from the rules): the params.yaml
# values a rule tracks, and the paths params.yaml names. Params are passed as
# `tracked=tracked(...)`, a {dotted key: value} mapping of the keys a stage reads, so Snakemake
# reruns a job when one of those values changes; the keys read the same as the dvc.yaml stage's
# `params` list.
from functools import reduce

from linefuse.params.full import parse_params

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


def param_input(key):
    """The path params.yaml names at a dotted key; one with `{level}` per job."""
    if "{level}" in key:
        return lambda wildcards: lookup(key.format(level=wildcards.level))
    return lookup(key)
