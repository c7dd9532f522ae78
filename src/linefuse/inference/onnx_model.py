"""The restoring model on ONNX Runtime, on the CPU: the export evaluate writes (models/onnx,
inference/onnx_export.py) run by an InferenceSession, sampled by inference/numpy_sampler.py. It
imports neither torch, diffusers nor peft, so `linefuse restore` starts in well under a second.

An export is one UNet with one adapter merged. Its manifest holds the key of what shaped its graph
(export_key): the digests of the base's and the adapter's files, of the code that builds and
exports the model, and the versions of the libraries that do; find_export hands it out only while
that key is the one now, so a retrained adapter, another one, changed export code or another
torch restores on torch until evaluate exports again.

A session's graph optimisations took 0.2 s of every `linefuse restore` (0.06 s to load the
result): the first session of an export on a machine saves its optimised graph in the cache
folder (tile_choice.cache_folder), and the next ones load that, unoptimised, to the same outputs.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from linefuse import paths
from linefuse.hardware import cpu_flags
from linefuse.inference.numpy_sampler import sample
from linefuse.inference.sampler import restored_from
from linefuse.inference.tile_choice import cache_folder
from linefuse.params.model import ModelParams

ONNX_FILE = "unet.onnx"
MANIFEST_FILE = "model.json"
# ONNX Runtime's graph optimisations: all of them (constant folding, fusions, the CPU's blocked
# layouts), the fastest of the four levels on the test set, each of which gave torch's PSNR to
# 0.0001 dB (benchmarks/onnx.py; docs/benchmarks.md, "onnx")
OPTIMISATION = "ORT_ENABLE_ALL"
# the modules whose source shapes an export's graph: the exporter (its group norms, the prompt it
# builds in, the opset) and inference/model.py (how the base loads, the adapter merges and the
# UNet is called: predict)
GRAPH_CODE = ("linefuse.inference.onnx_export", "linefuse.inference.model")
# the libraries that do: the UNet's code, the adapter's merge, the exporter, and the runtime the
# export was checked against
GRAPH_LIBRARIES = ("torch", "diffusers", "peft", "onnx", "onnxruntime")
# the key's digests, as a line saying why an export is stale names them
DIGESTS = {
    "base_digest": "the base's files",
    "adapter_digest": "the adapter's files",
    "code_digest": "the export code",
}


def folder_digest(folder: Path) -> str:
    """sha256 over the names and bytes of a model folder's weights and configs (its .json and
    .safetensors files): what an export was made from."""
    digest = hashlib.sha256()
    for path in sorted(Path(folder).glob("*")):
        if path.suffix in (".json", ".safetensors") and path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def code_files() -> list[Path]:
    """The source files of GRAPH_CODE's modules, found without importing them (nor torch)."""
    return [Path(find_spec(name).origin) for name in GRAPH_CODE]


def code_digest() -> str:
    """sha256 over the names and bytes of the code that shapes an export (code_files)."""
    digest = hashlib.sha256()
    for path in code_files():
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def export_key(base_dir: Path, adapter: Path | None) -> dict:
    """What an export of `base_dir` with `adapter` merged is made from, as it is now: the digests
    of their files and of the export code, and the versions of GRAPH_LIBRARIES. The manifest
    holds it; an export is current while its key is this one."""
    return {
        "base_digest": folder_digest(base_dir),
        "adapter_digest": folder_digest(adapter) if adapter is not None else None,
        "code_digest": code_digest(),
        "versions": {name: version(name) for name in GRAPH_LIBRARIES},
    }


def why_stale(folder: Path, key: dict) -> str | None:
    """Why `folder` holds no current export made from `key` (export_key's): there is none, or
    the parts of its key that differ; None where it holds one."""
    manifest = folder / MANIFEST_FILE
    if not (manifest.is_file() and (folder / ONNX_FILE).is_file()):
        return "there is none"
    made_from = json.loads(manifest.read_text())
    differ = [words for part, words in DIGESTS.items() if made_from.get(part) != key[part]]
    was = made_from.get("versions", {})
    differ += [
        f"{name} {was.get(name)} (now {now})"
        for name, now in key["versions"].items()
        if was.get(name) != now
    ]
    return f"the one there was made from other inputs: {', '.join(differ)}" if differ else None


def find_export(
    base_dir: Path, adapter: Path | None, folders: tuple[Path, ...] = paths.ONNX_EXPORTS
) -> Path | None:
    """The first of `folders` that holds a current export of `base_dir` with `adapter` merged
    (export_key: their files, the export code and its libraries as they are now), else None."""
    key = export_key(base_dir, adapter)
    return next((folder for folder in folders if why_stale(folder, key) is None), None)


def threads() -> int:
    """The threads a session computes on: OMP_NUM_THREADS where set (as torch takes it), else
    every core this process may run on (every core, where the system does not say)."""
    if os.environ.get("OMP_NUM_THREADS"):
        return int(os.environ["OMP_NUM_THREADS"])
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def optimised_graph(graph: Path, optimisation: str) -> Path:
    """Where the export `graph` is cached, optimised at `optimisation`: per its bytes, the
    level, ONNX Runtime's version and the CPU's flags (ORT_ENABLE_ALL lays the graph out for
    this CPU's vector width)."""
    facts = {
        "graph": hashlib.sha256(graph.read_bytes()).hexdigest(),
        "optimisation": optimisation,
        "onnxruntime": version("onnxruntime"),
        "cpu_flags": sorted(cpu_flags()),
    }
    key = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
    return cache_folder() / "onnx" / f"{key}.onnx"


class OnnxModel:
    """The export in `folder`, sampled as params.yaml's `model` section says."""

    device = "cpu"

    def __init__(self, folder: Path, model: ModelParams, optimisation: str = OPTIMISATION):
        import onnxruntime

        self.manifest = json.loads((folder / MANIFEST_FILE).read_text())
        self.schedule, self.optimisation = model, optimisation
        self.multiple = 2 ** (len(self.manifest["unet"]["block_out_channels"]) - 1)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads()
        graph, saving = folder / ONNX_FILE, None
        cached = optimised_graph(graph, optimisation)
        if cached.is_file():  # optimised once already: loaded as it is
            graph = cached
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        else:
            options.graph_optimization_level = getattr(
                onnxruntime.GraphOptimizationLevel, optimisation
            )
            cached.parent.mkdir(parents=True, exist_ok=True)
            saving = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
            options.optimized_model_filepath = str(saving)
            # its warning that the saved graph suits this CPU only: the cache key holds its flags
            options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(
            str(graph), options, providers=["CPUExecutionProvider"]
        )
        if saving is not None:
            saving.replace(cached)  # renamed in whole: a session starting meanwhile optimises

    def predict(self, noisy: np.ndarray, condition: np.ndarray, timesteps: np.ndarray):
        """The UNet's output for float32 `noisy` given `condition`, at int64 `timesteps`."""
        feed = {"noisy": noisy, "condition": condition, "timestep": timesteps}
        return self.session.run(None, feed)[0]

    def restore(self, pixels: np.ndarray, steps: int, settings, seed: int = 0, should_stop=None):
        """float32 (B, 3, H, W) pixels in [-1, 1] restored (`settings`' formulation; `seed` is
        unused: the sampler starts at the prior's mean), one image at a time: the export's
        self-attention holds its whole (positions x positions) matrix, 0.7 GB for a 384 px image,
        where torch's fused attention holds a block; a batch gains nothing on a CPU."""
        x0 = np.concatenate(
            [
                sample(self.predict, image[None], self.schedule, steps, should_stop)
                for image in pixels
            ]
        )
        return restored_from(x0, pixels, settings.target)

    def timing_facts(self) -> dict:
        """Model architecture, threads, the optimisations and ONNX Runtime's version: what the
        tile timings depend on."""
        return {
            "runtime": "onnx",
            "unet": self.manifest["unet"],
            "prompt": self.manifest["prompt_shape"],
            "device": "cpu",
            "threads": threads(),
            "optimisation": self.optimisation,
            "onnxruntime": version("onnxruntime"),
        }
