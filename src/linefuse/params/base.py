"""params.yaml's `base`, `label_reader` and `digitize_reader` sections: the models LineFuse trains
once and ships (`linefuse base`, `base-window`, `label-reader`, `digitize-reader`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError

from linefuse.params import KeyedError, PositiveInt, Probability, Strict, cross_check
from linefuse.params.data import LIBRARIES
from linefuse.params.degrade import (
    CompressionLevel,
    GaussianLevel,
    LowresLevel,
    MotionLevel,
    ScanLevel,
)


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


class ShipParams(Strict):
    """What `linefuse base-land`'s verdict holds a window's weights to, beside beating the default
    base on the score set (base/land.py)."""

    # PSNR the worst sharp chart of both sets' trained parts must come back at
    sharp_floor_db: Annotated[float, Field(gt=0.0, allow_inf_nan=False)]
    # how far below zero the drawn-unlike set's mean paired difference may fall
    drawn_tolerance_db: Annotated[float, Field(ge=0.0, allow_inf_nan=False)]


class WindowParams(Strict):
    """`linefuse base-window` (make base-window): one GPU window of the base's training, resumed
    from the last window's stable state (base/window.py)."""

    init: str  # what the first window starts from: a shipped base or a local UNet folder
    lr: Annotated[float, Field(gt=0.0, le=1.0)]
    warmup_steps: Annotated[int, Field(ge=0)]
    cooldown_fraction: Annotated[float, Field(gt=0.0, lt=1.0)]
    batch_sizes: Annotated[list[PositiveInt], Field(min_length=1)]
    tune_seconds: Annotated[float, Field(gt=0.0)]
    try_compile: bool
    first_charts: PositiveInt
    pool_gb: Annotated[float, Field(gt=0.0)]
    finish_seconds: Annotated[float, Field(gt=0.0)]
    drawn_charts: PositiveInt
    drawn_seed: int  # the drawn-unlike set's seed (base/land.py)
    ship: ShipParams
    log_every: PositiveInt


class BaseParams(Strict):
    """`linefuse base` (make base): the pretrained UNet LineFuse trains once and ships in
    linefuse/zoo/<name>, on crops of a bank of sharp charts (linefuse.base.bank) degraded on
    the training device (linefuse.data.degrade_torch)."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    unet: str  # the architecture trained from scratch: tiny or a diffusers UNet config folder
    init: str | None  # None: from scratch; else the UNet (shipped or a folder) training starts from
    text: TextLossParams
    chart_seed: int
    libraries: Annotated[list[str], Field(min_length=1)]  # what the bank draws with
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
    score_seed: int  # the score set's seed (base/scores.py)
    window: WindowParams

    @property
    def batch_size(self) -> int:
        return self.charts_per_step * self.units_per_chart * self.crops_per_unit


class LabelReaderParams(Strict):
    """`linefuse label-reader` and `digitize-reader` (make label-reader, make digitize-reader): a
    CRNN that reads tick labels (digitize/label_reader.py), trained once and shipped in
    linefuse/zoo/<name>: the base's text loss reads with one that reads sharp labels only,
    digitize with one that also reads them blurred, at the boxes it finds itself."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    charts: PositiveInt
    libraries: list[str]  # the libraries drawing its charts, in equal shares; [] = base.libraries
    axes: Literal["base", "data"]  # its charts' axes: the base's, or data.charts' (descending, log)
    sizes: Literal["base", "data"]  # its charts' fonts, type and figure sizes: the base's or data's
    degraded: Annotated[int, Field(ge=0, le=15)]  # degraded copies of each chart it also reads
    restored: Annotated[int, Field(ge=0, le=15)]  # more degraded copies, restored by `restorer`
    restorer: str  # the shipped base (zoo/NAME) or a base folder that restores them
    boxes: Literal["sidecar", "found"]  # each label's box: the drawer's, or the word digitize finds
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
    voters: list[dict[str, Any]]  # further readers, each this recipe with these keys changed

    def readers(self) -> list[LabelReaderParams]:
        """This reader's recipe, then each voter's: this one with the voter's keys changed (a
        name of its own among them); every one trained and shipped, and read with alike."""
        recipe = self.model_dump() | {"voters": []}
        return [self] + [LabelReaderParams.model_validate(recipe | v) for v in self.voters]


@cross_check("label_reader", "digitize_reader")
def voters_are_readers_of_their_own(params) -> None:
    for section in ("label_reader", "digitize_reader"):
        cfg = getattr(params, section)
        try:
            names = [reader.name for reader in cfg.readers()]
        except ValidationError as error:  # a voter's key misspelt, or its value out of range
            first = error.errors()[0]
            where = ".".join(map(str, first["loc"]))
            raise KeyedError(
                f"{section}.voters", f"{where}: {first['msg']} (a voter's keys are {section}'s)"
            ) from None
        if len(set(names)) < len(names):
            raise KeyedError(
                f"{section}.voters",
                f"each voter needs a name of its own (the readers are named {', '.join(names)})",
            )


@cross_check("label_reader", "digitize_reader", "data")
def readers_read_no_held_out_library(params) -> None:
    for section in ("label_reader", "digitize_reader"):
        first, *voters = getattr(params, section).readers()
        for key, reader in [("libraries", first)] + [("voters", voter) for voter in voters]:
            for library in reader.libraries:
                if library in LIBRARIES and library not in params.data.charts.held_out:
                    continue
                raise KeyedError(
                    f"{section}.{key}",
                    f"{library!r} is not a library a reader may train on: choose among "
                    f"{', '.join(n for n in LIBRARIES if n not in params.data.charts.held_out)}",
                )


@cross_check("base", "model")
def ctc_reads_a_restoration(params) -> None:
    if params.base.text.ctc > 0 and params.model.prediction_type != "sample":
        raise KeyedError(
            "base.text.ctc",
            "reads the labels of the restoration the model predicts, which needs "
            "model.prediction_type: sample; set base.text.ctc: 0 or predict samples",
        )


@cross_check("base", "data")
def base_charts_are_not_the_default_data(params) -> None:
    if params.base.chart_seed == params.data.charts.seed:
        raise KeyedError(
            "base.chart_seed",
            f"{params.base.chart_seed} is data.charts.seed: the base would train on the "
            "default test charts; give it another seed",
        )
    charts = params.data.charts
    for library in params.base.libraries:
        if library not in LIBRARIES:
            raise KeyedError(
                "base.libraries", f"{library!r} is not a library; accepts {', '.join(LIBRARIES)}"
            )
        if library in charts.held_out:
            raise KeyedError(
                "base.libraries",
                f"{library!r} is held out (data.charts.held_out): the base must never see it",
            )
    smallest = min(params.data.charts.with_overrides(params.base.chart_overrides).smallest_chart())
    if params.base.crop > smallest:
        raise KeyedError(
            "base.crop",
            f"{params.base.crop} px is larger than the smallest chart ({smallest} px); "
            f"accepts at most {smallest}",
        )


def _chart_seeds(params) -> list[tuple[str, int]]:
    """(key, seed) of every chart set the default run and the base draw, theirs first."""
    return [
        ("data.charts.seed", params.data.charts.seed),
        ("base.chart_seed", params.base.chart_seed),
        ("base.score_seed", params.base.score_seed),
        ("base.window.drawn_seed", params.base.window.drawn_seed),
    ]


def _own_seeds(seeds: list[tuple[str, int]]) -> None:
    """Raises naming the first key whose seed an earlier key's set uses too."""
    taken: dict[str, int] = {}
    for key, seed in seeds:
        clash = next((name for name, used in taken.items() if used == seed), None)
        if clash:
            raise KeyedError(
                key, f"{seed} is {clash}'s too: give the set a seed no other chart set uses"
            )
        taken[key] = seed


@cross_check("base", "data")
def selection_sets_have_their_own_seeds(params) -> None:
    """The score set and the drawn-unlike set decide what ships: each is drawn with a seed of its
    own, so none of their charts is one the default run reports (test, held out) or one the base
    trains on (tests/base/test_selection.py proves it by content hash)."""
    _own_seeds(_chart_seeds(params))


@cross_check("base", "data", "digitize_sets")
def digitize_sets_have_their_own_seeds(params) -> None:
    """digitize is decided on its dev set and reported on its report set: neither holds a chart
    of another set (tests/digitize/test_sets.py proves it by content hash)."""
    sets = params.digitize_sets
    _own_seeds(
        [
            *_chart_seeds(params),
            ("digitize_sets.dev_seed", sets.dev_seed),
            ("digitize_sets.dev2_seed", sets.dev2_seed),
            ("digitize_sets.report_seed", sets.report_seed),
        ]
    )
