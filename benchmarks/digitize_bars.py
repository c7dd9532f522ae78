"""Issue 72's bars across the report sets: what each report set read (`digitize_restored.py
--set report`, kept as benchmarks/results/digitize-reportNN-<avx2|bf16>.json with its images'
rows beside it), set after set, against the bar and against what the drawing allows.

    python benchmarks/digitize_bars.py [--out benchmarks/results/digitize-bars.json]

Per report set (each drawn with its own seed and read once, after that session's decisions):
sharp task-6b over all charts, over the libraries rules may be decided on (the held-out one
left out) and over the held-out one, each with evaluate's bootstrap interval over charts
(eval.interval), and what the first libraries would need to score for the set to reach the bar
with the held-out one as read; restored at
medium, task-6b over all images and over the images whose restoration is calibrated (what full
calibration would leave); the share of hard images whose restoration reads with a lower error
than its input; and the images read from the blurred input and not from the restoration (error
under 100 % against 100 % or more) at each level. The ideal reader of the drawn ink
(`line_score_ceiling.py`'s `rendered_ink`, on dev and dev2) is drawn beside the sharp bar.
Writes the table as JSON and the figure as a PNG beside it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path

import numpy as np

from linefuse.evaluate.intervals import mean_interval
from linefuse.params.full import load_params

RESULTS = Path(__file__).resolve().parent / "results"
REPORT = re.compile(r"digitize-report(\d+)-(avx2|bf16)\.json")
CEILINGS = ("line-score-ceiling-dev-bf16.json", "line-score-ceiling-dev2-bf16.json")
BARS = {"sharp_task6b": 0.95, "medium_task6b": 0.90, "hard_lowered": 0.70, "unread": 0}
UNREAD = 100.0  # a curve error at or past it: the chart was not read (digitize_restored.py)


def report_sets() -> list[tuple[int, Path]]:
    """(set number, summary file) of every report set kept, in order."""
    found = [
        (int(m.group(1)), path) for path in RESULTS.iterdir() if (m := REPORT.fullmatch(path.name))
    ]
    return sorted(found)


def one_set(path: Path, held_out: list[str], interval, seed: int) -> dict:
    """The set's figures for each bar, from its images' rows."""
    summary = json.loads(path.read_text())
    rows = json.loads(gzip.decompress((RESULTS / summary["images"]).read_bytes()))
    sharp = [r for r in rows if r["kind"] == "sharp"]
    decided_on = [r["line_score"] for r in sharp if r["library"] not in held_out]
    held = [r["line_score"] for r in sharp if r["library"] in held_out]
    # what the libraries rules are decided on must score for the set to reach the sharp bar
    needed = (BARS["sharp_task6b"] * len(sharp) - sum(held)) / len(decided_on)
    medium = [r for r in rows if r["kind"] == "model" and r["level"] == "medium"]
    inputs = {(r["chart"], r["level"], r["domain"]): r for r in rows if r["kind"] == "input"}
    unread = {}
    for level in ("medium", "hard"):
        restored = [r for r in rows if r["kind"] == "model" and r["level"] == level]
        unread[level] = sum(
            inputs[(r["chart"], level, r["domain"])]["curve_error"] < UNREAD <= r["curve_error"]
            for r in restored
        )
    hard = summary["summary"]["hard/model/all"]
    return {
        "cpu": path.stem.rsplit("-", 1)[1],
        "sharp_task6b": mean_interval([r["line_score"] for r in sharp], interval, seed),
        "sharp_task6b_without_held_out": mean_interval(decided_on, interval, seed),
        "sharp_task6b_held_out": mean_interval(held, interval, seed),
        "sharp_task6b_needed_without_held_out": needed,
        "medium_task6b": mean_interval([r["line_score"] for r in medium], interval, seed),
        "medium_task6b_calibrated": mean_interval(
            [r["line_score"] for r in medium if r["calibrated"]], interval, seed
        ),
        "medium_calibrated": float(np.mean([r["calibrated"] for r in medium])),
        "hard_lowered": hard["restoring_lowers_error"],
        "unread_restored_read_blurred": unread,
        "images_per_level": len(medium),
    }


def plot(sets: dict[int, dict], ceiling: list[float], out: Path) -> None:
    """Three panels against the set number: sharp task-6b, medium task-6b, hard share."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    numbers = sorted(sets)
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8), layout="constrained")

    def band(ax, key, label, colour):
        means = [sets[n][key]["mean"] for n in numbers]
        lows = [sets[n][key]["low"] for n in numbers]
        highs = [sets[n][key]["high"] for n in numbers]
        ax.plot(numbers, means, "o-", color=colour, label=label)
        ax.fill_between(numbers, lows, highs, color=colour, alpha=0.2)

    band(axes[0], "sharp_task6b", "all charts", "tab:blue")
    band(axes[0], "sharp_task6b_without_held_out", "held-out library left out", "tab:green")
    needed = [sets[n]["sharp_task6b_needed_without_held_out"] for n in numbers]
    axes[0].plot(numbers, needed, "x:", color="tab:green", label="left out: needed for the bar")
    for value in ceiling:
        axes[0].axhline(value, color="grey", ls=":", lw=1)
    axes[0].axhline(BARS["sharp_task6b"], color="tab:red", ls="--", label="bar")
    axes[0].set_title("sharp: task-6b (grey: ideal reader of the ink)")
    band(axes[1], "medium_task6b", "all restorations", "tab:blue")
    band(axes[1], "medium_task6b_calibrated", "calibrated restorations", "tab:orange")
    axes[1].axhline(BARS["medium_task6b"], color="tab:red", ls="--", label="bar")
    axes[1].set_title("restored at medium: task-6b")
    axes[2].plot(numbers, [sets[n]["hard_lowered"] for n in numbers], "o-", label="share")
    axes[2].axhline(BARS["hard_lowered"], color="tab:red", ls="--", label="bar")
    axes[2].set_title("hard: restoring lowers the error")
    for level, marker in (("medium", "o-"), ("hard", "s-")):
        counts = [sets[n]["unread_restored_read_blurred"][level] for n in numbers]
        axes[3].plot(numbers, counts, marker, label=level)
    axes[3].axhline(BARS["unread"], color="tab:red", ls="--", label="bar")
    axes[3].set_title("read blurred, not restored (of 600)")
    for ax in axes:
        ax.set_xlabel("report set")
        ax.legend(fontsize=8)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "digitize-bars.json")
    args = parser.parse_args()
    params = load_params()
    held_out = params.data.charts.held_out
    sets = {
        number: one_set(path, held_out, params.eval.interval, params.eval.seed)
        for number, path in report_sets()
    }
    ceiling = [
        json.loads((RESULTS / name).read_text())["summary"]["rendered_ink"]["mean"]
        for name in CEILINGS
    ]
    result = {"bars": BARS, "ink_ceiling_dev_dev2": ceiling, "held_out": held_out, "sets": sets}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    plot(sets, ceiling, args.out.with_suffix(".png"))
    for number, row in sets.items():
        print(
            f"set {number}: sharp {row['sharp_task6b']['mean']:.3f} "
            f"(without held out {row['sharp_task6b_without_held_out']['mean']:.3f}, "
            f"needed {row['sharp_task6b_needed_without_held_out']:.3f}), "
            f"medium {row['medium_task6b']['mean']:.3f} "
            f"(calibrated {row['medium_task6b_calibrated']['mean']:.3f}), "
            f"hard lowered {row['hard_lowered']:.3f}, unread restored / read blurred "
            f"{row['unread_restored_read_blurred']['medium']} and "
            f"{row['unread_restored_read_blurred']['hard']} of {row['images_per_level']}"
        )
    print(f"wrote {args.out} and {args.out.with_suffix('.png').name}")


if __name__ == "__main__":
    main()
