# The stage graph for Snakemake: the same stages as dvc.yaml, over the same params.yaml.
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
