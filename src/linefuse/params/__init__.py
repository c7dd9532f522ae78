"""Typed, validated view of params.yaml: the shared parts, and one module per section (or per
group of sections read together: linefuse.params.training).

The models declare types and constraints only: params.yaml is the one source of every value, so
a key missing from it is an error naming the key, never a silent second default. Errors become
one `ParamsError` line naming the dotted key and what it accepts; the command line prints that
line instead of a traceback.

Each stage reads the sections it declares through a `Sections` model of its own
(linefuse.stages), so a bad value in one of them stops it before it does work, and an edit to
another section's schema reruns nothing. `linefuse.params.full.Params` is the whole file, for the
commands around the stages, the benchmarks and the tests.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from linefuse.paths import PARAMS

# params.yaml's sections (linefuse.params.full.Params holds each): a stage reads some of them,
# and any other name is a misspelling
SECTION_NAMES = (
    "data",
    "degrade",
    "shards",
    "model",
    "embed",
    "loader",
    "optim",
    "pretrain",
    "base",
    "label_reader",
    "digitize_reader",
    "digitize_sets",
    "train",
    "eval",
    "tiles",
    "serve",
    "launch",
    "compute",
)
DOMAINS = ("gaussian", "motion", "scan", "compression", "lowres")
# held_out: images of the chart families in data.charts.held_out, never trained on, scored apart
SPLITS = ("train", "val", "test", "held_out")
DEVICES = ("auto", "cpu", "cuda")


class ParamsError(ValueError):
    """A user error in params.yaml: one line, naming the key and what it accepts."""


class KeyedError(ValueError):
    """A cross-field error that names its own dotted key."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


PositiveInt = Annotated[int, Field(gt=0)]
Probability = Annotated[float, Field(ge=0.0, le=1.0)]


def value_range(kind: type, low: float | None = None, high: float | None = None):
    """A `[low, high]` pair with low <= high, both inside the given bounds."""

    def check(value: Any) -> tuple:
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise ValueError("must be a [low, high] pair")
        lo, hi = (
            kind(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for v in value
        )
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


# checks across sections, each run by every Sections model that holds all of its sections
CROSS_CHECKS: list[tuple[tuple[str, ...], Callable[[Any], None]]] = []


def cross_check(*sections: str):
    """Registers `check(params)` (raising KeyedError) over `sections`; the section module that
    defines it is imported wherever one of them is read."""

    def register(check: Callable[[Any], None]) -> Callable[[Any], None]:
        CROSS_CHECKS.append((sections, check))
        return check

    return register


class Sections(BaseModel):
    """A view of params.yaml: the sections a reader declares as fields, each validated by its
    section's model; the file's other sections are left to their own readers."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_sections(cls, raw: Any) -> Any:
        for name in raw if isinstance(raw, dict) else ():
            if name not in SECTION_NAMES:
                raise KeyedError(name, "unknown key; remove it or fix its spelling")
        return raw

    @model_validator(mode="after")
    def _across_sections(self) -> Sections:
        for sections, check in CROSS_CHECKS:
            if all(section in type(self).model_fields for section in sections):
                check(self)
        return self


S = TypeVar("S", bound=BaseModel)


def validate(model: type[S], raw: Any, source: str = str(PARAMS)) -> S:
    """`raw` (params.yaml as read) as `model`, or a ParamsError naming the first bad key."""
    if not isinstance(raw, dict):
        raise ParamsError(f"{source}: must be a mapping of sections (data, degrade, shards)")
    try:
        return model.model_validate(raw)
    except ValidationError as error:
        raise ParamsError(one_line(error, source)) from None


def load_sections(model: type[S], path: str | Path = PARAMS) -> S:
    """The params file at `path` as `model` (a Sections model, or linefuse.params.full.Params)."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ParamsError(
            f"{path}: not found; run from the project root or pass --params PATH"
        ) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ParamsError(f"{path}: not valid YAML{where}; fix the syntax") from None
    return validate(model, raw, str(path))


def one_line(error: ValidationError, source: str, prefix: str = "") -> str:
    """`source: dotted.key: what it accepts`, for the first failure; `prefix` is the section a
    model of one section was validated as."""
    key, message = key_and_message(error)
    key = ".".join(part for part in (prefix, key) if part)
    return f"{source}: {key or '<top level>'}: {message}"


def key_and_message(error: ValidationError) -> tuple[str, str]:
    """The dotted key of a validation error's first failure and what it accepts."""
    first = error.errors()[0]
    key = ".".join(str(part) for part in first["loc"])
    message = first["msg"]
    ctx_error = (first.get("ctx") or {}).get("error")
    if isinstance(ctx_error, KeyedError):
        key, message = ctx_error.key, str(ctx_error)
    elif first["type"] == "extra_forbidden":
        parent = key.rpartition(".")[0]
        message = "unknown key; remove it or fix its spelling"
        if parent:
            message += f" (see the keys under {parent!r} in the repository's params.yaml)"
    elif first["type"] == "missing":
        message = "missing; this key is required"
    else:
        message = message.removeprefix("Value error, ")
        if "input" in first and first["type"] not in ("value_error",):
            message += f" (got {first['input']!r})"
    return key, message
