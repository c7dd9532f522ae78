"""Tick-label legibility: Tesseract's character error rate on the labels a chart's sidecar names.

A restorer can sharpen a line and still turn "450" into glyphs nobody can read. Each generated
chart's sidecar records every tick label's text and pixel box (for matplotlib's charts,
data/charts/matplotlib_drawer.tick_labels), so each label is cut out, enlarged (6-9 pt at 72-100
dpi is a few pixels tall, below what Tesseract reads) and darkened, and the labels of one or more
images are read by one Tesseract call: each image's labels are stacked into a page, one a
line, and the pages go to Tesseract as one document (a list of images). Starting Tesseract costs
more than reading a chart's labels; a page of the lines of many images read each label as its
neighbours on the page let it (its reading changed with the batch), and a page of one label
alone reads many labels worse than a page of its image's labels. The character error rate is the
edit distance of what was read to what was drawn, summed over the labels, over the characters
drawn.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageOps

from linefuse.data.labels import ALPHABET, normalise

LINE_PX = 80  # each label's crop is enlarged (LANCZOS) to this height
MARGIN_PX = 2  # image pixels kept around a label's box: its anti-aliasing and the blur's spread
GAP_PX = 24  # white rows between the lines of a page, and around it
# Each label is read twice, its ink darkened by each gamma (thin serif digits need the stronger),
# and the reading Tesseract is surer of counts.
GAMMAS = (2.5, 5.0)
MAX_LINES = 240  # per page, so a page stays within Tesseract's image size
# Tesseract reads nothing else; a superscript it reads as digits on the line (10^2 as 102), never
# as a caret, which only the label reader writes
CONFIG = f"--psm 6 -c tessedit_char_whitelist={ALPHABET.replace('^', '')}"
INSTALL_HINT = (
    "make tesseract (apt-get install tesseract-ocr), brew install tesseract, "
    "or conda install -c conda-forge tesseract"
)


@dataclass(frozen=True)
class Label:
    """One tick label: its text as drawn and its box in image pixels (left, top, right, bottom)."""

    text: str
    box: tuple[float, float, float, float]


def _pytesseract():
    """pytesseract, imported without pandas where pandas is not loaded yet: pytesseract imports
    pandas, if installed, for an output type LineFuse does not ask for, and pandas would cost a
    fresh `linefuse digitize` a good share of its start-up (docs/benchmarks.md, "digitize")."""
    if (loaded := sys.modules.get("pytesseract")) is not None:
        return loaded
    hidden = "pandas" not in sys.modules
    if hidden:
        sys.modules["pandas"] = None  # `import pandas` raises ModuleNotFoundError
    try:
        import pytesseract
    finally:
        if hidden:
            del sys.modules["pandas"]
    return pytesseract


def missing() -> str | None:
    """Why labels cannot be read here, in one line naming the fix; None when they can."""
    try:
        pytesseract = _pytesseract()
    except ImportError:
        return "pytesseract is not installed (pip install pytesseract)"
    if shutil.which(pytesseract.pytesseract.tesseract_cmd) is None:
        return f"tesseract is not on PATH: install it with {INSTALL_HINT}"
    return None


def edit_distance(read: str, truth: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions, each 1."""
    previous = list(range(len(truth) + 1))
    for i, a in enumerate(read, 1):
        current = [i]
        for j, b in enumerate(truth, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b)))
        previous = current
    return previous[-1]


def label_lines(
    gray: Image.Image, box: tuple[float, ...], gammas: tuple[float, ...] = GAMMAS
) -> list[Image.Image]:
    """One label cut out with MARGIN_PX around it, stretched to black on white, enlarged to
    LINE_PX and darkened by each of `gammas`."""
    left, top, right, bottom = box
    area = (
        max(int(np.floor(left)) - MARGIN_PX, 0),
        max(int(np.floor(top)) - MARGIN_PX, 0),
        min(int(np.ceil(right)) + MARGIN_PX, gray.width),
        min(int(np.ceil(bottom)) + MARGIN_PX, gray.height),
    )
    crop = ImageOps.autocontrast(gray.crop(area))
    scale = LINE_PX / max(crop.height, 1)
    size = (max(round(crop.width * scale), 1), LINE_PX)
    crop = ImageOps.autocontrast(crop.resize(size, Image.Resampling.LANCZOS))
    return [crop.point([round(255 * (v / 255) ** gamma) for v in range(256)]) for gamma in gammas]


@contextmanager
def _one_thread() -> Iterator[None]:
    """Tesseract on one OpenMP thread (unless the user chose): on short lines its threads only
    wait on each other, and evaluate already runs one scorer per core."""
    chosen = os.environ.get("OMP_THREAD_LIMIT")
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    try:
        yield
    finally:
        if chosen is None:
            os.environ.pop("OMP_THREAD_LIMIT", None)


def read_pages(
    pages: list[list[Image.Image]], config: str = CONFIG, separator: str = ""
) -> list[list[tuple[str, float]]]:
    """Each page's lines' texts and Tesseract's confidence in each (its least sure word; -1
    when nothing was read), all pages in one call, each read apart as a page of a document: the
    lines stacked, each word going to the line whose rows hold its centre, a line's words
    joined by `separator` (none for a number, which Tesseract may split). A page of more than
    MAX_LINES lines is read as several."""
    parts = [
        (number, lines[first : first + MAX_LINES])
        for number, lines in enumerate(pages)
        for first in range(0, len(lines), MAX_LINES)
    ]
    if not parts:
        return [[] for _ in pages]
    pytesseract = _pytesseract()
    # The pages go to Tesseract as uncompressed BMPs, not as the PNGs pytesseract writes for an
    # image: compressing a tall page costs a good share of Tesseract's reading of it, which is
    # as fast from either file and reads the same words (docs/benchmarks.md, "digitize").
    with _one_thread(), tempfile.TemporaryDirectory(prefix="linefuse-ocr-") as folder:
        paths = [os.path.join(folder, f"{index:06d}.bmp") for index in range(len(parts))]
        for path, (_, lines) in zip(paths, parts, strict=True):
            _stacked(lines).save(path)
        listing = os.path.join(folder, "pages.txt")
        with open(listing, "w") as file:
            file.write("\n".join(paths) + "\n")
        data = pytesseract.image_to_data(
            listing, config=config, output_type=pytesseract.Output.DICT
        )
    words: list[list[list[tuple[int, str, float]]]] = [[[] for _ in lines] for _, lines in parts]
    for text, page, left, top, height, conf in zip(
        data["text"],
        data["page_num"],
        data["left"],
        data["top"],
        data["height"],
        data["conf"],
        strict=True,
    ):
        row = int((top + height / 2 - GAP_PX / 2) // (LINE_PX + GAP_PX))
        if text.strip() and 0 <= row < len(words[page - 1]):
            words[page - 1][row].append((left, text.strip(), float(conf)))
    read: list[list[tuple[str, float]]] = [[] for _ in pages]
    for (number, _), lines in zip(parts, words, strict=True):
        read[number] += [
            (
                separator.join(text for _, text, _ in sorted(found)),
                min((c for *_, c in found), default=-1.0),
            )
            for found in lines
        ]
    return read


def _stacked(lines: list[Image.Image]) -> Image.Image:
    """The lines (each LINE_PX tall) one under another on a white page, GAP_PX apart."""
    width = max(line.width for line in lines) + 2 * GAP_PX
    page = Image.new("L", (width, len(lines) * (LINE_PX + GAP_PX) + GAP_PX), 255)
    for row, line in enumerate(lines):
        page.paste(line, (GAP_PX, GAP_PX + row * (LINE_PX + GAP_PX)))
    return page


def read_labels(
    items: list[tuple[np.ndarray, list[Label]]], config: str = CONFIG, separator: str = ""
) -> list[list[str]]:
    """What Tesseract reads in each label's box of each image (uint8 H x W x 3, each at the size
    its labels' boxes were drawn at), for each (image, labels) item, in one call, each image's
    labels a page; `config` and `separator` as read_pages' (tick labels by default)."""
    pages = []
    for image, labels in items:
        gray = Image.fromarray(image).convert("L")
        pages.append([line for label in labels for line in label_lines(gray, label.box)])
    read = [reading for page in read_pages(pages, config, separator) for reading in page]
    variants = len(GAMMAS)
    best = [
        max(read[first : first + variants], key=lambda reading: reading[1])[0]
        for first in range(0, len(read), variants)
    ]
    found, first = [], 0
    for _, labels in items:
        found.append(best[first : first + len(labels)])
        first += len(labels)
    return found


def label_errors(items: list[tuple[np.ndarray, list[Label]]]) -> list[tuple[int, int]]:
    """For each (image, labels) item, (edits, characters): the summed edit distance of what was
    read in each label to its text, and the characters drawn. Their ratio over many images is the
    pooled character error rate."""
    errors = []
    for (_, labels), read in zip(items, read_labels(items), strict=True):
        truths = [normalise(label.text) for label in labels]
        edits = sum(edit_distance(normalise(r), t) for r, t in zip(read, truths, strict=True))
        errors.append((edits, sum(len(truth) for truth in truths)))
    return errors
