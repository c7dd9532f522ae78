"""Loading what restoring needs: the base UNet, its null prompt, a VAE, the per-domain adapters,
and the UNet's prediction for a noisy input given the condition. Training writes these files
(train/model.py); evaluate, `linefuse restore` and `linefuse serve` read them from here.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from diffusers import UNet2DConditionModel
from safetensors.torch import load_file
from torch import Tensor, nn

from linefuse import paths
from linefuse.data.layout import ADAPTERS_MANIFEST
from linefuse.stage import UserError

NULL_PROMPT_FILE = "null_prompt.safetensors"


def load_vae(path: str):
    """A local diffusers AutoencoderKL folder, frozen and in eval mode (never a hub id)."""
    from diffusers import AutoencoderKL

    vae = AutoencoderKL.from_pretrained(path, local_files_only=True)
    vae.eval()
    vae.requires_grad_(False)
    return vae


def predict(
    unet: nn.Module, noisy: Tensor, condition: Tensor, timesteps: Tensor, prompt_embeds: Tensor
) -> Tensor:
    """The UNet's prediction for `noisy` given the condition; a bare UNet or a PeftModel."""
    return unet(
        torch.cat([noisy, condition], dim=1), timesteps, encoder_hidden_states=prompt_embeds
    ).sample


def load_null_prompt(folder: Path) -> Tensor:
    """The (1, seq, dim) embedding save_base wrote beside the base model."""
    path = Path(folder) / NULL_PROMPT_FILE
    if not path.is_file():
        raise UserError(
            f"{path} is missing (a base written before LineFuse saved the prompt "
            f"with the model); rerun `linefuse pretrain`"
        )
    return load_file(str(path))["embedding"]


def load_base(folder: Path) -> UNet2DConditionModel:
    """Read back a folder written by save_base (or any local diffusers UNet folder)."""
    return UNet2DConditionModel.from_pretrained(str(folder))


def domain_adapters(folder: Path = paths.DOMAIN_ADAPTERS_DIR) -> dict:
    """The manifest train_domains wrote: {"adapters": {domain: dir}, "combined": dir | None}."""
    manifest = folder / ADAPTERS_MANIFEST
    if not manifest.is_file():
        return {"adapters": {}, "combined": None}
    content = json.loads(manifest.read_text())
    return {
        "adapters": {domain: folder / name for domain, name in content["adapters"].items()},
        "combined": folder / content["combined"] if content["combined"] else None,
    }
