"""The restoring model on ONNX Runtime: evaluate's export of the shipped base with an adapter
merged restores default charts as LineFusePipeline does on torch (no pixel more than a grey level
apart, all but a thousandth equal, PSNR to 0.001 dB); restoring through it imports no torch,
diffusers, peft or scipy; a session's optimised graph is cached and restores alike; `auto` times
the two runtimes once and follows the cache; a model without a current export runs on torch, and
a setting the export cannot serve is one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from contextlib import chdir
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image
from scipy import ndimage

from linefuse import paths
from linefuse.data.charts import draw_chart
from linefuse.data.transforms import normalise_array
from linefuse.evaluate.metrics import psnr
from linefuse.inference import runtime
from linefuse.inference.model import load_base
from linefuse.inference.onnx_export import export_onnx
from linefuse.inference.onnx_model import (
    ONNX_FILE,
    OPTIMISATION,
    OnnxModel,
    find_export,
    optimised_graph,
)
from linefuse.inference.pipeline import pipeline_from_params
from linefuse.inference.restorer import Restorer
from linefuse.inference.settings import RestoreSettings
from linefuse.params.full import parse_params
from linefuse.stage import UserError
from linefuse.train.model import add_lora, save_adapter

from conftest import ROOT

CHARTS = 4  # default charts, each drawn at its own size (up to 360 x 270 px: restored whole)


def _params(**eval_update) -> dict:
    """The repo's params.yaml (the default model and data), eval.runtime onnx unless told."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["eval"].update({"runtime": "onnx", **eval_update})
    return params


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The shipped base as models/base, a LoRA adapter of params.yaml's rank on it (random, so
    merging it changes the weights) as models/lora/hard, and models/onnx as evaluate exports
    them; params.yaml with eval.runtime onnx."""
    folder = tmp_path_factory.mktemp("onnx")
    params = parse_params(_params())
    with chdir(folder):
        shutil.copytree(paths.unet_folder(params.model.unet), paths.BASE_DIR)
        torch.manual_seed(0)
        lora = add_lora(load_base(paths.BASE_DIR), params.train.lora)
        with torch.no_grad():
            for name, weight in lora.named_parameters():
                if "lora_B" in name:
                    weight.normal_(std=0.01)
        save_adapter(lora, paths.adapter("hard"))
        export_onnx(paths.BASE_DIR, paths.adapter("hard"), paths.ONNX_DIR)
    (folder / "params.yaml").write_text(yaml.safe_dump(_params(), sort_keys=False))
    return folder


def _charts() -> list[tuple[np.ndarray, np.ndarray]]:
    """(blurred, sharp) default charts."""
    charts = parse_params(_params()).data.charts
    pairs = []
    for index in range(CHARTS):
        sharp = draw_chart(charts, index)[0]
        blurred = ndimage.gaussian_filter(sharp.astype(np.float64), (1.2, 1.2, 0))
        pairs.append((np.clip(np.rint(blurred), 0, 255).astype(np.uint8), sharp))
    return pairs


@pytest.mark.slow  # whole default charts, on both runtimes
def test_the_export_restores_as_the_diffusers_pipeline_does(project):
    """Default charts through `restore`'s restorer on ONNX Runtime and through the
    LineFusePipeline of the same base and adapter on torch: no pixel more than a grey level
    apart, at least 99.9 % of them equal, and PSNR against the sharp chart equal to 0.001 dB
    (a tenth of the digit evaluate's headline prints: it does not hang on the runtime)."""
    params = parse_params(_params())
    with chdir(project):
        restorer = Restorer.from_params(params, "models/lora/hard", "cpu")
        pipe = pipeline_from_params(params)
        pipe.load_adapter("models/lora/hard")
    assert restorer.runtime.value == "onnx" and type(restorer.model) is OnnxModel
    for blurred, sharp in _charts():
        by_onnx = restorer.restore_image(blurred, params.eval.steps)
        by_pipeline = pipe(blurred, output_type="np").images[0]
        assert not np.array_equal(by_onnx, blurred)
        gap = psnr(by_onnx, sharp, params.eval.metric) - psnr(
            by_pipeline, sharp, params.eval.metric
        )
        apart = np.abs(by_onnx.astype(np.int16) - by_pipeline.astype(np.int16)).max()
        equal = (by_onnx == by_pipeline).all(axis=2).mean()
        assert apart <= 1 and equal >= 0.999 and abs(gap) <= 0.001, (apart, equal, gap)


@pytest.mark.slow  # a fresh interpreter
def test_restoring_on_onnx_runtime_imports_no_torch_nor_scipy(project, tmp_path, monkeypatch):
    """`linefuse restore` of a default chart in a fresh interpreter, with eval.runtime auto and
    this machine's choice cached (timed here, as a first restore would): onnx, the restorer's
    bytes, and neither torch, diffusers, peft nor scipy's stats and ndimage in sys.modules
    (seconds of start-up; deskew straightens a straight chart without them)."""
    monkeypatch.setenv("LINEFUSE_CACHE", str(tmp_path / "cache"))
    faked = {OnnxModel: 0.1}  # ONNX Runtime measured the faster: what auto caches
    monkeypatch.setattr(runtime, "_time", lambda model, side, settings: faked.get(type(model), 0.2))
    params = parse_params(_params(runtime="auto"))
    with chdir(project):
        restorer = Restorer.from_params(params, "models/lora/hard", "cpu")
    assert restorer.runtime.value == "onnx" and "took 100 ms on ONNX Runtime" in (
        restorer.runtime.reason
    )
    blurred = _charts()[0][0]
    Image.fromarray(blurred).save(tmp_path / "chart.png")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(_params(runtime="auto")))
    probe = (
        "import json, sys\n"
        "from linefuse.cli import main\n"
        f"code = main(['--params', {str(tmp_path / 'params.yaml')!r}, 'restore',"
        f" {str(tmp_path / 'chart.png')!r}, '--out', {str(tmp_path / 'out')!r}])\n"
        "heavy = ('torch', 'diffusers', 'peft', 'scipy.stats', 'scipy.ndimage')\n"
        "print(json.dumps([code, [m for m in heavy if m in sys.modules]]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=project,
        env={**os.environ, "LINEFUSE_CACHE": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == [0, []], done.stderr[-2000:]
    assert "runtime onnx (auto: on CPU" in done.stderr
    restored = np.asarray(Image.open(tmp_path / "out/chart.png"))
    assert np.array_equal(restored, restorer.restore_image(blurred, params.eval.steps))


def test_the_optimised_graph_is_cached_and_restores_alike(project, tmp_path, monkeypatch):
    """The first session of an export optimises its graph and saves it in the cache folder; the
    next loads that unoptimised, and restores a default chart to the same bytes."""
    monkeypatch.setenv("LINEFUSE_CACHE", str(tmp_path))
    params = parse_params(_params())
    export = project / paths.ONNX_DIR
    first = OnnxModel(export, params.model)
    (cached,) = (tmp_path / "onnx").iterdir()
    assert cached == optimised_graph(export / ONNX_FILE, OPTIMISATION)
    second = OnnxModel(export, params.model)
    assert list((tmp_path / "onnx").iterdir()) == [cached]
    levels = [m.session.get_session_options().graph_optimization_level for m in (first, second)]
    assert [level.name for level in levels] == [OPTIMISATION, "ORT_DISABLE_ALL"]
    settings = RestoreSettings.from_params(params)
    blurred = _charts()[0][0]
    height, width = (side - side % first.multiple for side in blurred.shape[:2])
    pixels = normalise_array(blurred[None, :height, :width])
    assert np.array_equal(first.restore(pixels, 1, settings), second.restore(pixels, 1, settings))


def test_auto_times_both_runtimes_once_and_follows_the_cache(project, tmp_path, monkeypatch):
    """A first restorer times one tile on each runtime and caches the seconds; the next reads
    them, untimed, and takes whichever they say is faster."""
    monkeypatch.setenv("LINEFUSE_CACHE", str(tmp_path))
    raw = _params(runtime="auto")
    raw["tiles"]["size"] = 64  # a small tile: quick to time
    params = parse_params(raw)
    with chdir(project):
        first = Restorer.from_params(params, "models/lora/hard", "cpu")
        (key, seconds), *others = json.loads((tmp_path / runtime.CACHE_NAME).read_text()).items()
        assert not others and sorted(seconds) == ["onnx", "torch"]
        assert first.runtime.value == min(seconds, key=seconds.get)
        assert "a 64 px tile took" in first.runtime.reason and "timed now" in first.runtime.reason

        def untimed(model, side, settings):
            raise AssertionError("timed again")

        monkeypatch.setattr(runtime, "_time", untimed)
        for faster, slower in (("torch", "onnx"), ("onnx", "torch")):
            cached = {faster: 0.01, slower: 1.0}
            (tmp_path / runtime.CACHE_NAME).write_text(json.dumps({key: cached}))
            chosen = Restorer.from_params(params, "models/lora/hard", "cpu")
            assert chosen.runtime.value == faster and "cached in" in chosen.runtime.reason


def test_a_model_without_a_current_export_runs_on_torch(project, tmp_path):
    """The base alone, and the adapter once its files change (retrained), have no export: they
    run on torch under `onnx` too, saying why; the export is not handed out for them. Once the
    base alone is exported (models/onnx_base, as evaluate does), it runs on ONNX Runtime."""
    params = parse_params(_params())
    copy = shutil.copytree(project / "models", tmp_path / "models")
    with chdir(tmp_path):
        assert find_export(paths.BASE_DIR, paths.adapter("hard")) == paths.ONNX_DIR
        alone = Restorer.from_params(params, None, "cpu")
        config = copy / "lora/hard/adapter_config.json"
        config.write_text(config.read_text() + "\n")
        retrained = Restorer.from_params(params, "models/lora/hard", "cpu")
        export_onnx(paths.BASE_DIR, None, paths.ONNX_BASE_DIR)
        assert find_export(paths.BASE_DIR, None) == paths.ONNX_BASE_DIR
        assert Restorer.from_params(params, None, "cpu").runtime.value == "onnx"
    for restorer, named in ((alone, "models/base alone"), (retrained, "with models/lora/hard")):
        assert restorer.runtime.value == "torch"
        assert "no export of" in restorer.runtime.reason
        assert named in restorer.runtime.reason


@pytest.mark.parametrize(
    "model_update,device,said",
    [
        ({}, "cuda", "ONNX Runtime runs on the CPU here and the device is cuda"),
        ({"vae": "models/vae"}, "cpu", "a latent model (model.vae) restores on torch"),
        ({"sample_start": "noise"}, "cpu", "model.sample_start noise draws its start"),
    ],
)
def test_onnx_for_what_it_cannot_run_is_one_line(project, model_update, device, said):
    params = parse_params(_params())
    params = params.model_copy(update={"model": params.model.model_copy(update=model_update)})
    with chdir(project), pytest.raises(UserError) as caught:
        Restorer.from_params(params, "models/lora/hard", device)
    message = str(caught.value)
    assert message.startswith("eval.runtime onnx: ") and said in message and "\n" not in message
