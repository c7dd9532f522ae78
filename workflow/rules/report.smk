# The report: reports/index.html from what evaluate wrote. Its params are the params.yaml
# sections the page shows (linefuse.report.report.SECTIONS), as in dvc.yaml.


rule report:
    input:
        "reports/eval_detail.json",
        "plots/psnr_by_domain_level.csv",
        "plots/psnr_vs_steps.csv",
        "reports/samples.png",
        "src/linefuse/report",
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
    shell:
        "linefuse report > {log} 2>&1"
