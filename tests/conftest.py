"""Tiny params and a session-wide tiny project, so the suite runs on 2 CPU cores."""

from __future__ import annotations

import copy
import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from contextlib import chdir, suppress
from pathlib import Path

import pytest
import yaml

from linefuse.cli import main
from linefuse.digitize.ocr import missing
from linefuse.params.data import AXIS_KNOBS

# Tests that read tick labels need Tesseract, which `make test` installs (and then sets
# LINEFUSE_REQUIRE_TESSERACT, so that they fail rather than skip where it could not).
needs_tesseract = pytest.mark.skipif(
    missing() is not None and not os.environ.get("LINEFUSE_REQUIRE_TESSERACT"),
    reason=f"{missing()}; `make test` installs it (LINEFUSE_REQUIRE_TESSERACT=1: fail instead)",
)

# Tests that drive a headless browser need Chromium, which `make test` installs (and then sets
# LINEFUSE_REQUIRE_CHROMIUM, so that they fail rather than skip where it could not).
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("LINEFUSE_REQUIRE_CHROMIUM"),
    reason="no chromium on PATH; `make test` installs it (LINEFUSE_REQUIRE_CHROMIUM=1: fail)",
)

ROOT = Path(__file__).resolve().parents[1]
# engine_builds below imports tests/pipeline/test_engines.py by name, wherever the tests run from
sys.path.insert(0, str(Path(__file__).resolve().parent / "pipeline"))
LEVELS = ("easy", "medium", "hard")

# The session fixtures below that build a pipeline (stages run in-process, or by dvc and
# snakemake). A test that uses one, itself or through another fixture, is marked `slow`, and so is
# every `engines` test (each runs dvc or snakemake); `make test-fast` (pytest -m "not slow") leaves
# them out. A test that runs stages or trains on its own, or spends seconds in a real tool
# (Tesseract, a fresh interpreter) or on whole charts, carries @pytest.mark.slow
# (tests/codebase/test_suite_layout.py checks that fixtures calling run_cli build on one of these
# or are listed here).
PIPELINE_FIXTURES = frozenset(
    {"tiny_project", "trained_project", "dvc_build", "snakemake_build", "two_windows"}
)


def pytest_configure(config) -> None:
    """Under pytest-xdist (`make test` runs one more worker than cores) each worker's torch, and
    every process it starts, gets its share of the cores (at least one thread): more threads
    than cores only wait on each other at torch's barriers."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        threads = max(1, len(os.sched_getaffinity(0)) // workers)
        os.environ["OMP_NUM_THREADS"] = str(threads)
        import torch

        torch.set_num_threads(threads)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by markers
def pytest_sessionfinish(session) -> None:
    """The run's end, in the process that ran or handed out the tests: the SLURM cluster this
    run's engines' build started is stopped (nothing of it outlives the suite); a run that
    started none leaves alone one that another run is using."""
    if hasattr(session.config, "workerinput"):
        return
    from test_slurm import STARTED_HERE, stop_cluster

    engines = session.config._tmp_path_factory.getbasetemp() / "engines"
    stop_engines(engines)
    if (engines / STARTED_HERE).exists():
        stop_cluster()


def pytest_collection_modifyitems(config, items) -> None:
    """Marks what builds a pipeline slow, and orders the tests so that no core idles and no long
    test starts last (`make test` hands them out in this order, one at a time, to whichever
    worker is free). The engines' two builds start with the run, and a worker waits for the one
    its test needs: meanwhile SLURM's jobs leave a core idle between the plugin's polls.
    - the first test on the two base windows: they train for a wall-clock budget, beside the builds;
    - the kill trials on DVC's build, ready first;
    - the test on both builds, whose worker waits for the SLURM build;
    - the other slow tests on no shared build, which keep the other core busy until it is ready;
    - the tests on the SLURM build, then the engines' other tests, then the rest on DVC's build;
    - the quick ones, which fill the workers' last minutes, the windows' other tests among them
      (long built by then: no worker waits for them)."""
    for item in items:
        uses = PIPELINE_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if uses or item.get_closest_marker("engines"):
            item.add_marker(pytest.mark.slow)
    on_windows = [item for item in items if "two_windows" in getattr(item, "fixturenames", ())]
    items.sort(key=lambda item: _tier(item, on_windows))


def _tier(item, on_windows: list) -> int:
    """The test's place in pytest_collection_modifyitems's order."""
    fixtures = set(getattr(item, "fixturenames", ()))
    engine = getattr(item, "callspec", None) and item.callspec.params.get("engine")
    engines, slow = (item.get_closest_marker(name) is not None for name in ("engines", "slow"))
    shared = {"dvc_build", "snakemake_build", "trained_project", "two_windows"}
    tiers = [
        item in on_windows[:1],
        engine == "dvc",
        "engine_builds" in fixtures,
        slow and not engines and not fixtures & shared,
        engine == "snakemake" or "snakemake_build" in fixtures,
        engines,
        bool(fixtures & {"dvc_build", "trained_project"}),
        item not in on_windows,
    ]
    return tiers.index(True) if True in tiers else len(tiers)


def matplotlib_charts(charts):
    """data.charts drawn by matplotlib alone, as the default data was before issue 55 (and its
    held_out_fraction, 0.15): the tests that pick a default chart by index for what it shows (a
    frame, tick labels to read) keep that chart."""
    return charts.model_copy(update={"libraries": {"matplotlib": 1.0}, "held_out_fraction": 0.15})


def figure_pixels(draw, size=(3.2, 2.4), dpi=100, font: str | None = None):
    """A matplotlib figure of `size` inches at `dpi`, drawn by `draw(ax)` (in `font` where
    given), as RGB pixels (numpy uint8)."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")  # no display
    import matplotlib.pyplot as plt

    with plt.rc_context({"font.family": font} if font else {}):
        figure, ax = plt.subplots(figsize=size, dpi=dpi)
        draw(ax)
        figure.tight_layout()
        figure.canvas.draw()
        pixels = np.asarray(figure.canvas.buffer_rgba())[..., :3].copy()
        plt.close(figure)
    return pixels


def tiny_params() -> dict:
    """The repo's params.yaml shrunk: 20 charts of 96x64 px, 32 px crops, 16 samples a tar."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    # from scratch: the suite's pipelines exercise pretrain's training, resume and kill paths;
    # tests/base/test_base.py runs the default, the shipped base adapted by LoRA
    params["model"]["unet"] = "tiny"
    # 1.33 x 0.89 in at 72 dpi: 96 x 64 px (small fonts, so the plot keeps most of it)
    params["data"]["charts"].update(
        count=20,
        width_in=[1.33, 1.33],
        height_in=[0.89, 0.89],
        dpi=[72, 72],
        font_pt=[4.0, 5.0],
        points=128,
        held_out_fraction=0.2,  # 4 of the 20 in the held-out family
        # mostly the line: at 96 x 64 px titles, legends and notes would leave it no room, and
        # 160 pretrain steps learn no text
        series=[1, 2],
        title_prob=0.0,
        legend_prob=0.0,
        annotate_prob=0.0,
        labels_prob=0.0,
        # the axes as chart-base's recipe draws them: at 96 x 64 px a wavenumber axis's 4-digit
        # labels or a log axis's 10^n crowd the plot; tests/data and tests/digitize draw them
        **dict.fromkeys(AXIS_KNOBS, 0.0),
    )
    # the base's streams draw these tiny charts too, not its wide ranges (figures up to 1024 px)
    params["base"]["chart_overrides"] = {}
    params["data"]["split"] = {"train": 0.6, "val": 0.2, "test": 0.2}
    # the tests' uploads and charts are cut into tiles, of a fixed size (auto would time them)
    params["tiles"].update(size=128, tile=128)
    # the last adapter's model on ONNX Runtime (as auto picks on the suite's CPUs), untimed:
    # evaluate, restore and serve run the export evaluate writes, and every run gives its bytes
    params["eval"]["runtime"] = "onnx"
    params["eval"]["ocr"]["max_images"] = 1  # labels read on 1 image a cell: less time
    params["eval"]["digitize"]["max_images"] = 1  # and 1 chart digitized a cell
    # several step counts, so the sweep's table, plot and few-step comparison are exercised
    params["eval"]["sweep"]["steps"] = [1, 4, 8]
    params["shards"].update(crop=32, patches_per_image=2, val_crop=48, samples_per_shard=16)
    params["embed"].update(batch_size=16)
    params["optim"].update(
        batch_size=8, warmup_steps=2, checkpoint_every=5, log_every=5, val_every=10
    )
    params["pretrain"]["steps"] = 160
    for level in params["train"]["curriculum"].values():
        level["steps"] = 10
    return params


def write_params(project: Path, params: dict) -> None:
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def run_cli(project: Path, *argv: str) -> int:
    with chdir(project):
        return main(list(argv))


def file_digests(folder: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under folder."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def build_data(project: Path, params: dict, workers: int = 1) -> Path:
    """generate -> index -> shard@every level, in-process, in `project`."""
    write_params(project, params)
    assert run_cli(project, "generate", "--workers", str(workers)) == 0
    assert run_cli(project, "index", "--workers", str(workers)) == 0
    for level in params["degrade"]["levels"]:
        assert run_cli(project, "shard", "--level", level, "--workers", str(workers)) == 0
    return project


@pytest.fixture(scope="session")
def tiny_project(tmp_path_factory) -> Path:
    """A project dir holding the full data half built once from tiny params, for every worker
    of the run (read-only use)."""

    def build(folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        build_data(folder, tiny_params())

    return built_once(shared_folder(tmp_path_factory, "tiny"), build)


@pytest.fixture
def params_copy() -> dict:
    return copy.deepcopy(tiny_params())


def embed_all(project: Path, params: dict) -> None:
    for level in params["degrade"]["levels"]:
        assert run_cli(project, "embed", "--level", level) == 0


@pytest.fixture(scope="session")
def trained_project(dvc_build) -> Path:
    """Data, embeddings, pretrain, the whole curriculum and evaluate on tiny params: the dvc
    build, shared (read-only use: tests that change it work on a copy)."""
    return dvc_build


def copy_project(source: Path, target: Path) -> Path:
    """A copy that keeps symlinks and mtimes (Snakemake decides on them)."""
    import shutil

    shutil.copytree(source, target, symlinks=True)
    return target


def shared_folder(tmp_path_factory, name: str) -> Path:
    """A folder of this name for the whole run, which pytest-xdist's workers share."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name


def built_once(folder: Path, build) -> Path:
    """`build(folder)` once for the whole run: the first worker that needs it builds, the others
    wait on the lock; a failed build's reason is every waiter's, not a second build."""
    from filelock import FileLock

    with FileLock(f"{folder}.lock"):
        built, failed = folder.with_suffix(".built"), folder.with_suffix(".failed")
        if failed.exists():
            raise AssertionError(failed.read_text())
        if not built.exists():
            try:
                build(folder)
            except BaseException as error:
                failed.write_text(str(error))
                raise
            built.touch()
    return folder


@pytest.fixture(scope="session")
def engines_root(tmp_path_factory) -> Path:
    """Where each engine builds its project, beside its log (dvc.log, snakemake.log)."""
    return shared_folder(tmp_path_factory, "engines")


@pytest.fixture(scope="session")
def dvc_build(engines_root) -> Path:
    """The repo on tiny params built from scratch by `dvc repro`, once for the whole run
    (read-only use: copy with copy_project first)."""
    return _engine_build(engines_root, "dvc")


@pytest.fixture(scope="session")
def snakemake_build(engines_root) -> Path:
    """The same params built by Snakemake through the SLURM profile (every stage an sbatch job on a
    one-node cluster of this machine; test_slurm checks the jobs), beside the DVC build."""
    return _engine_build(engines_root, "snakemake")


@pytest.fixture(scope="session")
def engine_builds(dvc_build, snakemake_build) -> tuple[Path, Path]:
    return dvc_build, snakemake_build


def _engine_build(root: Path, engine: str) -> Path:
    """The engine's build, started with the other one's by the first worker that needs either;
    each worker waits only for the build it uses: DVC's tests run while the SLURM jobs do. The
    stages run on one thread each (test_engines.ENV), so the builds never wait on each other's
    thread barriers."""
    from filelock import FileLock

    built_once(root, _start_engines)
    exited, pid = root / f"{engine}.exit", int((root / f"{engine}.pid").read_text())
    while not exited.exists():  # written when the engine's command ends, in whichever worker
        assert _running(pid), f"{engine}'s build was killed: {root / f'{engine}.log'}"
        time.sleep(0.5)
    with FileLock(f"{root}.lock"):
        checked = root / f"{engine}.checked"
        if not checked.exists():
            _check_engine(root, engine, int(exited.read_text()))
            checked.touch()
    return root / engine


def _start_engines(root: Path) -> None:
    """Starts both builds in the background, each in its own process group, its exit status
    written to <engine>.exit when it ends."""
    from test_engines import ENV, make_project
    from test_slurm import SLURM, STARTED_HERE, start_cluster

    root.mkdir(parents=True, exist_ok=True)
    start_cluster()
    (root / STARTED_HERE).touch()
    # each Snakemake job logs the modules it imports (Python's -X importtime, exported to the
    # job), for test_engines to hold them to the stage's code deps
    commands = {
        "dvc": (("dvc", "repro"), ENV),
        "snakemake": (SLURM, {**ENV, "PYTHONPROFILEIMPORTTIME": "1"}),
    }
    for engine, (command, env) in commands.items():
        project = make_project(root / engine, tiny_params())
        log, exited = root / f"{engine}.log", root / f"{engine}.exit"
        log, exited, part = (shlex.quote(str(path)) for path in (log, exited, f"{exited}.part"))
        script = f'"$@" > {log} 2>&1; echo $? > {part}; mv {part} {exited}'
        process = subprocess.Popen(
            ["sh", "-c", script, "sh", *command], cwd=project, env=env, start_new_session=True
        )
        (root / f"{engine}.pid").write_text(str(process.pid))


def _running(pid: int) -> bool:
    """Whether the process lives (a zombie, ended but not yet reaped by its parent, does not)."""
    stat = Path(f"/proc/{pid}/stat")
    with suppress(FileNotFoundError):
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False


def _check_engine(root: Path, engine: str, code: int) -> None:
    from test_engines import ALL_STAGES, ran_dvc_stages

    log = root / f"{engine}.log"
    assert code == 0, f"{engine} exited {code}: {log.read_text()[-4000:]}"
    if engine == "dvc":
        assert ran_dvc_stages(log.read_text()) == ALL_STAGES
    else:  # the stages' own lines (test_kill reads their work units) go to the jobs' log: files
        jobs = sorted((root / "snakemake/logs/snakemake").rglob("*.log"))
        with log.open("a") as sink:
            sink.write("".join(job.read_text() for job in jobs))


def stop_engines(root: Path) -> None:
    """Ends a build still running when the run ends (a run of a few tests that used one)."""
    for pid_file in root.glob("*.pid"):
        if not pid_file.with_suffix(".exit").exists():
            with suppress(ProcessLookupError):
                os.killpg(int(pid_file.read_text()), signal.SIGKILL)
