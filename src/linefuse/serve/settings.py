"""params.yaml's `serve` section: the limits of `linefuse serve` and the steps `linefuse restore`
and serve use, and the sections the two read. No stage reads it, so its schema lives here rather
than in linefuse.params, which every stage runs: an edit to it reruns nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, ValidationError

from linefuse.params import ParamsError, Sections, Strict, one_line
from linefuse.params.compute import ComputeParams
from linefuse.params.evaluation import EvalParams, TileParams
from linefuse.params.model import ModelParams
from linefuse.params.training import OptimParams, TrainParams

if TYPE_CHECKING:
    from linefuse.params.full import Params


class ServeParams(Strict):
    max_upload_mb: Annotated[float, Field(gt=0.0)]
    max_pixels: Annotated[int, Field(ge=1)]
    default_steps: Annotated[int, Field(ge=1, le=1000)] | None  # None: eval.steps
    max_steps: Annotated[int, Field(ge=1, le=1000)]
    max_queue: Annotated[int, Field(ge=1)]
    max_batch: Annotated[int, Field(ge=1)]
    timeout_s: Annotated[float, Field(gt=0.0)]


class ServingSections(Sections):
    """What `linefuse restore` and `linefuse serve` read of params.yaml; the other sections are
    left to their readers (checking the data's chart styles alone takes matplotlib a second)."""

    compute: ComputeParams
    model: ModelParams
    eval: EvalParams
    tiles: TileParams
    optim: OptimParams  # start_fraction: more steps than the model trained for are warned of
    train: TrainParams  # the curriculum's last level names the default adapter
    serve: dict[str, Any]  # checked by serve_settings where it is read


def serve_settings(params: Params, source: str = "params.yaml") -> ServeParams:
    """The serve section, validated (a bad key is one line naming it, as for any section)."""
    try:
        return ServeParams.model_validate(params.serve)
    except ValidationError as error:
        raise ParamsError(one_line(error, source, prefix="serve")) from None


def restore_steps(params: Params) -> int:
    """The DDIM steps `linefuse restore` and serve use unless told: serve.default_steps, or when
    that is null the count evaluate scored (eval.steps)."""
    return serve_settings(params).default_steps or params.eval.steps
