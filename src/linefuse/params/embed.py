"""params.yaml's `embed` section: how the embed stage caches the model inputs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from linefuse.params import Strict


class EmbedParams(Strict):
    dtype: Literal["float32", "float16", "bfloat16"]
    batch_size: Annotated[int, Field(ge=1)]
    splits: list[Literal["train", "val", "test"]]
