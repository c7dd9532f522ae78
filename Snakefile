# The stage graph for Snakemake: the same stages as dvc.yaml, over the same params.yaml.
# Each job's stdout and stderr go to its `log:` file under logs/snakemake/ (git-ignored; not a
# DVC output, unlike logs/pretrain and logs/train/LEVEL, which the training stages write).
configfile: "params.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        "metrics/index.json",
        expand("data/shards/{level}", level=LEVELS),
        expand("metrics/shard/{level}.json", level=LEVELS),
        expand("models/lora/{level}", level=CURRICULUM),
        "metrics/eval.json",
        "reports/index.html",
