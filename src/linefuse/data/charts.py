"""The embedded default data set: synthetic spectra drawn as clean line charts.

Each chart is a spectrum (CSV, the ground truth curve) and its rendering (PNG, the sharp target
that later stages degrade). Everything comes from one generator per chart index, so the data set
is byte-identical for a given `data.charts` block whatever the worker count or chart count.
"""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from linefuse.params import ChartParams
from linefuse.stage import ordered_map

SUPERSAMPLE = 4  # draw at 4x and box-filter down: anti-aliasing without a plotting library
MARGIN = 0.02  # data range padding on every side, as a fraction of the range
INKS = ((0, 0, 0), (25, 25, 25), (10, 20, 90), (0, 40, 120), (100, 10, 10), (0, 70, 30))


def make_spectrum(rng: np.random.Generator, cfg: ChartParams) -> np.ndarray:
    """(cfg.points, 2) wavelength/intensity: Gaussian and Lorentzian peaks on a sloping baseline."""
    start, span = rng.uniform(380.0, 450.0), rng.uniform(300.0, 400.0)
    x = np.linspace(start, start + span, cfg.points)
    n = int(rng.integers(cfg.peaks[0], cfg.peaks[1] + 1))
    centres = rng.uniform(start + 0.05 * span, start + 0.95 * span, n)
    widths = span * rng.uniform(0.005, 0.04, n)
    heights = rng.uniform(0.2, 1.0, n)
    gaussian = rng.random(n) < 0.5
    z = (x[:, None] - centres) / widths
    profiles = np.where(gaussian, np.exp(-0.5 * z**2), 1.0 / (1.0 + z**2))
    baseline = rng.uniform(0.05, 0.25) + rng.uniform(-0.1, 0.1) * (x - start) / span
    noise = rng.normal(0.0, cfg.noise * heights.max(), cfg.points)
    return np.column_stack([x, profiles @ heights + baseline + noise])


def _ticks(lo: float, hi: float, target: int) -> np.ndarray:
    """'Nice' tick values (1, 2, 2.5, 5 x 10^k steps) inside [lo, hi], like a plotting library."""
    raw = (hi - lo) / target
    mag = 10.0 ** math.floor(math.log10(raw))
    step = mag * next(m for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * mag >= raw)
    return np.arange(math.ceil(lo / step), math.floor(hi / step) + 1) * step


def _label(value: float) -> str:
    return f"{round(value, 6) + 0.0:g}"  # + 0.0 turns -0 into 0


def _paper(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """(H, W, 3) multiplier in (0, 1]: off-white, slightly warm tint with a faint smooth mottle."""
    level, warmth = rng.uniform(0.93, 0.985), rng.uniform(0.0, 0.04)
    tint = level * np.array([1.0, 1.0 - warmth / 2, 1.0 - warmth])
    coarse = rng.normal(size=(height // 16 + 2, width // 16 + 2)).astype(np.float32)
    mottle = np.asarray(Image.fromarray(coarse).resize((width, height), Image.BICUBIC))
    return np.clip(tint * (1.0 + 0.008 * mottle[..., None]), 0.0, 1.0)


def render_chart(spectrum: np.ndarray, rng: np.random.Generator, cfg: ChartParams) -> np.ndarray:
    """(cfg.height, cfg.width, 3) uint8 RGB chart; pure_line gives the bare black curve on white."""
    s, W, H = SUPERSAMPLE, cfg.width * SUPERSAMPLE, cfg.height * SUPERSAMPLE
    px = cfg.dpi / 72.0 * s  # supersampled pixels per point
    # Sample every style choice, used or not, so one probability never shifts the others' draws.
    axes, grid, labels, paper = rng.random(4) < (
        cfg.axes_prob,
        cfg.grid_prob,
        cfg.labels_prob,
        cfg.paper_prob,
    )
    ink = INKS[int(rng.integers(len(INKS)))]
    if cfg.pure_line:
        axes = grid = labels = paper = False
        ink = (0, 0, 0)
    labels = labels and axes  # tick labels sit at ticks, so they need axes

    x, y = spectrum[:, 0], spectrum[:, 1]
    xlo, xhi, ylo, yhi = x.min(), x.max(), y.min(), y.max()
    xpad, ypad = MARGIN * ((xhi - xlo) or 1.0), MARGIN * ((yhi - ylo) or 1.0)
    xlo, xhi, ylo, yhi = xlo - xpad, xhi + xpad, ylo - ypad, yhi + ypad
    # About one tick per 50 px, as a plotting library would choose, so labels never collide.
    xticks = _ticks(xlo, xhi, max(2, min(6, cfg.width // 50)))
    yticks = _ticks(ylo, yhi, max(2, min(6, cfg.height // 40)))

    canvas = Image.new("RGB", (W, H), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    tick = round(min(3.5 * px, 0.03 * min(W, H)))  # 3.5 pt, shortened on small charts
    # Pillow's bundled font (no download): 8 pt at the chart's dpi, shrunk on small charts.
    font_px = max(4.0, min(8 * cfg.dpi / 72, min(cfg.width, cfg.height) / 14))
    font = ImageFont.load_default(size=font_px * s)
    xnames, ynames = [_label(v) for v in xticks], [_label(v) for v in yticks]
    text_h = draw.textbbox((0, 0), "0123456789", font=font)[3] if labels else 0
    left = bottom = top = right = 0
    if axes:
        top, right = round(0.04 * H), round(0.04 * W)
        left, bottom = tick + round(0.03 * W), tick + round(0.03 * H)
        if labels:
            widest = max(draw.textlength(name, font=font) for name in ynames)
            left += round(widest + 2.4 * text_h)  # tick labels, then the rotated axis title
            bottom += round(2.6 * text_h)
    x0, x1, y0, y1 = left, W - right, top, H - bottom  # plot area, supersampled pixels

    def to_x(v):
        return x0 + (v - xlo) / (xhi - xlo) * (x1 - x0)

    def to_y(v):
        return y1 - (v - ylo) / (yhi - ylo) * (y1 - y0)

    if grid:
        for v in xticks:
            draw.line([(to_x(v), y0), (to_x(v), y1)], fill=(215, 215, 215), width=round(0.5 * px))
        for v in yticks:
            draw.line([(x0, to_y(v)), (x1, to_y(v))], fill=(215, 215, 215), width=round(0.5 * px))
    if axes:
        dark = (30, 30, 30)
        write = partial(draw.text, fill=dark, font=font)
        draw.rectangle([x0, y0, x1, y1], outline=dark, width=round(0.8 * px))
        for v, name in zip(xticks, xnames, strict=True):
            draw.line([(to_x(v), y1), (to_x(v), y1 + tick)], fill=dark, width=round(0.8 * px))
            if labels:
                write((to_x(v), y1 + tick + 0.3 * text_h), name, anchor="mt")
        for v, name in zip(yticks, ynames, strict=True):
            draw.line([(x0 - tick, to_y(v)), (x0, to_y(v))], fill=dark, width=round(0.8 * px))
            if labels:
                write((x0 - tick - 0.3 * text_h, to_y(v)), name, anchor="rm")
        if labels:
            write(((x0 + x1) / 2, H - 0.2 * text_h), "Wavelength (nm)", anchor="md")
            title = Image.new("L", (H, W))  # drawn sideways, then turned to read upwards
            ImageDraw.Draw(title).text(
                (H - (y0 + y1) / 2, 0.2 * text_h),
                "Intensity (a.u.)",
                fill=255,
                font=font,
                anchor="mt",
            )
            canvas.paste(dark, (0, 0), title.rotate(90, expand=True))
    line = [(to_x(a), to_y(b)) for a, b in zip(x, y, strict=True)]
    draw.line(line, fill=ink, width=max(1, round(cfg.line_width_pt * px)), joint="curve")

    image = np.asarray(canvas.resize((cfg.width, cfg.height), Image.BOX))
    if paper:  # ink on paper: multiply, so white becomes the paper and dark ink stays dark
        image = np.rint(image * _paper(rng, cfg.height, cfg.width)).astype(np.uint8)
    return image


def chart_rng(cfg: ChartParams, index: int) -> np.random.Generator:
    """Chart `index`'s own generator, independent of how many charts or workers there are."""
    return np.random.default_rng(np.random.SeedSequence([cfg.seed % 2**64, index]))


def _write_chart(cfg: ChartParams, out_dir: Path, index: int) -> None:
    rng = chart_rng(cfg, index)
    spectrum = make_spectrum(rng, cfg)
    image = render_chart(spectrum, rng, cfg)
    stem = out_dir / f"chart_{index:05d}"
    np.savetxt(
        stem.with_suffix(".csv"),
        spectrum,
        fmt="%.6f",
        delimiter=",",
        header="wavelength,intensity",
        comments="",
    )
    Image.fromarray(image).save(
        stem.with_suffix(".png"), format="PNG", optimize=False, compress_level=6
    )


def generate(cfg: ChartParams, out_dir: Path, workers: int = 1) -> int:
    """Write chart_{i:05d}.png/.csv for every index into out_dir; returns how many were written."""
    job = partial(_write_chart, cfg, Path(out_dir))
    for _ in ordered_map(job, list(range(cfg.count)), workers, desc="generate", unit="chart"):
        pass
    return cfg.count
