# Written by `make dvc.yaml` (python -m linefuse.pipeline) from the stage graph declared once in
# src/linefuse/pipeline.py, as dvc.yaml is: edit that, not this file. One rule per stage, over the
# same params.yaml; a stage over levels is one rule with a {level} wildcard. `tracked` holds the
# params.yaml values a stage reads, so a changed value reruns its jobs (workflow/rules/common.smk).
# Each job's stdout and stderr go to its `log:` file under logs/snakemake/ (git-ignored). The
# training stages take every core: Snakemake sets OMP_NUM_THREADS to a job's threads, and torch's
# float results depend on the thread count, so a run here equals a `dvc repro` on this machine.


configfile: "params.yaml"


include: "workflow/rules/common.smk"


rule all:
    input:
        "data/source",
        "data/index/images.parquet",
        "data/index/rejects.parquet",
        "metrics/index.json",
        expand("data/shards/{level}", level=LEVELS),
        expand("metrics/shard/{level}.json", level=LEVELS),
        expand("data/embeddings/{level}", level=LEVELS),
        expand("metrics/embed/{level}.json", level=LEVELS),
        "reports/eval_detail.json",
        "models/pipeline",
        "models/onnx",
        "models/onnx_base",
        "reports/samples.png",
        "models/base",
        "logs/pretrain",
        "metrics/train/pretrain.json",
        expand("models/lora/{level}", level=CURRICULUM),
        expand("logs/train/{level}", level=CURRICULUM),
        expand("metrics/train/{level}.json", level=CURRICULUM),
        "models/domains",
        "logs/train/domains",
        "metrics/train/domains.json",
        "reports/index.html",


rule generate:
    """render the synthetic charts, the default data"""
    input:
        "src/linefuse/__init__.py",
        "src/linefuse/data/charts/__init__.py",
        "src/linefuse/data/charts/facts.py",
        "src/linefuse/data/charts/letsplot_drawer.py",
        "src/linefuse/data/charts/matplotlib_drawer.py",
        "src/linefuse/data/charts/plan.py",
        "src/linefuse/data/charts/plotnine_drawer.py",
        "src/linefuse/data/charts/registry.py",
        "src/linefuse/data/charts/reportlab_drawer.py",
        "src/linefuse/data/charts/style.py",
        "src/linefuse/data/charts/vegalite_drawer.py",
        "src/linefuse/params/__init__.py",
        "src/linefuse/params/data.py",
        "src/linefuse/paths.py",
        "src/linefuse/stage.py",
        "src/linefuse/stages/generate.py",
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
        "python -m linefuse.stages.generate --workers {threads} > {log} 2>&1"


rule index:
    """list and split the images of data.source_dir"""
    input:
        param_input("data.source_dir"),
        "src/linefuse/__init__.py",
        "src/linefuse/data/images.py",
        "src/linefuse/data/index.py",
        "src/linefuse/params/__init__.py",
        "src/linefuse/params/data.py",
        "src/linefuse/paths.py",
        "src/linefuse/stage.py",
        "src/linefuse/stages/index.py",
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
        "python -m linefuse.stages.index --workers {threads} > {log} 2>&1"


rule shard:
    """degrade every indexed image into LMDB and WebDataset shards of one level"""
    input:
        "data/index/images.parquet",
        "src/linefuse/__init__.py",
        "src/linefuse/data/degrade.py",
        "src/linefuse/data/deskew.py",
        "src/linefuse/data/images.py",
        "src/linefuse/data/layout.py",
        "src/linefuse/data/shards.py",
        "src/linefuse/data/tars.py",
        "src/linefuse/params/__init__.py",
        "src/linefuse/params/data.py",
        "src/linefuse/params/degrade.py",
        "src/linefuse/params/evaluation.py",
        "src/linefuse/params/shards.py",
        "src/linefuse/paths.py",
        "src/linefuse/stage.py",
        "src/linefuse/stages/shard.py",
    output:
        directory("data/shards/{level}"),
        "metrics/shard/{level}.json",
    params:
        tracked=tracked(
            "data.source_dir",
            "degrade.seed",
            "degrade.domains",
            "degrade.gaussian.{level}",
            "degrade.motion.{level}",
            "degrade.scan.{level}",
            "degrade.compression.{level}",
            "degrade.lowres.{level}",
            "shards",
            "eval.deskew",
        ),
    log:
        "logs/snakemake/shard/{level}.log",
    threads: 8
    resources:
        cpus_per_task=8,
        mem_mb=4000,
        runtime=30,
    shell:
        "python -m linefuse.stages.shard --level {wildcards.level} --workers {threads} > {log} 2>&1"


rule embed:
    """precompute the model inputs (pixels or VAE latents) and the prompt table of one level"""
    input:
        "data/shards/{level}",
        "data/index/images.parquet",
        "src/linefuse/__init__.py",
        "src/linefuse/data/layout.py",
        "src/linefuse/data/readers.py",
        "src/linefuse/data/transforms.py",
        "src/linefuse/hardware.py",
        "src/linefuse/inference/__init__.py",
        "src/linefuse/inference/model.py",
        "src/linefuse/params/__init__.py",
        "src/linefuse/params/compute.py",
        "src/linefuse/params/degrade.py",
        "src/linefuse/params/embed.py",
        "src/linefuse/params/model.py",
        "src/linefuse/paths.py",
        "src/linefuse/stage.py",
        "src/linefuse/stages/embed.py",
        "src/linefuse/train/embed.py",
    output:
        directory("data/embeddings/{level}"),
        "metrics/embed/{level}.json",
    params:
        tracked=tracked(
            "compute",
            "model.unet",
            "model.vae",
            "model.text_encoder",
            "embed",
            "degrade.levels",
        ),
    log:
        "logs/snakemake/embed/{level}.log",
    threads: workflow.cores
    shell:
        "python -m linefuse.stages.embed --level {wildcards.level} > {log} 2>&1"


rule evaluate:
    """export the last curriculum adapter's model to ONNX; score it (and any per-domain ones) on test and held out; save the base as a LineFusePipeline"""
    input:
        expand("data/shards/{level}", level=LEVELS),
        "data/index/images.parquet",
        param_input("data.source_dir"),
        "models/base",
        expand("models/lora/{level}", level=CURRICULUM),
        "models/domains",
        "src/linefuse/__init__.py",
        "src/linefuse/data/degrade.py",
        "src/linefuse/data/deskew.py",
        "src/linefuse/data/images.py",
        "src/linefuse/data/labels.py",
        "src/linefuse/data/layout.py",
        "src/linefuse/data/readers.py",
        "src/linefuse/data/transforms.py",
        "src/linefuse/digitize/__init__.py",
        "src/linefuse/digitize/axes.py",
        "src/linefuse/digitize/calibrate.py",
        "src/linefuse/digitize/chart.py",
        "src/linefuse/digitize/curves.py",
        "src/linefuse/digitize/label_crops.py",
        "src/linefuse/digitize/label_onnx.py",
        "src/linefuse/digitize/label_reader.py",
        "src/linefuse/digitize/legend.py",
        "src/linefuse/digitize/line_score.py",
        "src/linefuse/digitize/ocr.py",
        "src/linefuse/digitize/scale.py",
        "src/linefuse/digitize/score.py",
        "src/linefuse/digitize/series.py",
        "src/linefuse/evaluate/baselines.py",
        "src/linefuse/evaluate/chart_metrics.py",
        "src/linefuse/evaluate/evaluate.py",
        "src/linefuse/evaluate/intervals.py",
        "src/linefuse/evaluate/metrics.py",
        "src/linefuse/evaluate/outputs.py",
        "src/linefuse/evaluate/scoring.py",
        "src/linefuse/evaluate/tables.py",
        "src/linefuse/hardware.py",
        "src/linefuse/inference/__init__.py",
        "src/linefuse/inference/model.py",
        "src/linefuse/inference/numpy_sampler.py",
        "src/linefuse/inference/onnx_export.py",
        "src/linefuse/inference/onnx_model.py",
        "src/linefuse/inference/pipeline.py",
        "src/linefuse/inference/restorer.py",
        "src/linefuse/inference/runtime.py",
        "src/linefuse/inference/sampler.py",
        "src/linefuse/inference/settings.py",
        "src/linefuse/inference/tile_choice.py",
        "src/linefuse/inference/tiles.py",
        "src/linefuse/inference/torch_model.py",
        "src/linefuse/params/__init__.py",
        "src/linefuse/params/compute.py",
        "src/linefuse/params/data.py",
        "src/linefuse/params/degrade.py",
        "src/linefuse/params/evaluation.py",
        "src/linefuse/params/model.py",
        "src/linefuse/params/training.py",
        "src/linefuse/paths.py",
        "src/linefuse/stage.py",
        "src/linefuse/stages/evaluate.py",
        "src/linefuse/zoo",
    output:
        "reports/eval_detail.json",
        directory("models/pipeline"),
        directory("models/onnx"),
        directory("models/onnx_base"),
        "reports/samples.png",
        "metrics/eval.json",
        "plots/psnr_by_domain_level.csv",
        "plots/psnr_vs_steps.csv",
        "plots/gain_by_cell.csv",
        "plots/ocr_cer_by_level.csv",
        "plots/digitize_error_by_level.csv",
    params:
        tracked=tracked(
            "compute",
            "model",
            "eval",
            "tiles",
            "data.source_dir",
            "data.charts.held_out",
            "degrade.levels",
            "degrade.domains",
            "train.curriculum",
            "optim.start_fraction",
        ),
    log:
        "logs/snakemake/evaluate.log",
    threads: workflow.cores
    shell:
        "python -m linefuse.stages.evaluate --workers {threads} > {log} 2>&1"


rule pretrain:
    """train the base UNet on every level, or copy the pretrained one model.unet names"""
    input:
        expand("data/embeddings/{level}", level=LEVELS),
        "src/linefuse/__init__.py",
        "src/linefuse/data/labels.py",
        "src/linefuse/data/layout.py",
        "src/linefuse/data/readers.py",
        "src/linefuse/data/transforms.py",
        "src/linefuse/digitize/__init__.py",
        "src/linefuse/digitize/label_crops.py",
        "src/linefuse/digitize/label_reader.py",
        "src/linefuse/hardware.py",
        "src/linefuse/inference/__init__.py",
        "src/linefuse/inference/model.py",
        "src/linefuse/inference/sampler.py",
        "src/linefuse/params/__init__.py",
        "src/linefuse/params/compute.py",
        "src/linefuse/params/degrade.py",
        "src/linefuse/params/model.py",
        "src/linefuse/params/training.py",
        "src/linefuse/paths.py",
        "src/linefuse/stage.py",
        "src/linefuse/stages/pretrain.py",
        "src/linefuse/train/checkpoints.py",
        "src/linefuse/train/configs",
        "src/linefuse/train/diffusion.py",
        "src/linefuse/train/job.py",
        "src/linefuse/train/model.py",
        "src/linefuse/train/null_prompt.py",
        "src/linefuse/train/pretrain.py",
        "src/linefuse/train/run.py",
        "src/linefuse/train/step.py",
        "src/linefuse/train/telemetry.py",
        "src/linefuse/train/trainset.py",
        "src/linefuse/zoo",
        "src/linefuse/launch.py",
        launch=config["launch"]["config"],
    output:
        directory("models/base"),
        directory("logs/pretrain"),
        "metrics/train/pretrain.json",
    params:
        tracked=tracked(
            "compute",
            "model",
            "loader",
            "optim",
            "launch",
            "pretrain",
            "degrade.levels",
        ),
        processes=PROCESSES,
    log:
        "logs/snakemake/pretrain.log",
    threads: workflow.cores
    resources:
        mem_mb=16000,
        runtime=120,
        gpu=PROCESSES,
    shell:
        "python -m linefuse.launch --config_file {input.launch} --num_processes {params.processes} --num_cpu_threads_per_process $(nproc) -m linefuse.stages.pretrain > {log} 2>&1"


rule train:
    """train one curriculum level's LoRA adapter, from the one train.curriculum names"""
    input:
        expand("data/embeddings/{level}", level=LEVELS),
        "models/base",
        param_input("train.curriculum.{level}.init"),
        "src/linefuse/__init__.py",
        "src/linefuse/data/labels.py",
        "src/linefuse/data/layout.py",
        "src/linefuse/data/readers.py",
        "src/linefuse/data/transforms.py",
        "src/linefuse/digitize/__init__.py",
        "src/linefuse/digitize/label_crops.py",
        "src/linefuse/digitize/label_reader.py",
        "src/linefuse/hardware.py",
        "src/linefuse/inference/__init__.py",
        "src/linefuse/inference/model.py",
        "src/linefuse/inference/sampler.py",
        "src/linefuse/params/__init__.py",
        "src/linefuse/params/compute.py",
        "src/linefuse/params/model.py",
        "src/linefuse/params/training.py",
        "src/linefuse/paths.py",
        "src/linefuse/stage.py",
        "src/linefuse/stages/train.py",
        "src/linefuse/train/checkpoints.py",
        "src/linefuse/train/configs",
        "src/linefuse/train/curriculum.py",
        "src/linefuse/train/diffusion.py",
        "src/linefuse/train/job.py",
        "src/linefuse/train/model.py",
        "src/linefuse/train/null_prompt.py",
        "src/linefuse/train/run.py",
        "src/linefuse/train/step.py",
        "src/linefuse/train/telemetry.py",
        "src/linefuse/train/trainset.py",
        "src/linefuse/zoo",
        "src/linefuse/launch.py",
        launch=config["launch"]["config"],
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
        processes=PROCESSES,
    log:
        "logs/snakemake/train/{level}.log",
    threads: workflow.cores
    resources:
        mem_mb=16000,
        runtime=120,
        gpu=PROCESSES,
    shell:
        "python -m linefuse.launch --config_file {input.launch} --num_processes {params.processes} --num_cpu_threads_per_process $(nproc) -m linefuse.stages.train --level {wildcards.level} > {log} 2>&1"


rule train_domains:
    """one adapter per blur domain and their merge (train.adapters: per_domain), else none"""
    input:
        expand("data/embeddings/{level}", level=LEVELS),
        "models/base",
        "src/linefuse/__init__.py",
        "src/linefuse/data/labels.py",
        "src/linefuse/data/layout.py",
        "src/linefuse/data/readers.py",
        "src/linefuse/data/transforms.py",
        "src/linefuse/digitize/__init__.py",
        "src/linefuse/digitize/label_crops.py",
        "src/linefuse/digitize/label_reader.py",
        "src/linefuse/hardware.py",
        "src/linefuse/inference/__init__.py",
        "src/linefuse/inference/model.py",
        "src/linefuse/inference/sampler.py",
        "src/linefuse/params/__init__.py",
        "src/linefuse/params/compute.py",
        "src/linefuse/params/degrade.py",
        "src/linefuse/params/model.py",
        "src/linefuse/params/training.py",
        "src/linefuse/paths.py",
        "src/linefuse/stage.py",
        "src/linefuse/stages/train_domains.py",
        "src/linefuse/train/checkpoints.py",
        "src/linefuse/train/configs",
        "src/linefuse/train/curriculum.py",
        "src/linefuse/train/diffusion.py",
        "src/linefuse/train/domains.py",
        "src/linefuse/train/job.py",
        "src/linefuse/train/model.py",
        "src/linefuse/train/null_prompt.py",
        "src/linefuse/train/run.py",
        "src/linefuse/train/step.py",
        "src/linefuse/train/telemetry.py",
        "src/linefuse/train/trainset.py",
        "src/linefuse/zoo",
        "src/linefuse/launch.py",
        launch=config["launch"]["config"],
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
        processes=PROCESSES,
    log:
        "logs/snakemake/train_domains.log",
    threads: workflow.cores
    resources:
        mem_mb=16000,
        runtime=120,
        gpu=PROCESSES,
    shell:
        "python -m linefuse.launch --config_file {input.launch} --num_processes {params.processes} --num_cpu_threads_per_process $(nproc) -m linefuse.stages.train_domains > {log} 2>&1"


rule report:
    """the HTML report of evaluate's tables and plots, with the params that made them"""
    input:
        "reports/eval_detail.json",
        "plots/psnr_by_domain_level.csv",
        "plots/psnr_vs_steps.csv",
        "reports/samples.png",
        "src/linefuse/__init__.py",
        "src/linefuse/params/__init__.py",
        "src/linefuse/params/data.py",
        "src/linefuse/params/degrade.py",
        "src/linefuse/params/embed.py",
        "src/linefuse/params/evaluation.py",
        "src/linefuse/params/model.py",
        "src/linefuse/params/shards.py",
        "src/linefuse/params/training.py",
        "src/linefuse/paths.py",
        "src/linefuse/report/index.html.j2",
        "src/linefuse/report/report.css",
        "src/linefuse/report/report.py",
        "src/linefuse/stage.py",
        "src/linefuse/stages/report.py",
    output:
        "reports/index.html",
    params:
        tracked=tracked(
            "data",
            "degrade",
            "shards",
            "model",
            "embed",
            "optim",
            "pretrain",
            "train",
            "eval",
        ),
    log:
        "logs/snakemake/report.log",
    threads: 1
    shell:
        "python -m linefuse.stages.report > {log} 2>&1"
