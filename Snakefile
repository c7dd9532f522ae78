# The stage graph for Snakemake: one rule per stage of linefuse.pipeline.STAGES, the declaration
# dvc.yaml is written from, over the same params.yaml. A stage over levels is one rule with a
# {level} wildcard. Each job's stdout and stderr go to its `log:` file under logs/snakemake/
# (git-ignored; not a DVC output, unlike logs/pretrain and logs/train/LEVEL, which the training
# stages write). The training stages take every core (`threads: workflow.cores`): Snakemake sets
# OMP_NUM_THREADS to a job's threads, and torch's float results depend on its thread count, so a
# run here equals a `dvc repro` on the same machine.
from linefuse.pipeline import STAGES


configfile: "params.yaml"


include: "workflow/rules/common.smk"


rule all:
    input:
        final_outputs(),


for stage in STAGES:

    rule:
        name:
            stage.name
        input:
            rule_inputs(stage),
        output:
            rule_outputs(stage),
        params:
            tracked=tracked(*stage.params),
            command=job_command(stage),
        log:
            job_log(stage),
        threads: stage.threads or workflow.cores
        resources:
            **job_resources(stage),
        shell:
            "{params.command} > {log} 2>&1"
