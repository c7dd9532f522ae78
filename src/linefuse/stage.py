"""What every stage shares: its command line, atomic outputs, one-line user errors, and a closing
log line.

A stage writes into a hidden temporary sibling and renames it onto the declared output only when
it has finished, so a killed stage leaves nothing that DVC or Snakemake could take as done, and a
failed one leaves the previous output in place. User errors (bad params, a missing input, a full
disk) print one line and exit 2 before anything already built is touched; only a bug shows a
traceback.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from linefuse.params import ParamsError, Sections, load_sections
from linefuse.paths import PARAMS

if TYPE_CHECKING:
    from linefuse.params.full import Params

log = logging.getLogger("linefuse")
DISK_ERRORS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EDQUOT, errno.EPERM, errno.EFBIG}


class UserError(ValueError):
    """A problem the user can fix (bad input, a model folder that does not fit, unwritable
    output): the CLI prints it as one line instead of a traceback."""


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)))


# For tests: "STAGE:N" makes the stage named STAGE stop itself (SIGSTOP) once N units of its work
# are done, after logging that it paused, so a test can kill it at a known point of its work
# whatever the machine's speed. Unset, work_done only counts.
PAUSE_ENV = "LINEFUSE_PAUSE_AT"
_work = {"stage": "", "done": 0}


def work_done() -> None:
    """One unit of the running stage's work is done: a chart drawn, a file indexed, an image
    sharded, a batch embedded, a training step taken. The count closes the stage's log line."""
    _work["done"] += 1
    if os.environ.get(PAUSE_ENV) == f"{_work['stage']}:{_work['done']}":
        log.info("%s: paused after %d work units", _work["stage"], _work["done"])
        os.kill(os.getpid(), signal.SIGSTOP)


def ordered_map(
    function: Callable, tasks: list, workers: int, desc: str, unit: str, start: str = "fork"
) -> Iterator:
    """`function` over `tasks` in order, with a progress bar; worker processes when workers > 1,
    started by `start` (multiprocessing's start method): forked from this process, or with
    "forkserver" from a fresh interpreter, for work whose libraries run threads that a fork does
    not copy (vl-convert's runtime: a forked worker would wait on it forever).

    Results come back in task order whatever the worker count, which is what keeps outputs
    byte-identical between 1 and N workers.
    """
    bar = tqdm(total=len(tasks), desc=desc, unit=unit, disable=None)
    with bar:
        if workers > 1 and len(tasks) > 1:
            with get_context(start).Pool(min(workers, len(tasks))) as pool:
                for result in pool.imap(function, tasks, chunksize=1):
                    bar.update()
                    yield result
                    work_done()  # the caller has used the result
        else:
            for task in tasks:
                yield function(task)
                bar.update()
                work_done()


def _clear_stale_temporaries(final: Path) -> None:
    """Removes what a killed earlier run left behind beside `final`."""
    for stale in final.parent.glob(f".{final.name}.tmp-*"):
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)


@contextmanager
def atomic_dir(final: str | Path) -> Iterator[Path]:
    """Yields an empty temporary directory that replaces `final` when the block succeeds."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    _clear_stale_temporaries(final)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if final.exists() or final.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-old-", dir=final.parent))
        os.rename(final, old / final.name)
        os.rename(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, final)


@contextmanager
def atomic_file(final: str | Path) -> Iterator[Path]:
    """Yields a temporary path that replaces `final` when the block succeeds."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    _clear_stale_temporaries(final)
    handle, name = tempfile.mkstemp(prefix=f".{final.name}.tmp-", dir=final.parent)
    os.close(handle)
    tmp = Path(name)
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, final)


@contextmanager
def atomic_files(finals: list[Path]) -> Iterator[dict[Path, Path]]:
    """Temporary paths for several outputs that replace theirs only when all were written, so
    a failure half-way (a full disk, say) leaves every earlier output as it was."""
    with ExitStack() as stack:
        yield {final: stack.enter_context(atomic_file(final)) for final in map(Path, finals)}


def write_json(path: str | Path, payload: dict) -> None:
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")


def size_of(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _human(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


@contextmanager
def stage(name: str) -> Iterator[list[Path]]:
    """Times a stage; the caller appends what it wrote, and one line reports it at the end.

    Under a multi-process launch only rank 0 reports, as only rank 0 writes.
    """
    report = log.info if os.environ.get("RANK", "0") == "0" else log.debug
    started = time.perf_counter()
    _work.update(stage=name, done=0)
    written: list[Path] = []
    report("%s: started", name)
    try:
        yield written
    except Exception as error:
        if getattr(error, "filename", None) is None:  # a failed write() names no file: the stage
            try:
                error.filename = f"the outputs of {name}"
            except AttributeError:
                pass
        raise
    elapsed = time.perf_counter() - started
    parts = ", ".join(f"{p} ({_human(size_of(p))})" for p in written)
    units = f"; {_work['done']} work units" if _work["done"] else ""
    report("%s: wrote %s in %.1fs%s", name, parts or "nothing", elapsed, units)


def stage_main(
    run: Callable[[Params, argparse.Namespace], None],
    name: str,
    sections: type[Sections],
    argv: list[str] | None = None,
    level: str | None = None,
    workers: bool = False,
) -> int:
    """A stage's command line (`python -m linefuse.stages.NAME`, or `linefuse NAME`): --params,
    --level where `level` says what names one, --workers where `workers`; then `run(params,
    args)` with the params file's `sections` (the stage's own), a user's error as one line.
    Returns the exit status."""
    parser = argparse.ArgumentParser(prog=f"linefuse {name}")
    parser.add_argument("--params", default=str(PARAMS), help="params file (default: %(default)s)")
    if level:
        parser.add_argument("--level", required=True, help=level)
    if workers:
        add_workers_option(parser)
    args = parser.parse_args(argv)
    return guarded(lambda: run(load_sections(sections, args.params), args), args)


def add_workers_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workers",
        type=int,
        default=default_workers(),
        help="processes to use; never changes the output (default: all cores)",
    )


def guarded(command: Callable[[], None], args: argparse.Namespace) -> int:
    """Runs `command` with linefuse's logging; a user's error (bad params, a missing input, a
    full disk or read-only folder, `args.workers` under 1) is one line and status 2, an
    interrupt 130, else 0."""
    if getattr(args, "workers", 1) < 1:
        print("linefuse: error: --workers must be at least 1", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(name)s %(message)s", stream=sys.stderr)
    log.setLevel(logging.INFO)
    try:
        command()
    except (ParamsError, UserError) as error:
        print(f"linefuse: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:
        disk = disk_error(error)
        if disk is None:
            raise
        # half-written files being discarded fail again as they are finalised; that is noise
        sys.unraisablehook = lambda unraisable: None
        where = f" {disk.filename}" if disk.filename else ""
        print(
            f"linefuse: error: cannot write{where}: {disk.strerror}; free space or fix "
            f"permissions and rerun (earlier outputs are untouched)",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print("linefuse: interrupted; nothing was marked as done", file=sys.stderr)
        return 130
    return 0


# what sqlite (DVC's state, which DVCLive opens in a DVC repo) says where a write failed
SQLITE_DISK_ERRORS = ("database or disk is full", "disk I/O error")


def _sqlite_disk_error(named: str | None) -> OSError:
    """sqlite names no errno: past a file-size limit (RLIMIT_FSIZE) it is EFBIG, else ENOSPC."""
    import resource

    limited = resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY
    code = errno.EFBIG if limited else errno.ENOSPC
    return OSError(code, os.strerror(code), named)


def disk_error(error: BaseException) -> OSError | None:
    """The full-disk / read-only / permission failure behind `error`, if that is what it is:
    an OSError, one a library raised from, or one safetensors and torch only report as text."""
    named = getattr(error, "filename", None)  # stage() names the outputs when nothing else does
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno in DISK_ERRORS:
            return cause
        if isinstance(cause, sqlite3.OperationalError) and str(cause) in SQLITE_DISK_ERRORS:
            return _sqlite_disk_error(named)
        cause = cause.__cause__ or cause.__context__
    text = str(error)
    for code in DISK_ERRORS:
        if f"(os error {code})" in text or f"{os.strerror(code)}" in text:
            return OSError(code, os.strerror(code), named)
    return None


def known_level(levels: list[str], level: str, key: str = "degrade.levels") -> str:
    """--level, if one of `levels` (params' `key`); else a user's error naming them."""
    if level not in levels:
        raise UserError(f"--level {level}: not in {key} ({', '.join(levels)})")
    return level


def commit() -> str:
    """The commit the working tree stands at, short; "unknown" outside a git checkout."""
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
