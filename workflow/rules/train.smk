# The model half: embed@{level} -> pretrain -> train@{level}, chained by train.curriculum.
# These rules take every core (`threads: workflow.cores`): Snakemake sets OMP_NUM_THREADS to a
# job's threads, and torch's float results depend on its thread count, so this keeps them equal
# to a `dvc repro` on the same machine. The training rules ask for one GPU per accelerate process
# (launch.processes), which the SLURM profile turns into --gpus.


rule embed:
    input:
        "data/shards/{level}",
        "data/index/images.parquet",
        "src/linefuse/train/embed.py",
        "src/linefuse/hardware.py",
    output:
        directory("data/embeddings/{level}"),
        "metrics/embed/{level}.json",
    params:
        tracked=tracked("compute", "model.unet", "model.vae", "model.text_encoder", "embed"),
    log:
        "logs/snakemake/embed/{level}.log",
    threads: workflow.cores
    shell:
        "linefuse embed --level {wildcards.level} > {log} 2>&1"


rule pretrain:
    input:
        expand("data/embeddings/{level}", level=LEVELS),
        "src/linefuse/zoo",
        TRAIN_CODE,
        LAUNCH_CONFIG,
    output:
        directory("models/base"),
        directory("logs/pretrain"),
        "metrics/train/pretrain.json",
    params:
        tracked=tracked("compute", "model", "loader", "optim", "launch", "pretrain", "degrade.levels"),
    log:
        "logs/snakemake/pretrain.log",
    threads: workflow.cores
    resources:
        gpu=PROCESSES,
        mem_mb=16000,
        runtime=120,
    shell:
        f"{LAUNCH} pretrain > {{log}} 2>&1"


rule train:
    input:
        expand("data/embeddings/{level}", level=LEVELS),
        "models/base",
        curriculum_init,
        TRAIN_CODE,
        LAUNCH_CONFIG,
    output:
        directory("models/lora/{level}"),
        directory("logs/train/{level}"),
        "metrics/train/{level}.json",
    params:
        tracked=tracked(
            "compute",
            "model",
            "loader",
            "optim",
            "launch",
            "train.lora",
            "train.unfreeze",
            "train.replay",
            "train.ordered",
            "train.curriculum.{level}",
        ),
    log:
        "logs/snakemake/train/{level}.log",
    threads: workflow.cores
    resources:
        gpu=PROCESSES,
        mem_mb=16000,
        runtime=120,
    shell:
        f"{LAUNCH} train --level {{wildcards.level}} > {{log}} 2>&1"


rule train_domains:
    input:
        expand("data/embeddings/{level}", level=LEVELS),
        "models/base",
        "src/linefuse/train/domains.py",
        TRAIN_CODE,
        LAUNCH_CONFIG,
    output:
        directory("models/domains"),
        directory("logs/train/domains"),
        "metrics/train/domains.json",
    params:
        tracked=tracked(
            "compute",
            "model",
            "loader",
            "optim",
            "launch",
            "degrade.levels",
            "train.lora",
            "train.adapters",
            "train.per_domain",
        ),
    log:
        "logs/snakemake/train_domains.log",
    threads: workflow.cores
    resources:
        gpu=PROCESSES,
        mem_mb=16000,
        runtime=120,
    shell:
        f"{LAUNCH} train-domains > {{log}} 2>&1"


rule evaluate:
    input:
        expand("data/shards/{level}", level=LEVELS),
        "data/index/images.parquet",
        config["data"]["source_dir"],
        "models/base",
        f"models/lora/{CURRICULUM_ORDER[-1]}",
        "models/domains",
        "src/linefuse/evaluate/evaluate.py",
        "src/linefuse/evaluate/scoring.py",
        "src/linefuse/evaluate/tables.py",
        "src/linefuse/evaluate/outputs.py",
        "src/linefuse/evaluate/intervals.py",
        "src/linefuse/evaluate/curves.py",
        "src/linefuse/train/domains.py",
        "src/linefuse/serve/restorer.py",
        "src/linefuse/serve/tiles.py",
        "src/linefuse/evaluate/baselines.py",
        "src/linefuse/evaluate/metrics.py",
        "src/linefuse/evaluate/chart_metrics.py",
        "src/linefuse/evaluate/ocr.py",
        "src/linefuse/data/labels.py",
        "src/linefuse/hardware.py",
    output:
        "reports/samples.png",
        "reports/eval_detail.json",
        "metrics/eval.json",
        "plots/psnr_by_domain_level.csv",
        "plots/psnr_vs_steps.csv",
        "plots/gain_by_cell.csv",
        "plots/ocr_cer_by_level.csv",
    params:
        tracked=tracked(
            "compute",
            "model",
            "eval",
            "tiles",
            "data.source_dir",
            "degrade.levels",
            "degrade.domains",
            "train.curriculum",
        ),
    log:
        "logs/snakemake/evaluate.log",
    threads: workflow.cores
    shell:
        "linefuse evaluate --workers {threads} > {log} 2>&1"
