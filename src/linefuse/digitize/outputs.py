"""What digitizing writes for each chart: a CSV of its series in data units (series, x, y), a
JSON of the axes it found (box, scale, direction, mapping, ticks used and rejected, confidence),
and a PNG of what it read drawn over the chart, for a person to check at a glance; and the
folder-level run that writes them for many images with a progress bar, one line per unreadable
file.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, UnidentifiedImageError
from tqdm import tqdm

from linefuse.data.images import image_files, load_rgb
from linefuse.digitize.calibrate import Axis, Tick
from linefuse.digitize.chart import Digitized, Unreadable, digitize_many

BATCH = 16  # images whose tick labels share one Tesseract call
BOX_COLOUR = (255, 0, 255)
USED_COLOUR = (0, 170, 0)
REJECTED_COLOUR = (230, 0, 0)
SCALE = 3  # the overlay is drawn this many times larger than the chart, to be legible


def csv_text(digitized: Digitized) -> str:
    """One row per point: the series' name from the legend, or where it has none its index (in
    the order read), x and y in data units."""
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(["series", "x", "y"])
    for index, series in enumerate(digitized.series):
        for x, y in zip(series.x, series.y, strict=True):
            writer.writerow([series.name or index, f"{x:.6g}", f"{y:.6g}"])
    return table.getvalue()


def _tick(tick: Tick) -> dict:
    value = None if not np.isfinite(tick.value) else tick.value
    return {"text": tick.text, "value": value, "pixel": tick.position, "box": list(tick.box)}


def _axis(axis: Axis) -> dict:
    return {
        "scale": axis.scale,
        "direction": axis.direction,
        "mapping": {
            "pixel": "offset + slope * " + ("log10(value)" if axis.scale == "log" else "value"),
            "offset": axis.offset,
            "slope": axis.slope,
        },
        "ticks_used": [_tick(t) for t in axis.used],
        "ticks_rejected": [_tick(t) for t in axis.rejected],
        "residual_px": axis.residual,
        "confidence": axis.confidence,
    }


def axes_json(digitized: Digitized) -> dict:
    """The axes found, in continuous image pixels (pixel (r, c) covers [c, c + 1) x [r, r + 1))."""
    return {
        "plot_box": list(digitized.box),
        "x": _axis(digitized.x_axis),
        "y": _axis(digitized.y_axis),
        "confidence": digitized.confidence,
        "read_from": digitized.read_from,
        "axes_from": digitized.axes_from,
        "series": [
            {
                "index": i,
                "name": s.name,
                "colour": list(s.colour),
                "dashed": s.dashed,
                "points": len(s.x),
            }
            for i, s in enumerate(digitized.series)
        ],
    }


def overlay(image: np.ndarray, digitized: Digitized) -> Image.Image:
    """The chart enlarged SCALE times, faded, with the box, the ticks used (green) and rejected
    (red) and each series as read, in its own colour outlined in black."""
    faded = (np.asarray(image[..., :3], dtype=np.float32) * 0.35 + 255 * 0.65).astype(np.uint8)
    picture = Image.fromarray(faded).resize(
        (image.shape[1] * SCALE, image.shape[0] * SCALE), Image.Resampling.NEAREST
    )
    draw = ImageDraw.Draw(picture)
    draw.rectangle([v * SCALE for v in digitized.box], outline=BOX_COLOUR, width=2)
    for axis in (digitized.x_axis, digitized.y_axis):
        for ticks, colour in ((axis.used, USED_COLOUR), (axis.rejected, REJECTED_COLOUR)):
            for tick in ticks:
                draw.rectangle([v * SCALE for v in tick.box], outline=colour, width=2)
    for trace in digitized.traces:
        points = [(c * SCALE, r * SCALE) for c, r in zip(trace.columns, trace.rows, strict=True)]
        colour = tuple(int(v) for v in trace.colour)
        # a gap in the path stays a gap: more than two of its steps (a column, or the columns a
        # chart read shrunk stands for: scale.py)
        step = float(np.median(np.diff(trace.columns))) if len(trace.columns) > 1 else 1.0
        for start, end in zip(points[:-1], points[1:], strict=True):
            if end[0] - start[0] <= 2 * step * SCALE:
                draw.line([start, end], fill=(0, 0, 0), width=5)
                draw.line([start, end], fill=colour, width=3)
    return picture


def write_outputs(
    image: np.ndarray, digitized: Digitized, out_dir: Path, stem: str, restored: bool = False
) -> None:
    """stem.csv, stem.json and stem.overlay.png in out_dir; stem.restored.png too when `image`
    was restored (what was digitized)."""
    if restored:
        Image.fromarray(image).save(out_dir / f"{stem}.restored.png")
    (out_dir / f"{stem}.csv").write_text(csv_text(digitized))
    (out_dir / f"{stem}.json").write_text(json.dumps(axes_json(digitized), indent=1) + "\n")
    overlay(image, digitized).save(out_dir / f"{stem}.overlay.png")


def _opened(batch: list[tuple[Path, Path]], restore: Callable | None) -> tuple[list, list]:
    """(each file of `batch` opened, restored where `restore` is given, or the Unreadable saying
    why it cannot be opened; for each opened one the input it was restored from, or None)."""
    images, given = [], []
    for path, _ in batch:
        try:
            image = load_rgb(path)
        except UnidentifiedImageError:
            image = Unreadable("not an image: send a PNG, JPEG, TIFF or WebP file")
        except (OSError, ValueError, SyntaxError) as error:
            image = Unreadable(f"cannot open the image: {error or type(error).__name__}")
        if isinstance(image, Unreadable):
            images.append(image)
            continue
        restored_from, image = restore(image) if restore is not None else (None, image)
        images.append(image)
        given.append(restored_from)
    return images, given


def digitize_files(
    inputs: list[Path | str], out_dir: Path | str, restore: Callable | None = None
) -> dict:
    """Digitize every image named (and every image under the folders named) into out_dir,
    keeping relative names: NAME.csv, NAME.json and NAME.overlay.png, and NAME.restored.png when
    `restore` restores each first (uint8 RGB to the input as the model got it, straightened, and
    the restoration: both are read). A file that cannot be opened or read
    gets one printed line naming why. Returns the counts and each unreadable file's reason."""
    out_dir = Path(out_dir)
    files, missing = image_files([str(path) for path in inputs])
    unreadable = dict(missing)
    for name, why in missing:
        tqdm.write(f"{name}: unreadable: {why}", file=sys.stderr)
    batches = [files[first : first + BATCH] for first in range(0, len(files), BATCH)]
    # the next batch is opened and restored in a thread while this one is read: ONNX Runtime
    # and numpy let go of the GIL, so restoring takes the core reading leaves (one image at a
    # time, in order, as without the thread: the same restorations)
    with (
        ThreadPoolExecutor(1) as opener,
        tqdm(total=len(files), unit="chart", desc="digitize", disable=None) as bar,
    ):
        opening = opener.submit(_opened, batches[0], restore) if batches else None
        for index, batch in enumerate(batches):
            images, given = opening.result()
            if index + 1 < len(batches):
                opening = opener.submit(_opened, batches[index + 1], restore)
            read = iter(digitize_many([i for i in images if not isinstance(i, Unreadable)], given))
            for (path, relative), image in zip(batch, images, strict=True):
                result = image if isinstance(image, Unreadable) else next(read)
                if isinstance(result, Unreadable):
                    unreadable[str(path)] = str(result)
                    tqdm.write(f"{path}: unreadable: {result}", file=sys.stderr)
                else:
                    target = out_dir / relative.with_suffix("")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    write_outputs(image, result, target.parent, target.name, restore is not None)
                bar.update(1)
    return {
        "charts": len(files) + len(missing),
        "digitized": len(files) - len(unreadable) + len(missing),
        "unreadable": unreadable,
    }
