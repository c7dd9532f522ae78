"""Build or load the conditional UNet, widen its input for the condition, and inject LoRA.

The UNet follows InstructPix2Pix: its input is the noisy target and the condition (the blurred
image or its VAE latent) concatenated on the channel axis, C channels each, so it has 2C inputs
and C outputs. Prompt embeddings reach it through cross-attention.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import peft
import torch
from diffusers import UNet2DConditionModel
from safetensors.torch import load_file
from torch import Tensor, nn

from linefuse.inference.model import load_base, save_null_prompt
from linefuse.params.training import LoraParams
from linefuse.paths import fresh_config, unet_config, unet_folder
from linefuse.stage import UserError

ADAPTER_WEIGHTS = "adapter_model.safetensors"  # what PeftModel.save_pretrained writes


def build_unet(spec: str, channels: int) -> UNet2DConditionModel:
    """The conditional UNet for `channels`-channel images or latents (2*channels in, channels out).

    `tiny` (or another of train/configs/) is built from the repo config with a fixed seed, so
    every run starts from the same weights, and with conv_out zeroed, so the untrained model
    predicts 0 (with the residual target that returns the blurred input). Any other spec is a
    shipped model (linefuse/zoo) or a local diffusers UNet folder; a plain one (`channels`
    inputs) is widened for the condition without changing what it computes.
    """
    if fresh_config(spec):
        config = {**unet_config(spec), "in_channels": 2 * channels, "out_channels": channels}
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            unet = UNet2DConditionModel.from_config(config)
        nn.init.zeros_(unet.conv_out.weight)
        nn.init.zeros_(unet.conv_out.bias)
        return unet
    unet = UNet2DConditionModel.from_pretrained(str(unet_folder(spec)))
    in_channels, out_channels = unet.config.in_channels, unet.config.out_channels
    if out_channels != channels:
        raise UserError(
            f"model.unet: {spec} has {out_channels} output channels; the data has "
            f"{channels} (pixel or VAE latent channels), so it needs {channels}"
        )
    if in_channels == channels:
        return widen_conv_in(unet, 2 * channels)
    if in_channels != 2 * channels:
        raise UserError(
            f"model.unet: {spec} has {in_channels} input channels; accepts {channels} "
            f"(widened for the condition) or {2 * channels} (already conditional)"
        )
    return unet


def widen_conv_in(unet: UNet2DConditionModel, in_channels: int) -> UNet2DConditionModel:
    """Give conv_in `in_channels` inputs: old weights on the first channels, zeros on the new ones.

    The widened model ignores the new (condition) channels until training moves those weights,
    so it starts from exactly what the pretrained model computed.
    """
    old = unet.conv_in
    new = nn.Conv2d(
        in_channels,
        old.out_channels,
        old.kernel_size,
        old.stride,
        old.padding,
        device=old.weight.device,
        dtype=old.weight.dtype,
    )
    with torch.no_grad():
        new.weight.zero_()
        new.weight[:, : old.in_channels].copy_(old.weight)
        new.bias.copy_(old.bias)
    unet.conv_in = new
    unet.register_to_config(in_channels=in_channels)
    return unet


def init_from(unet: UNet2DConditionModel, source: UNet2DConditionModel) -> tuple[int, int]:
    """Copies into `unet` every tensor of `source` whose name and shape match, with the up blocks
    counted from the deepest level (a UNet with more levels puts its new ones first in
    up_blocks, and its own down_blocks last): a deeper layout starts from a shallower base's
    outer levels, its new deep levels from its own initialisation. Returns (parameters copied,
    parameters in `unet`)."""
    shift = len(unet.config.block_out_channels) - len(source.config.block_out_channels)
    target = unet.state_dict()
    copied = {}
    for name, value in source.state_dict().items():
        parts = name.split(".")
        if parts[0] == "up_blocks":
            parts[1] = str(int(parts[1]) + shift)
        mapped = ".".join(parts)
        if mapped in target and target[mapped].shape == value.shape:
            copied[mapped] = value
    unet.load_state_dict(copied, strict=False)
    total = sum(p.numel() for p in unet.parameters())
    names = dict(unet.named_parameters())
    return sum(names[k].numel() for k in copied if k in names), total


def lora_config(lora: LoraParams, modules_to_save: list[str] | None = None) -> peft.LoraConfig:
    """The peft config for train.lora; B starts at zero, so adding the adapter changes nothing.

    With no `blocks`, `target_modules` are peft name suffixes. With blocks, they become one regex
    (peft full-matches a string) that only accepts those suffixes under the named blocks.
    `modules_to_save` are backbone blocks trained fully and saved inside the adapter (hybrid).
    """
    targets: list[str] | str = list(lora.target_modules)
    if lora.blocks:
        blocks = "|".join(re.escape(block) for block in lora.blocks)
        names = "|".join(re.escape(name) for name in lora.target_modules)
        targets = rf"^(?:{blocks})\.(?:.*\.)?(?:{names})$"
    return peft.LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=targets,
        init_lora_weights=True,
        modules_to_save=modules_to_save,
    )


def add_lora(
    unet: UNet2DConditionModel, lora: LoraParams, unfreeze_blocks: list[str] = ()
) -> peft.PeftModel:
    """Wrap the UNet with a fresh LoRA adapter; only LoRA and `unfreeze_blocks` stay trainable."""
    _require_blocks(unet, lora.blocks, "train.lora.blocks")
    _require_blocks(unet, unfreeze_blocks, "train.unfreeze.blocks")
    config = lora_config(lora, list(unfreeze_blocks) or None)
    try:
        return peft.get_peft_model(unet, config)
    except peft.NoMatchingPeftModuleError:
        where = f"under {list(lora.blocks)}" if lora.blocks else "anywhere"
        outside = ""
        if unfreeze_blocks:
            outside = f" outside train.unfreeze.blocks {list(unfreeze_blocks)}"
        raise UserError(
            f"train.lora.target_modules / train.lora.blocks: no module of the UNet "
            f"matches {list(lora.target_modules)} {where}{outside}"
        ) from None


def _require_blocks(unet: nn.Module, blocks, key: str) -> None:
    """A misspelt block would silently drop out of peft's matching; name it instead."""
    names = dict(unet.named_modules())
    for block in blocks:
        if block not in names:
            raise UserError(
                f"{key}: the UNet has no module {block!r}; accepts names like "
                f"mid_block, down_blocks.0, up_blocks.2"
            )


def adapter_start(model: peft.PeftModel, base_dir: Path, init_adapter: Path) -> dict[str, Tensor]:
    """The weights a level starts from: its init adapter's. Where the hybrid starts, the blocks it
    trains fully were never saved in that adapter: they start from the base with the adapter's
    LoRA merged into them, so what the earlier levels learnt there carries over."""
    start = load_file(Path(init_adapter) / ADAPTER_WEIGHTS)
    missing = [name for name in peft.get_peft_model_state_dict(model) if name not in start]
    if missing:
        merged = load_adapter(load_base(base_dir), init_adapter, trainable=False).merge_and_unload()
        weights = merged.state_dict()
        start |= {name: weights[name.removeprefix("base_model.model.")] for name in missing}
    return start


def load_adapter(
    unet: UNet2DConditionModel, adapter_dir: str | Path, trainable: bool
) -> peft.PeftModel:
    """Attach an adapter saved by PeftModel.save_pretrained; trainable to keep training it."""
    return peft.PeftModel.from_pretrained(unet, str(adapter_dir), is_trainable=trainable)


def count_parameters(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts, for logs and metrics."""
    params = list(model.parameters())
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)


def zero_prompt(unet: str) -> torch.Tensor:
    """The null prompt of pixel-space training: one token of zeros."""
    return torch.zeros(1, 1, unet_config(unet)["cross_attention_dim"])


def save_base(unet: UNet2DConditionModel, folder: Path, null_prompt: Tensor) -> None:
    """Write the base model (models/base) as a standard diffusers folder, safetensors only, with
    the empty prompt's embedding the model was trained with, so restoring needs nothing else."""
    unet.save_pretrained(folder, safe_serialization=True)
    save_null_prompt(null_prompt, Path(folder))


def save_adapter(model: peft.PeftModel, folder: Path) -> None:
    """PeftModel.save_pretrained, with adapter_config.json made byte-stable.

    peft writes target_modules from a set, in an order that changes with each process's hash
    seed; sorted, the same training gives the same file and DVC's cache hits.
    """
    model.save_pretrained(folder)
    for config_path in Path(folder).rglob("adapter_config.json"):  # nested: non-default names
        config = json.loads(config_path.read_text())
        if isinstance(config.get("target_modules"), list):
            config["target_modules"] = sorted(config["target_modules"])
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def quantize_frozen(unet: nn.Module, scheme: str | None) -> None:
    """model.quantize_base: quantise the frozen base weights in place to save memory.

    Call it after add_lora/load_adapter: modules holding trainable parameters (LoRA, unfrozen
    blocks) stay in full precision so their gradients are exact.
    """
    if scheme is None:
        return
    try:
        from optimum import quanto
    except ImportError:
        raise UserError(
            f"model.quantize_base: {scheme} needs optimum-quanto; pip install "
            "optimum-quanto, or set it to null"
        ) from None
    trainable = [
        name
        for name, module in unet.named_modules()
        if any(p.requires_grad for p in module.parameters(recurse=False))
    ]
    quanto.quantize(unet, weights=getattr(quanto, scheme), exclude=trainable or None)
    quanto.freeze(unet)
