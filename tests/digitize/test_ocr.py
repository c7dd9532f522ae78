"""Tick-label legibility: Tesseract reads a sharp chart's tick labels almost all right, a blurred
one's mostly wrong, and where Tesseract is missing the reason names the fix."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.ndimage import gaussian_filter

from linefuse.data.charts import draw_chart
from linefuse.data.labels import normalise
from linefuse.digitize import ocr
from linefuse.params.full import load_params

from conftest import ROOT, needs_tesseract


def test_edit_distance_and_normalised_text():
    assert ocr.edit_distance("450", "450") == 0
    assert ocr.edit_distance("4530", "450") == 1  # one inserted
    assert ocr.edit_distance("", "0.25") == 4  # nothing read: every character missed
    assert ocr.edit_distance("1.0", "10") == 1
    assert ocr.edit_distance("kitten", "sitting") == 3
    assert normalise("\u22120.5 ") == "-0.5"  # matplotlib's minus sign


def test_a_missing_tesseract_is_named_with_its_fix(monkeypatch):
    pytesseract = pytest.importorskip("pytesseract")
    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", "no-such-tesseract")
    reason = ocr.missing()
    assert reason is not None and "\n" not in reason and "apt-get install tesseract-ocr" in reason


def _labels(sidecar: dict) -> list[ocr.Label]:
    return [ocr.Label(label["text"], tuple(label["box"])) for label in sidecar["tick_labels"]]


@needs_tesseract
@pytest.mark.slow
def test_sharp_labels_read_right_and_blurred_ones_wrong():
    """The first 12 default charts (6-9 pt labels at 72-100 dpi, 417 characters): few of the
    sharp charts' characters read wrong, nearly all after a Gaussian blur of sigma 2 px (the rates
    measured: docs/experiments.md, "Reading tick labels")."""
    cfg = load_params(ROOT / "params.yaml").data.charts
    edits, drawn = np.zeros(2), 0
    for index in range(12):
        image, _, sidecar = draw_chart(cfg, index)
        blurred = np.stack([gaussian_filter(image[..., c] * 1.0, 2.0) for c in range(3)], -1)
        blurred = np.clip(np.rint(blurred), 0, 255).astype(np.uint8)
        labels = _labels(sidecar)
        errors = ocr.label_errors([(image, labels), (blurred, labels)])
        edits += [e for e, _ in errors]
        drawn += errors[0][1]
    sharp, blurred = edits / drawn
    assert drawn > 300
    assert sharp < 0.12, sharp
    assert blurred > sharp + 0.4, (sharp, blurred)


@needs_tesseract
def test_each_image_reads_the_same_alone_or_with_others():
    """The labels of several images, read in one call, come back to their own image, each read
    as alone: an image read beside a blank one and beside another chart with other labels
    reads the same as alone (each image's labels are a page of their own), and the blank one
    reads nothing."""
    cfg = load_params(ROOT / "params.yaml").data.charts
    image, _, sidecar = draw_chart(cfg, 0)
    other, _, other_sidecar = draw_chart(cfg, 1)
    labels, other_labels = _labels(sidecar), _labels(other_sidecar)
    alone = ocr.read_labels([(image, labels)])[0]
    blank = np.full_like(image, 255)
    beside = ocr.read_labels([(blank, labels), (other, other_labels), (image, labels)])
    assert beside[0] == [""] * len(labels) and beside[2] == alone
    assert beside[1] == ocr.read_labels([(other, other_labels)])[0]
    assert (
        ocr.label_errors([(blank, labels)])[0]
        == (sum(len(normalise(label.text)) for label in labels),) * 2
    )
