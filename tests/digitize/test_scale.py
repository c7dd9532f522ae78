"""linefuse.digitize.scale: a chart drawn larger than the dev sets' is read shrunk, scaled back."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from linefuse.data.charts import write_chart
from linefuse.data.images import load_rgb
from linefuse.digitize.chart import Unreadable, _read_pairs, digitize_many
from linefuse.digitize.scale import LARGEST_SIDE_PX, LEAST_FACTOR, reading_factor, text_height
from linefuse.digitize.score import score
from linefuse.digitize.sets import dev_chart_params
from linefuse.params.full import load_params

from conftest import ROOT, needs_tesseract

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("chart_*.png"))


def test_charts_drawn_at_the_dev_sets_scale_are_read_as_drawn():
    """Every fixture (a dev chart) is read at its own size, and so is one padded with white to
    twice its size (a large canvas, small text); the same fixture drawn three times larger
    (each pixel a 3 x 3 block) is read shrunk by its text's height over READ_GLYPH_PX."""
    for path in FIXTURES:
        assert reading_factor(load_rgb(path)) == 1.0, path.name
    small = load_rgb(FIXTURES[0])
    height, width = small.shape[:2]
    padded = np.full((2 * height, 2 * width, 3), 255, np.uint8)
    padded[:height, :width] = small
    assert max(padded.shape[:2]) >= LEAST_FACTOR * LARGEST_SIDE_PX
    assert reading_factor(padded) == 1.0
    large = np.repeat(np.repeat(small, 3, axis=0), 3, axis=1)
    assert text_height(large) == pytest.approx(3 * text_height(small), abs=3)
    assert reading_factor(large) >= LEAST_FACTOR


@needs_tesseract
def test_a_chart_drawn_at_300_dpi_is_read_shrunk_and_scaled_back(tmp_path):
    """Dev chart 28 drawn at 300 dpi (1018 px wide, its digits three times the dev sets'): read
    as drawn, its fit goes wrong; read shrunk, it is calibrated against its own sidecar (so the
    ticks' pixels were scaled back), its box within 4 px of the drawn plot box, its series
    within 1.5 % of the y range and matched one to one. Read as a restoration with itself as
    its input, the pair is shrunk alike and read from the image."""
    recipe = dev_chart_params(load_params(ROOT / "params.yaml"))
    write_chart(recipe.model_copy(update={"dpi": (300, 300), "max_px": 4096}), tmp_path, 28)
    png = tmp_path / "chart_00028.png"
    image = np.asarray(Image.open(png).convert("RGB"))
    assert reading_factor(image) >= 2.0
    (as_drawn,) = _read_pairs([image], [None])
    assert isinstance(as_drawn, Unreadable) or not score(as_drawn, png)["calibrated"]
    read, paired = digitize_many([image, image.copy()], [None, image])
    scores = score(read, png)
    assert scores["calibrated"] and scores["curve_error"] < 1.5, scores
    assert scores["line_score"] >= 0.95, scores
    drawn_box = json.loads(png.with_suffix(".json").read_text())["plot_box"]
    assert np.allclose(read.box, drawn_box, atol=4.0)
    assert paired.read_from == "image" and score(paired, png)["calibrated"]
