"""Disk full and read-only outputs: one line naming the cause and the fix, earlier outputs
intact."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import file_digests

BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
FILE_SIZE_LIMIT = 48 * 1024  # bytes: every stage below writes a larger file than this

STAGES = {  # command -> the folders it writes
    "shard": (["shard", "--level", "easy"], ["data/shards", "metrics/shard"]),
    "embed": (["embed", "--level", "medium"], ["data/embeddings", "metrics/embed"]),
    "train": (["train", "--level", "easy"], ["models", "metrics/train", "logs/train"]),
    "evaluate": (["evaluate"], ["metrics", "plots", "reports"]),
}


def _project(trained_project: Path, tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(trained_project, project, symlinks=True)
    (project / "reports").mkdir(exist_ok=True)
    (project / "plots").mkdir(exist_ok=True)
    return project


def _digests(project: Path, folders: list[str]) -> dict:
    return {folder: file_digests(project / folder) for folder in folders}


def _error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr[-3000:]
    return [line for line in stderr.splitlines() if line.startswith("linefuse: error:")]


@pytest.mark.parametrize("stage", list(STAGES))
def test_disk_full_is_one_line_and_keeps_the_outputs(trained_project, tmp_path, stage):
    """RLIMIT_FSIZE makes every write past 48 KB fail with EFBIG, as a full disk fails a write."""
    command, folders = STAGES[stage]
    project = _project(trained_project, tmp_path)
    before = _digests(project, folders)

    def limit_file_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))

    done = subprocess.run(
        ["linefuse", *command],
        cwd=project,
        env=ENV,
        capture_output=True,
        text=True,
        preexec_fn=limit_file_size,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    errors = _error_lines(done.stderr)
    assert len(errors) == 1 and "cannot write" in errors[0] and "File too large" in errors[0], (
        errors
    )
    assert "free space" in errors[0]
    assert _digests(project, folders) == before


def _can_mount_read_only(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    done = subprocess.run(
        [
            "unshare",
            "-rm",
            "sh",
            "-c",
            f"mount --bind {probe} {probe} && mount -o remount,bind,ro {probe}",
        ],
        capture_output=True,
    )
    return done.returncode == 0


@pytest.mark.parametrize("stage", ["shard", "train"])
def test_read_only_output_folder_is_one_line_and_keeps_the_outputs(
    trained_project, tmp_path, stage
):
    """The stage's output folder bind-mounted read-only (in a private mount namespace)."""
    if shutil.which("unshare") is None or not _can_mount_read_only(tmp_path):
        reason = "needs `unshare -rm` (unprivileged user and mount namespaces) to mount read-only"
        # `make test` sets LINEFUSE_REQUIRE_MOUNTS: there the trial fails rather than skips
        if os.environ.get("LINEFUSE_REQUIRE_MOUNTS"):
            pytest.fail(f"{reason}; unset LINEFUSE_REQUIRE_MOUNTS to skip it")
        pytest.skip(reason)
    command, folders = STAGES[stage]
    project = _project(trained_project, tmp_path)
    before = _digests(project, folders)
    frozen = project / folders[0]
    script = (
        f"mount --bind {frozen} {frozen} && mount -o remount,bind,ro {frozen} && "
        f"exec linefuse {' '.join(command)}"
    )
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], cwd=project, env=ENV, capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr[-3000:]
    errors = _error_lines(done.stderr)
    assert len(errors) == 1 and "Read-only file system" in errors[0], errors
    assert _digests(project, folders) == before
