"""digitize's label reader on ONNX Runtime: numpy crops that are crop_labels', and the shipped
export reading what the shipped weights read, on the fixture charts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from linefuse import paths
from linefuse.data.transforms import normalise
from linefuse.digitize import label_crops, label_onnx, label_reader
from linefuse.digitize.axes import find_frame

CHARTS = sorted((Path(__file__).parent / "fixtures").glob("chart_*.png"))


@pytest.fixture(scope="module", params=paths.DIGITIZE_READERS)
def reader(request) -> tuple[str, label_reader.LabelReader]:
    """Each reader digitize reads with (digitize_reader's, then its voters'), by name."""
    folder = paths.zoo_model(request.param)
    return request.param, label_reader.LabelReader.from_pretrained(folder).eval()


def _chart(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The chart's pixels, and the boxes digitize reads at: the words it finds."""
    image = np.asarray(Image.open(path).convert("RGB"))
    frame = find_frame(image)
    return image, np.array([word.box for word in frame.x_words + frame.y_words], np.float32)


def _torch_boxes(boxes: np.ndarray) -> torch.Tensor:
    return torch.cat([torch.zeros(len(boxes), 1), torch.from_numpy(boxes)], 1)


@pytest.mark.parametrize("path", CHARTS, ids=lambda p: p.stem)
def test_numpy_crops_are_crop_labels_on_real_charts(path):
    """At the drawer's label boxes (the JSON sidecar's), the words digitize finds, and two boxes
    over the image's corners (white beyond its edge)."""
    image, words = _chart(path)
    drawn = [
        label["box"] for label in json.loads(path.with_suffix(".json").read_text())["tick_labels"]
    ]
    height, width = image.shape[:2]
    corners = [[-3, -2, 20, 9], [width - 15, height - 8, width + 2, height + 1]]
    boxes = np.concatenate([np.array(drawn + corners, np.float32), words])
    pixels = normalise(torch.from_numpy(image.copy())[None])
    expected = label_reader.crop_labels(pixels, _torch_boxes(boxes), 16, 64).numpy()
    got = label_crops.crop_labels(pixels[0].numpy(), boxes, 16, 64)
    assert got.dtype == np.float32 and got.shape == expected.shape == (len(boxes), 1, 16, 64)
    assert np.abs(got - expected).max() < 1e-4


def test_the_shipped_export_reads_what_the_shipped_weights_read(reader):
    """Every word of every fixture chart, read by torch (crop_labels, the safetensors) and by
    ONNX Runtime (numpy crops, model.onnx): the same texts, near the same logits, in a batch
    of any size; each reader digitize reads with."""
    name, reader = reader
    session = label_onnx._session(name)
    for path in CHARTS:
        image, boxes = _chart(path)
        pixels = normalise(torch.from_numpy(image.copy())[None])
        expected = label_reader.read_labels(reader, pixels, _torch_boxes(boxes))
        assert label_onnx.read_labels(image, boxes, name) == expected, path.name
        assert label_onnx.read_labels(image, boxes[:1], name) == expected[:1]
        with torch.no_grad():
            logits = reader(label_reader.crop_labels(pixels, _torch_boxes(boxes), 16, 64))
        crops = label_crops.crop_labels(pixels[0].numpy(), boxes, 16, 64)
        (got,) = session.run(None, {"crops": crops})
        assert np.abs(got - logits.numpy()).max() < 2e-3, path.name
    assert label_onnx.read_labels(image, np.zeros((0, 4), np.float32), name) == []
