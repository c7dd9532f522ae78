"""params.yaml's `shards` section: the crops the shard stage cuts and how it packs them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from linefuse.params import KeyedError, Strict, cross_check
from linefuse.paths import GENERATED_DIR


class ShardParams(Strict):
    crop: Annotated[int, Field(ge=8, le=4096)]
    patches_per_image: Annotated[int, Field(ge=1, le=1000)]
    focus: Annotated[float, Field(ge=0.0, le=1.0)]
    val_crop: Annotated[int, Field(ge=8, le=8192)]
    test_crop: Annotated[int, Field(ge=8, le=8192)] | None
    samples_per_shard: Annotated[int, Field(ge=1)]


@cross_check("shards", "data")
def crop_fits_generated_charts(params) -> None:
    charts = params.data.charts
    if Path(params.data.source_dir) == GENERATED_DIR:
        width, height = charts.smallest_chart()
        smallest = min(width, height)
        if params.shards.crop > smallest:
            raise KeyedError(
                "shards.crop",
                f"{params.shards.crop} px is larger than the smallest "
                f"generated chart ({width}x{height}: data.charts.width_in, height_in and dpi "
                f"at their lows); accepts at most {smallest}",
            )
