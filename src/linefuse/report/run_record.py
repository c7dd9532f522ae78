"""The run record: what `make repro` knows of the run it made and its outputs do not hold, its
wall time, the commit it ran at and the machine, for `make readme` to state.

python -m linefuse.report.run_record COMMAND...   (make repro: dvc repro)

It runs COMMAND and, when COMMAND succeeded and changed metrics/eval.json, writes
.linefuse/run.json (git-ignored) with the digest of the eval.json that run wrote. A run that
changed nothing (DVC found every stage cached) keeps the record of the run that made the outputs,
and `make readme` trusts a record only while eval.json still has its digest.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from linefuse.hardware import cpu_model
from linefuse.paths import EVAL_JSON, PARAMS, RUN_RECORD
from linefuse.stage import default_workers, write_json


def digest(path: Path) -> str | None:
    """sha256 of the file, None where there is none."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def commit() -> dict:
    """The checkout's commit (short hash) and whether the package or params.yaml differ from it
    (what a run is made of; its outputs may differ from the commit, being what it writes);
    None for what git cannot tell."""
    code = [str(Path(__file__).resolve().parents[1]), str(PARAMS)]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        diff = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", *code], capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "uncommitted_changes": None}
    # git diff --quiet: 0 the same, 1 changed, else it cannot tell (a package outside the checkout)
    return {"commit": head, "uncommitted_changes": {0: False, 1: True}.get(diff.returncode)}


def timed(command: list[str]) -> int:
    """Runs `command` and records it (the module's docstring); returns its exit status."""
    before, made_at, started = digest(EVAL_JSON), commit(), time.monotonic()
    with subprocess.Popen(command) as child:
        while True:
            try:
                status = child.wait()
                break
            except KeyboardInterrupt:  # the child got the terminal's Ctrl-C too: let it stop
                continue
    seconds = time.monotonic() - started
    after = digest(EVAL_JSON)
    if status == 0 and after is not None and after != before:
        record = {
            "command": shlex.join([Path(command[0]).name, *command[1:]]),
            "seconds": round(seconds, 1),
            **made_at,
            "cpu_model": cpu_model(),
            "cores": default_workers(),
            "eval_sha256": after,
        }
        write_json(RUN_RECORD, record)
    return status


def read() -> dict | None:
    """The record of the run whose metrics/eval.json is there now, else None."""
    if not RUN_RECORD.is_file():
        return None
    try:
        record = json.loads(RUN_RECORD.read_text())
    except json.JSONDecodeError:
        return None
    return record if record.get("eval_sha256") == digest(EVAL_JSON) else None


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m linefuse.report.run_record COMMAND [ARG...]")
    sys.exit(timed(sys.argv[1:]))
