"""The restoring model on torch: the base UNet with any adapter merged, the VAE of a latent model,
the null prompt and diffusers' DDIM scheduler, on a CPU or a GPU. The runtime of GPUs, of
LineFusePipeline, and of any model evaluate did not export (inference/runtime.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from linefuse.inference.model import load_base, load_null_prompt, merge_adapter
from linefuse.inference.sampler import ddim_scheduler, restored_from, sample

if TYPE_CHECKING:
    from diffusers import DDIMScheduler

    from linefuse.inference.settings import RestoreSettings
    from linefuse.params.full import Params


class TorchModel:
    """The modules a restoration runs, on the device `null_prompt` is on."""

    def __init__(self, unet, scheduler: DDIMScheduler, null_prompt: torch.Tensor, vae=None):
        """`unet` (a base with any adapter merged), `vae` (or None: pixel space) and
        `null_prompt` on the device the model runs on."""
        self.unet, self.scheduler, self.vae, self.prompt = unet, scheduler, vae, null_prompt
        self.device = null_prompt.device
        unet_factor = 2 ** (len(unet.config.block_out_channels) - 1)
        vae_factor = 2 ** (len(vae.config.block_out_channels) - 1) if vae is not None else 1
        self.multiple = unet_factor * vae_factor

    @classmethod
    def from_folders(
        cls, params: Params, base_dir: Path, adapter: Path | None, device: str
    ) -> TorchModel:
        """`base_dir` (save_base's layout) with `adapter` merged, on `device`."""
        unet = load_base(base_dir)
        if adapter is not None:
            unet = merge_adapter(unet, adapter)
        vae = None
        if params.model.vae is not None:
            from linefuse.inference.model import load_vae

            vae = load_vae(params.model.vae).to(device)
        return cls(
            unet.to(device).eval(),
            ddim_scheduler(params.model),
            load_null_prompt(base_dir).to(device),
            vae,
        )

    @torch.no_grad()
    def restore(
        self,
        pixels: np.ndarray,
        steps: int,
        settings: RestoreSettings,
        seed: int = 0,
        should_stop=None,
    ) -> np.ndarray:
        """float32 (B, 3, H, W) pixels in [-1, 1] restored (`settings`' formulation), back on the
        host as numpy."""
        batch = pixels.shape[0]
        condition = self._encode(torch.from_numpy(pixels).to(self.device))
        generator = torch.Generator().manual_seed(seed)
        x0 = sample(
            self.unet,
            condition,
            self.prompt.expand(batch, -1, -1),
            self.scheduler,
            settings.sample_start,
            steps,
            generator,
            should_stop,
        )
        restored = self._decode(restored_from(x0, condition, settings.target))
        return restored.float().cpu().numpy()

    def _encode(self, pixels: torch.Tensor) -> torch.Tensor:
        if self.vae is None:
            return pixels
        return self.vae.encode(pixels).latent_dist.mean * self.vae.config.scaling_factor

    def _decode(self, signal: torch.Tensor) -> torch.Tensor:
        if self.vae is None:
            return signal
        return self.vae.decode(signal / self.vae.config.scaling_factor).sample

    def timing_facts(self) -> dict:
        """Model architecture, device, threads, torch: what the tile timings depend on."""
        return {
            "runtime": "torch",
            "unet": architecture(self.unet.config),
            "vae": architecture(self.vae.config) if self.vae is not None else None,
            "prompt": list(self.prompt.shape),
            "device": str(self.device),
            "threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(0) if self.device.type == "cuda" else None,
            "torch": torch.__version__,
        }


def architecture(config) -> dict:
    """A diffusers model's config less the keys diffusers adds (`_name_or_path`: where it was
    loaded from), so the same architecture shares timings wherever its weights live (models/base,
    a saved pipeline's unet/)."""
    return {key: value for key, value in config.items() if not key.startswith("_")}
