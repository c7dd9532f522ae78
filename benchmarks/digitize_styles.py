"""Series of one colour, told apart by style and named from the legend: matplotlib charts drawn
here (seeded), each with two or three series in one colour (solid, and dashed, dotted or with
markers), half with a legend in a corner; how many are read as the right number of series, how
many named right, their curve error (median |y read - y true| in % of the y range, each true
series against the read series that fits it best) and task-6b line score, and the time a chart.

    cd PROJECT && python benchmarks/digitize_styles.py [--charts 20] [--out results/...json]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
STYLES = [{"linestyle": "--"}, {"linestyle": ":"}, {"marker": "o", "markevery": 20}]
COLOURS = ["black", "tab:blue", "tab:red"]
NAMES = ["sample", "reference", "blank", "fit", "control", "model"]
CORNERS = ["upper right", "upper left", "lower right"]


def draw(seed: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], list[str] | None]:
    """One chart: its pixels, x, the curves drawn and the legend's names (None: no legend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(seed)
    count = int(rng.integers(2, 4))
    styles = [{"linestyle": "-"}] + [STYLES[i] for i in rng.permutation(3)[: count - 1]]
    names = list(rng.choice(NAMES, count, replace=False)) if seed % 2 == 0 else None
    x = np.linspace(400, 700, 300)
    curves = [
        20 + 30 * k + 50 * np.exp(-(((x - rng.uniform(430, 670)) / rng.uniform(10, 40)) ** 2))
        for k in range(count)
    ]
    with plt.rc_context({"font.family": "DejaVu Sans"}):
        figure, ax = plt.subplots(figsize=(rng.uniform(3.5, 5.0), 3.0), dpi=100)
        for k, (style, y) in enumerate(zip(styles, curves, strict=True)):
            label = names[k] if names else None
            ax.plot(x, y, color=COLOURS[seed % len(COLOURS)], label=label, **style)
        ax.set_xlim(400, 700)
        ax.set_ylim(0, 150)
        if names:
            ax.legend(loc=CORNERS[seed // 2 % len(CORNERS)])
        figure.tight_layout()
        figure.canvas.draw()
        pixels = np.asarray(figure.canvas.buffer_rgba())[..., :3].copy()
        plt.close(figure)
    return pixels, x, curves, names


def main() -> None:
    from linefuse.digitize.chart import Unreadable, digitize
    from linefuse.digitize.line_score import line_score
    from linefuse.digitize.score import curve_error

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--charts", type=int, default=20)
    parser.add_argument(
        "--out", type=Path, default=REPO / "benchmarks/results/digitize_styles.json"
    )
    args = parser.parse_args()
    digitize(draw(0)[0])  # the label reader's imports, once, outside the timing
    rows = []
    for seed in range(args.charts):
        pixels, x, curves, names = draw(seed)
        start = time.perf_counter()
        read = digitize(pixels)
        seconds = time.perf_counter() - start
        if isinstance(read, Unreadable):
            rows.append({"seed": seed, "unreadable": str(read)})
            continue
        errors = [min(curve_error(s.x, s.y, x, y, 150.0) for s in read.series) for y in curves]
        rows.append(
            {
                "seed": seed,
                "series": len(curves),
                "read": len(read.series),
                "legend": names is not None,
                "named": names is not None
                and sorted(s.name or "" for s in read.series) == sorted(names),
                "curve_error": float(np.mean(errors)),
                "line_score": line_score(
                    [(s.x, s.y) for s in read.series], [(x, y) for y in curves]
                ),
                "seconds": seconds,
            }
        )
    read = [r for r in rows if "read" in r]
    legends = [r for r in read if r["legend"]]
    summary = {
        "charts": len(rows),
        "series_count_right": sum(r["read"] == r["series"] for r in read),
        "legends": len(legends),
        "named_right": sum(r["named"] for r in legends),
        "curve_error_median": float(np.median([r["curve_error"] for r in read])),
        "line_score_mean": float(np.mean([r["line_score"] for r in read])),
        "seconds_median": float(np.median([r["seconds"] for r in read])),
        "cpu": platform.processor() or platform.machine(),
    }
    args.out.write_text(json.dumps({"summary": summary, "charts": rows}, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
