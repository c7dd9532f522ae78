"""A line chart read from its pixels alone: its axes' mappings and its series in data units.

find the frame (axes.py), read and fit the tick labels (calibrate.py), follow each series
(series.py), map the paths through the fits, and name each series by its legend entry's text;
a chart drawn larger than digitize's rules were decided on is read shrunk (scale.py). A chart
that cannot be read is an Unreadable with a one-line reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import numpy as np

from linefuse.digitize.axes import Frame, find_frame
from linefuse.digitize.calibrate import Axis, fit_axis, read_ticks
from linefuse.digitize.legend import Entry
from linefuse.digitize.ocr import Label, missing, read_labels
from linefuse.digitize.scale import reading_factor, shrunk, size_for
from linefuse.digitize.series import Trace, trace_series

MIN_SIDE_PX = 32  # smaller images hold no legible chart
# what an odd image (no chart drawer's) may raise deep in the reading: reported as unreadable
ODD_INPUT = (ValueError, IndexError, ZeroDivisionError, FloatingPointError, np.linalg.LinAlgError)
# a legend's text is words, read as a block of lines (Tesseract's psm 6), its words spaced
LEGEND_CONFIG = "--psm 6"
# two readings of an axis closer than this share of its span read the same axis (score's
# CALIBRATED): the restoration's own, from sharper labels, is kept
SAME_AXIS = 0.01
LOST_POWERS = (1, 2, 3)  # powers of ten by which a lost decimal point scales labels: 0.6 as 6
INTEGER = re.compile(r"\d+")  # a name that reads as a series' index would name two series


class Unreadable(Exception):
    """A chart that cannot be digitized; str() is the reason, one line."""


@dataclass(frozen=True)
class Series:
    """One series read: its colour (0-255 RGB), whether it is dashed, x and y in data units,
    and its name from the legend (None where the chart has none, or no entry is like it)."""

    colour: tuple[float, float, float]
    dashed: bool
    x: np.ndarray
    y: np.ndarray
    name: str | None = None


@dataclass(frozen=True)
class Digitized:
    """A chart read: its plot box (left, top, right, bottom; continuous pixels), its axes'
    mappings, its series in data units, the pixel paths they were mapped from, and its legend's
    entries (none without a legend). `read_from` says which image it was read from: "image", or
    "input" where a restoration could not be read and the blurred input it came from could;
    `axes_from` which image's tick labels gave its axes (the input's where they are surer than
    the restoration's: digitize_many)."""

    box: tuple[float, float, float, float]
    x_axis: Axis
    y_axis: Axis
    series: list[Series]
    traces: list[Trace] = field(default_factory=list)
    legend: list[Entry] = field(default_factory=list)
    read_from: str = "image"
    axes_from: str = "image"

    @property
    def confidence(self) -> float:
        """0..1: the less sure axis's confidence."""
        return min(self.x_axis.confidence, self.y_axis.confidence)


def _pixels(image: np.ndarray) -> np.ndarray:
    """uint8 (H, W, 3) RGB of any grey, RGB or RGBA image (alpha over white)."""
    image = np.asarray(image)
    if image.ndim == 2:
        image = np.repeat(image[..., None], 3, axis=2)
    if image.ndim != 3 or image.shape[2] not in (3, 4):
        raise Unreadable(f"not an image: array of shape {image.shape}")
    if image.shape[2] == 4:
        alpha = image[..., 3:].astype(np.float32) / 255.0
        image = image[..., :3] * alpha + 255.0 * (1.0 - alpha)
    if min(image.shape[:2]) < MIN_SIDE_PX:
        raise Unreadable(f"too small: {image.shape[1]}x{image.shape[0]} px")
    return np.ascontiguousarray(image[..., :3], dtype=np.uint8)


def locate(image: np.ndarray) -> tuple[np.ndarray, Frame]:
    """The image as RGB and its frame; Unreadable when no plot area is framed."""
    pixels = _pixels(image)
    frame = find_frame(pixels)
    if frame is None:
        raise Unreadable("no axis: no axis line, grid or panel frames a plot area")
    if not frame.x_words or not frame.y_words:
        missing = " and ".join(n for n, w in (("x", frame.x_words), ("y", frame.y_words)) if not w)
        raise Unreadable(f"no tick labels found on the {missing} axis")
    return pixels, frame


def finish(pixels: np.ndarray, frame: Frame, ticks) -> Digitized:
    """The chart read from its frame and its tick labels as read (calibrate.read_ticks)."""
    x_axis, y_axis = fit_axis("x", ticks[0]), fit_axis("y", ticks[1])
    for name, axis, found in (("x", x_axis, ticks[0]), ("y", y_axis, ticks[1])):
        if axis is None:
            read = ", ".join(repr(t.text) for t in found) or "nothing"
            raise Unreadable(f"unreadable {name} tick labels: read {read}, no two agree")
    x_axis, y_axis = x_axis.times(ticks[2][0]), y_axis.times(ticks[2][1])
    traces, filled, legend = trace_series(pixels, frame)
    if not traces:
        shapes = " (it holds filled shapes: bars or areas)" if filled else ""
        raise Unreadable(f"no series: nothing inside the plot area is a line{shapes}")
    return Digitized(frame.box, x_axis, y_axis, _mapped(traces, x_axis, y_axis), traces, legend)


def _mapped(traces: list[Trace], x_axis: Axis, y_axis: Axis) -> list[Series]:
    """Each traced path in data units."""
    return [
        Series(t.colour, t.dashed, x_axis.value(t.columns), y_axis.value(t.rows)) for t in traces
    ]


def _name(text: str) -> str:
    """A legend entry's text as a name: its words, single-spaced, but for the ones that hold no
    letter or digit (a frame's edge or a curve behind the legend, read as | or \\)."""
    return " ".join(word for word in text.split() if any(c.isalnum() for c in word))


def _named(charts: list[tuple[np.ndarray, Digitized | Unreadable]]) -> list[Digitized | Unreadable]:
    """Each chart read (given with its pixels), its series named by the text of the legend entry
    each is drawn like, every legend's texts read in one batch of Tesseract calls. A name read
    empty, as a bare integer, or twice in one chart names nothing, and where Tesseract fails
    nothing is named: the series keeps its index."""
    legends = [(p, c) for p, c in charts if isinstance(c, Digitized) and c.legend]
    try:
        texts = iter(
            read_labels(
                [(pixels, [Label("", e.text) for e in chart.legend]) for pixels, chart in legends],
                LEGEND_CONFIG,
                separator=" ",
            )
        )
    except (OSError, RuntimeError):
        return [chart for _, chart in charts]
    named = []
    for _, chart in charts:
        if not isinstance(chart, Digitized) or not chart.legend:
            named.append(chart)
            continue
        words = next(texts)
        names = [_name(words[t.entry]) if t.entry is not None else "" for t in chart.traces]
        kept = [
            n if n and not INTEGER.fullmatch(n) and names.count(n) == 1 else None for n in names
        ]
        series = [replace(s, name=n) for s, n in zip(chart.series, kept, strict=True)]
        named.append(replace(chart, series=series))
    return named


def digitize_many(
    images: list[np.ndarray], inputs: list[np.ndarray | None] | None = None
) -> list[Digitized | Unreadable]:
    """Each image digitized, or the Unreadable saying why not (_read_pairs). An image drawn
    larger than the charts digitize's rules were decided on (scale.reading_factor: a 300 dpi
    figure) is read shrunk, the input it was restored from shrunk to its size, and what is read
    of it is scaled back to its own pixels."""
    inputs = inputs or [None] * len(images)
    sizes = [_shrunk_size(image) for image in images]
    if not any(sizes):
        return _read_pairs(images, inputs)
    made: dict[tuple[int, tuple[int, int]], np.ndarray] = {}  # one array shrunk once: one object

    def at(array: np.ndarray | None, size: tuple[int, int] | None) -> np.ndarray | None:
        if array is None or size is None:
            return array
        key = (id(array), size)
        if key not in made:  # an input that is also an image is shrunk once
            try:
                made[key] = shrunk(_pixels(array), size)
            except Unreadable:  # an input that is no image: left as it is, not used (_aligned)
                return array
        return made[key]

    read = _read_pairs(
        [at(image, size) for image, size in zip(images, sizes, strict=True)],
        [at(given, size) for given, size in zip(inputs, sizes, strict=True)],
    )
    return [
        _enlarged(r, np.shape(image), size) if size and isinstance(r, Digitized) else r
        for r, image, size in zip(read, images, sizes, strict=True)
    ]


def _shrunk_size(image: np.ndarray) -> tuple[int, int] | None:
    """(height, width) an image is read at, where it is read shrunk; else None."""
    try:
        pixels = _pixels(image)
    except Unreadable:
        return None
    factor = reading_factor(pixels)
    return size_for(pixels, factor) if factor > 1.0 else None


def _enlarged(chart: Digitized, shape: tuple[int, ...], size: tuple[int, int]) -> Digitized:
    """A chart read from its image shrunk to `size` (height, width), its pixel positions (box,
    axes, paths, legend) scaled back to the image's `shape`."""
    across, down = shape[1] / size[1], shape[0] / size[0]

    def box(b: tuple[float, ...]) -> tuple[float, float, float, float]:
        return (b[0] * across, b[1] * down, b[2] * across, b[3] * down)

    def axis(a: Axis, along: float) -> Axis:
        ticks = [
            [replace(t, position=t.position * along, box=box(t.box)) for t in group]
            for group in (a.used, a.rejected)
        ]
        offset, slope, residual = a.offset * along, a.slope * along, a.residual * along
        return replace(
            a, offset=offset, slope=slope, residual=residual, used=ticks[0], rejected=ticks[1]
        )

    traces = [
        replace(
            t, columns=t.columns * across, rows=t.rows * down, linewidth_px=t.linewidth_px * down
        )
        for t in chart.traces
    ]
    legend = [replace(e, sample=box(e.sample), text=box(e.text)) for e in chart.legend]
    x_axis, y_axis = axis(chart.x_axis, across), axis(chart.y_axis, down)
    return replace(
        chart, box=box(chart.box), x_axis=x_axis, y_axis=y_axis, traces=traces, legend=legend
    )


def _read_pairs(
    images: list[np.ndarray], inputs: list[np.ndarray | None]
) -> list[Digitized | Unreadable]:
    """Each image digitized, or the Unreadable saying why not; all tick labels in one batch of
    Tesseract calls (and one more for inputs read alone). `inputs`: for each image restored, the
    blurred chart it was restored from (as the model got it: straightened), whose labels are
    read too (calibrate.read_ticks). Each input is also read alone. A restoration whose labels
    cannot be fitted has its lines mapped through its input's axes (axes_from "input"), and one
    whose lines cannot be followed either is replaced by its input's reading (read_from
    "input"): restoring never leaves unreadable a chart its input was not. A restoration can
    redraw every label wrong and alike (400 ... 700 as 40 ... 70), which fits as surely as the
    truth; where the input's axes are surer, they map the restoration's series (axes_from
    "input": either axis the input's). Of two readings of an axis a power of ten apart, the one
    that shows the decimal points the other lost (_points_lost: 0.6 drawn as 6) is kept, however
    sure the other."""
    results = _read(images, inputs)
    # an input among the images (evaluate reads both) was read alone there already
    read_alone = zip(images, inputs, results, strict=True)
    alone = {id(image): r for image, given, r in read_alone if given is None}
    unread = {id(i): i for i in inputs if i is not None and id(i) not in alone}
    if unread:
        read = _read(list(unread.values()), [None] * len(unread))
        alone |= dict(zip(unread, read, strict=True))
    for index, given in enumerate(inputs):
        if given is None:
            continue
        chart, own = results[index], alone[id(given)]
        if isinstance(own, Unreadable):
            continue
        if isinstance(chart, Unreadable):
            traced = _traced_on(images[index], own) if _same_size(images[index], given) else None
            results[index] = traced or replace(own, read_from="input", axes_from="input")
        elif _same_size(images[index], given):
            x_axis, y_axis = chart.x_axis, chart.y_axis
            if own.confidence > chart.confidence and (
                _differ(x_axis, own.x_axis) or _differ(y_axis, own.y_axis)
            ):
                x_axis, y_axis = own.x_axis, own.y_axis
            # of two readings a power of ten apart, the one that shows the points the other lost
            x_axis = next(
                (a for a in (chart.x_axis, own.x_axis) if _points_lost(x_axis, a)), x_axis
            )
            y_axis = next(
                (a for a in (chart.y_axis, own.y_axis) if _points_lost(y_axis, a)), y_axis
            )
            if x_axis is not chart.x_axis or y_axis is not chart.y_axis:
                results[index] = _with_axes(chart, x_axis, y_axis)
    return results


def _differ(axis: Axis, other: Axis) -> bool:
    """Whether two readings of one axis map its ticks' pixels to values more than SAME_AXIS of
    its span apart (in decades on a log axis), or differ in scale."""
    if axis.scale != other.scale:
        return True
    pixels = np.array([t.position for t in axis.used + other.used])
    values, others = axis.value(pixels), other.value(pixels)
    if axis.scale == "log":
        values, others = np.log10(values), np.log10(others)
    span = np.ptp(values)
    return bool(np.max(np.abs(values - others)) > SAME_AXIS * span)


def _points_lost(axis: Axis, other: Axis) -> bool:
    """Whether `axis` reads `other`'s labels a power of ten apart (LOST_POWERS), in the same
    multiplier, with fewer of them pointed: a restoration that drew 0.6 as 6, or an input whose
    points the blur took. A point is a speck that blur and restoring lose and neither adds, so
    the reading that shows more is the one to keep, however sure the other's fit. (Digits are
    no such evidence: motion blur's ghost of 400 reads as 4000.)"""
    if {axis.scale, other.scale} != {"linear"} or axis.multiplier != other.multiplier:
        return False
    scaled = any(
        not _differ(axis.times(10.0**power), other)
        for magnitude in LOST_POWERS
        for power in (magnitude, -magnitude)
    )
    return scaled and _pointed(other) > _pointed(axis)


def _pointed(axis: Axis) -> float:
    """The share of its fit's labels read with a decimal point."""
    return float(np.mean([t.pointed for t in axis.used]))


def _same_size(image: np.ndarray, other: np.ndarray) -> bool:
    """Whether two images are one size (a restoration and the input it was restored from)."""
    return np.shape(image)[:2] == np.shape(other)[:2]


def _traced_on(image: np.ndarray, read: Digitized) -> Digitized | None:
    """The image's lines mapped through another reading's axes (its input's, which it matches
    pixel for pixel), where its frame and lines can be read though its labels cannot; None where
    they cannot either. A restoration's lines are sharper than its input's even where its labels
    came out illegible."""
    try:
        pixels, frame = locate(image)
        traces, _, legend = trace_series(pixels, frame)
    except (Unreadable, *ODD_INPUT):
        return None
    if not traces:
        return None
    series = _mapped(traces, read.x_axis, read.y_axis)
    chart = Digitized(frame.box, read.x_axis, read.y_axis, series, traces, legend, "image", "input")
    (named,) = _named([(pixels, chart)])
    return named


def _with_axes(chart: Digitized, x_axis: Axis, y_axis: Axis) -> Digitized:
    """The chart's series mapped through other axes (read from the input it was restored
    from, which it matches pixel for pixel)."""
    series = [
        replace(s, x=x_axis.value(t.columns), y=y_axis.value(t.rows))
        for s, t in zip(chart.series, chart.traces, strict=True)
    ]
    return replace(chart, x_axis=x_axis, y_axis=y_axis, series=series, axes_from="input")


def _read(
    images: list[np.ndarray], inputs: list[np.ndarray | None]
) -> list[Digitized | Unreadable]:
    """digitize_many without reading the inputs alone."""
    located: list[tuple[np.ndarray, Frame] | Unreadable] = []
    for image in images:
        try:
            located.append(locate(image))
        except Unreadable as why:
            located.append(why)
        except ODD_INPUT as error:  # an image no chart drawer makes: a reason, not a traceback
            located.append(Unreadable(f"no chart found: {type(error).__name__}: {error}"))
    framed = [item for item in located if not isinstance(item, Unreadable)]
    given = [
        _aligned(given, item[0])
        for item, given in zip(located, inputs, strict=True)
        if not isinstance(item, Unreadable)
    ]
    why_not = missing() if framed else None
    if why_not is None:
        try:
            ticks = iter(read_ticks(framed, given))
        except (OSError, RuntimeError) as error:  # Tesseract failed: no label read
            why_not = "Tesseract failed: " + " ".join(str(error).split())[:200]
    if why_not is not None:
        return [i if isinstance(i, Unreadable) else Unreadable(why_not) for i in located]
    results: list[Digitized | Unreadable] = []
    for item in located:
        if isinstance(item, Unreadable):
            results.append(item)
            continue
        try:
            results.append(finish(*item, next(ticks)))
        except Unreadable as why:
            results.append(why)
        except ODD_INPUT as error:
            results.append(Unreadable(f"no chart read: {type(error).__name__}: {error}"))
    return _named(
        [
            (item[0] if isinstance(item, tuple) else None, r)
            for item, r in zip(located, results, strict=True)
        ]
    )


def _aligned(given: np.ndarray | None, pixels: np.ndarray) -> np.ndarray | None:
    """The input as RGB where it is the restored chart's size (its words' boxes fit it), else
    None."""
    if given is None:
        return None
    try:
        given = _pixels(given)
    except Unreadable:
        return None
    return given if given.shape == pixels.shape else None


def digitize(pixels: np.ndarray, restored_from: np.ndarray | None = None) -> Digitized:
    """One chart digitized from its pixels (uint8 RGB, RGBA or grey), restored from
    `restored_from` if given (digitize_many); raises Unreadable."""
    (result,) = digitize_many([pixels], [restored_from])
    if isinstance(result, Unreadable):
        raise result
    return result
