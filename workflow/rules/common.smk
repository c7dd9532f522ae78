# Shared by every rule. Each rule passes the params.yaml keys it reads through `params:` as
# tracked(...), a {dotted key: value} mapping: Snakemake reruns a job when that value changes,
# and the keys read the same as the `params:` list of the matching dvc.yaml stage.
from functools import reduce

LEVELS = config["degrade"]["levels"]
DOMAIN_PARAMS = ["gaussian", "motion", "scan", "compression", "lowres"]
CURRICULUM = list(config["train"]["curriculum"])


def curriculum_order():
    """Levels from the one that starts at models/base, following each level's init."""
    follows = {spec["init"]: level for level, spec in config["train"]["curriculum"].items()}
    order, current = [], "models/base"
    while current in follows:
        order.append(follows[current])
        current = f"models/lora/{order[-1]}"
    return order


CURRICULUM_ORDER = curriculum_order()
LAUNCH_CONFIG = config["launch"]["config"]
PROCESSES = config["launch"]["processes"]
# The training stages start under accelerate with the process count from params.yaml; the thread
# count is the cores the job was given (nproc honours SLURM's and taskset's CPU masks).
LAUNCH = (f"accelerate launch --config_file {LAUNCH_CONFIG} --num_processes {PROCESSES} "
          f"--num_cpu_threads_per_process $(nproc) -m linefuse.cli")
TRAIN_CODE = [
    "src/linefuse/train/loop.py",
    "src/linefuse/train/model.py",
    "src/linefuse/train/diffusion.py",
    "src/linefuse/train/trainset.py",
    "src/linefuse/hardware.py",
]


wildcard_constraints:
    level="|".join(sorted(set(LEVELS) | set(CURRICULUM))),


def tracked(*keys):
    """{key: value} for dotted params.yaml keys; `{level}` is filled from the job's wildcard."""

    def values(wildcards):
        level = getattr(wildcards, "level", None)
        out = {}
        for key in keys:
            dotted = key.format(level=level)
            out[dotted] = reduce(lambda node, part: node[part], dotted.split("."), config)
        return out

    return values
