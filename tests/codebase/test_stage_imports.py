"""Every stage imports only what it runs: the data stages never torch, pretrain copying the
shipped base none of torch, diffusers or accelerate, and digitizing without restoring (the
command and the service's /digitize) none of them either; each checked in a fresh interpreter."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from contextlib import chdir

import diffusers
import numpy as np
import pytest
import torch
from safetensors.numpy import save_file

from linefuse import paths
from linefuse.data.layout import EMBEDDINGS_MANIFEST, NULL_PROMPT, PROMPTS
from linefuse.inference.model import NULL_PROMPT_FILE, load_null_prompt
from linefuse.params.full import parse_params
from linefuse.paths import CONFIG_FILE, WEIGHTS_FILE
from linefuse.train.pretrain import pretrain_job, widen_base

from conftest import ROOT, needs_tesseract, tiny_params, write_params

HEAVY = ("torch", "diffusers", "accelerate", "peft", "webdataset")  # webdataset imports torch
SHIPPED = paths.zoo_model("chart-base")
CHART = ROOT / "tests/digitize/fixtures/chart_00005.png"
# runs the code, then prints which of HEAVY the interpreter imported on the way
REPORT = "\nimport json, sys\nprint(json.dumps([m for m in {heavy} if m in sys.modules]))\n"


def _imported(code: str, cwd=None) -> list[str]:
    """HEAVY modules a fresh interpreter holds after running `code` (which must succeed)."""
    done = subprocess.run(
        [sys.executable, "-c", code + REPORT.format(heavy=HEAVY)],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("stage", ["generate", "index", "shard"])
def test_the_data_stages_import_no_torch(stage):
    """What `python -m linefuse.stages.NAME` loads before its main runs."""
    assert _imported(f"import linefuse.stages.{stage}") == []


@pytest.mark.parametrize("stage", ["pretrain", "train", "train_domains"])
def test_training_loads_no_chart_reader(stage):
    """Training's text term reads labels with the label reader (and its crops' geometry,
    label_crops); the chart reader (frames, tick fits, series) must not load with it, or changing
    how charts are read would retrain the model (each module a stage imports is one of its
    dvc.yaml deps)."""
    code = f"import linefuse.stages.{stage}\nfrom linefuse.train import step\nimport sys\n"
    code += "print([m for m in sorted(sys.modules) if m.startswith('linefuse.digitize.')])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        done.stdout.strip() == "['linefuse.digitize.label_crops', 'linefuse.digitize.label_reader']"
    )


def test_index_and_shard_run_without_torch(tiny_project, tmp_path):
    """The stages' own mains, on the tiny project's charts: index, then shard@easy."""
    shutil.copytree(tiny_project / paths.GENERATED_DIR, tmp_path / paths.GENERATED_DIR)
    shutil.copy(tiny_project / paths.PARAMS, tmp_path / paths.PARAMS)
    code = (
        "from linefuse.stages import index, shard\n"
        "assert index.main(['--workers', '1']) == 0\n"
        "assert shard.main(['--level', 'easy', '--workers', '1']) == 0"
    )
    assert _imported(code, cwd=tmp_path) == []
    assert (tmp_path / paths.shards("easy") / "wds/train-000000.tar").is_file()


def _shipped_base_project(project, reader: str) -> tuple[dict, np.ndarray]:
    """params.yaml naming the shipped base, and (reader embeddings) the embed stage's manifest
    and prompt table for the first level, whose "" row is not zeros, as a text encoder's is not.
    Returns the params and the null prompt the base should be saved with."""
    params = tiny_params()
    params["model"]["unet"] = SHIPPED.name
    params["loader"]["reader"] = reader
    write_params(project, params)
    if reader != "embeddings":  # training reads pixels: one token of zeros
        width = json.loads((SHIPPED / CONFIG_FILE).read_text())["cross_attention_dim"]
        return params, np.zeros((1, 1, width), np.float32)
    embeddings = project / paths.embeddings(params["degrade"]["levels"][0])
    embeddings.mkdir(parents=True)
    table = ["a line chart", NULL_PROMPT, "two series"]
    train = {"count": 0, "keys": [], "shape": [3, 32, 32]}  # what the torch path checks
    manifest = {"channels": 3, "prompts": table, "splits": {"train": train}}
    (embeddings / EMBEDDINGS_MANIFEST).write_text(json.dumps(manifest))
    rows = np.random.default_rng(0).standard_normal((len(table), 4, 32), np.float32)
    save_file({"embeddings": rows}, str(embeddings / PROMPTS))
    return params, rows[1][None]


@pytest.mark.slow  # the layout rule's, for any test that runs pretrain: this one takes seconds
@pytest.mark.parametrize("reader", ["embeddings", "lmdb"])
def test_pretrain_copies_the_shipped_base_without_torch_as_save_base_writes_it(tmp_path, reader):
    """The pretrain stage on the shipped base starts none of HEAVY, and writes what the torch
    path (diffusers' from_pretrained, then save_base) writes: the same weights and null prompt
    bytes, and the same config but for the diffusers version, which stays the shipped one."""
    project = tmp_path / "project"
    project.mkdir()
    raw, null_prompt = _shipped_base_project(project, reader)
    params = parse_params(raw)
    code = "from linefuse.stages.pretrain import main\nassert main([]) == 0"
    assert _imported(code, cwd=project) == []

    with chdir(project):
        counts = widen_base(params, pretrain_job(params), 3, tmp_path / "saved")
    copied, saved = project / paths.BASE_DIR, tmp_path / "saved"
    assert sorted(p.name for p in copied.iterdir()) == sorted(p.name for p in saved.iterdir())
    for name in (WEIGHTS_FILE, NULL_PROMPT_FILE):
        assert (copied / name).read_bytes() == (saved / name).read_bytes(), name
    shipped_version = json.loads((SHIPPED / CONFIG_FILE).read_text())["_diffusers_version"]
    assert (copied / CONFIG_FILE).read_text() == (saved / CONFIG_FILE).read_text().replace(
        f'"_diffusers_version": "{diffusers.__version__}"',
        f'"_diffusers_version": "{shipped_version}"',
    )
    assert torch.equal(load_null_prompt(copied), torch.from_numpy(null_prompt))
    logged = json.loads((project / paths.train_logs("pretrain") / "copied.json").read_text())
    assert (logged["trainable_params"], logged["total_params"]) == counts
    assert json.loads((project / paths.train_metrics("pretrain")).read_text()) == logged


@needs_tesseract
def test_digitize_without_restoring_imports_no_model_library(tmp_path):
    """`linefuse digitize --no-restore` reads its tick labels on ONNX Runtime (label_onnx), so
    none of HEAVY loads, and it starts without torch's seconds (nor pandas', which pytesseract
    would import)."""
    shutil.copy(ROOT / paths.PARAMS, tmp_path / paths.PARAMS)
    code = (
        "import sys\n"
        "from linefuse.cli import main\n"
        f"assert main(['digitize', {str(CHART)!r}, '--no-restore', '--out', 'out']) == 0\n"
        "assert 'onnxruntime' in sys.modules  # the label reader read the chart's labels\n"
        "assert 'pytesseract' in sys.modules and 'pandas' not in sys.modules  # ocr._pytesseract\n"
    )
    assert _imported(code, cwd=tmp_path) == []
    assert (tmp_path / "out" / CHART.with_suffix(".csv").name).is_file()


@needs_tesseract
def test_the_services_digitize_without_restoring_imports_no_model_library(tmp_path):
    """The service with no adapter to load (so no restorer) answers POST /digitize?restore=false
    with none of HEAVY loaded, before or after."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from fastapi.testclient import TestClient\n"
        "from linefuse.params.full import load_params\n"
        "from linefuse.serve.app import create_app\n"
        f"params = load_params({str(ROOT / paths.PARAMS)!r})\n"
        "client = TestClient(create_app(params, Path('no-adapters'), 'cpu'))\n"
        f"upload = {{'file': ('chart.png', Path({str(CHART)!r}).read_bytes())}}\n"
        "answer = client.post('/digitize', params={'restore': 'false'}, files=upload)\n"
        "assert answer.status_code == 200, answer.text\n"
        "assert answer.text.startswith('series,x,y') and 'onnxruntime' in sys.modules\n"
    )
    assert _imported(code, cwd=tmp_path) == []
