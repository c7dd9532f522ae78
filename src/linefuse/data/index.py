"""index: a folder of images -> `images.parquet` (kept) and `rejects.parquet` (with reasons).

Each image gets a content-hash id; its split is decided from that hash alone, so adding images
never moves old ones between splits. An image whose sidecar (`NAME.json`, as `generate` writes)
names a family or a plotting library in `data.charts.held_out` goes to the `held_out` split
instead: never trained on, scored apart. Bad files are rows in the rejects table, never a crash.
"""

from __future__ import annotations

import hashlib
import io
import json
import stat
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from PIL import Image, UnidentifiedImageError

from linefuse.data.images import find_images
from linefuse.params import SPLITS
from linefuse.params.data import DataParams, SplitRatios
from linefuse.stage import ordered_map

IMAGES_SCHEMA = {
    "id": pl.String,
    "path": pl.String,
    "width": pl.Int64,
    "height": pl.Int64,
    "channels": pl.Int64,
    "mode": pl.String,
    "bytes": pl.Int64,
    "split": pl.String,
    "prompt": pl.String,
    "family": pl.String,
    "library": pl.String,
}
REJECTS_SCHEMA = {"path": pl.String, "reason": pl.String, "detail": pl.String}


@dataclass(frozen=True)
class Probe:
    """What one file turned out to be: an image row, or a reject reason."""

    path: str
    id: str = ""
    width: int = 0
    height: int = 0
    channels: int = 0
    mode: str = ""
    bytes: int = 0
    prompt: str = ""
    family: str = ""
    library: str = ""
    reason: str = ""
    detail: str = ""


def content_id(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def split_for(image_id: str, ratios: SplitRatios) -> str:
    """train/val/test from the id's leading 48 bits, so the split never depends on the others."""
    position = int(image_id[:12], 16) / float(1 << 48)
    if position < ratios.train:
        return "train"
    if position < ratios.train + ratios.val:
        return "val"
    return "test"


def _drawn_by(sidecar: Path) -> tuple[str, str]:
    """(family, library) a chart's sidecar names; "" for each it does not or when it is not a
    JSON object (a user's folder may hold other .json files)."""
    try:
        found = json.loads(sidecar.read_bytes())
        named = (found.get("family", ""), found.get("library", ""))
    except (OSError, ValueError, AttributeError):
        return "", ""
    family, library = (name if isinstance(name, str) else "" for name in named)
    return family, library


def probe(task: tuple[Path, Path, int, int]) -> Probe:
    """Reads one file fully (hash, header, decode) and says whether it is usable."""
    path, root, min_side, max_pixels = task
    rel = path.relative_to(root).as_posix()
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO or device would block or never end
            return Probe(rel, reason="unreadable", detail="not a regular file")
        data = path.read_bytes()
    except OSError as error:
        return Probe(rel, reason="unreadable", detail=error.strerror or str(error))
    if not data:
        return Probe(rel, reason="empty", detail="zero-byte file")
    try:
        image = Image.open(io.BytesIO(data))
        width, height = image.size
        if width * height > max_pixels:
            return Probe(
                rel,
                reason="oversized",
                detail=f"{width}x{height} exceeds data.max_pixels={max_pixels}",
            )
        if min(width, height) < min_side:
            return Probe(
                rel,
                reason="too_small",
                detail=f"{width}x{height} is below data.min_side={min_side}",
            )
        image.load()
    except UnidentifiedImageError:
        return Probe(rel, reason="not_an_image", detail="no image format recognised")
    except (OSError, SyntaxError, ValueError, EOFError) as error:
        message = str(error) or type(error).__name__
        truncated = "truncat" in message.lower() or isinstance(error, EOFError)
        return Probe(rel, reason="truncated" if truncated else "corrupt", detail=message)
    sidecar = path.with_suffix(".txt")
    prompt = sidecar.read_text(errors="replace").strip() if sidecar.is_file() else ""
    family, library = _drawn_by(path.with_suffix(".json"))
    return Probe(
        rel,
        id=content_id(data),
        width=width,
        height=height,
        channels=len(image.getbands()),
        mode=image.mode,
        bytes=len(data),
        prompt=prompt,
        family=family,
        library=library,
    )


def build_index(params: DataParams, workers: int = 1) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(images, rejects) for every image file under `params.source_dir`."""
    root = Path(params.source_dir)
    paths = find_images(root)
    tasks = [(p, root, params.min_side, params.max_pixels) for p in paths]
    probes = list(ordered_map(probe, tasks, workers, desc="index", unit="file"))

    kept, rejects, first_path_of = [], [], {}
    for found in probes:
        if found.reason:
            rejects.append({"path": found.path, "reason": found.reason, "detail": found.detail})
        elif found.id in first_path_of:
            rejects.append(
                {
                    "path": found.path,
                    "reason": "duplicate",
                    "detail": f"same content as {first_path_of[found.id]}",
                }
            )
        else:
            first_path_of[found.id] = found.path
            kept.append(
                {
                    "id": found.id,
                    "path": found.path,
                    "width": found.width,
                    "height": found.height,
                    "channels": found.channels,
                    "mode": found.mode,
                    "bytes": found.bytes,
                    "split": "held_out"
                    if {found.family, found.library} & set(params.charts.held_out)
                    else split_for(found.id, params.split),
                    "prompt": found.prompt,
                    "family": found.family,
                    "library": found.library,
                }
            )
    return pl.DataFrame(kept, schema=IMAGES_SCHEMA), pl.DataFrame(rejects, schema=REJECTS_SCHEMA)


def index_metrics(images: pl.DataFrame, rejects: pl.DataFrame) -> dict:
    by_reason = Counter(rejects["reason"].to_list())
    by_split = Counter(images["split"].to_list())
    by_family = Counter(family for family in images["family"].to_list() if family)
    by_library = Counter(library for library in images["library"].to_list() if library)
    return {
        "kept": images.height,
        "rejected": rejects.height,
        "rejected_by_reason": dict(sorted(by_reason.items())),
        "split": {name: by_split.get(name, 0) for name in SPLITS},
        "family": dict(sorted(by_family.items())),
        "library": dict(sorted(by_library.items())),
    }
