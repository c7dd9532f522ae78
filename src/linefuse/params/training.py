"""params.yaml's training sections, read together by the training stages: `loader`, `optim`,
`pretrain`, `train` (LoRA, the curriculum, per-domain adapters) and `launch`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import Field, field_validator, model_validator

from linefuse.params import KeyedError, Strict, cross_check
from linefuse.paths import BASE_DIR, LORA_DIR

STREAM_SCHEMES = ("file://", "http://", "https://")


class LossWeights(Strict):
    mse: Annotated[float, Field(ge=0.0)]
    l1: Annotated[float, Field(ge=0.0)]
    charbonnier: Annotated[float, Field(ge=0.0)]
    # each sample weighs (mean |target| + floor) ** -balance: 0 = plain mean over the batch
    balance: Annotated[float, Field(ge=0.0, le=2.0)]
    laplacian: Annotated[float, Field(ge=0.0)]  # the L1 of the error's Laplacian

    @model_validator(mode="after")
    def _some_weight(self) -> LossWeights:
        if self.mse + self.l1 + self.charbonnier <= 0:
            raise ValueError("needs a positive weight on at least one of mse, l1, charbonnier")
        return self


class LoaderParams(Strict):
    """How training reads its data; none of these change what a step sees, only how fast."""

    reader: Literal["embeddings", "lmdb", "webdataset"]
    workers: Literal["auto"] | Annotated[int, Field(ge=0)]
    prefetch_factor: Annotated[int, Field(ge=1)]
    persistent_workers: bool
    pin_memory: Literal["auto"] | bool
    cache_gb: Annotated[float, Field(ge=0.0)]
    shuffle_buffer: Annotated[int, Field(ge=0)]
    # webdataset reader: where each level's train shards live instead of data/shards/LEVEL/wds;
    # anything WebDataset opens: a path, file://, http(s)://, or a pipe: command, {a..b} braces
    shard_urls: dict[str, str | list[str]]

    @field_validator("shard_urls")
    @classmethod
    def _openable_urls(cls, shard_urls: dict) -> dict:
        for level, urls in shard_urls.items():
            for url in [urls] if isinstance(urls, str) else urls:
                if "://" in url and not url.startswith(STREAM_SCHEMES):
                    raise ValueError(
                        f"{level}: {url} has a scheme WebDataset cannot open; "
                        f"accepts a path, {', '.join(STREAM_SCHEMES)} or pipe:COMMAND"
                    )
        return shard_urls


class OptimParams(Strict):
    """Shared by pretrain and every train@LEVEL."""

    seed: int
    batch_size: Annotated[int, Field(ge=1)]
    grad_accum: Annotated[int, Field(ge=1)]
    precision: Literal["auto", "fp32", "bf16", "fp16"]  # auto: linefuse.hardware decides
    optimizer: Literal["adamw", "adamw8bit"]
    weight_decay: Annotated[float, Field(ge=0.0)]
    clip_grad_norm: Annotated[float, Field(gt=0.0)] | None
    warmup_steps: Annotated[int, Field(ge=0)]
    loss: LossWeights
    start_fraction: Annotated[float, Field(ge=0.0, le=1.0)]
    timestep_range: tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=1)]]
    identity_fraction: Annotated[float, Field(ge=0.0, lt=1.0)]
    gradient_checkpointing: bool
    compile: bool
    checkpoint_every: Annotated[int, Field(ge=1)]
    keep_checkpoints: Annotated[int, Field(ge=1)]
    log_every: Annotated[int, Field(ge=1)]
    val_every: Annotated[int, Field(ge=0)]
    memory_warn_fraction: Annotated[float, Field(gt=0.0, le=1.0)]


class PretrainParams(Strict):
    steps: Annotated[int, Field(ge=1)]
    lr: Annotated[float, Field(gt=0.0, le=1.0)]


class LoraParams(Strict):
    rank: Annotated[int, Field(ge=1, le=1024)]
    alpha: Annotated[float, Field(gt=0.0)]
    dropout: Annotated[float, Field(ge=0.0, lt=1.0)]
    target_modules: list[str]
    blocks: list[str]

    @field_validator("target_modules")
    @classmethod
    def _some_targets(cls, targets: list[str]) -> list[str]:
        if not targets:
            raise ValueError("needs at least one module name, e.g. to_q, to_k, to_v, conv1")
        return targets


class UnfreezeParams(Strict):
    """Hybrid training: from `level` on, these backbone blocks train fully beside LoRA."""

    level: str | None
    blocks: list[str]


class CurriculumLevel(Strict):
    init: str
    steps: Annotated[int, Field(ge=1)]
    lr: Annotated[float, Field(gt=0.0, le=1.0)]


class PerDomainParams(Strict):
    """One adapter per blur domain on the base (train_domains), and their weighted merge."""

    domains: list[str]
    steps: Annotated[int, Field(ge=1)]
    lr: Annotated[float, Field(gt=0.0, le=1.0)]
    combination: Literal["cat", "svd", "linear"]
    weights: list[float] | None

    @model_validator(mode="after")
    def _weights_match_domains(self) -> PerDomainParams:
        if not self.domains or len(set(self.domains)) != len(self.domains):
            raise KeyedError(
                "train.per_domain.domains",
                "needs one or more distinct blur domains, e.g. [gaussian, scan, compression]",
            )
        if self.weights is not None and len(self.weights) != len(self.domains):
            raise KeyedError(
                "train.per_domain.weights",
                f"gives {len(self.weights)} weights "
                f"for {len(self.domains)} domains; give one per domain, or null "
                f"for equal weights",
            )
        return self

    def merge_weights(self) -> list[float]:
        return (
            list(self.weights)
            if self.weights is not None
            else [1.0 / len(self.domains)] * len(self.domains)
        )


class TrainParams(Strict):
    lora: LoraParams
    unfreeze: UnfreezeParams
    replay: bool
    ordered: bool  # false: curriculum off, every level's job samples every level alike
    curriculum: dict[str, CurriculumLevel]
    adapters: Literal["curriculum", "per_domain"]
    per_domain: PerDomainParams

    @model_validator(mode="after")
    def _curriculum_is_a_chain(self) -> TrainParams:
        order = self.order()  # raises on unknown predecessors and cycles
        if self.unfreeze.level is not None and self.unfreeze.level not in order:
            raise KeyedError(
                "train.unfreeze.level",
                f"{self.unfreeze.level!r} is not a "
                f"curriculum level; accepts null or one of {', '.join(order)}",
            )
        return self

    def predecessor(self, level: str) -> str | None:
        """The level whose adapter `level` starts from, or None when it starts from the base."""
        init = self.curriculum[level].init
        if init == BASE_DIR.as_posix():
            return None
        before = init.removeprefix(f"{LORA_DIR.as_posix()}/")
        if not init.startswith(f"{LORA_DIR.as_posix()}/") or before not in self.curriculum:
            raise KeyedError(
                f"train.curriculum.{level}.init",
                f"{init!r} names no curriculum level; accepts {BASE_DIR} or "
                f"{LORA_DIR}/LEVEL for one of {', '.join(self.curriculum)}",
            )
        return before

    def training_levels(self, level: str) -> list[str]:
        """The levels train@level samples from: with `replay`, those before it too, so the final
        adapter, which evaluate scores on every level, keeps what the earlier levels taught
        (docs/experiments.md: without it the hard adapter forgets the easy inputs)."""
        order = self.order()
        if not self.ordered:
            return order
        return order[: order.index(level) + 1] if self.replay else [level]

    def restoring_level(self) -> str:
        """The curriculum's last level: its adapter is the model evaluate scores and that
        restore, digitize and serve run unless told otherwise."""
        return self.order()[-1]

    def order(self) -> list[str]:
        """Levels from the one that starts at the base to the last, following `init`."""
        if not self.curriculum:
            raise KeyedError("train.curriculum", "is empty; give at least one level")
        roots = [level for level in self.curriculum if self.predecessor(level) is None]
        if len(roots) != 1:
            raise KeyedError(
                "train.curriculum",
                f"exactly one level must start from {BASE_DIR}; "
                f"found {len(roots)}" + (" (the levels form a cycle)" if not roots else ""),
            )
        order, followers = [roots[0]], {self.predecessor(lv): lv for lv in self.curriculum}
        while order[-1] in followers and len(order) <= len(self.curriculum):
            order.append(followers[order[-1]])
        if len(order) != len(self.curriculum) or len(followers) != len(self.curriculum):
            stray = next(lv for lv in self.curriculum if lv not in order)
            raise KeyedError(
                f"train.curriculum.{stray}.init",
                "makes a cycle or a branch; each "
                "level must start from the one before it, in one chain from the base",
            )
        return order


class LaunchParams(Strict):
    """How the training stages start: `accelerate launch` with this config and process count
    (linefuse/launch.py: one local process starts directly), also the GPUs each training job
    asks a cluster for."""

    processes: Annotated[int, Field(ge=1)]
    config: str

    @model_validator(mode="after")
    def _config_runs_that_many(self) -> LaunchParams:
        # a missing file is the engines' to report: it is a declared input of the training stages
        config = Path(self.config)
        distributed = (
            (yaml.safe_load(config.read_text()) or {}).get("distributed_type", "NO")
            if config.is_file()
            else None
        )
        if self.processes > 1 and distributed == "NO":
            raise KeyedError(
                "launch.processes",
                f"{self.processes} processes need a multi-process "
                f"config; {self.config} runs one (distributed_type: NO); set "
                f"launch.config: workflow/accelerate/ddp.yaml",
            )
        return self


@cross_check("train", "degrade")
def per_domain_domains_are_degrade_domains(params) -> None:
    for domain in params.train.per_domain.domains:
        if domain not in params.degrade.domains:
            raise KeyedError(
                "train.per_domain.domains",
                f"{domain!r} is not in "
                f"degrade.domains; accepts {', '.join(params.degrade.domains)}",
            )


@cross_check("optim", "model")
def timesteps_in_schedule(params) -> None:
    low, high = params.optim.timestep_range
    if not low < high <= params.model.train_timesteps:
        raise KeyedError(
            "optim.timestep_range",
            f"[{low}, {high}] is not a range within model.train_timesteps "
            f"({params.model.train_timesteps}); accepts [low, high] with "
            f"0 <= low < high <= {params.model.train_timesteps}",
        )


@cross_check("train", "degrade")
def curriculum_levels_are_shard_levels(params) -> None:
    for level in params.train.curriculum:
        if level not in params.degrade.levels:
            raise KeyedError(
                f"train.curriculum.{level}",
                f"is not in degrade.levels ({', '.join(params.degrade.levels)})",
            )


@cross_check("loader", "degrade")
def shard_urls_name_levels(params) -> None:
    for level in params.loader.shard_urls:
        if level not in params.degrade.levels:
            raise KeyedError(
                f"loader.shard_urls.{level}",
                f"is not in degrade.levels ({', '.join(params.degrade.levels)})",
            )
