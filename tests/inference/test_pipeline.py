"""LineFusePipeline: a diffusers pipeline over the one Restorer. Saved and loaded as diffusers
saves and loads pipelines, it restores the bytes the restorer gives; inputs are converted as
`linefuse restore` converts files; what a user gets wrong is one line."""

from __future__ import annotations

import doctest
import io
import json
from contextlib import chdir
from pathlib import Path

import numpy as np
import pytest
import torch
from diffusers import DiffusionPipeline
from PIL import Image

from linefuse.data.images import load_rgb
from linefuse.digitize.chart import Unreadable, digitize_many
from linefuse.digitize.outputs import csv_text
from linefuse.inference import pipeline as pipeline_module
from linefuse.inference.pipeline import LineFusePipeline, pipeline_from_params
from linefuse.inference.restorer import Restorer
from linefuse.params.full import parse_params
from linefuse.stage import UserError
from linefuse.train.model import add_lora, build_unet, save_adapter, save_base

from conftest import ROOT, needs_tesseract, tiny_params


def _random_base(folder: Path, config_update: dict | None = None) -> Path:
    """A tiny UNet whose head is not zero (a zero head gives the input back) in save_base's
    layout."""
    torch.manual_seed(0)
    unet = build_unet("tiny", 3)
    if config_update:
        from diffusers import UNet2DConditionModel

        unet = UNet2DConditionModel.from_config({**unet.config, **config_update})
    torch.nn.init.normal_(unet.conv_out.weight, std=0.05)
    save_base(unet, folder, torch.zeros(1, 1, unet.config.cross_attention_dim))
    return folder


def _random_adapter(base: Path, folder: Path, params) -> Path:
    from linefuse.inference.model import load_base

    model = add_lora(load_base(base), params.train.lora)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "lora_B" in name:
                weight.normal_(std=0.05)
    save_adapter(model, folder)
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A base, an adapter for it, an adapter for another base, and the base saved as a
    pipeline."""
    root = tmp_path_factory.mktemp("pipeline")
    params = parse_params(tiny_params())
    base = _random_base(root / "base")
    other = _random_base(root / "other", {"block_out_channels": [8, 16, 32]})
    pipeline_from_params(params, base).save_pretrained(root / "pipeline")
    return {
        "params": params,
        "base": base,
        "pipeline": root / "pipeline",
        "adapter": _random_adapter(base, root / "adapter", params),
        "foreign": _random_adapter(other, root / "foreign", params),
    }


def _chart(height: int = 100, width: int = 160) -> np.ndarray:
    """Dark lines on white; wider than the suite's tiles (128 px): restored in two tiles."""
    image = np.full((height, width, 3), 255, np.uint8)
    image[40:43, :, :] = (200, 30, 30)
    image[:, 90:92, :] = 20
    return image


def test_diffusers_loads_the_saved_folder_as_a_linefuse_pipeline(models):
    index = json.loads((models["pipeline"] / "model_index.json").read_text())
    assert index["_class_name"] == "LineFusePipeline"
    assert index["unet"] == ["diffusers", "UNet2DConditionModel"]
    assert index["scheduler"] == ["diffusers", "DDIMScheduler"]
    assert index["restore"]["tile"] == 128 and index["steps"] == 1
    pipe = DiffusionPipeline.from_pretrained(models["pipeline"])
    assert type(pipe) is LineFusePipeline
    again = models["pipeline"].parent / "again"
    pipe.save_pretrained(again)
    reloaded = LineFusePipeline.from_pretrained(again)
    image = _chart()
    assert np.array_equal(
        pipe(image, output_type="np").images[0], reloaded(image, output_type="np").images[0]
    )


def test_the_pipeline_gives_the_restorers_bytes_with_and_without_the_adapter(models):
    """The same base and adapter through the pipeline and through Restorer.from_params (what
    evaluate, restore and serve build): equal bytes, tiled, at 1 and 2 steps; the adapter
    changes them."""
    params, image = models["params"], _chart()
    pipe = LineFusePipeline.from_pretrained(models["pipeline"])
    plain = Restorer.from_params(params, None, "cpu", base_dir=models["base"])
    out = pipe(image, steps=2, output_type="np").images[0]
    assert np.array_equal(out, plain.restore_image(image, 2))
    assert not np.array_equal(out, image)
    pipe.load_adapter(models["adapter"])
    adapted = Restorer.from_params(params, models["adapter"], "cpu", base_dir=models["base"])
    out = pipe([image, image[:64, :96]]).images
    assert np.asarray(out[0]).tobytes() == adapted.restore_image(image, 1).tobytes()
    assert np.array_equal(np.asarray(out[1]), adapted.restore_image(image[:64, :96], 1))
    assert not np.array_equal(np.asarray(out[0]), plain.restore_image(image, 1))


@pytest.mark.parametrize("mode", ["L", "RGBA", "P", "I;16"])
def test_inputs_are_converted_as_linefuse_restore_reads_files(models, mode, tmp_path):
    """A grey, transparent, palette or 16-bit image given as a PIL image, and as an array where
    there is one, restores as its file does through load_rgb (restore_files' decoder)."""
    rgb = _chart(90, 120)
    image = Image.fromarray(rgb).convert("RGBA" if mode == "RGBA" else "RGB")
    if mode == "RGBA":
        alpha = np.full(rgb.shape[:2], 255, np.uint8)
        alpha[:, :30] = 0  # a transparent band: composited over white
        image.putalpha(Image.fromarray(alpha))
    elif mode == "I;16":
        grey = np.asarray(image.convert("L")).astype(np.uint16) * 257
        image = Image.fromarray(grey)
    else:
        image = image.convert(mode)
    path = tmp_path / "chart.png"
    image.save(path)
    pipe = LineFusePipeline.from_pretrained(models["pipeline"])
    expected = pipe(load_rgb(path), deskew="never", output_type="np").images[0]
    with Image.open(path) as opened:
        assert np.array_equal(pipe(opened, deskew="never", output_type="np").images[0], expected)
    if mode in ("L", "RGBA", "I;16"):
        array = np.asarray(Image.open(path))
        assert array.shape[2:] in ((), (4,))
        assert np.array_equal(pipe(array, deskew="never", output_type="np").images[0], expected)


def test_what_a_user_gets_wrong_is_one_line(models, tmp_path):
    def message(call) -> str:
        with pytest.raises(UserError) as caught:
            call()
        text = str(caught.value)
        assert "\n" not in text and caught.value.__cause__ is None
        return text

    assert "is a LineFuse base UNet, not a pipeline" in message(
        lambda: LineFusePipeline.from_pretrained(models["base"])
    )
    assert "is not a LineFuse model (no model_index.json)" in message(
        lambda: LineFusePipeline.from_pretrained(tmp_path)
    )
    pipe = LineFusePipeline.from_pretrained(models["pipeline"])
    assert "was made for another base" in message(lambda: pipe.load_adapter(models["foreign"]))
    assert "not a peft adapter folder" in message(lambda: pipe.load_adapter(tmp_path))
    assert message(lambda: pipe([])).startswith("no images to restore")
    assert "accepts uint8" in message(lambda: pipe(np.zeros((8, 8), np.float32)))
    assert "accepts auto, always or never" in message(lambda: pipe(_chart(), deskew="yes"))


def test_the_docstring_example_runs(models, tmp_path):
    """inference/pipeline.py's example, run as doctest runs it, in a project that has
    models/pipeline and models/lora/hard: it writes what the restorer gives."""
    (tmp_path / "models/lora").mkdir(parents=True)
    (tmp_path / "models/pipeline").symlink_to(models["pipeline"])
    (tmp_path / "models/lora/hard").symlink_to(models["adapter"])
    Image.fromarray(_chart()).save(tmp_path / "chart.png")
    with chdir(tmp_path):
        tests = doctest.DocTestFinder().find(pipeline_module, globs={})
        example = next(t for t in tests if t.name == pipeline_module.__name__)
        assert len(example.examples) == 6
        result = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS).run(example, out=print)
        assert result.failed == 0
        restored = np.asarray(Image.open("restored.png"))
    adapted = Restorer.from_params(
        models["params"], models["adapter"], "cpu", base_dir=models["base"]
    )
    buffer = io.BytesIO()
    Image.fromarray(adapted.restore_image(_chart(), 1)).save(buffer, "PNG")
    assert np.array_equal(restored, np.asarray(Image.open(buffer)))


@needs_tesseract
def test_digitize_gives_the_series_read_from_each_restored_chart(models):
    """digitize=True: beside each restored image, what linefuse.digitize reads from it: a
    default chart is read, series and all, where the (random) model leaves it readable; a blank
    frame is an Unreadable saying why; without it, no readings."""
    fixture = ROOT / "tests/digitize/fixtures/chart_00005.png"
    chart = np.asarray(Image.open(fixture).convert("RGB"))
    blank = np.full((120, 160, 3), 255, np.uint8)
    pipe = LineFusePipeline.from_pretrained(models["pipeline"])
    out = pipe([chart, blank], output_type="np", digitize=True)
    expected = digitize_many(out.images, [chart, blank])
    assert [type(found) for found in out.digitized] == [type(e) for e in expected]
    assert isinstance(out.digitized[1], Unreadable) and str(out.digitized[1]) == str(expected[1])
    if not isinstance(expected[0], Unreadable):
        assert csv_text(out.digitized[0]) == csv_text(expected[0])
    assert pipe(chart).digitized is None
