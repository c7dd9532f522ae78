"""How the training stages start (dvc.yaml, the Snakefile):

    python -m linefuse.launch --config_file CONFIG --num_processes N \
        --num_cpu_threads_per_process T -m linefuse.stages.STAGE [ARGS...]

takes `accelerate launch`'s own arguments. One process on a config that distributes nothing
(workflow/accelerate/local.yaml, params.yaml's default) runs the stage in this interpreter's
place, with OMP_NUM_THREADS=T as accelerate would set it: `accelerate launch` imports accelerate
and torch (about 5 s) only to start that same single process, and pretrain copying a shipped base
needs neither. Anything else (several processes, DDP, DeepSpeed) is `accelerate launch`,
unchanged. Imports nothing heavy, so that the direct start costs nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml


def command(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """The command this launch runs and the environment it adds: the stage's module on this
    interpreter, or `accelerate launch` with the same arguments."""
    parser = argparse.ArgumentParser(prog="python -m linefuse.launch", allow_abbrev=False)
    parser.add_argument("--config_file", type=Path, required=True)
    parser.add_argument("--num_processes", type=int, required=True)
    parser.add_argument("--num_cpu_threads_per_process", type=int, required=True)
    parser.add_argument("-m", dest="module", required=True)
    args, stage_args = parser.parse_known_args(argv)
    config = yaml.safe_load(args.config_file.read_text()) or {}
    if args.num_processes == 1 and str(config.get("distributed_type", "NO")).upper() == "NO":
        threads = {"OMP_NUM_THREADS": str(args.num_cpu_threads_per_process)}  # as accelerate's
        return [sys.executable, "-m", args.module, *stage_args], threads
    return ["accelerate", "launch", *argv], {}


def main(argv: list[str] | None = None) -> None:
    run, environment = command(sys.argv[1:] if argv is None else argv)
    os.environ.update(environment)
    os.execvp(run[0], run)


if __name__ == "__main__":
    main()
