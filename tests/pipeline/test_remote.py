"""DVC remotes: push a built project, lose the cache and the outputs, pull them back unchanged."""

from __future__ import annotations

import shutil

import pytest

from conftest import copy_project, file_digests
from test_engines import ran_dvc_stages, run

CACHED_OUTPUTS = ("data", "models")  # every `cache: true` output of dvc.yaml lives under these


@pytest.mark.engines
def test_push_wipe_pull_and_repro_has_nothing_to_do(dvc_build, tmp_path):
    project = copy_project(dvc_build, tmp_path / "project")
    storage = tmp_path / "storage"
    before = {folder: file_digests(project / folder) for folder in CACHED_OUTPUTS}
    run(project, "dvc", "remote", "add", "-d", "storage", str(storage))
    run(project, "dvc", "push")
    assert any(path.is_file() for path in storage.rglob("*"))

    shutil.rmtree(project / ".dvc/cache")
    for folder in CACHED_OUTPUTS:
        shutil.rmtree(project / folder)
    run(project, "dvc", "pull")
    assert {folder: file_digests(project / folder) for folder in CACHED_OUTPUTS} == before
    assert "Data and pipelines are up to date." in run(project, "dvc", "status")
    log = run(project, "dvc", "repro")
    assert ran_dvc_stages(log) == [] and "Data and pipelines are up to date." in log
