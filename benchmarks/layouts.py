"""Candidate UNet layouts for the next base: parameters against CPU time, paired in one run.

Each candidate is a stock diffusers UNet2DConditionModel config: chart-base's (the shipped base),
the repo's `deep` config (train/configs/deep_unet.json) and probes around it, each written here
as changes to chart-base's config. Every layout gets random weights (a fixed seed), is saved as a
base folder, exported to ONNX as evaluate exports it (inference/onnx_export.py) and measured:

- parameters, and the safetensors size (a shipped base stays under 32 MB);
- the receptive field of its convolutions (px; attention adds the whole tile at its level);
- µs per pixel of one sampler step on a 288 px and a 512 px tile, batch 1, on ONNX Runtime
  (the restore path, fp32, this machine's threads) and on torch eager;
- the wall time of restoring a 1024 px chart as `linefuse restore` restores it: Restorer.
  restore_image on ONNX Runtime, tiles.tile auto, so each layout runs at its own cheapest tile
  (timed once here into a fresh cache; the candidates are multiples of the layout's multiple).

Time is measured in rounds, each layout in turn within a round, and every figure's ratio to
chart-base is the median of the rounds' ratios: a paired ratio holds where the machine's load
drifts. A layout passes where it has at least 3x chart-base's parameters, at most 0.8x its time
per pixel at 512 px and for the 1024 px chart, at most 1.0x at 288 px, and weights under 32 MB.
The report names the CPU: benchmarks/results/layouts-<avx2|bf16>.json.

    python benchmarks/layouts.py [--rounds 5] [--only chart-base deep]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# Run as a script, this file's folder leads sys.path, where benchmarks/onnx.py would stand for the
# `onnx` package the exporter imports: the folder is dropped.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
CHART_BASE = "chart-base"
TILES = (288, 512)  # a tile of today's tile choice, and a large one
CHART_PX = 1024  # the side of the chart restored whole as restore restores it
# probes around `deep`: changes to chart-base's config (the one place each is written)
PROBES = {
    "no-mid-attention": {"mid_block_type": None},
    "deep-2-layers": {
        "block_out_channels": [16, 32, 64, 128],
        "down_block_types": ["DownBlock2D"] * 4,
        "up_block_types": ["UpBlock2D"] * 4,
        "layers_per_block": 2,
    },
    "deep-96-192": {
        "block_out_channels": [16, 32, 96, 192],
        "down_block_types": ["DownBlock2D"] * 4,
        "up_block_types": ["UpBlock2D"] * 4,
    },
    "five-levels": {
        "block_out_channels": [16, 32, 64, 128, 256],
        "down_block_types": ["DownBlock2D"] * 5,
        "up_block_types": ["UpBlock2D"] * 5,
    },
    "wide": {"block_out_channels": [32, 64, 128]},
}
BARS = {"parameters": 3.0, "tile_512": 0.8, "tile_288": 1.0, "chart_1024": 0.8}
MAX_WEIGHTS_MB = 32.0


def layouts() -> dict[str, dict]:
    """{name: diffusers config}: chart-base's, the repo's deep config, and the probes."""
    from linefuse.paths import unet_config

    base = unet_config(CHART_BASE)
    found = {CHART_BASE: base, "deep": {**base, **unet_config("deep")}}
    return found | {name: {**base, **change} for name, change in PROBES.items()}


def receptive_field(config: dict) -> int:
    """Px of input that reach one output pixel through the convolutions alone: conv_in, two
    3x3 convs a resnet, a stride-2 conv a downsampling, the mid block's two resnets, and on the
    way up layers_per_block + 1 resnets a level and a conv after each nearest upsampling."""
    levels, layers = len(config["block_out_channels"]), config["layers_per_block"]
    field, jump = 3, 1  # conv_in
    for level in range(levels):
        field += 2 * 2 * layers * jump
        if level < levels - 1:
            field += 2 * jump
            jump *= 2
    field += 2 * 2 * 2 * jump  # mid block
    for level in range(levels):
        field += 2 * 2 * (layers + 1) * jump
        if level < levels - 1:
            jump //= 2
            field += 2 * jump
    return field + 2  # conv_out


def build(name: str, config: dict, folder: Path) -> dict:
    """The layout saved as a base (random weights, seed 0) and exported to ONNX; its facts."""
    import torch
    from diffusers import UNet2DConditionModel

    from linefuse.inference.onnx_export import export_onnx
    from linefuse.train.model import count_parameters, save_base

    config = {**config, "in_channels": 6, "out_channels": 3}
    torch.manual_seed(0)
    unet = UNet2DConditionModel.from_config(config)
    base = folder / name / "base"
    save_base(unet, base, torch.zeros(1, 1, config["cross_attention_dim"]))
    export_onnx(base, None, folder / name / "onnx")
    weights = base / "diffusion_pytorch_model.safetensors"
    return {
        "config": {k: config[k] for k in sorted(config) if not k.startswith("_")},
        "parameters": count_parameters(unet)[1],
        "weights_mb": weights.stat().st_size / 2**20,
        "receptive_field_px": receptive_field(config),
        "multiple": 2 ** (len(config["block_out_channels"]) - 1),
    }


def models(params, folder: Path, name: str):
    """(ONNX Runtime restorer, torch model) of the layout built in folder/name."""
    from linefuse.hardware import Choice
    from linefuse.inference.onnx_model import OnnxModel
    from linefuse.inference.restorer import Restorer
    from linefuse.inference.settings import RestoreSettings
    from linefuse.inference.torch_model import TorchModel

    settings = RestoreSettings.from_params(params)
    onnx = OnnxModel(folder / name / "onnx", params.model)
    restorer = Restorer(onnx, settings, Choice("onnx", "benchmarks/layouts.py"))
    return restorer, TorchModel.from_folders(params, folder / name / "base", None, "cpu")


def seconds(run, repeats: int = 2) -> float:
    """The fastest of `repeats` timed runs, after one untimed."""
    run()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def chart(side: int) -> np.ndarray:
    """A uint8 chart-like image: white with a frame and a few dark curves (time does not depend
    on the pixels, but deskew and the tiles see a chart)."""
    image = np.full((side, side, 3), 255, np.uint8)
    image[side // 10 : side - side // 10, side // 8 : side // 8 + 2] = 0
    image[side - side // 10 : side - side // 10 + 2, side // 8 : side - side // 20] = 0
    x = np.arange(side // 8, side - side // 20)
    for k in range(3):
        y = (side / 2 + side / 4 * np.sin(x / (40 + 20 * k) + k)).astype(int)
        for dy in range(2):
            image[y + dy, x] = (60 * k, 30, 200 - 60 * k)
    return image


def measure_round(restorers, torch_models, params) -> dict[str, dict]:
    """One round: every layout in turn, µs per pixel per tile and runtime, and the chart's s."""
    from linefuse.inference.settings import RestoreSettings

    settings = RestoreSettings.from_params(params)
    image = chart(CHART_PX)
    found = {}
    for name, restorer in restorers.items():
        row = {}
        for side in TILES:
            tile = np.full((1, side, side, 3), 255, np.uint8)
            pixels = (tile.transpose(0, 3, 1, 2).astype(np.float32) / 127.5) - 1
            onnx = partial(restorer.restore, tile, 1)
            row[f"onnx_tile_{side}_us_per_px"] = seconds(onnx) / side**2 * 1e6
            eager = partial(torch_models[name].restore, pixels, 1, settings, 0, None)
            row[f"torch_tile_{side}_us_per_px"] = seconds(eager) / side**2 * 1e6
        row["chart_1024_s"] = seconds(partial(restorer.restore_image, image, 1))
        found[name] = row
    return found


def summarise(facts: dict, rounds: list[dict], restorers) -> dict:
    """Per layout: medians over the rounds, ratios to chart-base (median of the paired
    ratios), the tile auto chose for the chart, and the bars."""
    report = {}
    for name in facts:
        keys = rounds[0][name].keys()
        medians = {key: statistics.median(r[name][key] for r in rounds) for key in keys}
        ratios = {
            key: statistics.median(r[name][key] / r[CHART_BASE][key] for r in rounds)
            for key in keys
        }
        ratio_parameters = facts[name]["parameters"] / facts[CHART_BASE]["parameters"]
        bars = {
            "parameters": ratio_parameters >= BARS["parameters"],
            "tile_512": ratios["onnx_tile_512_us_per_px"] <= BARS["tile_512"],
            "tile_288": ratios["onnx_tile_288_us_per_px"] <= BARS["tile_288"],
            "chart_1024": ratios["chart_1024_s"] <= BARS["chart_1024"],
            "weights": facts[name]["weights_mb"] < MAX_WEIGHTS_MB,
        }
        restorer = restorers[name]
        report[name] = {
            **facts[name],
            "median": medians,
            "ratio_to_chart_base": {"parameters": ratio_parameters, **ratios},
            "chart_1024_tile": restorer.tile_for(CHART_PX, CHART_PX),
            "chart_1024_tiles": restorer.tile_count(CHART_PX, CHART_PX),
            "passes": {**bars, "all": all(bars.values())},
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(REPO / "params.yaml"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", nargs="+", help="these layouts (chart-base is always in)")
    parser.add_argument("--out", help="default: benchmarks/results/layouts-<avx2|bf16>.json")
    args = parser.parse_args()
    from linefuse.hardware import machine_summary, native_bf16_flags
    from linefuse.params.full import load_params

    params = load_params(args.params)
    chosen = {
        name: config
        for name, config in layouts().items()
        if not args.only or name in {CHART_BASE, *args.only}
    }
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["LINEFUSE_CACHE"] = str(Path(tmp) / "cache")  # tile auto measures afresh
        folder = Path(tmp)
        facts = {name: build(name, config, folder) for name, config in chosen.items()}
        loaded = {name: models(params, folder, name) for name in chosen}
        restorers = {name: pair[0] for name, pair in loaded.items()}
        torch_models = {name: pair[1] for name, pair in loaded.items()}
        rounds = []
        for k in range(args.rounds):
            rounds.append(measure_round(restorers, torch_models, params))
            print(f"round {k + 1}/{args.rounds} done", flush=True)
        report = summarise(facts, rounds, restorers)
    kind = "bf16" if native_bf16_flags() else "avx2"
    out = Path(args.out or REPO / "benchmarks" / "results" / f"layouts-{kind}.json")
    result = {
        "machine": machine_summary(),
        "rounds": args.rounds,
        "tiles": list(TILES),
        "chart_px": CHART_PX,
        "tiles_size": params.tiles.size,
        "overlap": params.tiles.overlap,
        "bars": BARS,
        "layouts": report,
    }
    out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    for name, row in report.items():
        ratio = row["ratio_to_chart_base"]
        print(
            f"{name:18s} {row['parameters'] / 1e6:5.2f} M  RF {row['receptive_field_px']:4d} px  "
            f"288: {row['median']['onnx_tile_288_us_per_px']:.2f} us/px "
            f"({ratio['onnx_tile_288_us_per_px']:.2f}x)  512: "
            f"{row['median']['onnx_tile_512_us_per_px']:.2f} "
            f"({ratio['onnx_tile_512_us_per_px']:.2f}x)  1024 chart: "
            f"{row['median']['chart_1024_s']:.2f} s ({ratio['chart_1024_s']:.2f}x, "
            f"{row['chart_1024_tiles']} tiles of {row['chart_1024_tile']})  "
            f"{'passes' if row['passes']['all'] else 'fails'}",
            flush=True,
        )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
