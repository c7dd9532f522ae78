"""train_domains: one LoRA adapter per blur domain, and their weighted merge.

With `train.adapters: per_domain`, each domain in train.per_domain.domains gets its own adapter
on the base, trained on that domain's samples of every level (by default gaussian, scan and
compression); peft's add_weighted_adapter then merges them into one `combined` adapter.
evaluate scores each domain with its own adapter and every domain with the combined one.
With `train.adapters: curriculum` the stage writes only a manifest saying there are none, so the
stage graph is the same in both modes.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from linefuse import paths
from linefuse.data.layout import ADAPTERS_MANIFEST, COMBINED
from linefuse.stage import atomic_dir, write_json

if TYPE_CHECKING:
    from linefuse.params.full import Params
    from linefuse.train.job import Job

log = logging.getLogger("linefuse")
METRICS_PATH = paths.train_metrics("domains")
LOG_DIR = paths.train_logs("domains")


def domain_job(params: Params, domain: str, out_dir: Path, log_root: Path) -> Job:
    """One per-domain adapter: on the base, over that domain's samples of every level."""
    from linefuse.train.job import Job

    per_domain = params.train.per_domain
    return Job(
        name=f"train_domains@{domain}",
        steps=per_domain.steps,
        lr=per_domain.lr,
        lr_key="train.per_domain.lr",
        levels=list(params.degrade.levels),
        out_dir=out_dir,
        metrics_path=log_root / f"{domain}.json",
        log_dir=log_root / domain,
        domain=domain,
        settings={
            **params.model_dump(include={"model", "optim"}),
            "lora": params.train.lora.model_dump(),
            "domain": domain,
            "per_domain": per_domain.model_dump(include={"steps", "lr"}),
        },
    )


def train_domain_adapters(params: Params) -> dict:
    """Writes models/domains (adapters + manifest), logs/train/domains and its metrics file."""
    per_domain = params.train.per_domain
    metrics: dict = {"mode": params.train.adapters, "adapters": {}}
    with atomic_dir(paths.DOMAIN_ADAPTERS_DIR) as tmp, atomic_dir(LOG_DIR) as logs:
        manifest = {"adapters": {}, "combined": None}
        if params.train.adapters == "per_domain":
            # torch, diffusers and peft load only here: the curriculum's run writes a manifest
            from linefuse.train.curriculum import train_adapter

            for domain in per_domain.domains:
                metrics["adapters"][domain] = train_adapter(
                    params, domain_job(params, domain, tmp / domain, logs)
                )
                manifest["adapters"][domain] = domain
            weights = per_domain.merge_weights()
            merge_adapters(tmp, per_domain.domains, weights, per_domain.combination, tmp / COMBINED)
            manifest["combined"] = COMBINED
            metrics["combined"] = {
                "domains": per_domain.domains,
                "weights": weights,
                "combination": per_domain.combination,
            }
        else:
            note = (
                f"train.adapters is {params.train.adapters}: no per-domain adapters "
                f"(set it to per_domain to train them)"
            )
            (logs / "README.txt").write_text(note + "\n")  # DVC warns on an empty output
            log.info("train_domains: %s", note)
        (tmp / ADAPTERS_MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    write_json(METRICS_PATH, metrics)
    return metrics


def merge_adapters(
    folder: Path, domains: list[str], weights: list[float], combination: str, out_dir: Path
) -> None:
    """peft's add_weighted_adapter over folder/DOMAIN adapters, saved as a plain adapter folder.

    `cat` stacks the adapters' ranks, so the merged update is exactly sum(w_i * delta_W_i);
    `svd` compresses that to the largest rank; `linear` averages A and B (approximate).
    """
    from peft import PeftModel

    from linefuse.inference.model import load_base
    from linefuse.train.model import save_adapter

    model = PeftModel.from_pretrained(
        load_base(paths.BASE_DIR), str(folder / domains[0]), adapter_name=domains[0]
    )
    for domain in domains[1:]:
        model.load_adapter(str(folder / domain), adapter_name=domain)
    model.add_weighted_adapter(domains, weights, COMBINED, combination_type=combination)
    model.set_adapter(COMBINED)
    for domain in domains:
        model.delete_adapter(domain)
    staging = out_dir.with_name(out_dir.name + ".peft")
    save_adapter(model, staging)
    # peft writes a non-default adapter into a sub-folder named after it
    shutil.move(str(staging / COMBINED), str(out_dir))
    shutil.rmtree(staging)
