"""What digitizing writes for each chart: a CSV of its series in data units (series, x, y), a
JSON of the axes it found (box, scale, mapping, ticks used and rejected, confidence), and a PNG
of what it read drawn over the chart, for a person to check at a glance; and the folder-level
run that writes them for many images with a progress bar, one line per unreadable file.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw
from tqdm import tqdm

from linefuse.digitize import Digitized, Unreadable, digitize_many
from linefuse.digitize.calibrate import Axis, Tick

BATCH = 16  # images whose tick labels share one Tesseract call
SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")
BOX_COLOUR = (255, 0, 255)
USED_COLOUR = (0, 170, 0)
REJECTED_COLOUR = (230, 0, 0)
SCALE = 3  # the overlay is drawn this many times larger than the chart, to be legible


def write_csv(digitized: Digitized, path: Path) -> None:
    """One row per point: the series' index (in the order read), x and y in data units."""
    with path.open("w", newline="") as table:
        writer = csv.writer(table)
        writer.writerow(["series", "x", "y"])
        for index, series in enumerate(digitized.series):
            for x, y in zip(series.x, series.y, strict=True):
                writer.writerow([index, f"{x:.6g}", f"{y:.6g}"])


def _tick(tick: Tick) -> dict:
    value = None if not np.isfinite(tick.value) else tick.value
    return {"text": tick.text, "value": value, "pixel": tick.position, "box": list(tick.box)}


def _axis(axis: Axis) -> dict:
    return {
        "scale": axis.scale,
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
        "series": [
            {"index": i, "colour": list(s.colour), "dashed": s.dashed, "points": len(s.x)}
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
        for start, end in zip(points[:-1], points[1:], strict=True):
            if end[0] - start[0] <= 2 * SCALE:  # a gap in the path stays a gap
                draw.line([start, end], fill=(0, 0, 0), width=5)
                draw.line([start, end], fill=colour, width=3)
    return picture


def write_outputs(image: np.ndarray, digitized: Digitized, out_dir: Path, stem: str) -> None:
    """stem.csv, stem.json and stem.overlay.png in out_dir."""
    write_csv(digitized, out_dir / f"{stem}.csv")
    (out_dir / f"{stem}.json").write_text(json.dumps(axes_json(digitized), indent=1) + "\n")
    overlay(image, digitized).save(out_dir / f"{stem}.overlay.png")


def _inputs(inputs: list[Path]) -> list[Path]:
    """The image files named, and those in the folders named (sorted)."""
    files = []
    for path in map(Path, inputs):
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.suffix.lower() in SUFFIXES)
        else:
            files.append(path)
    return files


def _load(path: Path) -> np.ndarray | Unreadable:
    try:
        with Image.open(path) as image:
            return np.asarray(image.convert("RGB"))
    except (OSError, ValueError) as error:
        return Unreadable(f"cannot open the image: {error}")


def digitize_files(inputs: list[Path | str], out_dir: Path | str) -> dict:
    """Digitize every image named (and every image in the folders named) into out_dir: three
    files per chart; an unreadable one gets one printed line naming why. Returns the counts and
    each unreadable file's reason."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = _inputs(inputs)
    unreadable: dict[str, str] = {}
    with tqdm(total=len(files), unit="chart", desc="digitize", disable=len(files) < 2) as bar:
        for first in range(0, len(files), BATCH):
            batch = files[first : first + BATCH]
            loaded = [_load(path) for path in batch]
            images = [item for item in loaded if not isinstance(item, Unreadable)]
            results = iter(digitize_many(images))
            for path, item in zip(batch, loaded, strict=True):
                result = item if isinstance(item, Unreadable) else next(results)
                if isinstance(result, Unreadable):
                    unreadable[str(path)] = str(result)
                    tqdm.write(f"{path}: unreadable: {result}")
                else:
                    write_outputs(item, result, out_dir, path.stem)
                bar.update(1)
    return {
        "charts": len(files),
        "digitized": len(files) - len(unreadable),
        "unreadable": unreadable,
    }
