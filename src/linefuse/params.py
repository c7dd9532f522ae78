"""Typed, validated view of params.yaml.

Every stage loads the whole file through `load_params`, so a bad value anywhere stops the run
before any stage does work. Errors become one `ParamsError` line naming the dotted key and what
it accepts; the CLI prints that line instead of a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

DOMAINS = ("gaussian", "motion", "scan", "compression", "lowres")
SPLITS = ("train", "val", "test")


class ParamsError(ValueError):
    """A user error in params.yaml: one line, naming the key and what it accepts."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


PositiveInt = Annotated[int, Field(gt=0)]
Probability = Annotated[float, Field(ge=0.0, le=1.0)]


def _range(kind: type, low: float | None = None, high: float | None = None):
    """A `[low, high]` pair with low <= high, both inside the given bounds."""

    def check(value: Any) -> tuple:
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise ValueError("must be a [low, high] pair")
        lo, hi = (kind(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
                  for v in value)
        if not all(isinstance(v, (int, float)) for v in (lo, hi)):
            raise ValueError(f"must be a [low, high] pair of {kind.__name__}s")
        if kind is int and (lo != int(lo) or hi != int(hi)):
            raise ValueError("must be a [low, high] pair of integers")
        if lo > hi:
            raise ValueError(f"range [{lo}, {hi}] is empty: give [low, high] with low <= high")
        for v in (lo, hi):
            if low is not None and v < low:
                raise ValueError(f"values must be >= {low}, got {v}")
            if high is not None and v > high:
                raise ValueError(f"values must be <= {high}, got {v}")
        return (kind(lo), kind(hi))

    return Annotated[tuple, BeforeValidator(check)]


# --- data -------------------------------------------------------------------------------------


class ChartParams(Strict):
    """The embedded default data set: synthetic spectra rendered as line charts."""

    count: Annotated[int, Field(ge=0)] = 60
    width: Annotated[int, Field(ge=32, le=4096)] = 256
    height: Annotated[int, Field(ge=32, le=4096)] = 192
    seed: int = 0
    points: Annotated[int, Field(ge=16)] = 512
    peaks: _range(int, 1, 50) = (2, 7)
    noise: Annotated[float, Field(ge=0.0, le=0.2)] = 0.01
    line_width_pt: Annotated[float, Field(gt=0.0, le=10.0)] = 1.2
    dpi: Annotated[int, Field(ge=36, le=600)] = 100
    pure_line: bool = False
    axes_prob: Probability = 0.6
    grid_prob: Probability = 0.3
    labels_prob: Probability = 0.5
    paper_prob: Probability = 0.5


class SplitRatios(Strict):
    train: Probability = 0.8
    val: Probability = 0.1
    test: Probability = 0.1

    @model_validator(mode="after")
    def _sums_to_one(self) -> SplitRatios:
        total = self.train + self.val + self.test
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"train + val + test must sum to 1, got {total:g}")
        return self


class DataParams(Strict):
    source_dir: str = "data/source"
    min_side: Annotated[int, Field(ge=1)] = 32
    max_pixels: Annotated[int, Field(ge=1)] = 50_000_000
    split: SplitRatios = SplitRatios()
    charts: ChartParams = ChartParams()


# --- degradations -----------------------------------------------------------------------------


class GaussianLevel(Strict):
    sigma: _range(float, 0.0, 50.0)


class MotionLevel(Strict):
    length: _range(int, 1, 101)
    angle: _range(float, 0.0, 360.0) = (0.0, 180.0)


class ScanLevel(Strict):
    """Print-and-scan: geometry, resampling blur, contrast loss, print grain, paper shading."""

    blur: Annotated[float, Field(ge=0.0, le=20.0)]
    contrast: Annotated[float, Field(gt=0.0, le=1.0)]
    noise: Annotated[float, Field(ge=0.0, le=1.0)]
    rotation_deg: Annotated[float, Field(ge=0.0, le=10.0)] = 0.5
    shear: Annotated[float, Field(ge=0.0, le=0.2)] = 0.01
    background: Annotated[float, Field(ge=0.0, le=0.5)] = 0.03
    line_fade: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0


class CompressionLevel(Strict):
    quality: _range(int, 1, 95)


class LowresLevel(Strict):
    factor: _range(float, 1.0, 16.0)


class DegradeParams(Strict):
    seed: int = 0
    levels: list[str] = ["easy", "medium", "hard"]
    domains: list[str] = list(DOMAINS)
    gaussian: dict[str, GaussianLevel]
    motion: dict[str, MotionLevel]
    scan: dict[str, ScanLevel]
    compression: dict[str, CompressionLevel]
    lowres: dict[str, LowresLevel]

    @field_validator("domains")
    @classmethod
    def _known_domains(cls, domains: list[str]) -> list[str]:
        unknown = [d for d in domains if d not in DOMAINS]
        if unknown:
            raise ValueError(f"unknown domain {unknown[0]!r}; accepts {', '.join(DOMAINS)}")
        if not domains:
            raise ValueError(f"needs at least one of {', '.join(DOMAINS)}")
        if len(set(domains)) != len(domains):
            raise ValueError("lists a domain twice")
        return domains

    @field_validator("levels")
    @classmethod
    def _level_names(cls, levels: list[str]) -> list[str]:
        if not levels:
            raise ValueError("needs at least one level name")
        for level in levels:
            if not level.isidentifier():
                raise ValueError(f"level {level!r} must be a plain name (letters, digits, _)")
        if len(set(levels)) != len(levels):
            raise ValueError("lists a level twice")
        return levels

    @model_validator(mode="after")
    def _every_level_defined(self) -> DegradeParams:
        for domain in self.domains:
            table = getattr(self, domain)
            for level in self.levels:
                if level not in table:
                    raise _KeyedError(f"degrade.{domain}.{level}",
                                      f"missing; every domain needs an entry for each of "
                                      f"degrade.levels ({', '.join(self.levels)})")
        return self

    def level(self, domain: str, level: str) -> Strict:
        return getattr(self, domain)[level]


# --- shards -----------------------------------------------------------------------------------


class ShardParams(Strict):
    crop: Annotated[int, Field(ge=8, le=4096)] = 64
    patches_per_image: Annotated[int, Field(ge=1, le=1000)] = 4
    eval_crop: Annotated[int, Field(ge=8, le=8192)] | None = 128
    samples_per_shard: Annotated[int, Field(ge=1)] = 512


class Params(Strict):
    data: DataParams = DataParams()
    degrade: DegradeParams
    shards: ShardParams = ShardParams()

    @model_validator(mode="after")
    def _crop_fits_generated_charts(self) -> Params:
        charts = self.data.charts
        if self.data.source_dir == DataParams().source_dir:
            smallest = min(charts.width, charts.height)
            if self.shards.crop > smallest:
                raise _KeyedError("shards.crop", f"{self.shards.crop} px is larger than the "
                                  f"generated charts ({charts.width}x{charts.height}); "
                                  f"accepts at most {smallest}")
        return self


class _KeyedError(ValueError):
    """A cross-field error that names its own dotted key."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def _one_line(error: ValidationError, source: str) -> str:
    first = error.errors()[0]
    key = ".".join(str(part) for part in first["loc"])
    message = first["msg"]
    ctx_error = (first.get("ctx") or {}).get("error")
    if isinstance(ctx_error, _KeyedError):
        key, message = ctx_error.key, str(ctx_error)
    elif first["type"] == "extra_forbidden":
        parent = key.rpartition(".")[0]
        message = "unknown key; remove it or fix its spelling"
        if parent:
            message += f" (see the keys under {parent!r} in the README)"
    elif first["type"] == "missing":
        message = "missing; this key is required"
    else:
        message = message.removeprefix("Value error, ")
        if "input" in first and first["type"] not in ("value_error",):
            message += f" (got {first['input']!r})"
    return f"{source}: {key or '<top level>'}: {message}"


def parse_params(raw: Any, source: str = "params.yaml") -> Params:
    if not isinstance(raw, dict):
        raise ParamsError(f"{source}: must be a mapping of sections (data, degrade, shards)")
    try:
        return Params.model_validate(raw)
    except ValidationError as error:
        raise ParamsError(_one_line(error, source)) from None


def load_params(path: str | Path = "params.yaml") -> Params:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ParamsError(f"{path}: not found; run from the project root or pass --params PATH") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ParamsError(f"{path}: not valid YAML{where}; fix the syntax") from None
    return parse_params(raw, str(path))
