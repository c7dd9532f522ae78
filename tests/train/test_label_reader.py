"""The label readers: their crops, the CTC loss, `linefuse label-reader` and `digitize-reader`,
and the two shipped readers."""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from linefuse import paths
from linefuse.data.charts import draw_chart
from linefuse.data.labels import encode
from linefuse.digitize import label_onnx
from linefuse.digitize.label_patches import RestoredCopies, found_labels, label_patches
from linefuse.digitize.label_reader import LabelReader, crop_labels, ctc_loss, read_labels
from linefuse.evaluate.label_reader_card import character_error_rate
from linefuse.params import ParamsError
from linefuse.params.data import SIZE_KNOBS
from linefuse.params.full import load_params, parse_params
from linefuse.train.label_reader_training import reader_charts, restore_whole

from conftest import ROOT, run_cli, tiny_params, write_params

PARAMS = load_params(ROOT / "params.yaml")
SHIPPED = paths.zoo_model(PARAMS.label_reader.name)
CHARTS = list(range(12))  # default charts (seed 0): the reader never trained on them ...
# ... drawn with the axes of the recipe both readers were trained on (chart-base's: no
# wavenumbers, 10^n or offsets; ChartParams.without_axis_knobs)
DEFAULT_CHARTS = PARAMS.data.charts.without_axis_knobs()


@pytest.fixture(scope="module")
def reader() -> LabelReader:
    return LabelReader.from_pretrained(SHIPPED).eval()


@pytest.fixture(scope="module")
def sharp():
    return label_patches(DEFAULT_CHARTS, CHARTS, workers=1)


@pytest.fixture(scope="module")
def blurred():
    hard = ("gaussian", PARAMS.degrade.level("gaussian", "hard"), "hard", PARAMS.degrade.seed)
    return label_patches(DEFAULT_CHARTS, CHARTS, workers=1, blur=hard)


def _boxes(labels) -> torch.Tensor:
    return torch.cat([torch.arange(len(labels))[:, None], torch.from_numpy(labels.boxes)], 1)


def _centre(box) -> np.ndarray:
    return (np.asarray(box[:2]) + np.asarray(box[2:])) / 2


def _cer(reader, labels) -> float:
    reads = read_labels(reader, labels.images(slice(None)), _boxes(labels))
    return character_error_rate(reads, labels.texts)["cer"]


def test_the_shipped_reader_reads_sharp_labels_and_fails_on_blurred_ones(reader, sharp, blurred):
    assert len(sharp) > 80 and sharp.texts == blurred.texts
    sharp_cer, blurred_cer = _cer(reader, sharp), _cer(reader, blurred)
    assert sharp_cer <= 0.10, blurred_cer
    assert blurred_cer >= 0.25 and blurred_cer > 3 * sharp_cer, (sharp_cer, blurred_cer)


def test_digitize_reads_with_a_reader_that_reads_blurred_labels_too(reader, sharp, blurred):
    """The readers digitize ships with (its first and its voters) read what the base's reader
    cannot: hard-blurred labels."""
    readers = PARAMS.digitize_reader.readers()
    assert paths.DIGITIZE_READERS == tuple(cfg.name for cfg in readers)
    # the voters: the recipe larger, and the recipe with restored copies
    assert [(cfg.charts, cfg.restored) for cfg in readers] == [(1000, 0), (2000, 0), (1000, 2)]
    base_cer = _cer(reader, blurred)
    for cfg in readers:
        robust = LabelReader.from_pretrained(paths.zoo_model(cfg.name)).eval()
        sharp_cer, blurred_cer = _cer(robust, sharp), _cer(robust, blurred)
        assert sharp_cer <= 0.10, (cfg.name, sharp_cer)
        assert blurred_cer <= 0.5 * base_cer, (cfg.name, blurred_cer)


def test_found_labels_are_the_words_digitize_finds_with_the_drawn_texts():
    """A reader for digitize trains at the word boxes digitize itself finds: on sharp default
    charts, most drawn labels are found, each with the text drawn nearest its centre."""
    drawn, found = 0, []
    for index in CHARTS:
        image, _, sidecar = draw_chart(PARAMS.data.charts, index)
        labels = sidecar["tick_labels"]
        drawn += len(labels)
        for label in found_labels(image, labels):
            centre = _centre(label["box"])
            nearest = min(labels, key=lambda drawn: np.abs(_centre(drawn["box"]) - centre).sum())
            found.append(label["text"] == nearest["text"])
    assert len(found) >= 0.8 * drawn and all(found), (len(found), drawn)


def test_a_reader_drawn_at_the_datas_sizes_trains_on_labels_as_small_as_the_datas():
    """sizes: data draws the reader's charts at data.charts' fonts, type and figure sizes: on the
    same charts, its labels are the default data's small ones, not the base's larger range."""
    cfg = PARAMS.digitize_reader
    at_data = reader_charts(PARAMS, cfg.model_copy(update={"sizes": "data"}))
    at_base = reader_charts(PARAMS, cfg.model_copy(update={"sizes": "base"}))
    assert all(getattr(at_data, k) == getattr(PARAMS.data.charts, k) for k in SIZE_KNOBS)
    assert at_base.font_pt != PARAMS.data.charts.font_pt
    heights = {
        name: np.median([b[3] - b[1] for b in label_patches(charts, CHARTS, workers=1).boxes])
        for name, charts in (("data", at_data), ("base", at_base))
    }
    assert heights["data"] < 0.8 * heights["base"], heights


@pytest.mark.slow  # restores four charts
def test_restored_copies_are_further_degraded_copies_brought_back_by_the_base():
    seed = PARAMS.base.chart_seed
    restore = RestoredCopies(
        1, partial(restore_whole, params=PARAMS, base=PARAMS.digitize_reader.restorer)
    )
    distances = []
    for chart in CHARTS[:4]:
        degraded = label_patches(DEFAULT_CHARTS, [chart], 1, copies=(PARAMS.degrade, 1, seed))
        count = len(degraded) // 2  # the sharp chart's labels, then the degraded copy's
        sharp, blurred = degraded.patches[:count], degraded.patches[count:]
        # the copy restored, as the only copy
        alone = label_patches(
            DEFAULT_CHARTS, [chart], 1, copies=(PARAMS.degrade, 0, seed), restore=restore
        )
        assert np.array_equal(alone.patches[:count], sharp)
        back = alone.patches[count:]
        distances.append([np.abs(view.astype(float) - sharp).mean() for view in (blurred, back)])
        # a restored copy comes after the degraded ones, which stay as they were
        both = label_patches(
            DEFAULT_CHARTS, [chart], 1, copies=(PARAMS.degrade, 1, seed), restore=restore
        )
        assert len(both) == 3 * count
        assert np.array_equal(both.patches[: 2 * count], degraded.patches)
    blurred_distance, restored_distance = np.mean(distances, axis=0)
    assert restored_distance < 0.5 * blurred_distance, distances


def test_the_shipped_reader_is_small_and_carded():
    weights = SHIPPED / "diffusion_pytorch_model.safetensors"
    assert weights.stat().st_size < 1024**2
    card = (SHIPPED / "README.md").read_text()
    assert yaml.safe_load(card.split("---")[1])["pipeline_tag"] == "image-to-text"
    for fact in ("commit", "make label-reader", f"seed {PARAMS.base.chart_seed}", "| sharp |"):
        assert fact in card
    scores = json.loads((SHIPPED / "scores.json").read_text())
    assert scores["sharp"]["test"]["cer"] < scores["gaussian_hard"]["test"]["cer"]


def test_a_crop_is_the_label_scaled_to_the_crop_height_left_aligned_on_white():
    image = np.full((40, 80, 3), 255, np.uint8)
    image[10:20, 30:44] = np.random.default_rng(0).integers(0, 200, (10, 14, 1))  # a grey label
    tensor = torch.from_numpy(image).permute(2, 0, 1)[None].float() / 127.5 - 1
    crop = crop_labels(tensor, torch.tensor([[0.0, 30, 10, 44, 20]]), 16, 64)[0, 0]
    got = ((crop + 1) * 127.5).numpy()
    # widened by MARGIN (1.5 px a side): 17 x 13 image px, 13 px to 16 rows, so 21 columns
    scale = 13 / 16
    area = (28.5, 8.5, 28.5 + 21 * scale, 21.5)
    expected = Image.fromarray(image[..., 0]).resize((21, 16), Image.Resampling.BILINEAR, area)
    assert np.abs(got[:, :21] - np.asarray(expected, float)).max() < 3
    assert np.all(got[:, 21:] == 255)  # right of the widened box: white, not the chart
    assert got[3:13, 2:19].mean() < 130  # the label itself, not stretched over the width


def test_crops_pass_gradients_back_to_the_images():
    images = torch.zeros(2, 3, 30, 60, requires_grad=True)
    boxes = torch.tensor([[1.0, 5, 5, 25, 15]])
    crop_labels(images, boxes, 16, 64).sum().backward()
    assert images.grad[1].abs().sum() > 0 and images.grad[0].abs().sum() == 0


def test_the_ctc_loss_is_lower_on_sharp_labels_and_reaches_the_images(reader, sharp, blurred):
    pick = slice(0, 48)
    targets = torch.zeros(48, 6, dtype=torch.long)
    lengths = torch.tensor([len(encode(t)) for t in sharp.texts[pick]])
    for row, text in enumerate(sharp.texts[pick]):
        targets[row, : len(encode(text))] = torch.tensor(encode(text))
    boxes = _boxes(sharp)[pick].clone()
    boxes[:, 0] = torch.arange(48)
    images = sharp.images(pick).requires_grad_()
    sharp_loss = ctc_loss(reader, images, boxes, targets, lengths)
    sharp_loss.backward()
    blurred_loss = ctc_loss(reader, blurred.images(pick), boxes, targets, lengths)
    assert sharp_loss.item() < 0.5 * blurred_loss.item(), (sharp_loss.item(), blurred_loss.item())
    assert images.grad.abs().sum() > 0


def test_a_bad_crop_size_is_a_one_line_error_naming_the_key():
    params = tiny_params()
    params["label_reader"]["width"] = 63
    with pytest.raises(ParamsError, match="label_reader.width"):
        parse_params(params)


@pytest.mark.slow  # draws charts and trains a few steps
def test_linefuse_digitize_reader_trains_on_degraded_copies_at_found_words(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "ZOO_DIR", tmp_path / "zoo")
    params = tiny_params()
    params["digitize_reader"].update(
        name="test-digitize",
        charts=3,
        restored=1,
        steps=2,
        score_charts=2,
        voters=[{"name": "test-voter", "charts": 2, "steps": 3}],
    )
    write_params(tmp_path, params)
    # two workers: the voter's copies are restored in processes started after the first reader
    # trained here, where a forked one would wait forever on torch's threads
    assert run_cli(tmp_path, "digitize-reader", "--workers", "2") == 0
    folder = tmp_path / "zoo" / "test-digitize"
    card = (folder / "README.md").read_text()
    assert "make digitize-reader" in card and "degraded copies" in card
    assert f"1 more each restored by {PARAMS.digitize_reader.restorer}" in card
    assert (folder / label_onnx.ONNX_FILE).is_file()  # what digitize reads, made with the weights
    assert "the words digitize finds" in card and "matplotlib, plotnine" in card
    assert "2 steps of 64" in card and "(its voter" not in card
    voter = tmp_path / "zoo" / "test-voter"  # the voter: the recipe, with its own keys
    voter_card = (voter / "README.md").read_text()
    assert "# LineFuse test-voter" in voter_card and "3 steps of 64" in voter_card
    assert "of 2 sharp charts" in voter_card and "(its voter test-voter's keys)" in voter_card
    assert (voter / label_onnx.ONNX_FILE).is_file()


@pytest.mark.slow  # draws charts and trains a few steps
def test_one_reader_of_a_section_is_remade_alone_by_its_name(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(paths, "ZOO_DIR", tmp_path / "zoo")
    params = tiny_params()
    params["digitize_reader"].update(
        name="test-digitize", charts=2, steps=2, score_charts=2, voters=[{"name": "test-voter"}]
    )
    write_params(tmp_path, params)
    assert run_cli(tmp_path, "digitize-reader", "--reader", "test-vote") == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error == [
        "linefuse: error: --reader test-vote: digitize_reader has no reader of that name; "
        "choose among test-digitize, test-voter"
    ]
    assert run_cli(tmp_path, "digitize-reader", "--reader", "test-voter") == 0
    assert sorted(p.name for p in (tmp_path / "zoo").iterdir()) == ["test-voter"]
    card = (tmp_path / "zoo" / "test-voter" / "README.md").read_text()
    assert "`make digitize-reader READER=test-voter`" in card


@pytest.mark.slow  # draws charts and trains a few steps
def test_linefuse_label_reader_writes_a_loadable_reader_with_a_card(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "ZOO_DIR", tmp_path / "zoo")
    params = tiny_params()
    params["label_reader"].update(name="test-reader", charts=4, steps=3, score_charts=2)
    write_params(tmp_path, params)
    assert run_cli(tmp_path, "label-reader", "--workers", "1") == 0
    folder = tmp_path / "zoo" / "test-reader"
    loaded = LabelReader.from_pretrained(folder)
    assert loaded.config.height == params["label_reader"]["height"]
    card = (folder / "README.md").read_text()
    assert yaml.safe_load(card.split("---")[1])["library_name"] == "linefuse"
    assert "3 steps of 64" in card and "make label-reader" in card
    scores = json.loads((folder / "scores.json").read_text())
    assert set(scores) == {"sharp", "gaussian_easy", "gaussian_medium", "gaussian_hard"}
