"""evaluate's scoring in one process against forked workers: seconds, and that the scores match.

Generates the first default charts (params.yaml's data.charts) into a temporary folder, blurs
each in every domain and level (degrade's own draws), and scores every pair as evaluate does
(baselines, PSNR/SSIM, the curve read back against the CSV), with unsharp masking standing in
for the model's output, whose cost it shares. Both runs happen in one process, so the speed-up is
a ratio from one run on one machine. Writes benchmarks/results/scoring.json.

    python benchmarks/scoring.py [--charts 10] [--workers N]
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    from linefuse.data.charts import generate
    from linefuse.data.degrade import degrade, item_rng
    from linefuse.digitize.curves import read_truth, shown_columns
    from linefuse.evaluate.baselines import baselines
    from linefuse.evaluate.scoring import score_pairs, scoring_map
    from linefuse.hardware import machine_summary
    from linefuse.params.full import load_params
    from linefuse.stage import default_workers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--charts", type=int, default=10)
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/scoring.json")
    args = parser.parse_args()
    params = load_params(REPO / "params.yaml")
    model = f"model_s{params.eval.steps}"
    tasks = []
    with tempfile.TemporaryDirectory() as folder:
        generate(params.data.charts.model_copy(update={"count": args.charts}), Path(folder))
        for index, png in enumerate(sorted(Path(folder).glob("*.png"))):
            sharp = np.asarray(Image.open(png).convert("RGB"))
            truth = read_truth(png)
            shown = shown_columns(sharp, truth, (0, 0))
            for domain in params.degrade.domains:
                for level in params.degrade.levels:
                    settings = getattr(params.degrade, domain)[level]
                    rng = item_rng(params.degrade.seed, str(index), domain, level)
                    blurred, drawn = degrade(sharp, domain, settings, rng)
                    meta = {"domain": domain, "params": drawn}
                    stand_in = baselines(blurred, domain, drawn, params.eval.baselines)["unsharp"]
                    task = (blurred, sharp, meta, {model: stand_in}, truth, shown, params.eval)
                    tasks.append((*task, [], False, None))  # no labels read, no chart digitized
    seconds, results = {}, {}
    for name, workers in (("one_process", 1), ("workers", args.workers)):
        started = time.perf_counter()
        with scoring_map(workers) as mapper:
            results[name] = list(mapper(score_pairs, [[task] for task in tasks]))
        seconds[name] = time.perf_counter() - started
    report = {
        "machine": {
            **machine_summary(),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
        "pairs": len(tasks),
        "workers": args.workers,
        "seconds": {name: round(value, 2) for name, value in seconds.items()},
        "speedup": round(seconds["one_process"] / seconds["workers"], 2),
        # as JSON, where a curve the reader lost (NaN) equals itself
        "same_scores": json.dumps(results["one_process"]) == json.dumps(results["workers"]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
