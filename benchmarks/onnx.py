"""ONNX Runtime against torch on this CPU: the restoring model (models/base with the last
curriculum adapter merged) on the default test set, per runtime and setting.

Run in a project `dvc repro` built (data/shards, models/base, models/lora/LEVEL). The model is
exported as evaluate exports it (inference/onnx_export.py), and once more with the exporter's own
group norm (ONNX's InstanceNormalization), the export evaluate used before; each export runs at
ONNX Runtime's four graph optimisation levels, and with its weights quantised to int8 by
onnxruntime.quantization's dynamic quantisation (MatMul and Gemm alone, and Conv too). Every
variant restores the first --samples test images of each domain and level (evaluate's crops,
straightened once as evaluate straightens them, at eval.steps), scored as evaluate scores them:
the mean test PSNR, its difference from torch's, and the share of pixels equal to torch's. Speed
is then timed in rounds, each variant once per round in turn (the machine is shared: a paired
ratio holds where the load drifts): one 288 px and one 384 px tile through one sampler step, and
the restorations' seconds per megapixel; the ratio to torch eager is the median of the rounds'.
The last block times `linefuse restore` of one default chart, start-up included, per runtime, in
fresh interpreters. The report names the CPU and its load: benchmarks/results/onnx.json.

    python benchmarks/onnx.py [--samples 8] [--rounds 5] [--out benchmarks/results/onnx.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# Run as a script, this file's folder leads sys.path, where its name would stand for the `onnx`
# package that onnxruntime.quantization imports: the folder is dropped.
HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != HERE]
LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL")
QUANTISED = {"int8_matmul": ["MatMul", "Gemm"], "int8_matmul_conv": ["MatMul", "Gemm", "Conv"]}
TILES = (288, 384)  # a tile of the measurement, and tiles.size: a default chart whole


def _exports(params, folder: Path) -> dict[str, Path]:
    """{name: export folder}: as evaluate writes it, with the exporter's group norm, and the
    former quantised."""
    from onnxruntime.quantization import QuantType, quant_pre_process, quantize_dynamic

    from linefuse import paths
    from linefuse.inference import onnx_export
    from linefuse.inference.onnx_model import ONNX_FILE

    adapter = paths.adapter(params.train.restoring_level())
    exports = {"exact_group_norm": folder / "exact_group_norm"}
    onnx_export.export_onnx(paths.BASE_DIR, adapter, exports["exact_group_norm"])
    plain = onnx_export._with_exact_group_norms
    onnx_export._with_exact_group_norms = lambda unet: unet  # torch's exporter's own
    try:
        exports["instance_norm"] = folder / "instance_norm"
        onnx_export.export_onnx(paths.BASE_DIR, adapter, exports["instance_norm"])
    finally:
        onnx_export._with_exact_group_norms = plain
    for name, ops in QUANTISED.items():
        exports[name] = shutil.copytree(exports["exact_group_norm"], folder / name)
        model = exports[name] / ONNX_FILE
        quant_pre_process(model, model, skip_symbolic_shape=True)  # folded, as ORT advises
        quantize_dynamic(model, model, op_types_to_quantize=ops, weight_type=QuantType.QInt8)
    return exports


def _variants(params, exports: dict[str, Path]) -> dict:
    """{name: a function making its model}: torch eager, every export at every optimisation
    level, the quantised ones at the level evaluate's export runs at. Each ONNX Runtime session
    is made where it runs and dropped after: a session's memory arena keeps its largest shapes,
    and eleven at once outgrow the machine."""
    from linefuse import paths
    from linefuse.inference.onnx_model import OPTIMISATION, OnnxModel
    from linefuse.inference.torch_model import TorchModel

    adapter = paths.adapter(params.train.restoring_level())
    torch_model = TorchModel.from_folders(params, paths.BASE_DIR, adapter, "cpu")
    variants = {"torch_eager": lambda: torch_model}
    for export in ("exact_group_norm", "instance_norm"):
        for level in LEVELS:
            variants[f"onnx_{export}_{level}"] = partial(
                OnnxModel, exports[export], params.model, level
            )
    for name in QUANTISED:
        variants[f"onnx_{name}_{OPTIMISATION}"] = partial(
            OnnxModel, exports[name], params.model, OPTIMISATION
        )
    return variants


def _test_images(params, samples: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(inputs straightened as evaluate straightens them, sharp) of the first `samples` test
    images of each domain and level."""
    from linefuse import paths
    from linefuse.data.deskew import straighten
    from linefuse.data.readers import LmdbPairs
    from linefuse.evaluate.scoring import first_per_domain

    inputs, sharp = [], []
    for level in params.degrade.levels:
        dataset = LmdbPairs(paths.shards(level), "test")
        for index in first_per_domain(dataset.metas, samples):
            blurred, clean, _ = dataset[index]
            inputs.append(straighten(blurred, params.eval.deskew))
            sharp.append(clean)
        dataset.close()
    return inputs, sharp


def _restorer(params, make_model):
    """A restorer over a new model; the one before it freed (a restorer and its tile costs
    hold each other, so only the collector frees them, and with them a session's arena)."""
    from linefuse.hardware import Choice
    from linefuse.inference.restorer import Restorer
    from linefuse.inference.settings import RestoreSettings

    gc.collect()
    settings = RestoreSettings.from_params(params)
    return Restorer(make_model(), settings, Choice("benchmark", "benchmarks/onnx.py"))


def _scores(params, variants: dict, inputs: list, sharp: list) -> dict:
    """Per variant: mean test PSNR, its difference from torch's (mean of the per-image
    differences), the share of pixels equal to torch's, and the seconds per megapixel of the
    pass."""
    from linefuse.evaluate.metrics import psnr

    steps, seed, batch = params.eval.steps, params.eval.seed, params.eval.batch_size
    megapixels = sum(image.shape[0] * image.shape[1] for image in inputs) / 1e6
    outputs, scores = {}, {}
    for name, variant in variants.items():
        started = time.perf_counter()
        outputs[name] = _restorer(params, variant).restore_images(inputs, steps, seed, batch)
        seconds = time.perf_counter() - started
        values = [psnr(o, s, params.eval.metric) for o, s in zip(outputs[name], sharp, strict=True)]
        scores[name] = {"psnr": float(np.mean(values)), "values": values, "pass_s": seconds}
        print(
            name, f"{scores[name]['psnr']:.3f} dB", f"{seconds / megapixels:.2f} s/MP", flush=True
        )
    reference = scores["torch_eager"]["values"]
    for name, score in scores.items():
        values = score.pop("values")
        equal = [
            (a == b).all(axis=2).sum()
            for a, b in zip(outputs[name], outputs["torch_eager"], strict=True)
        ]
        score["psnr_vs_torch_db"] = float(np.mean(np.subtract(values, reference)))
        score["pixels_equal_to_torch"] = float(
            sum(equal) / sum(o.shape[0] * o.shape[1] for o in outputs[name])
        )
        score["psnr"] = round(score["psnr"], 4)
        score["seconds_per_megapixel_first_pass"] = round(score.pop("pass_s") / megapixels, 3)
    return scores


def _timed(params, variants: dict, inputs: list, rounds: int) -> dict:
    """Each ONNX Runtime variant against torch eager, paired: in each of `rounds` rounds every
    case (one tile of each TILES size through one step, and `inputs` restored one after the
    other, each of its own size) runs on torch and then on the variant, back to back, so that a
    ratio holds where the shared machine's load drifts. Per variant: the median seconds of each
    case, the median of its paired ratios to torch (torch's seconds over the variant's), and the
    first run of each tile after the session was made (ONNX Runtime plans each new size and grows
    its arena then: what a restore of one chart pays). Both runtimes run every case once before
    the rounds; one session lives at a time."""
    steps, seed, batch = params.eval.steps, params.eval.seed, params.eval.batch_size
    tiles = {f"tile_{side}px": np.full((1, side, side, 3), 255, np.uint8) for side in TILES}

    def cases(restorer) -> dict:
        work = {name: partial(restorer.restore, tile, 1) for name, tile in tiles.items()}
        work["test_images"] = partial(restorer.restore_images, inputs, steps, seed, batch)
        return work

    def seconds(work) -> float:
        started = time.perf_counter()
        work()
        return time.perf_counter() - started

    on_torch = cases(_restorer(params, variants["torch_eager"]))
    for work in on_torch.values():
        work()
    report = {}
    for name, variant in variants.items():
        if name == "torch_eager":
            continue
        on_onnx = cases(_restorer(params, variant))
        first = {f"{case}_first_run_s": round(seconds(on_onnx[case]), 4) for case in tiles}
        on_onnx["test_images"]()
        runs = {case: ([], []) for case in on_onnx}
        for _ in range(rounds):
            for case, (torch_s, onnx_s) in runs.items():
                torch_s.append(seconds(on_torch[case]))
                onnx_s.append(seconds(on_onnx[case]))
        report[name] = first
        for case, (torch_s, onnx_s) in runs.items():
            ratios = [t / o for t, o in zip(torch_s, onnx_s, strict=True)]
            report[name][f"{case}_s"] = round(statistics.median(onnx_s), 4)
            report[name][f"{case}_torch_s"] = round(statistics.median(torch_s), 4)
            report[name][f"speed_vs_torch_{case}"] = round(statistics.median(ratios), 3)
        print(name, {k: v for k, v in report[name].items() if k.startswith("speed")}, flush=True)
    return report


def _startup(params, export: Path, runs: int) -> dict:
    """`linefuse restore` of one default chart in a fresh interpreter per run, eval.runtime
    onnx and torch in turn, in a folder holding only the models restore reads and params.yaml:
    the median wall seconds (and the fastest and slowest run), imports included, and of them the
    restore stage's own (its log's "in N s": the model loaded, the chart straightened, restored
    and written)."""
    import yaml
    from PIL import Image
    from scipy import ndimage

    from linefuse import paths
    from linefuse.data.charts import draw_chart

    sharp = draw_chart(params.data.charts, 0)[0]
    blurred = ndimage.gaussian_filter(sharp.astype(np.float64), (1.2, 1.2, 0))
    adapter = paths.adapter(params.train.restoring_level())
    wall: dict[str, list[float]] = {"onnx": [], "torch": []}
    stage: dict[str, list[float]] = {"onnx": [], "torch": []}
    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch)
        shutil.copytree(paths.BASE_DIR, project / paths.BASE_DIR)
        shutil.copytree(adapter, project / adapter)
        shutil.copytree(export, project / paths.ONNX_DIR)
        Image.fromarray(np.clip(np.rint(blurred), 0, 255).astype(np.uint8)).save(
            project / "chart.png"
        )
        raw = yaml.safe_load(Path("params.yaml").read_text())
        for runtime in wall:
            raw["eval"]["runtime"] = runtime
            (project / f"{runtime}.yaml").write_text(yaml.safe_dump(raw))
        for _ in range(runs):
            for runtime in wall:
                command = [
                    sys.executable, "-m", "linefuse.cli", "--params", f"{runtime}.yaml",
                    "restore", "chart.png", "--out", runtime,
                ]  # fmt: skip
                started = time.perf_counter()
                done = subprocess.run(command, cwd=project, check=True, capture_output=True)
                wall[runtime].append(time.perf_counter() - started)
                said = done.stderr.decode()
                assert f"runtime {runtime} (set to {runtime})" in said
                stage[runtime].append(float(re.search(r"restore: wrote .* in ([\d.]+)s", said)[1]))
    return {
        "chart_px": list(sharp.shape[:2]),
        **{f"{runtime}_wall_s": round(statistics.median(s), 2) for runtime, s in wall.items()},
        **{
            f"{runtime}_wall_range_s": [round(min(s), 2), round(max(s), 2)]
            for runtime, s in wall.items()
        },
        **{f"{runtime}_stage_s": round(statistics.median(s), 2) for runtime, s in stage.items()},
    }


def main() -> None:
    from onnxruntime import __version__ as onnxruntime_version

    from linefuse.hardware import machine_summary
    from linefuse.inference.onnx_model import threads
    from linefuse.params.full import load_params

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=8, help="test images per domain and level")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds of every variant")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/onnx.json")
    args = parser.parse_args()
    params = load_params("params.yaml")
    report = {
        "machine": {
            **machine_summary(),
            "onnxruntime": onnxruntime_version,
            "onnxruntime_threads": threads(),
        },
        "model": f"{params.model.unet} + models/lora/{params.train.restoring_level()}",
        "steps": params.eval.steps,
        "load_average": {"before": round(os.getloadavg()[0], 2)},
    }
    inputs, sharp = _test_images(params, args.samples)
    report["test_images"] = len(inputs)
    with tempfile.TemporaryDirectory() as folder:
        exports = _exports(params, Path(folder))
        variants = _variants(params, exports)
        report["scores"] = _scores(params, variants, inputs, sharp)
        report["timed"] = _timed(params, variants, inputs[: args.samples], args.rounds)
        report["restore_one_chart"] = _startup(params, exports["exact_group_norm"], args.rounds)
    report["load_average"]["after"] = round(os.getloadavg()[0], 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
