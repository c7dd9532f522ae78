"""Loading what restoring needs: the base UNet, its null prompt, a VAE, the per-domain adapters,
and the UNet's prediction for a noisy input given the condition. Training writes these files
(train/model.py); evaluate, `linefuse restore` and `linefuse serve` read them from here.
torch, diffusers and peft load inside the functions that use them: restoring on ONNX Runtime
reads the adapters' folders from here without them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from linefuse import paths
from linefuse.data.layout import ADAPTERS_MANIFEST
from linefuse.stage import UserError

if TYPE_CHECKING:
    from diffusers import UNet2DConditionModel
    from torch import Tensor, nn

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
    import torch

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
    from safetensors.torch import load_file

    return load_file(str(path))["embedding"]


def save_null_prompt(embedding: Tensor, folder: Path) -> None:
    """Writes the (1, seq, dim) embedding load_null_prompt reads, into `folder`."""
    import torch
    from safetensors.torch import save_file

    Path(folder).mkdir(parents=True, exist_ok=True)
    tensor = embedding.detach().to("cpu", torch.float32).contiguous()
    save_file({"embedding": tensor}, str(Path(folder) / NULL_PROMPT_FILE))


def load_base(folder: Path) -> UNet2DConditionModel:
    """Read back a folder written by save_base (or any local diffusers UNet folder)."""
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel.from_pretrained(str(folder))


def merge_adapter(unet: UNet2DConditionModel, adapter: str | Path) -> UNet2DConditionModel:
    """The UNet with a peft LoRA adapter folder (PeftModel.save_pretrained's) merged into its
    weights, so restoring costs what the base alone costs. An adapter whose layers or shapes
    are not this UNet's was made for another base: one line says so."""
    from peft import PeftModel

    adapter = require_adapter(adapter)
    try:
        return PeftModel.from_pretrained(unet, str(adapter)).merge_and_unload()
    except (RuntimeError, ValueError, KeyError) as error:
        cause = (str(error).strip().splitlines() or [type(error).__name__])[-1].strip()
        raise UserError(
            f"adapter {adapter} does not fit this base UNet ({cause[:160]}): it was made for "
            f"another base; load it onto the base it was trained from"
        ) from None


def require_adapter(adapter: str | Path) -> Path:
    """`adapter` as a Path; one line for a folder that is not a peft adapter's."""
    adapter = Path(adapter)
    if not (adapter / "adapter_config.json").is_file():
        raise UserError(
            f"adapter {adapter}: not a peft adapter folder (no adapter_config.json); pass "
            f"models/lora/LEVEL"
        )
    return adapter


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
