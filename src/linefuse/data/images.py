"""Decoding any accepted image file to 8-bit RGB, the one layout the pipeline works in.

Conversions (documented in docs/pipeline.md): 16-bit and 32-bit greyscale are scaled to 8 bits;
transparency (RGBA, LA, palette with a transparent index) is composited over white, as a chart
would be printed; CMYK, YCbCr, palette and greyscale go through Pillow's RGB conversion.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
from PIL import Image

# The index enforces data.max_pixels from the header, before any decoding, with a reason naming
# the key; Pillow's own fixed limit would only duplicate that check with another threshold.
Image.MAX_IMAGE_PIXELS = None

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"})


def to_rgb(image: Image.Image) -> np.ndarray:
    """(H, W, 3) uint8 array from a decoded Pillow image of any supported mode."""
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        wide = np.asarray(image, dtype=np.float64)
        peak = 65535.0 if image.mode.startswith("I;16") or wide.max() > 255 else 255.0
        grey = np.clip(np.rint(wide * (255.0 / peak)), 0, 255).astype(np.uint8)
        return np.repeat(grey[:, :, None], 3, axis=2)
    if image.mode == "F":
        grey = np.clip(np.rint(np.asarray(image) * 255.0), 0, 255).astype(np.uint8)
        return np.repeat(grey[:, :, None], 3, axis=2)
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")
    if image.mode in ("RGBA", "LA", "PA", "RGBa"):
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, rgba)
    return np.asarray(image.convert("RGB"), dtype=np.uint8).copy()


def load_rgb(path: str | Path) -> np.ndarray:
    with open(path, "rb") as handle:
        data = handle.read()
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        return to_rgb(image)


def find_images(root: Path) -> list[Path]:
    """Files with an image suffix under root, sorted; directory symlinks are not followed."""
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        found.extend(
            Path(folder) / name for name in files if Path(name).suffix.lower() in IMAGE_SUFFIXES
        )
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def image_files(inputs: list[str]) -> tuple[list[tuple[Path, Path]], list[tuple[str, str]]]:
    """([(file, its name relative to the input it came from)], [(input, why it was skipped)]):
    a folder gives every image under it, a file itself."""
    files: list[tuple[Path, Path]] = []
    skipped: list[tuple[str, str]] = []
    for entry in map(Path, inputs):
        if entry.is_dir():
            files += [(path, path.relative_to(entry)) for path in find_images(entry)]
        elif entry.is_file():
            files.append((entry, Path(entry.name)))
        else:
            skipped.append((str(entry), "no such file or folder"))
    return files, skipped
