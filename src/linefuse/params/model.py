"""params.yaml's `model` section: the diffusion formulation and the UNet, VAE and text encoder it
loads."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator

from linefuse.params import Strict
from linefuse.paths import ZOO_DIR, fresh_config, unet_folder


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
