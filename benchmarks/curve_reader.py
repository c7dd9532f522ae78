"""The curve reader's floor: how far evaluate's chart errors are from zero when nothing is wrong.

Generates the default data set's charts (params.yaml's data.charts) in a temporary folder and
reads each main series back from the sharp chart, and from the chart blurred by a Gaussian of
each sigma, against its CSV, as evaluate does (the sharp chart's shown columns judge the peak).
A perfect reader scores 0 on the sharp charts; what it scores there is in every chart figure of
reports/eval_detail.json too. Writes benchmarks/results/curve_reader.json.

    python benchmarks/curve_reader.py [--sigmas 1 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image
from scipy.ndimage import gaussian_filter

from linefuse.data.charts import generate
from linefuse.digitize.curves import curve_errors, read_truth, shown_columns
from linefuse.params.full import load_params

REPO = Path(__file__).resolve().parents[1]


def blur(image: np.ndarray, sigma: float) -> np.ndarray:
    if sigma == 0:
        return image
    blurred = gaussian_filter(image.astype(np.float64), (sigma, sigma, 0))
    return np.clip(np.rint(blurred), 0, 255).astype(np.uint8)


def summary(values: np.ndarray) -> dict:
    finite = values[np.isfinite(values)]
    return {
        "mean": round(float(finite.mean()), 4),
        "median": round(float(np.median(finite)), 4),
        "p90": round(float(np.percentile(finite, 90)), 4),
        "unread": int(len(values) - len(finite)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sigmas", type=float, nargs="+", default=[1.0, 2.0])
    args = parser.parse_args()
    cfg = load_params(REPO / "params.yaml").data.charts
    report = {"charts": cfg.count}  # accuracy, not speed: the same on any machine
    with tempfile.TemporaryDirectory() as folder:
        generate(cfg, Path(folder), workers=2)
        charts = []
        for png in sorted(Path(folder).glob("*.png")):
            truth = read_truth(png)
            image = np.asarray(Image.open(png).convert("RGB"))
            charts.append((png.stem, truth, image, shown_columns(image, truth)))
        for sigma in [0.0, *args.sigmas]:
            rows, names = [], []
            for name, truth, image, shown in charts:
                errors = curve_errors(blur(image, sigma), truth, shown=shown)
                left, _, right, _ = truth.plot_box
                column_nm = abs(truth.xlim[1] - truth.xlim[0]) / (right - left)
                span = float(np.ptp(truth.intensity)) or 1.0
                rows.append(
                    [
                        errors["peak_position_error"],
                        errors["peak_position_error"] / column_nm,
                        100 * errors["peak_height_error"] / span,
                        100 * errors["curve_rmse"] / span,
                        errors["curve_coverage"],
                    ]
                )
                names.append(name)
            table = np.array(rows, dtype=float)
            worst = np.argsort(-np.nan_to_num(table[:, 3], nan=np.inf))[:10]
            report["sharp" if sigma == 0 else f"gaussian_sigma_{sigma:g}"] = {
                "peak_position_error_nm": summary(table[:, 0]),
                "peak_position_error_columns": summary(table[:, 1]),
                "peak_height_error_pct_of_range": summary(table[:, 2]),
                "curve_rmse_pct_of_range": summary(table[:, 3]),
                "curve_coverage": summary(table[:, 4]),
                "peak_off_by_over_2_columns": int((table[:, 1] > 2).sum()),
                "rmse_over_3_pct": int((table[:, 3] > 3).sum()),
                "worst_rmse": [names[i] for i in worst],
            }
    out = REPO / "benchmarks" / "results" / "curve_reader.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["sharp"], indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
