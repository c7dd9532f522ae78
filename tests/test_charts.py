"""The default data set must be reproducible byte for byte and actually draw the spectrum."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy.spatial import cKDTree

from linefuse.data.charts import chart_rng, generate, make_spectrum, render_chart
from linefuse.params import ChartParams, load_params

from conftest import ROOT


def small(**overrides) -> ChartParams:
    """Tiny charts with every style switched on half the time, so the tests stay fast."""
    base = load_params(ROOT / "params.yaml").data.charts.model_dump()
    base |= dict(
        count=4,
        width=96,
        height=64,
        points=128,
        axes_prob=0.5,
        grid_prob=0.5,
        labels_prob=0.5,
        paper_prob=0.5,
    )
    return ChartParams(**(base | overrides))


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_two_runs_are_byte_identical(tmp_path):
    cfg = small()
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        assert generate(cfg, tmp_path / name) == cfg.count
    a, b = files(tmp_path / "a"), files(tmp_path / "b")
    assert sorted(a) == [f"chart_{i:05d}.{ext}" for i in range(4) for ext in ("csv", "png")]
    assert a == b


def test_worker_count_does_not_change_output(tmp_path):
    cfg = small(count=5, axes_prob=1.0, labels_prob=1.0)  # text goes through both paths too
    for name, workers in (("one", 1), ("two", 2)):
        (tmp_path / name).mkdir()
        assert generate(cfg, tmp_path / name, workers=workers) == 5
    assert files(tmp_path / "one") == files(tmp_path / "two")


def test_chart_does_not_depend_on_count(tmp_path):
    (tmp_path / "few").mkdir()
    (tmp_path / "more").mkdir()
    generate(small(count=2), tmp_path / "few")
    generate(small(count=5), tmp_path / "more")
    few, more = files(tmp_path / "few"), files(tmp_path / "more")
    assert few == {name: more[name] for name in few}


def test_seed_changes_the_data():
    spectra = [make_spectrum(chart_rng(small(seed=seed), 0), small()) for seed in (0, 1)]
    assert not np.array_equal(*spectra)


def test_csv_and_png_shapes(tmp_path):
    cfg = small(count=2)
    generate(cfg, tmp_path)
    lines = (tmp_path / "chart_00001.csv").read_text().splitlines()
    assert lines[0] == "wavelength,intensity"
    assert len(lines) == cfg.points + 1
    data = np.loadtxt(tmp_path / "chart_00001.csv", delimiter=",", skiprows=1)
    assert data.shape == (cfg.points, 2) and np.isfinite(data).all()
    assert np.all(np.diff(data[:, 0]) > 0)
    with Image.open(tmp_path / "chart_00001.png") as image:
        assert image.mode == "RGB"
        assert np.asarray(image).shape == (cfg.height, cfg.width, 3)


@pytest.mark.parametrize("index", range(3))
def test_pure_line_is_the_bare_curve(tmp_path, index):
    cfg = small(
        count=3, pure_line=True, axes_prob=1.0, grid_prob=1.0, labels_prob=1.0, paper_prob=1.0
    )
    generate(cfg, tmp_path)
    image = np.asarray(Image.open(tmp_path / f"chart_{index:05d}.png")).astype(int)
    x, y = np.loadtxt(tmp_path / f"chart_{index:05d}.csv", delimiter=",", skiprows=1).T
    white = (image == 255).all(axis=2)
    # A 1.2 pt line at 100 dpi is ~1.7 px plus anti-aliasing, and peaks go up and down the
    # whole 64 px height, so a tiny chart is inked well beyond 5%; nearly all of it is still white.
    assert white.mean() > 0.75
    assert (image[~white] == image[~white][:, :1]).all()  # grey only: black ink, no colour
    assert image.min() == 0  # the line core is solid black

    # Every inked pixel lies on the curve: within half the line width plus anti-aliasing of it,
    # with the curve mapped to the whole image after the 2% margins.
    def to_pixels(values, size):
        pad = 0.02 * np.ptp(values)
        return (values - values.min() + pad) / (np.ptp(values) + 2 * pad) * size

    t = np.linspace(0, len(x) - 1, 20 * len(x))
    dense_x = to_pixels(np.interp(t, np.arange(len(x)), x), cfg.width)
    dense_y = cfg.height - to_pixels(np.interp(t, np.arange(len(y)), y), cfg.height)
    rows, cols = np.nonzero(~white)
    distance, _ = cKDTree(np.column_stack([dense_x, dense_y])).query(
        np.column_stack([cols + 0.5, rows + 0.5])
    )
    assert distance.max() < 2.5

    # The darkest pixel of each column follows the curve (y grows downward, hence the minus).
    # Columns inside the 2% side margins hold no curve, so only inked columns count.
    columns = np.interp(np.arange(cfg.width) + 0.5, to_pixels(x, cfg.width), x)
    darkest = image.sum(axis=2).argmin(axis=0)
    inked = (~white).any(axis=0)
    assert inked.mean() > 0.9
    assert np.corrcoef(darkest[inked], -np.interp(columns, x, y)[inked])[0, 1] > 0.9


def test_styles_vary_and_paper_is_off_white():
    plain = small(axes_prob=0.0, grid_prob=0.0, labels_prob=0.0, paper_prob=0.0)
    paper = small(axes_prob=0.0, grid_prob=0.0, labels_prob=0.0, paper_prob=1.0)
    framed = small(axes_prob=1.0, grid_prob=1.0, labels_prob=1.0, paper_prob=0.0)
    images = {}
    for name, cfg in (("plain", plain), ("paper", paper), ("framed", framed)):
        rng = chart_rng(cfg, 0)
        images[name] = render_chart(make_spectrum(rng, cfg), rng, cfg)
    assert (np.median(images["plain"].reshape(-1, 3), axis=0) == 255).all()
    background = np.median(images["paper"].reshape(-1, 3), axis=0)
    assert (background < 255).all() and (background > 200).all()
    assert images["paper"][..., 0].mean() >= images["paper"][..., 2].mean()  # warm, not blue
    # Axes shrink the plot area, so the framed curve sits elsewhere than the plain one.
    assert not np.array_equal(images["plain"], images["framed"])
    assert (images["framed"] < 255).any(axis=2).mean() > (images["plain"] < 255).any(axis=2).mean()
