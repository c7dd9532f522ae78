"""The evaluate stage: export the base with the last curriculum adapter merged to ONNX
(models/onnx, which restore and serve run on ONNX Runtime) and the base alone (models/onnx_base);
score that model (on the runtime
eval.runtime picks) and any per-domain adapters on the test and held-out images: PSNR/SSIM per
domain and level, baselines, steps, chart units, tick labels; and save the base it scored as a
LineFusePipeline (models/pipeline) that loads without params.yaml.

    python -m linefuse.stages.evaluate [--workers N] [--params params.yaml]
"""

from __future__ import annotations

import argparse
import logging
import sys

from linefuse import paths
from linefuse.evaluate.evaluate import evaluate
from linefuse.hardware import logged_device
from linefuse.inference.onnx_export import refresh_export
from linefuse.inference.pipeline import save_default_pipeline
from linefuse.params import Sections
from linefuse.params.compute import ComputeParams
from linefuse.params.data import DataParams
from linefuse.params.degrade import DegradeParams
from linefuse.params.evaluation import EvalParams, TileParams
from linefuse.params.model import ModelParams
from linefuse.params.training import OptimParams, TrainParams
from linefuse.stage import stage, stage_main


class EvaluateSections(Sections):
    """The sections of params.yaml the evaluate stage reads."""

    compute: ComputeParams
    model: ModelParams
    eval: EvalParams
    tiles: TileParams
    data: DataParams
    degrade: DegradeParams
    train: TrainParams
    optim: OptimParams


def run(params: EvaluateSections, args: argparse.Namespace) -> None:
    last = params.train.restoring_level()
    with stage("evaluate") as written:
        # first: evaluate scores the model as restore runs it, on the export where that is faster
        refresh_export(paths.BASE_DIR, paths.adapter(last), paths.ONNX_DIR)
        refresh_export(paths.BASE_DIR, None, paths.ONNX_BASE_DIR)
        report = evaluate(params, logged_device(params, "evaluate"), workers=args.workers)
        save_default_pipeline(params, paths.PIPELINE_DIR, last)
        written += [paths.EVAL_JSON, paths.EVAL_DETAIL, paths.PLOTS_DIR, paths.SAMPLES_PNG]
        written += [paths.PIPELINE_DIR, *paths.ONNX_EXPORTS]
    log, steps = logging.getLogger("linefuse"), params.eval.steps
    if summary := report["summary"]:
        low, high = summary[f"psnr_gain_s{steps}_low"], summary[f"psnr_gain_s{steps}_high"]
        log.info(
            "evaluate: mean PSNR gain at %d steps %+.2f dB (%.0f%% interval %s), %d test images, "
            "at least %d a cell",
            steps,
            summary[f"psnr_gain_s{steps}"],
            100 * summary["interval_confidence"],
            "n/a" if low is None else f"{low:+.2f} to {high:+.2f}",
            summary["samples"],
            summary["min_cell_samples"],
        )
    if few := report.get("few_step"):
        log.info(
            "evaluate: %d steps vs %d: %+.2f dB shortfall on the sweep's tiles, %.1fx faster",
            few["steps"],
            few["reference_steps"],
            few["psnr_shortfall_db"],
            few["speedup"],
        )


def main(argv: list[str] | None = None) -> int:
    return stage_main(run, "evaluate", EvaluateSections, argv, workers=True)


if __name__ == "__main__":
    sys.exit(main())
