"""RestoreSettings: what restoring needs besides the weights and the scheduler. A module of its
own because the restorer, both runtimes' models and the runtime choice all read it, and none of
them should import another for it."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from linefuse.params.full import Params


@dataclasses.dataclass(frozen=True)
class RestoreSettings:
    """What restoring needs besides the weights and the scheduler: params.yaml's values
    (from_params), or those a saved LineFusePipeline keeps in its model_index.json."""

    target: str  # model.target: the model predicts the residual or the sharp image
    sample_start: str  # model.sample_start: the sampler starts at the prior's mean or noise
    start_fraction: float  # optim.start_fraction the model was trained with (1: first step only)
    shrink: float  # eval.shrink
    deskew: str  # eval.deskew: auto, always or never
    whole: int  # tiles.size: the largest side restored whole, and the largest tile
    tile: int | str  # tiles.tile: px, or auto (the cheapest measured)
    overlap: int  # tiles.overlap
    tile_batch: int  # tiles.batch_size

    @classmethod
    def from_params(cls, params: Params) -> RestoreSettings:
        return cls(
            target=params.model.target,
            sample_start=params.model.sample_start,
            start_fraction=params.optim.start_fraction,
            shrink=params.eval.shrink,
            deskew=params.eval.deskew,
            whole=params.tiles.size,
            tile=params.tiles.tile,
            overlap=params.tiles.overlap,
            tile_batch=params.tiles.batch_size,
        )

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)
