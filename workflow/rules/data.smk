# The data half: generate -> index -> shard@{level}.


rule generate:
    input:
        "src/linefuse/charts.py",
    output:
        directory("data/source"),
    params:
        tracked=tracked("data.charts"),
    threads: 2
    shell:
        "linefuse generate --workers {threads}"


rule index:
    input:
        config["data"]["source_dir"],
        "src/linefuse/index.py",
        "src/linefuse/images.py",
    output:
        "data/index/images.parquet",
        "data/index/rejects.parquet",
        "metrics/index.json",
    params:
        tracked=tracked("data.source_dir", "data.min_side", "data.max_pixels", "data.split"),
    threads: 2
    shell:
        "linefuse index --workers {threads}"


rule shard:
    input:
        "data/index/images.parquet",
        "src/linefuse/shards.py",
        "src/linefuse/degrade.py",
        "src/linefuse/images.py",
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
    threads: 2
    shell:
        "linefuse shard --level {wildcards.level} --workers {threads}"
