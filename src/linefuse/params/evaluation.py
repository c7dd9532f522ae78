"""params.yaml's `eval` and `tiles` sections: how evaluate scores, and the tiles evaluate,
restore and serve restore large images in."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from linefuse.params import KeyedError, Strict


class MetricParams(Strict):
    """How PSNR/SSIM are computed (BasicSR's conventions): data range 255 for uint8 images."""

    color: Literal["rgb", "y"]
    crop_border: Annotated[int, Field(ge=0)]


class BaselineParams(Strict):
    wiener_balance: Annotated[float, Field(gt=0.0)]
    richardson_lucy_iterations: Annotated[int, Field(ge=1, le=1000)]
    unsharp_radius: Annotated[float, Field(gt=0.0)]
    unsharp_amount: Annotated[float, Field(gt=0.0)]


class SweepParams(Strict):
    """Quality and speed against DDIM steps, on the first `samples` test images of each cell."""

    steps: list[Annotated[int, Field(ge=1, le=1000)]]
    samples: Annotated[int, Field(ge=1)]

    @field_validator("steps")
    @classmethod
    def _distinct_steps(cls, steps: list[int]) -> list[int]:
        if not steps or len(set(steps)) != len(steps):
            raise ValueError("needs one or more distinct sampler step counts, e.g. [1, 4, 25]")
        return sorted(steps)


class IntervalParams(Strict):
    """The bootstrap interval of each cell's mean PSNR gain."""

    confidence: Annotated[float, Field(gt=0.0, lt=1.0)]
    resamples: Annotated[int, Field(ge=100, le=100_000)]


class OcrParams(Strict):
    """Tick-label legibility (Tesseract's character error rate) on `max_images` images of each
    domain and level, in the test and held-out splits, each domain's from other charts while
    there are enough (evaluate/scoring.spread_per_domain); null reads them all, 0 none."""

    max_images: Annotated[int, Field(ge=0)] | None


class DigitizeParams(Strict):
    """The data read back with no sidecar (linefuse digitize): `max_images` images of each
    domain and level, in the test and held-out splits, each domain's from other charts while
    there are enough (evaluate/scoring.spread_per_domain), digitized as input, restored and
    sharp, and scored against the chart's data; null digitizes them all, 0 none."""

    max_images: Annotated[int, Field(ge=0)] | None


class DigitizeSetsParams(Strict):
    """The charts digitize is decided on (dev, dev2) and reported on (report): data.charts drawn
    with seeds of their own (linefuse.digitize.sets)."""

    dev_seed: int
    dev2_seed: int
    report_seed: int
    charts: Annotated[int, Field(ge=1)]


class EvalParams(Strict):
    steps: Annotated[int, Field(ge=1, le=1000)]
    shrink: Annotated[float, Field(ge=0.0, le=255.0)]
    deskew: Literal["auto", "always", "never"]
    runtime: Literal["auto", "onnx", "torch"]  # inference/runtime.py
    sweep: SweepParams
    batch_size: Annotated[int, Field(ge=1)]
    seed: int
    max_samples: Annotated[int, Field(ge=1)] | None
    interval: IntervalParams
    metric: MetricParams
    baselines: BaselineParams
    ocr: OcrParams
    digitize: DigitizeParams


class TileParams(Strict):
    """Images larger than `size` are restored in overlapping tiles of `tile` px (evaluate,
    restore, serve); `auto`: the size that restores each image cheapest, measured."""

    size: Annotated[int, Field(ge=16, le=4096)]
    tile: Literal["auto"] | Annotated[int, Field(ge=16, le=4096)]
    overlap: Annotated[int, Field(ge=0)]
    batch_size: Annotated[int, Field(ge=1)]

    @model_validator(mode="after")
    def _overlap_fits(self) -> TileParams:
        for key, size in (("size", self.size), ("tile", self.tile)):
            if size != "auto" and 2 * self.overlap > size:
                raise KeyedError(
                    "tiles.overlap",
                    f"{self.overlap} px is more than half of tiles.{key} ({size}); accepts at "
                    f"most {size // 2}",
                )
        return self
