"""Restoring images with the trained model: the base UNet plus an adapter, DDIM sampling.

An image no larger than `tiles.size` is padded (reflect) to the model's multiple, restored in a
batch of its size and cropped back; a larger one is restored in overlapping tiles
(inference/tiles.py) of `tiles.tile` px, or with `auto` of the size that restores it cheapest on
this machine (inference/tile_choice.py). A scan's skew is undone first (eval.deskew,
data/deskew.py). The same code serves `evaluate`, `linefuse restore`, `linefuse serve` and
LineFusePipeline (inference/pipeline.py).

The model runs on one of two runtimes (eval.runtime, inference/runtime.py): torch
(inference/torch_model.py), or ONNX Runtime on the CPU over the export evaluate writes
(inference/onnx_model.py). Everything around the model (normalising, padding, the shrink,
tiling) is numpy here, so the ONNX path imports neither torch, diffusers nor peft.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
from PIL import Image
from tqdm import tqdm

from linefuse import paths
from linefuse.data.deskew import straighten
from linefuse.data.transforms import normalise_array, to_uint8_array
from linefuse.hardware import Choice, choose_device
from linefuse.inference.model import require_adapter
from linefuse.inference.onnx_model import OnnxModel, find_export
from linefuse.inference.runtime import choose_runtime
from linefuse.inference.settings import RestoreSettings
from linefuse.inference.tile_choice import TileCosts
from linefuse.inference.tiles import boxes, restore_tiled
from linefuse.stage import UserError

if TYPE_CHECKING:
    from linefuse.params.full import Params

log = logging.getLogger("linefuse")


class Model(Protocol):
    """The model on one runtime: inference/torch_model.py's or inference/onnx_model.py's."""

    multiple: int  # inputs are padded to a multiple of this many px
    device: object  # where it runs (a torch.device, or "cpu" for ONNX Runtime)

    def restore(
        self, pixels: np.ndarray, steps: int, settings: RestoreSettings, seed: int, should_stop
    ) -> np.ndarray:
        """float32 (B, 3, H, W) in [-1, 1] to the restored image, the same, before the shrink."""

    def timing_facts(self) -> dict:
        """What its speed depends on besides the CPU (tile_choice's cache key)."""


class Restorer:
    """Holds a loaded model; `restore` maps uint8 (B, H, W, 3) blurred images to restored ones."""

    def __init__(self, model: Model, settings: RestoreSettings, runtime: Choice):
        """`model` on the runtime `runtime` names (with why it was chosen)."""
        self.model, self.settings, self.runtime = model, settings, runtime
        self.tile_costs = TileCosts(self)
        self.warned_steps = False

    @classmethod
    def from_params(
        cls,
        params: Params,
        adapter: str | Path | None,
        device: str | None = None,
        base_dir: Path = paths.BASE_DIR,
    ) -> Restorer:
        """The model a run trained: `base_dir` (save_base's layout, models/base unless told) with
        `adapter` (a peft adapter folder, or None) merged, params.yaml's formulation and tiles;
        on ONNX Runtime where eval.runtime says so and an export (paths.ONNX_EXPORTS) holds them
        (inference/runtime.py), else on torch. `device`: cpu, cuda; None takes compute.device
        (auto: the GPU if there is one)."""
        device = device or choose_device(params.compute.device).value
        if not (Path(base_dir) / "config.json").is_file():
            raise UserError(
                f"{base_dir} is missing; run `dvc repro` (or `linefuse pretrain`) first"
            )
        if adapter is not None:
            adapter = require_adapter(adapter)
        settings = RestoreSettings.from_params(params)
        export = find_export(base_dir, adapter)
        runtime = choose_runtime(params, settings, device, export, Path(base_dir), adapter)
        log.info("restorer: runtime %s (%s)", runtime.value, runtime.reason)
        if runtime.value == "onnx":
            return cls(OnnxModel(export, params.model), settings, runtime)
        from linefuse.inference.torch_model import TorchModel

        return cls(TorchModel.from_folders(params, base_dir, adapter, device), settings, runtime)

    def restore(
        self, blurred: np.ndarray, steps: int, seed: int = 0, should_stop=None
    ) -> np.ndarray:
        """Restores a uint8 (B, H, W, 3) batch of one size; returns uint8 (B, H, W, 3).
        `should_stop()`, asked before each step, stops it with SamplingCancelled."""
        if steps > 1 and self.settings.start_fraction == 1 and not self.warned_steps:
            self.warned_steps = True
            log.warning(
                "%d DDIM steps: optim.start_fraction is 1, so the model was trained for the first "
                "step only and the later ones run it at timesteps it never saw, which restores "
                "worse; restore in 1 step, or train with optim.start_fraction < 1",
                steps,
            )
        _, height, width, _ = blurred.shape
        pixels = normalise_array(blurred)
        multiple = self.model.multiple
        pad_y, pad_x = -height % multiple, -width % multiple
        if pad_y or pad_x:
            mode = "reflect" if min(height, width) > 1 else "edge"
            pixels = np.pad(pixels, ((0, 0), (0, 0), (0, pad_y), (0, pad_x)), mode=mode)
        restored = self.model.restore(pixels, steps, self.settings, seed, should_stop)
        restored = shrink_change(restored, pixels, self.settings.shrink)
        return to_uint8_array(restored[:, :, :height, :width])

    def restore_image(
        self,
        image: np.ndarray,
        steps: int,
        seed: int = 0,
        should_stop=None,
        progress=None,
        deskew: str | None = None,
    ) -> np.ndarray:
        """One uint8 (H, W, 3) image of any size, straightened first (`deskew`, eval.deskew
        unless told), whole if no side is larger than tiles.size, else tiled. `progress(n)`, if
        given, is told how many tiles each batch restored."""
        image = straighten(image, deskew or self.settings.deskew)
        tile = self.tile_for(*image.shape[:2])
        if tile is None:
            restored = self.restore(image[None], steps, seed, should_stop)[0]
            if progress is not None:
                progress(1)
            return restored

        def restore_batch(batch: np.ndarray) -> np.ndarray:
            return self.restore(batch, steps, seed, should_stop)

        settings = self.settings
        batch = self.tile_batch(tile)
        return restore_tiled(image, restore_batch, tile, settings.overlap, batch, progress)

    def restore_pair(
        self,
        image: np.ndarray,
        steps: int,
        seed: int = 0,
        should_stop=None,
        deskew: str | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(the image as restore_image restores it, straightened; its restoration): digitize
        reads a restoration's tick labels in both."""
        straightened = straighten(image, deskew or self.settings.deskew)
        restored = self.restore_image(straightened, steps, seed, should_stop, deskew="never")
        return straightened, restored

    def tile_batch(self, tile: int) -> int:
        """How many `tile` px tiles run at once: tiles.batch_size, or with tiles.tile auto that
        or 1, whichever was measured cheaper per tile."""
        if self.settings.tile != "auto":
            return self.settings.tile_batch
        return self.tile_costs.batch_for(tile)

    def tile_for(self, height: int, width: int) -> int | None:
        """The tile size an image of this size is restored in; None: it runs whole."""
        settings = self.settings
        if max(height, width) <= settings.whole:
            return None
        if settings.tile != "auto":
            return int(settings.tile)
        return self.tile_costs.cheapest(height, width)

    def tile_count(self, height: int, width: int) -> int:
        """How many tiles restore_image cuts an image of this size into (1: it runs whole)."""
        tile = self.tile_for(height, width)
        return 1 if tile is None else len(boxes(height, width, tile, self.settings.overlap))

    def restore_images(
        self, images: list[np.ndarray], steps: int, seed: int = 0, batch_size: int = 8
    ) -> list[np.ndarray]:
        """Any number of uint8 (H, W, 3) images of any sizes in input order, as given (evaluate
        straightens its inputs once, for all its models): those restored whole batched by
        size, larger ones tiled."""
        out: list[np.ndarray | None] = [None] * len(images)
        by_shape: dict[tuple, list[int]] = {}
        for position, image in enumerate(images):
            if max(image.shape[:2]) > self.settings.whole:
                out[position] = self.restore_image(image, steps, seed, deskew="never")
                continue
            by_shape.setdefault(image.shape, []).append(position)
        for positions in by_shape.values():
            for start in range(0, len(positions), batch_size):
                chunk = positions[start : start + batch_size]
                restored = self.restore(np.stack([images[i] for i in chunk]), steps, seed)
                for position, image in zip(chunk, restored, strict=True):
                    out[position] = image
        return out


def shrink_change(restored: np.ndarray, blurred: np.ndarray, grey_levels: float) -> np.ndarray:
    """The restoration with its change to the input soft-thresholded by `grey_levels` (0-255
    scale; pixels in [-1, 1]): every pixel moves that much less, and not at all if it moved less.
    A model's 1-step output may carry a faint texture of its own over the whole chart: harmless
    on a blurred chart, it is most of the error on a sharp one (docs/experiments.md, "Shrink")."""
    if grey_levels <= 0:
        return restored
    change = restored - blurred
    threshold = np.float32(grey_levels * 2.0 / 255.0)
    return blurred + np.sign(change) * np.maximum(np.abs(change) - threshold, np.float32(0.0))


def check_steps(params: Params, steps: int) -> None:
    """A command's --steps, within what the model was trained for."""
    if not 1 <= steps <= params.model.train_timesteps:
        raise UserError(
            f"--steps {steps}: accepts 1 to {params.model.train_timesteps} (model.train_timesteps)"
        )


def restore_files(
    params: Params,
    inputs: list[str],
    adapter: Path,
    steps: int,
    out_dir: Path,
    seed: int = 0,
    device: str | None = None,
) -> tuple[int, list[tuple[str, str]]]:
    """Restores every image in `inputs` (files or folders) into out_dir as PNG, keeping relative
    names (load_rgb decodes any mode to 8-bit RGB); returns (restored count, [(path, reason)
    for each skipped file]). A progress bar
    counts the images and, under it, the tiles of an image that has more than one."""
    from linefuse.data.images import image_files, load_rgb

    files, skipped = image_files(inputs)
    check_steps(params, steps)
    restorer = Restorer.from_params(params, adapter, device)
    out_dir.mkdir(parents=True, exist_ok=True)
    restored = 0
    for path, relative in tqdm(files, desc="restore", unit="image", disable=None):
        try:
            image = load_rgb(path)
        except (OSError, ValueError, SyntaxError) as error:
            skipped.append((str(path), str(error) or type(error).__name__))
            continue
        result = _restore_showing_tiles(restorer, image, steps, seed, relative.as_posix())
        target = (out_dir / relative).with_suffix(".png")
        target.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(result).save(target)
        restored += 1
    return restored, skipped


def _restore_showing_tiles(
    restorer: Restorer, image: np.ndarray, steps: int, seed: int, name: str
) -> np.ndarray:
    """restore_image, with a bar over the image's tiles when it has more than one: a large chart
    at many steps runs long (docs/benchmarks.md, "restore"), and the image bar moves only once
    it is done."""
    tiles = restorer.tile_count(*image.shape[:2])
    if tiles == 1:
        return restorer.restore_image(image, steps, seed)
    with tqdm(total=tiles, desc=name, unit="tile", leave=False, disable=None) as bar:
        return restorer.restore_image(image, steps, seed, progress=bar.update)
