"""Exporting the restoring model to ONNX: the base UNet with an adapter merged, as
Restorer.from_params loads it for torch, with its null prompt built in, written with a manifest
of what it was made from (evaluate writes models/onnx; inference/onnx_model.py runs it).
evaluate keeps an export whose manifest holds the key of the files, code and libraries as they
are now (onnx_model.export_key), and exports again, saying why, where any part differs.

The graph takes the noisy signal, the condition and the timesteps, any batch and any height and
width that are multiples of the UNet's downsampling (the restorer pads to them), and gives the
UNet's prediction. It is written by torch's TorchScript exporter, which needs only the `onnx`
package (the torch.export one needs onnxscript too), takes seconds and writes the same bytes
on every run; its trace records the UNet's shape checks and its upsampling for sizes divisible
by the downsampling, which is every input the restorer gives it.

Its group norms are _GroupNorm's, not the exporter's: that one is ONNX's InstanceNormalization,
which ONNX Runtime sums in one float32 running sum over a group's whole image. On a chart, where
most of a group is one white, that sum's rounding moves the mean, and the normalised output by up
to 5e-4, so 1 restored pixel in 800 of the test set came out a grey level off torch's; means
taken row by row agree with torch's group_norm to its own rounding, at the same speed
(docs/benchmarks.md, "onnx").
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import torch

from linefuse.inference.model import load_base, load_null_prompt, merge_adapter, predict
from linefuse.inference.onnx_model import MANIFEST_FILE, ONNX_FILE, export_key, why_stale
from linefuse.inference.torch_model import architecture
from linefuse.stage import atomic_dir

OPSET = 17  # ONNX Runtime 1.17 and later run it; LayerNormalization is an operator from 17 on
DYNAMIC = {0: "batch", 2: "height", 3: "width"}

log = logging.getLogger("linefuse")


class _GroupNorm(torch.nn.Module):
    """torch.nn.GroupNorm's output, its mean and variance taken over each row, then the rows,
    then the group's channels: short float32 sums, whose rounding stays at float32's own."""

    def __init__(self, norm: torch.nn.GroupNorm):
        super().__init__()
        self.groups, self.eps = norm.num_groups, norm.eps
        self.weight, self.bias = norm.weight, norm.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, channels, height, width = x.shape
        grouped = x.reshape(batch, self.groups, channels // self.groups, height, width)
        mean = grouped.mean(-1, keepdim=True).mean(-2, keepdim=True).mean(-3, keepdim=True)
        centred = grouped - mean
        variance = (centred * centred).mean(-1, keepdim=True).mean(-2, keepdim=True)
        variance = variance.mean(-3, keepdim=True)
        normed = (centred * torch.rsqrt(variance + self.eps)).reshape(x.shape)
        return normed * self.weight[:, None, None] + self.bias[:, None, None]


def _with_exact_group_norms(unet: torch.nn.Module) -> torch.nn.Module:
    """`unet` (changed in place) with each of its GroupNorms a _GroupNorm."""
    for parent in list(unet.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.GroupNorm):
                setattr(parent, name, _GroupNorm(child))
    return unet


class _Denoiser(torch.nn.Module):
    """The UNet as the sampler calls it (inference/model.py's predict), the prompt built in."""

    def __init__(self, unet, null_prompt: torch.Tensor):
        super().__init__()
        self.unet = unet
        self.register_buffer("prompt", null_prompt)

    def forward(self, noisy: torch.Tensor, condition: torch.Tensor, timestep: torch.Tensor):
        prompt = self.prompt.expand(noisy.shape[0], -1, -1)
        return predict(self.unet, noisy, condition, timestep, prompt)


def refresh_export(base_dir: Path, adapter: Path | None, folder: Path) -> None:
    """`folder` holding a current export of `base_dir` with `adapter` merged: the one there where
    its key is the one now (onnx_model.export_key), else a new one; one line says which, and
    what differed."""
    why = why_stale(folder, export_key(base_dir, adapter))
    if why is None:
        log.info("onnx export: %s is current, kept", folder)
        return
    log.info("onnx export: exporting %s, as %s", folder, why)
    export_onnx(base_dir, adapter, folder)


def export_onnx(base_dir: Path, adapter: Path | None, folder: Path) -> None:
    """`folder` (replaced whole): unet.onnx, `base_dir` with `adapter` merged, and model.json,
    its key (the digests of their files and of the export code, the libraries' versions), the
    UNet's config and the prompt's shape."""
    unet = load_base(base_dir)
    if adapter is not None:
        unet = merge_adapter(unet, adapter)
    prompt = load_null_prompt(base_dir)
    side = 2 ** len(unet.config.block_out_channels)  # two cells at the deepest level
    signal = unet.config.out_channels
    noisy = torch.zeros(1, signal, side, side)
    condition = torch.zeros(1, unet.config.in_channels - signal, side, side)
    timestep = torch.zeros(1, dtype=torch.int64)
    with atomic_dir(folder) as tmp, warnings.catch_warnings():
        # the trace's notes on the shape checks (above), and the exporter's own deprecation
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            _Denoiser(_with_exact_group_norms(unet.eval()), prompt).eval(),
            (noisy, condition, timestep),
            str(tmp / ONNX_FILE),
            input_names=["noisy", "condition", "timestep"],
            output_names=["prediction"],
            dynamic_axes={
                "noisy": DYNAMIC,
                "condition": DYNAMIC,
                "timestep": {0: "batch"},
                "prediction": DYNAMIC,
            },
            opset_version=OPSET,
            dynamo=False,
        )
        manifest = {
            **export_key(base_dir, adapter),
            "base": str(base_dir),
            "adapter": str(adapter) if adapter is not None else None,
            "unet": architecture(unet.config),
            "prompt_shape": list(prompt.shape),
            "opset": OPSET,
        }
        (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
