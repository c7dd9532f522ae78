"""`linefuse digitize --no-restore` of one chart, start-up included: wall seconds in a fresh
interpreter per run, and whether torch or diffusers loaded on the way.

Each run digitizes chart_00005.png of tests/digitize/fixtures/ (a sharp dev chart) in a
folder holding only it and params.yaml, as the console script does (linefuse.cli.main),
then names the model libraries the interpreter imported. Runs alternate between this tree's code
and, with --before, the src/ of another commit (the code before a change), in two settings: the
bytecode as this machine leaves it (PYTHONDONTWRITEBYTECODE=1 and a venv with no __pycache__:
every start compiles numpy, pydantic and the rest from source) and cached (PYTHONPYCACHEPREFIX,
as `pip install` leaves a venv; one untimed run fills it). The report names the machine and its
load: benchmarks/results/digitize-start.json.

    python benchmarks/digitize_start.py [--runs 5] [--before COMMIT] [--out FILE]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "tests/digitize/fixtures" / "chart_00005.png"
HEAVY = ("torch", "diffusers", "onnxruntime")
# the console script's call, then the libraries of HEAVY it left loaded, as the last line
RUN = (
    "import json, sys\n"
    "from linefuse.cli import main\n"
    "code = main(['digitize', 'chart.png', '--no-restore', '--out', 'out'])\n"
    f"print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))\n"
    "sys.exit(code)\n"
)


def _run(src: Path, folder: Path, cache: Path | None) -> tuple[float, list[str]]:
    """One digitize of the chart with `src`'s code: wall seconds, and HEAVY libraries loaded."""
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPYCACHEPREFIX", None)
    if cache is not None:
        env["PYTHONPYCACHEPREFIX"] = str(cache)
        del env["PYTHONDONTWRITEBYTECODE"]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", RUN], cwd=folder, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return seconds, json.loads(done.stdout.strip().splitlines()[-1])


def _summary(runs: list[tuple[float, list[str]]]) -> dict:
    seconds = [s for s, _ in runs]
    loaded = sorted({name for _, names in runs for name in names})
    return {
        "wall_s_median": round(statistics.median(seconds), 2),
        "wall_s": [round(s, 2) for s in seconds],
        "imported": loaded,
        "torch_imported": "torch" in loaded,
    }


def _git(*argv: str) -> bytes:
    return subprocess.run(["git", "-C", str(REPO), *argv], capture_output=True, check=True).stdout


def _source(before: str | None, scratch: Path) -> tuple[dict, dict]:
    """({name: src folder}, {name: commit}): this tree, and commit `before`'s src/ unpacked."""
    dirty = _git("status", "--porcelain", "--", "src").strip()
    folders = {"this": REPO / "src"}
    commits = {
        "this": _git("rev-parse", "--short", "HEAD").decode().strip()
        + ("+changes" if dirty else "")
    }
    if before:
        with tarfile.open(fileobj=io.BytesIO(_git("archive", before, "src"))) as archive:
            archive.extractall(scratch / "before", filter="data")
        folders["before"] = scratch / "before" / "src"
        commits["before"] = _git("rev-parse", "--short", before).decode().strip()
    return folders, commits


def main() -> None:
    from linefuse.hardware import machine_summary

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each code and setting")
    parser.add_argument("--before", help="a commit whose code to compare with")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/digitize-start.json")
    args = parser.parse_args()
    report = {
        "machine": machine_summary(),
        "chart": CHART.relative_to(REPO).as_posix(),
        "load_average": {"before": round(os.getloadavg()[0], 2)},
        "bar": "wall <= 1.5 s, no torch imported",
    }
    with tempfile.TemporaryDirectory() as scratch:
        codes, report["code"] = _source(args.before, Path(scratch))
        folder, cache = Path(scratch) / "project", Path(scratch) / "pycache"
        folder.mkdir()
        shutil.copy(CHART, folder / "chart.png")
        shutil.copy(REPO / "params.yaml", folder / "params.yaml")
        for setting, prefix in (("from_source", None), ("bytecode_cached", cache)):
            for src in codes.values():
                if prefix is not None:
                    _run(src, folder, prefix)  # fills the bytecode cache, untimed
            runs = {name: [] for name in codes}
            for _ in range(args.runs):  # the codes in turn, so the machine's load falls on both
                for name, src in codes.items():
                    runs[name].append(_run(src, folder, prefix))
            report[setting] = {name: _summary(r) for name, r in runs.items()}
            print(setting, json.dumps(report[setting]), flush=True)
    report["load_average"]["after"] = round(os.getloadavg()[0], 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
