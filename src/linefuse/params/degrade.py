"""params.yaml's `degrade` section: the blur domains and their strength at each level."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from linefuse.params import DOMAINS, KeyedError, Strict, value_range


class GaussianLevel(Strict):
    sigma: value_range(float, 0.0, 50.0)


class MotionLevel(Strict):
    length: value_range(int, 1, 101)
    angle: value_range(float, 0.0, 360.0)


class ScanLevel(Strict):
    """Print-and-scan: geometry, resampling blur, contrast loss, print grain, paper shading."""

    blur: Annotated[float, Field(ge=0.0, le=20.0)]
    contrast: Annotated[float, Field(gt=0.0, le=1.0)]
    noise: Annotated[float, Field(ge=0.0, le=1.0)]
    rotation_deg: Annotated[float, Field(ge=0.0, le=10.0)]
    shear: Annotated[float, Field(ge=0.0, le=0.2)]
    background: Annotated[float, Field(ge=0.0, le=0.5)]
    line_fade: Annotated[float, Field(ge=0.0, le=1.0)]


class CompressionLevel(Strict):
    quality: value_range(int, 1, 95)


class LowresLevel(Strict):
    factor: value_range(float, 1.0, 16.0)


class DegradeParams(Strict):
    seed: int
    levels: list[str]
    domains: list[str]
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
                    raise KeyedError(
                        f"degrade.{domain}.{level}",
                        f"missing; every domain needs an entry for each of "
                        f"degrade.levels ({', '.join(self.levels)})",
                    )
        return self

    def level(self, domain: str, level: str) -> Strict:
        return getattr(self, domain)[level]
