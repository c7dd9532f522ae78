# Shared by all the workflow's rules, and the one place for its functions (`snakemake --lint`
# wants them out of the files that hold the rules). The rules pass the params.yaml keys they read
# as `params: tracked=tracked(...)`, a {dotted key: value} mapping: Snakemake reruns a job when
# that value changes, and the keys read the same as the `params` list of the dvc.yaml stage.
from functools import reduce

from linefuse.params import DOMAINS, parse_params

# the same validation as every stage: a bad params.yaml stops Snakemake before any job runs
PARAMS = parse_params(config)
LEVELS = config["degrade"]["levels"]
DOMAIN_PARAMS = list(DOMAINS)
CURRICULUM = list(config["train"]["curriculum"])
CURRICULUM_ORDER = PARAMS.train.order()
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
    "src/linefuse/train/base_batches.py",
    "src/linefuse/train/label_reader.py",
    "src/linefuse/data/bank.py",
    "src/linefuse/data/degrade_torch.py",
    "src/linefuse/data/jpeg.py",
    "src/linefuse/data/label_patches.py",
    "src/linefuse/cli.py",
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


def curriculum_init(wildcards):
    """train@LEVEL starts from the adapter (or base model) that train.curriculum names."""
    return config["train"]["curriculum"][wildcards.level]["init"]

