"""The whole params.yaml as one model, `Params`: what the commands around the stages read
(restore, serve, the shipped models' training), and the benchmarks and tests. A stage reads only
its own sections (linefuse.stages), so it never imports this module but for type hints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ConfigDict

from linefuse.params import Sections, load_sections, validate
from linefuse.params.base import BaseParams, LabelReaderParams
from linefuse.params.compute import ComputeParams
from linefuse.params.data import DataParams
from linefuse.params.degrade import DegradeParams
from linefuse.params.embed import EmbedParams
from linefuse.params.evaluation import DigitizeSetsParams, EvalParams, TileParams
from linefuse.params.model import ModelParams
from linefuse.params.shards import ShardParams
from linefuse.params.training import (
    LaunchParams,
    LoaderParams,
    OptimParams,
    PretrainParams,
    TrainParams,
)
from linefuse.paths import PARAMS


class Params(Sections):
    """Every section; an unknown one is an error, as it is no reader's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: DataParams
    degrade: DegradeParams
    shards: ShardParams
    model: ModelParams
    embed: EmbedParams
    loader: LoaderParams
    optim: OptimParams
    pretrain: PretrainParams
    base: BaseParams
    label_reader: LabelReaderParams
    digitize_reader: LabelReaderParams
    digitize_sets: DigitizeSetsParams
    train: TrainParams
    eval: EvalParams
    tiles: TileParams
    # restore's and serve's own (linefuse.serve.settings validates it where they read it): no
    # stage reads it, and its schema is none of theirs
    serve: dict[str, Any]
    launch: LaunchParams
    compute: ComputeParams


def parse_params(raw: Any, source: str = str(PARAMS)) -> Params:
    return validate(Params, raw, source)


def load_params(path: str | Path = PARAMS) -> Params:
    return load_sections(Params, path)
