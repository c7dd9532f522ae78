# The data half: generate -> index -> shard@{level}. CPU-bound: each asks for up to 8 cores
# (capped at --cores on one machine; a cluster job's cpus-per-task), no GPU.


rule generate:
    input:
        "src/linefuse/data/charts.py",
        "src/linefuse/data/chart_style.py",
    output:
        directory("data/source"),
    params:
        tracked=tracked("data.charts"),
    log:
        "logs/snakemake/generate.log",
    threads: 8
    resources:
        cpus_per_task=8,
        mem_mb=4000,
        runtime=30,
    shell:
        "linefuse generate --workers {threads} > {log} 2>&1"


rule index:
    input:
        config["data"]["source_dir"],
        "src/linefuse/data/index.py",
        "src/linefuse/data/images.py",
    output:
        "data/index/images.parquet",
        "data/index/rejects.parquet",
        "metrics/index.json",
    params:
        tracked=tracked(
            "data.source_dir",
            "data.min_side",
            "data.max_pixels",
            "data.split",
            "data.charts.held_out",
        ),
    log:
        "logs/snakemake/index.log",
    threads: 8
    resources:
        cpus_per_task=8,
        mem_mb=4000,
        runtime=30,
    shell:
        "linefuse index --workers {threads} > {log} 2>&1"


rule shard:
    input:
        "data/index/images.parquet",
        "src/linefuse/data/shards.py",
        "src/linefuse/data/degrade.py",
        "src/linefuse/data/images.py",
    output:
        directory("data/shards/{level}"),
        "metrics/shard/{level}.json",
    params:
        tracked=tracked(
            "data.source_dir",
            "degrade.seed",
            "degrade.domains",
            *[f"degrade.{domain}.{{level}}" for domain in DOMAIN_PARAMS],
            "shards",
        ),
    log:
        "logs/snakemake/shard/{level}.log",
    threads: 8
    resources:
        cpus_per_task=8,
        mem_mb=4000,
        runtime=30,
    shell:
        "linefuse shard --level {wildcards.level} --workers {threads} > {log} 2>&1"
