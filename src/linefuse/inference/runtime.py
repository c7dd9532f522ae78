"""eval.runtime: whether a restorer runs its model on ONNX Runtime or on torch.

`auto`: on a GPU, torch. On the CPU, ONNX Runtime where it was measured faster: one tile of
tiles.size px through one sampler step on each runtime, the faster of three runs, timed once per
machine and model and cached beside the tile timings (LINEFUSE_CACHE, else ~/.cache/linefuse),
so that every process on the machine chooses alike; the choice is logged with both timings and
the CPU model. `onnx` takes ONNX Runtime untimed, `torch` torch.

ONNX Runtime runs the models evaluate exported: models/onnx holds the base with the last adapter
merged (restore's and serve's default), models/onnx_base the base alone, and a restorer of either
runs its export; any other model (another adapter) runs on torch, under `onnx` too, and the log
says why. The numpy sampler samples pixel-space models started at the prior's mean (the defaults): a
latent model, a noise start or a GPU device makes `auto` take torch, and `onnx` one line saying
why.
"""

from __future__ import annotations

import hashlib
import json
import time
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from linefuse import paths
from linefuse.hardware import Choice, cpu_flags, cpu_model
from linefuse.inference.onnx_model import MANIFEST_FILE, OPTIMISATION, OnnxModel, threads
from linefuse.inference.tile_choice import cache_file, read_cache, write_cache
from linefuse.stage import UserError

if TYPE_CHECKING:
    from linefuse.inference.settings import RestoreSettings
    from linefuse.params.full import Params

CACHE_NAME = "runtime_seconds.json"
RUNS = 3  # timed runs of each runtime: the fastest counts


def choose_runtime(
    params: Params,
    settings: RestoreSettings,
    device: str,
    export: Path | None,
    base_dir: Path,
    adapter: Path | None,
) -> Choice:
    """The runtime of the model `base_dir` with `adapter` on `device`, as eval.runtime asks;
    `export`: the folder holding its ONNX export, or None (onnx_model.find_export); `settings`:
    how it restores."""
    requested = params.eval.runtime
    if requested == "torch":
        return Choice("torch", "set to torch")
    cannot = _why_not_onnx(params, device)
    if cannot is not None:
        if requested == "onnx":
            raise UserError(f"eval.runtime onnx: {cannot}; set eval.runtime to auto or torch")
        return Choice("torch", f"auto: {cannot}")
    if export is None:
        merged = f"{base_dir} with {adapter}" if adapter is not None else f"{base_dir} alone"
        return Choice(
            "torch",
            f"{requested}: no export of {merged} as they, the export code and its libraries "
            f"are now in {', '.join(map(str, paths.ONNX_EXPORTS))} (evaluate exports the base "
            f"alone and with the last adapter)",
        )
    if requested == "onnx":
        return Choice("onnx", "set to onnx")
    seconds, source = _seconds(params, settings, export, base_dir)
    faster = min(seconds, key=seconds.get)
    return Choice(
        faster,
        f"auto: on CPU {cpu_model()}, a {_tile_side(params, export)} px tile took "
        f"{seconds['onnx'] * 1e3:.0f} ms on ONNX Runtime and {seconds['torch'] * 1e3:.0f} ms on "
        f"torch ({source})",
    )


def _why_not_onnx(params: Params, device: str) -> str | None:
    """Why no model restores on ONNX Runtime here with these params, or None."""
    if device != "cpu":
        return f"ONNX Runtime runs on the CPU here and the device is {device}"
    if params.model.vae is not None:
        return "a latent model (model.vae) restores on torch, which runs its VAE"
    if params.model.sample_start != "mean":
        return "model.sample_start noise draws its start from torch's generator"
    return None


def _tile_side(params: Params, export: Path) -> int:
    """tiles.size rounded up to the model's multiple: the largest input it restores whole."""
    unet = json.loads((export / MANIFEST_FILE).read_text())["unet"]
    multiple = 2 ** (len(unet["block_out_channels"]) - 1)
    return -(-params.tiles.size // multiple) * multiple


def _seconds(
    params: Params, settings: RestoreSettings, export: Path, base_dir: Path
) -> tuple[dict[str, float], str]:
    """{onnx: s, torch: s} for one tile and step: from the cache, else timed now (torch on the
    base alone: merging an adapter changes the weights, not the work)."""
    manifest = json.loads((export / MANIFEST_FILE).read_text())
    side = _tile_side(params, export)
    facts = {
        "unet": manifest["unet"],
        "prompt": manifest["prompt_shape"],
        "side": side,
        "cpu": cpu_model(),
        "cpu_flags": sorted(cpu_flags()),
        "threads": threads(),
        "optimisation": OPTIMISATION,
        "onnxruntime": version("onnxruntime"),
        "torch": version("torch"),
    }
    key = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
    path = cache_file(CACHE_NAME)
    if (entry := read_cache(path).get(key)) is not None:
        return entry, f"cached in {path}"
    from linefuse.inference.torch_model import TorchModel

    models = {
        "onnx": OnnxModel(export, params.model),
        "torch": TorchModel.from_folders(params, base_dir, None, "cpu"),
    }
    seconds = {name: _time(model, side, settings) for name, model in models.items()}
    write_cache(path, key, seconds)
    return seconds, f"timed now, cached in {path}"


def _time(model, side: int, settings: RestoreSettings) -> float:
    """Seconds for one white `side` px tile through one sampler step: the fastest of RUNS."""
    pixels = np.ones((1, 3, side, side), np.float32)
    runs = []
    for _ in range(RUNS):
        started = time.perf_counter()
        model.restore(pixels, 1, settings)
        runs.append(time.perf_counter() - started)
    return min(runs)
