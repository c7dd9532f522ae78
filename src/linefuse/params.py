"""Typed, validated view of params.yaml.

The models declare types and constraints only: params.yaml is the one source of every value, so
a key missing from it is an error naming the key, never a silent second default.

Every stage loads the whole file through `load_params`, so a bad value anywhere stops the run
before any stage does work. Errors become one `ParamsError` line naming the dotted key and what
it accepts; the CLI prints that line instead of a traceback.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

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

from linefuse.paths import (
    BASE_DIR,
    GENERATED_DIR,
    LORA_DIR,
    PARAMS,
    ZOO_DIR,
    fresh_config,
    unet_folder,
)

DOMAINS = ("gaussian", "motion", "scan", "compression", "lowres")
# held_out: images of the chart families in data.charts.held_out, never trained on, scored apart
SPLITS = ("train", "val", "test", "held_out")
DEVICES = ("auto", "cpu", "cuda")
STREAM_SCHEMES = ("file://", "http://", "https://")


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


# --- data -------------------------------------------------------------------------------------


# data.charts keys the base's overrides may not change: its seed is base.chart_seed, and it
# never draws a held-out family's style sheet
BASE_FIXED_CHART_KEYS = ("count", "seed", "families", "held_out", "held_out_fraction")


def chart_pixels(inches: float, dpi: float) -> int:
    """A generated chart's side in pixels: the renderer and the crop check both round this way."""
    return max(1, round(inches * dpi))


LAST_RESORT_FONT = "Last Resort High-Efficiency"  # matplotlib's fallback: a box for any character


@lru_cache
def _bundled_fonts() -> list[str]:
    """Font families shipped inside matplotlib (the same glyphs on every machine) that draw a
    tick label's every character: digits, point and matplotlib's minus sign (U+2212, which the
    Computer Modern faces lack)."""
    import matplotlib
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    data = Path(matplotlib.get_data_path()).resolve()
    fonts = font_manager.fontManager.ttflist
    needed = {ord(c) for c in "0123456789.\u2212"}
    return sorted(
        {
            f.name
            for f in fonts
            if data in Path(f.fname).resolve().parents
            and f.name != LAST_RESORT_FONT
            and needed <= set(FT2Font(f.fname).get_charmap())
        }
    )


class ChartParams(Strict):
    """The embedded default data set: synthetic spectra drawn as line charts by matplotlib.

    Ranges are drawn per chart; `*_prob` is the chance a chart has that feature."""

    count: Annotated[int, Field(ge=0)]
    seed: int
    points: Annotated[int, Field(ge=16)]
    peaks: _range(int, 1, 50)
    noise: Annotated[float, Field(ge=0.0, le=0.2)]
    families: dict[str, list[str]]  # family name: matplotlib style sheets
    held_out: list[str]  # families never trained on (the index routes them to held_out)
    held_out_fraction: Annotated[float, Field(ge=0.0, lt=1.0)]
    fonts: list[str]
    width_in: _range(float, 0.5, 40.0)
    height_in: _range(float, 0.5, 40.0)
    dpi: _range(int, 36, 600)
    max_px: Annotated[int, Field(ge=64, le=8192)]  # a longer side is drawn at a lower dpi
    multi_panel_prob: Probability
    panels: _range(int, 2, 4)  # of a multi-panel figure
    font_pt: _range(float, 3.0, 30.0)
    line_width_pt: _range(float, 0.1, 10.0)
    series: _range(int, 1, 4)
    markers: list[str]
    marker_prob: Probability
    dash_prob: Probability
    black_prob: Probability
    colormap_prob: Probability
    stack_prob: Probability
    grid_toggle_prob: Probability
    tick_prob: Probability
    minor_ticks_prob: Probability
    despine_prob: Probability
    labels_prob: Probability
    title_prob: Probability
    legend_prob: Probability
    annotate_prob: Probability
    tint_prob: Probability
    background_prob: Probability
    grid_style_prob: Probability

    @field_validator("families")
    @classmethod
    def _known_styles(cls, families: dict[str, list[str]]) -> dict[str, list[str]]:
        import matplotlib.style

        if not families:
            raise ValueError("needs at least one family, e.g. {plain: [default, classic]}")
        accepted = ["default", *sorted(matplotlib.style.available)]
        seen: dict[str, str] = {}
        for name, styles in families.items():
            if not name.isidentifier():
                raise ValueError(f"family {name!r} must be a plain name (letters, digits, _)")
            if not styles:
                raise ValueError(f"family {name!r} lists no style sheet")
            for style in styles:
                if style not in accepted:
                    raise ValueError(
                        f"family {name!r}: unknown style sheet {style!r}; accepts "
                        f"{', '.join(accepted)}"
                    )
                if style in seen:
                    raise ValueError(
                        f"style sheet {style!r} is in families {seen[style]!r} and {name!r}; "
                        f"each style belongs to one family"
                    )
                seen[style] = name
        return families

    @field_validator("fonts")
    @classmethod
    def _bundled(cls, fonts: list[str]) -> list[str]:
        bundled = _bundled_fonts()
        if not fonts:
            raise ValueError(f"needs at least one font; accepts {', '.join(bundled)}")
        for font in fonts:
            if font not in bundled:
                raise ValueError(
                    f"{font!r} is not a font shipped with matplotlib that draws tick labels "
                    f"(other fonts differ between machines, and so would the PNGs); accepts "
                    f"{', '.join(bundled)}"
                )
        return fonts

    @field_validator("markers")
    @classmethod
    def _known_markers(cls, markers: list[str]) -> list[str]:
        from matplotlib.lines import Line2D

        accepted = [
            m for m in Line2D.markers if isinstance(m, str) and m.strip() and m.lower() != "none"
        ]
        if not markers:
            raise ValueError(f"needs at least one marker; accepts {' '.join(accepted)}")
        for marker in markers:
            if marker not in accepted:
                raise ValueError(f"unknown marker {marker!r}; accepts {' '.join(accepted)}")
        return markers

    @model_validator(mode="after")
    def _held_out_families(self) -> ChartParams:
        for name in self.held_out:
            if name not in self.families:
                raise _KeyedError(
                    "data.charts.held_out",
                    f"{name!r} is not a family in data.charts.families; accepts "
                    f"{', '.join(self.families)}",
                )
        if len(set(self.held_out)) != len(self.held_out):
            raise _KeyedError("data.charts.held_out", "lists a family twice")
        if not set(self.families) - set(self.held_out):
            raise _KeyedError(
                "data.charts.held_out",
                "holds out every family; leave at least one of "
                f"{', '.join(self.families)} to train on",
            )
        if self.black_prob + self.colormap_prob > 1.0:
            raise _KeyedError(
                "data.charts.black_prob",
                f"black_prob + colormap_prob is {self.black_prob + self.colormap_prob:g}; "
                f"they are exclusive, so their sum must be at most 1",
            )
        return self

    def smallest_chart(self) -> tuple[int, int]:
        """(width, height) px of the smallest chart the ranges can give."""
        return (
            chart_pixels(self.width_in[0], self.dpi[0]),
            chart_pixels(self.height_in[0], self.dpi[0]),
        )

    def with_overrides(self, overrides: dict[str, Any]) -> ChartParams:
        """These params with `overrides` (base.chart_overrides: some of these keys) merged in and
        validated again; a bad override is an error naming base.chart_overrides.KEY."""
        accepted = [key for key in type(self).model_fields if key not in BASE_FIXED_CHART_KEYS]
        for key in overrides:
            if key in BASE_FIXED_CHART_KEYS:
                raise _KeyedError(
                    f"base.chart_overrides.{key}",
                    "is fixed for the base (its seed is base.chart_seed, its families those of "
                    f"data.charts not held out); accepts {', '.join(accepted)}",
                )
            if key not in accepted:
                raise _KeyedError(
                    f"base.chart_overrides.{key}",
                    f"is not a data.charts key; accepts {', '.join(accepted)}",
                )
        try:
            return type(self).model_validate(self.model_dump() | overrides)
        except ValidationError as error:
            key, message = _key_and_message(error)
            raise _KeyedError(
                f"base.chart_overrides.{key.removeprefix('data.charts.')}", message
            ) from None


class SplitRatios(Strict):
    train: Probability
    val: Probability
    test: Probability

    @model_validator(mode="after")
    def _sums_to_one(self) -> SplitRatios:
        total = self.train + self.val + self.test
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"train + val + test must sum to 1, got {total:g}")
        return self


class DataParams(Strict):
    source_dir: str
    min_side: Annotated[int, Field(ge=1)]
    max_pixels: Annotated[int, Field(ge=1)]
    split: SplitRatios
    charts: ChartParams


# --- degradations -----------------------------------------------------------------------------


class GaussianLevel(Strict):
    sigma: _range(float, 0.0, 50.0)


class MotionLevel(Strict):
    length: _range(int, 1, 101)
    angle: _range(float, 0.0, 360.0)


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
    quality: _range(int, 1, 95)


class LowresLevel(Strict):
    factor: _range(float, 1.0, 16.0)


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
                    raise _KeyedError(
                        f"degrade.{domain}.{level}",
                        f"missing; every domain needs an entry for each of "
                        f"degrade.levels ({', '.join(self.levels)})",
                    )
        return self

    def level(self, domain: str, level: str) -> Strict:
        return getattr(self, domain)[level]


# --- shards -----------------------------------------------------------------------------------


class ShardParams(Strict):
    crop: Annotated[int, Field(ge=8, le=4096)]
    patches_per_image: Annotated[int, Field(ge=1, le=1000)]
    focus: Annotated[float, Field(ge=0.0, le=1.0)]
    val_crop: Annotated[int, Field(ge=8, le=8192)]
    test_crop: Annotated[int, Field(ge=8, le=8192)] | None
    samples_per_shard: Annotated[int, Field(ge=1)]


# --- model, embeddings, training -------------------------------------------------------------


class ModelParams(Strict):
    """The diffusion formulation; `unet`, `vae` and `text_encoder` are `tiny`/null or local
    folders."""

    unet: str
    vae: str | None
    text_encoder: str | None
    target: Literal["residual", "image"]
    prediction_type: Literal["sample", "epsilon", "v_prediction"]
    train_timesteps: Annotated[int, Field(ge=1, le=10000)]
    beta_schedule: Literal["linear", "scaled_linear", "squaredcos_cap_v2"]
    quantize_base: Literal["qfloat8"] | None
    sample_start: Literal["mean", "noise"]

    @field_validator("unet")
    @classmethod
    def _unet_folder(cls, unet: str) -> str:
        if fresh_config(unet) is None:
            shipped = sorted(p.parent.name for p in ZOO_DIR.glob("*/config.json"))
            _existing_folder(
                str(unet_folder(unet)),
                "config.json",
                f"a model LineFuse ships ({', '.join(shipped) or 'none yet'}), tiny (from "
                "scratch), or a local diffusers UNet2DConditionModel folder",
            )
        return unet

    @field_validator("vae")
    @classmethod
    def _vae_folder(cls, vae: str | None) -> str | None:
        if vae is not None:
            _existing_folder(vae, "config.json", "a local diffusers AutoencoderKL folder or null")
        return vae

    @field_validator("text_encoder")
    @classmethod
    def _text_encoder_folder(cls, folder: str | None) -> str | None:
        if folder is not None:
            _existing_folder(
                folder,
                "text_encoder",
                "a local folder holding text_encoder/ and "
                "tokenizer/ (a Stable Diffusion layout) or null",
            )
        return folder


def _existing_folder(path: str, must_hold: str, accepts: str) -> None:
    folder = Path(path)
    if not folder.is_dir():
        raise ValueError(f"{path} is not a folder; accepts {accepts}")
    if not (folder / must_hold).exists():
        raise ValueError(f"{path} holds no {must_hold}; accepts {accepts}")


class EmbedParams(Strict):
    dtype: Literal["float32", "float16", "bfloat16"]
    batch_size: Annotated[int, Field(ge=1)]
    splits: list[Literal["train", "val", "test"]]


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


class LightLevels(Strict):
    """One light degradation per domain: nearly sharp inputs the base learns to leave alone."""

    gaussian: GaussianLevel
    motion: MotionLevel
    scan: ScanLevel
    compression: CompressionLevel
    lowres: LowresLevel


class TextLossParams(Strict):
    """The base's text terms: the tick labels' pixels weigh more in the pixel loss, and a frozen
    label reader's CTC loss on the restored labels joins it (NAF-DPM's recogniser loss)."""

    reader: str  # a label reader LineFuse ships (linefuse/zoo) or a local folder of one
    label_weight: Annotated[float, Field(ge=0.0)]
    ctc: Annotated[float, Field(ge=0.0)]


class BankParams(Strict):
    """The chart bank (`linefuse bank`): sharp charts drawn once, each reused for many crops."""

    charts: PositiveInt
    label_focus: Probability


class WindowParams(Strict):
    """`linefuse base-window` (make base-window): one GPU window of the base's training, resumed
    from the last window's stable state (train/window.py)."""

    init: str  # what the first window starts from: a shipped base or a local UNet folder
    lr: Annotated[float, Field(gt=0.0, le=1.0)]
    warmup_steps: Annotated[int, Field(ge=0)]
    cooldown_fraction: Annotated[float, Field(gt=0.0, lt=1.0)]
    batch_sizes: Annotated[list[PositiveInt], Field(min_length=1)]
    tune_seconds: Annotated[float, Field(gt=0.0)]
    try_compile: bool
    first_charts: PositiveInt
    pool_gb: Annotated[float, Field(gt=0.0)]
    score_seconds: Annotated[float, Field(gt=0.0)]
    drawn_charts: PositiveInt
    log_every: PositiveInt


class BaseParams(Strict):
    """`linefuse base` (make base): the pretrained UNet LineFuse trains once and ships in
    linefuse/zoo/<name>, on crops of a bank of sharp charts (linefuse.data.bank) degraded on
    the training device (linefuse.data.degrade_torch)."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    unet: str  # the architecture trained from scratch: tiny or a diffusers UNet config folder
    init: str | None  # None: from scratch; else the UNet (shipped or a folder) training starts from
    text: TextLossParams
    chart_seed: int
    chart_overrides: dict[str, Any]  # data.charts keys, the base's wider ranges
    charts: PositiveInt
    units_per_chart: PositiveInt
    crops_per_unit: PositiveInt
    charts_per_step: PositiveInt
    crop: Annotated[int, Field(ge=8, le=4096)]
    focus: Probability
    light_fraction: Probability
    light: LightLevels
    bank: BankParams
    steps: PositiveInt
    lr: Annotated[float, Field(gt=0.0, le=1.0)]
    warmup_steps: Annotated[int, Field(ge=0)]
    checkpoint_every: PositiveInt
    workers: Annotated[int, Field(ge=0)] | Literal["auto"]
    score_charts: PositiveInt
    window: WindowParams

    @property
    def batch_size(self) -> int:
        return self.charts_per_step * self.units_per_chart * self.crops_per_unit


class LabelReaderParams(Strict):
    """`linefuse label-reader` (make label-reader): the CRNN that reads tick labels, trained once
    on sharp label crops and shipped in linefuse/zoo/<name> (inference/label_reader.py)."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    charts: PositiveInt
    height: Annotated[int, Field(ge=8, le=256, multiple_of=8)]
    width: Annotated[int, Field(ge=8, le=1024, multiple_of=2)]
    channels: Annotated[list[PositiveInt], Field(min_length=4, max_length=4)]
    hidden: PositiveInt
    steps: PositiveInt
    batch_size: PositiveInt
    lr: Annotated[float, Field(gt=0.0, le=1.0)]
    jitter_px: Annotated[float, Field(ge=0.0, le=4.0)]
    seed: int
    score_charts: PositiveInt


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
            raise _KeyedError(
                "train.per_domain.domains",
                "needs one or more distinct blur domains, e.g. [gaussian, scan, compression]",
            )
        if self.weights is not None and len(self.weights) != len(self.domains):
            raise _KeyedError(
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
            raise _KeyedError(
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
            raise _KeyedError(
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

    def order(self) -> list[str]:
        """Levels from the one that starts at the base to the last, following `init`."""
        if not self.curriculum:
            raise _KeyedError("train.curriculum", "is empty; give at least one level")
        roots = [level for level in self.curriculum if self.predecessor(level) is None]
        if len(roots) != 1:
            raise _KeyedError(
                "train.curriculum",
                f"exactly one level must start from {BASE_DIR}; "
                f"found {len(roots)}" + (" (the levels form a cycle)" if not roots else ""),
            )
        order, followers = [roots[0]], {self.predecessor(lv): lv for lv in self.curriculum}
        while order[-1] in followers and len(order) <= len(self.curriculum):
            order.append(followers[order[-1]])
        if len(order) != len(self.curriculum) or len(followers) != len(self.curriculum):
            stray = next(lv for lv in self.curriculum if lv not in order)
            raise _KeyedError(
                f"train.curriculum.{stray}.init",
                "makes a cycle or a branch; each "
                "level must start from the one before it, in one chain from the base",
            )
        return order


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
    """Tick-label legibility (Tesseract's character error rate) on the first `max_images` images
    of each domain and level, in the test and held-out splits; null reads them all, 0 none."""

    max_images: Annotated[int, Field(ge=0)] | None


class EvalParams(Strict):
    steps: Annotated[int, Field(ge=1, le=1000)]
    shrink: Annotated[float, Field(ge=0.0, le=255.0)]
    deskew: Literal["auto", "always", "never"]
    sweep: SweepParams
    batch_size: Annotated[int, Field(ge=1)]
    seed: int
    max_samples: Annotated[int, Field(ge=1)] | None
    interval: IntervalParams
    metric: MetricParams
    baselines: BaselineParams
    ocr: OcrParams


class TileParams(Strict):
    """Images larger than a tile are restored in overlapping tiles (evaluate, restore, serve)."""

    size: Annotated[int, Field(ge=16, le=4096)]
    overlap: Annotated[int, Field(ge=0)]
    batch_size: Annotated[int, Field(ge=1)]

    @model_validator(mode="after")
    def _overlap_fits(self) -> TileParams:
        if 2 * self.overlap > self.size:
            raise _KeyedError(
                "tiles.overlap",
                f"{self.overlap} px is more than half of tiles.size ({self.size}); accepts at "
                f"most {self.size // 2}",
            )
        return self


class ComputeParams(Strict):
    """Where the model runs (embed, training, evaluate, restore, serve); `auto` takes the CUDA GPU
    when one is visible, else the CPU, and each stage logs the choice with its reason."""

    device: Literal[DEVICES]


class LaunchParams(Strict):
    """How the training stages start: `accelerate launch` with this config and process count
    (also the GPUs each training job asks a cluster for)."""

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
            raise _KeyedError(
                "launch.processes",
                f"{self.processes} processes need a multi-process "
                f"config; {self.config} runs one (distributed_type: NO); set "
                f"launch.config: workflow/accelerate/ddp.yaml",
            )
        return self


class Params(Strict):
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
    train: TrainParams
    eval: EvalParams
    tiles: TileParams
    # restore's and serve's own (linefuse.serve.settings validates it where they read it): no
    # stage reads it, and its schema is none of theirs
    serve: dict[str, Any]
    launch: LaunchParams
    compute: ComputeParams

    @model_validator(mode="after")
    def _per_domain_domains_are_degrade_domains(self) -> Params:
        for domain in self.train.per_domain.domains:
            if domain not in self.degrade.domains:
                raise _KeyedError(
                    "train.per_domain.domains",
                    f"{domain!r} is not in "
                    f"degrade.domains; accepts {', '.join(self.degrade.domains)}",
                )
        return self

    @model_validator(mode="after")
    def _ctc_reads_a_restoration(self) -> Params:
        if self.base.text.ctc > 0 and self.model.prediction_type != "sample":
            raise _KeyedError(
                "base.text.ctc",
                "reads the labels of the restoration the model predicts, which needs "
                "model.prediction_type: sample; set base.text.ctc: 0 or predict samples",
            )
        return self

    @model_validator(mode="after")
    def _timesteps_in_schedule(self) -> Params:
        low, high = self.optim.timestep_range
        if not low < high <= self.model.train_timesteps:
            raise _KeyedError(
                "optim.timestep_range",
                f"[{low}, {high}] is not a range within model.train_timesteps "
                f"({self.model.train_timesteps}); accepts [low, high] with "
                f"0 <= low < high <= {self.model.train_timesteps}",
            )
        return self

    @model_validator(mode="after")
    def _curriculum_levels_are_shard_levels(self) -> Params:
        for level in self.train.curriculum:
            if level not in self.degrade.levels:
                raise _KeyedError(
                    f"train.curriculum.{level}",
                    f"is not in degrade.levels ({', '.join(self.degrade.levels)})",
                )
        return self

    @model_validator(mode="after")
    def _shard_urls_name_levels(self) -> Params:
        for level in self.loader.shard_urls:
            if level not in self.degrade.levels:
                raise _KeyedError(
                    f"loader.shard_urls.{level}",
                    f"is not in degrade.levels ({', '.join(self.degrade.levels)})",
                )
        return self

    @model_validator(mode="after")
    def _base_charts_are_not_the_default_data(self) -> Params:
        if self.base.chart_seed == self.data.charts.seed:
            raise _KeyedError(
                "base.chart_seed",
                f"{self.base.chart_seed} is data.charts.seed: the base would train on the "
                "default test charts; give it another seed",
            )
        smallest = min(self.data.charts.with_overrides(self.base.chart_overrides).smallest_chart())
        if self.base.crop > smallest:
            raise _KeyedError(
                "base.crop",
                f"{self.base.crop} px is larger than the smallest chart ({smallest} px); "
                f"accepts at most {smallest}",
            )
        return self

    @model_validator(mode="after")
    def _crop_fits_generated_charts(self) -> Params:
        charts = self.data.charts
        if Path(self.data.source_dir) == GENERATED_DIR:
            width, height = charts.smallest_chart()
            smallest = min(width, height)
            if self.shards.crop > smallest:
                raise _KeyedError(
                    "shards.crop",
                    f"{self.shards.crop} px is larger than the smallest "
                    f"generated chart ({width}x{height}: data.charts.width_in, height_in and dpi "
                    f"at their lows); accepts at most {smallest}",
                )
        return self


class _KeyedError(ValueError):
    """A cross-field error that names its own dotted key."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def one_line(error: ValidationError, source: str, prefix: str = "") -> str:
    """`source: dotted.key: what it accepts`, for the first failure; `prefix` is the section a
    model of one section was validated as."""
    key, message = _key_and_message(error)
    key = ".".join(part for part in (prefix, key) if part)
    return f"{source}: {key or '<top level>'}: {message}"


def _key_and_message(error: ValidationError) -> tuple[str, str]:
    """The dotted key of a validation error's first failure and what it accepts."""
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
            message += f" (see the keys under {parent!r} in the repository's params.yaml)"
    elif first["type"] == "missing":
        message = "missing; this key is required"
    else:
        message = message.removeprefix("Value error, ")
        if "input" in first and first["type"] not in ("value_error",):
            message += f" (got {first['input']!r})"
    return key, message


def parse_params(raw: Any, source: str = str(PARAMS)) -> Params:
    if not isinstance(raw, dict):
        raise ParamsError(f"{source}: must be a mapping of sections (data, degrade, shards)")
    try:
        return Params.model_validate(raw)
    except ValidationError as error:
        raise ParamsError(one_line(error, source)) from None


def load_params(path: str | Path = PARAMS) -> Params:
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
    return parse_params(raw, str(path))
