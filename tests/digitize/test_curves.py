"""Chart errors in data units: a chart's main curve read back from its pixels matches its CSV
closely when sharp, whatever else the plot holds, and drifts measurably with blur or a wrong
curve."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image
from scipy.ndimage import gaussian_filter

from linefuse.data.charts.matplotlib_drawer import plot_furniture
from linefuse.digitize.curves import (
    ChartTruth,
    curve_errors,
    extract_curve,
    read_truth,
    shown_columns,
)

DPI = 100
LINE_WIDTH_PT = 1.2
XLIM, YLIM = (395.0, 705.0), (0.0, 1.25)
Y_RANGE = YLIM[1] - YLIM[0]
WAVELENGTH = np.linspace(400.0, 700.0, 512)
BLUE, ORANGE, BLACK, RED = "#1f77b4", "#ff7f0e", "#000000", "#d62728"


def spectrum(peaks: list[tuple[float, float, float]], baseline: float) -> np.ndarray:
    """Gaussian peaks (centre nm, height, sigma nm) on a flat baseline, at WAVELENGTH."""
    return baseline + sum(h * np.exp(-0.5 * ((WAVELENGTH - c) / w) ** 2) for c, h, w in peaks)


# the tallest peak at 480 nm; one narrow (4 nm) peak whose flanks are nearly vertical
MAIN = spectrum([(480.0, 1.0, 8.0), (560.0, 0.5, 15.0), (620.0, 0.7, 4.0)], baseline=0.1)
# crosses MAIN six times, flanks included
OTHER = spectrum([(450.0, 0.6, 20.0), (600.0, 0.6, 10.0)], baseline=0.35)


def rgb255(colour: str) -> list[int]:
    return [int(colour[i : i + 2], 16) for i in (1, 3, 5)]


def write_csv(path: Path, wavelength: np.ndarray, columns: dict[str, np.ndarray]) -> None:
    with path.open("w", newline="") as table:
        writer = csv.writer(table)
        writer.writerow(["wavelength", *columns])
        writer.writerows(zip(wavelength, *columns.values(), strict=True))


def draw_chart(
    folder: Path,
    series: list[tuple[np.ndarray, str]],
    *,
    clutter: bool = False,
    linestyle: str = "-",
    name: str = "chart_00000",
    grid: dict | None = None,
) -> tuple[Path, np.ndarray]:
    """A 360x270 matplotlib chart with its CSV and sidecar; clutter adds a grid (styled by
    `grid`), an annotation with an arrow onto the main peak, free text and a legend (black text,
    series-coloured samples); linestyle is the main series'. The sidecar's furniture is what
    generate records."""
    figure = Figure(figsize=(3.6, 2.7), dpi=DPI)
    canvas = FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    styles = [linestyle] + ["-"] * (len(series) - 1)
    for (intensity, colour), style in zip(series, styles, strict=True):
        axes.plot(WAVELENGTH, intensity, color=colour, linewidth=LINE_WIDTH_PT, linestyle=style)
    axes.set_xlim(*XLIM)
    axes.set_ylim(*YLIM)
    axes.set_xlabel("Wavelength (nm)")
    axes.set_ylabel("Intensity")
    note = None
    if clutter:
        axes.grid(True, **(grid or {}))
        note = axes.annotate(
            "main peak", xy=(480, 1.1), xytext=(530, 1.15), arrowprops={"arrowstyle": "->"}
        )
        axes.text(600, 0.95, "sample A", color="black")
        axes.legend(["main", "other"][: len(series)], loc="upper right", edgecolor="black")
    canvas.draw()
    image = np.asarray(canvas.buffer_rgba())[..., :3].copy()
    height, width = image.shape[:2]
    box = axes.get_window_extent()  # display pixels, origin at the bottom left
    png = folder / f"{name}.png"
    Image.fromarray(image).save(png)
    names = ["intensity"] if len(series) == 1 else [f"intensity_{i}" for i in range(len(series))]
    write_csv(
        png.with_suffix(".csv"), WAVELENGTH, {n: s for n, (s, _) in zip(names, series, strict=True)}
    )
    sidecar = {
        "family": "test",
        "style": "default",
        "width": width,
        "height": height,
        "dpi": DPI,
        "plot_box": [box.x0, height - box.y1, box.x1, height - box.y0],
        "xlim": list(axes.get_xlim()),
        "ylim": list(axes.get_ylim()),
        "series": [
            {
                "column": column,
                "color": rgb255(colour),
                "linewidth_px": LINE_WIDTH_PT * DPI / 72,
                "linestyle": style,
                "marker": None,
            }
            for column, (_, colour), style in zip(names, series, styles, strict=True)
        ],
        "furniture": plot_furniture(axes, canvas.get_renderer(), note),
    }
    png.with_suffix(".json").write_text(json.dumps(sidecar))
    return png, image


def blur(image: np.ndarray, sigma: float) -> np.ndarray:
    channels = [gaussian_filter(image[..., c].astype(np.float64), sigma) for c in range(3)]
    return np.clip(np.rint(np.stack(channels, axis=-1)), 0, 255).astype(np.uint8)


def pixel_nm(truth: ChartTruth) -> float:
    """The wavelength one pixel column spans."""
    left, _, right, _ = truth.plot_box
    return (truth.xlim[1] - truth.xlim[0]) / (right - left)


@pytest.fixture()
def sharp(tmp_path: Path) -> tuple[ChartTruth, np.ndarray]:
    png, image = draw_chart(tmp_path, [(MAIN, BLUE)])
    truth = read_truth(png)
    assert truth is not None
    return truth, image


def test_sharp_chart_reads_back_its_csv(sharp: tuple[ChartTruth, np.ndarray]) -> None:
    truth, image = sharp
    errors = curve_errors(image, truth)
    assert errors["curve_rmse"] < 0.004 * Y_RANGE  # half a pixel
    assert errors["peak_position_error"] < pixel_nm(truth) / 2  # half a column
    # read at the crest: the column's centre sits below a narrow peak's apex
    assert errors["peak_height_error"] < 0.002 * Y_RANGE
    assert errors["curve_coverage"] > 0.99
    wavelength, intensity = extract_curve(image, truth)
    assert wavelength[0] < 402 and wavelength[-1] > 698  # the whole curve, not its flat parts
    assert np.abs(intensity - np.interp(wavelength, WAVELENGTH, MAIN)).max() < 0.03 * Y_RANGE


@pytest.mark.parametrize(
    "main, other",
    [(BLUE, ORANGE), (BLACK, RED)],
    ids=["blue-line-black-text", "black-line-black-text"],
)
def test_other_series_grid_and_text_do_not_drag_the_curve(
    tmp_path: Path, main: str, other: str
) -> None:
    """With a black main line the annotation, its arrow, the text and the grid are all on the
    line's own colour blend: only the path's continuity keeps the curve on the line."""
    png, image = draw_chart(tmp_path, [(MAIN, main), (OTHER, other)], clutter=True)
    truth = read_truth(png)
    errors = curve_errors(image, truth)
    assert errors["curve_rmse"] < 0.008 * Y_RANGE  # twice the bound of the line alone
    assert errors["peak_position_error"] < pixel_nm(truth)
    assert errors["peak_height_error"] < 0.01 * Y_RANGE
    assert errors["curve_coverage"] > 0.95  # the crossings hide a few columns at most


@pytest.mark.parametrize("linestyle", ["-", "--"])
def test_furniture_in_the_series_colour_is_masked(tmp_path: Path, linestyle: str) -> None:
    """A black line on a black grid, under a black-framed legend: every grid line is a straight
    path in the series' own colour, and only the sidecar's furniture tells it from the curve."""
    black_grid = {"color": "black", "linestyle": "-", "linewidth": 0.8}
    png, image = draw_chart(
        tmp_path, [(MAIN, BLACK), (OTHER, RED)], clutter=True, linestyle=linestyle, grid=black_grid
    )
    truth = read_truth(png)
    assert len(truth.boxes) == 2 and len(truth.lines) == 11  # legend, text; 4 + 7 grid lines
    errors = curve_errors(image, truth)
    assert errors["curve_rmse"] < 0.008 * Y_RANGE  # twice the bound of the line alone
    assert errors["peak_position_error"] < pixel_nm(truth)
    assert errors["peak_height_error"] < 0.002 * Y_RANGE  # the line alone's bound
    assert errors["curve_coverage"] > 0.7  # less the vertical grid lines' columns

    unfurnished = curve_errors(image, dataclasses.replace(truth, boxes=(), lines=()))
    assert unfurnished["curve_rmse"] > 0.3 * Y_RANGE  # the path runs along a grid line


def test_dark_series_stays_out_of_a_blurred_curve(tmp_path: Path) -> None:
    """Blurred dark grey lies close to the blue line's blend with white: only the hue tells the two
    series apart, so the second series must cost the blurred curve nothing."""
    png, image = draw_chart(tmp_path, [(MAIN, BLUE), (OTHER, "#333333")], clutter=True)
    alone_png, alone = draw_chart(tmp_path, [(MAIN, BLUE)], name="chart_00001")
    truth = read_truth(png)
    errors = curve_errors(blur(image, 1.5), truth)
    reference = curve_errors(blur(alone, 1.5), read_truth(alone_png))
    # within half a column of the CSV's peak sample: the column holding it
    assert (
        max(errors["peak_position_error"], reference["peak_position_error"]) < pixel_nm(truth) / 2
    )
    row = Y_RANGE / (truth.plot_box[3] - truth.plot_box[1])  # the intensity one pixel row spans
    # within a quarter row of the blue line drawn alone
    assert errors["peak_height_error"] < reference["peak_height_error"] + 0.25 * row
    assert errors["curve_rmse"] < 2 * reference["curve_rmse"]
    assert errors["curve_coverage"] > 0.95


@pytest.mark.parametrize("linestyle", ["--", ":", "-."])
def test_dashed_line_is_followed_across_its_gaps(tmp_path: Path, linestyle: str) -> None:
    """A black dashed line beside a solid arrow, text and legend in black: the gaps must cost the
    line less than a detour along the solid clutter."""
    png, image = draw_chart(
        tmp_path, [(MAIN, BLACK), (OTHER, RED)], clutter=True, linestyle=linestyle
    )
    truth = read_truth(png)
    assert truth.linestyle == linestyle
    errors = curve_errors(image, truth)
    assert errors["peak_position_error"] < pixel_nm(truth)
    assert errors["peak_height_error"] < 0.01 * Y_RANGE  # as for a solid line in clutter
    assert errors["curve_rmse"] < 0.01 * Y_RANGE
    assert 0.4 < errors["curve_coverage"] < 0.9  # the dashes' share of the columns


def test_errors_grow_with_blur(sharp: tuple[ChartTruth, np.ndarray]) -> None:
    truth, image = sharp
    errors = [curve_errors(blur(image, sigma), truth) for sigma in (0.0, 1.5, 3.0)]
    rmse = [e["curve_rmse"] for e in errors]
    height = [e["peak_height_error"] for e in errors]
    assert rmse[0] < rmse[1] < rmse[2]
    assert height[0] < height[1] < height[2]
    assert rmse[2] > 3 * rmse[0] and height[2] > 3 * height[0]
    assert min(e["curve_coverage"] for e in errors) > 0.99  # not from fewer columns


def test_wrong_curve_moves_the_peak(tmp_path: Path) -> None:
    png, image = draw_chart(tmp_path, [(MAIN, BLUE)])
    write_csv(png.with_suffix(".csv"), WAVELENGTH + 10.0, {"intensity": MAIN})
    truth = read_truth(png)
    errors = curve_errors(image, truth)
    assert errors["peak_position_error"] == pytest.approx(10.0, abs=pixel_nm(truth))
    assert errors["curve_rmse"] > 0.05 * Y_RANGE  # the flanks no longer line up


def test_centred_crop_with_its_offset_scores_like_the_whole_chart(
    sharp: tuple[ChartTruth, np.ndarray],
) -> None:
    truth, image = sharp
    offset = (10, 60)  # what evaluate passes for a centred 250x240 crop of this 270x360 chart
    crop = image[offset[0] : truth.height - offset[0], offset[1] : truth.width - offset[1]]
    crop_wavelength, crop_intensity = extract_curve(crop, truth, offset)
    whole_wavelength, whole_intensity = extract_curve(image, truth)
    covered = (whole_wavelength >= crop_wavelength[0]) & (whole_wavelength <= crop_wavelength[-1])
    np.testing.assert_allclose(crop_wavelength, whole_wavelength[covered])
    np.testing.assert_allclose(crop_intensity, whole_intensity[covered], atol=1e-3 * Y_RANGE)
    assert crop_wavelength[-1] - crop_wavelength[0] < 0.9 * (whole_wavelength[-1] - 400.0)

    expected = np.interp(crop_wavelength, WAVELENGTH, MAIN)
    whole_rmse = np.sqrt(np.mean((whole_intensity[covered] - expected) ** 2))
    errors, whole = curve_errors(crop, truth, offset), curve_errors(image, truth)
    assert errors["curve_rmse"] == pytest.approx(whole_rmse, abs=1e-4)
    assert errors["peak_position_error"] == whole["peak_position_error"]  # 480 nm is in the crop
    assert errors["peak_height_error"] == pytest.approx(whole["peak_height_error"], abs=1e-4)
    assert errors["curve_coverage"] > 0.99

    misplaced = curve_errors(crop, truth)  # the crop read as if it were the chart's corner
    assert misplaced["curve_rmse"] > 10 * errors["curve_rmse"]


def test_erased_line_has_no_coverage(sharp: tuple[ChartTruth, np.ndarray]) -> None:
    """A restorer that erases the line cannot score by leaving few columns to judge."""
    truth, image = sharp
    left, top, right, bottom = (round(v) for v in truth.plot_box)
    erased = image.copy()
    erased[top + 3 : bottom - 3, left + 3 : right - 3] = 255
    errors = curve_errors(erased, truth)
    assert errors["curve_coverage"] == 0.0
    assert np.isnan([errors["curve_rmse"], errors["peak_position_error"]]).all()
    assert extract_curve(erased, truth)[0].size == 0

    half = image.copy()
    middle = (left + right) // 2
    half[top + 3 : bottom - 3, middle:right] = 255
    errors = curve_errors(half, truth)
    assert errors["curve_coverage"] == pytest.approx(0.5, abs=0.05)
    assert errors["peak_height_error"] < 0.01 * Y_RANGE  # the tallest peak is in the left half

    # the tallest peak's top erased: few columns lost, but the peak is judged against the CSV's
    peak_col = round(left + (480.0 - XLIM[0]) / (XLIM[1] - XLIM[0]) * (right - left))
    beheaded = image.copy()
    beheaded[top + 3 : round(top + 0.4 * (bottom - top)), peak_col - 8 : peak_col + 9] = 255
    errors = curve_errors(beheaded, truth)
    assert errors["curve_coverage"] > 0.95
    assert errors["peak_height_error"] > 0.2 * Y_RANGE  # the next tallest (620 nm) is read


def test_a_peak_the_sharp_chart_does_not_show_is_not_judged(
    sharp: tuple[ChartTruth, np.ndarray],
) -> None:
    """A dashed line's apex may fall in a gap: the sharp chart's own shown_columns restrict the
    truth's peak to what it draws. Here the peak's top (above 0.9, from 475 to 485 nm) is blank."""
    truth, image = sharp
    left, top, right, bottom = truth.plot_box

    def col(nm: float) -> float:
        return left + (nm - XLIM[0]) / (XLIM[1] - XLIM[0]) * (right - left)

    gap = image.copy()
    gap[: round(bottom - 0.9 / Y_RANGE * (bottom - top)), round(col(475)) : round(col(485))] = 255
    shown = shown_columns(gap, truth)
    assert 0.97 < shown.mean() < 1.0
    unjudged, judged = curve_errors(gap, truth), curve_errors(gap, truth, shown=shown)
    assert unjudged["peak_height_error"] > 0.1 * Y_RANGE  # the apex (1.1) against about 0.92
    # the gap's edge column holds the steep flank's cut end, a little above its CSV value
    assert judged["peak_height_error"] < 0.05 * Y_RANGE
    assert unjudged["peak_height_error"] > 3 * judged["peak_height_error"]
    assert judged["peak_position_error"] < 4.0  # nm: the gap's edges
    assert judged["curve_rmse"] == unjudged["curve_rmse"]


def test_read_truth(tmp_path: Path) -> None:
    png, _ = draw_chart(tmp_path, [(MAIN, BLUE), (OTHER, ORANGE)])
    truth = read_truth(png)
    assert truth is not None
    assert (truth.width, truth.height) == (360, 270)
    assert truth.colour == (31.0, 119.0, 180.0)
    np.testing.assert_allclose(truth.intensity, MAIN)  # series 0 of intensity_0, intensity_1

    sidecar = json.loads(png.with_suffix(".json").read_text())
    sidecar["series"][0]["color"] = [31 / 255, 119 / 255, 180 / 255]  # matplotlib's 0-1 floats
    png.with_suffix(".json").write_text(json.dumps(sidecar))
    assert read_truth(png).colour == pytest.approx((31.0, 119.0, 180.0))

    png.with_suffix(".json").write_text('{"width": 360, "height": ')
    assert read_truth(png) is None
    png.with_suffix(".json").unlink()
    assert read_truth(png) is None  # a user's own image: no sidecar
    json_only, _ = draw_chart(tmp_path, [(MAIN, BLUE)], name="chart_00001")
    json_only.with_suffix(".csv").unlink()
    assert read_truth(json_only) is None
