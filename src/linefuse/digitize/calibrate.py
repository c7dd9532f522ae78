"""Each axis's pixel-to-data mapping, from its tick labels read by Tesseract.

A tick label is centred on its tick (x) or level with it (y), so its word's centre is the tick's
pixel position and its text the tick's value. The words of many charts are read in one Tesseract
call (digitize/ocr.py: a chart's enlarged words a page; starting Tesseract costs more than
reading a chart). A fit of pixel = a + b * value (linear) or a + b * log10(value) (logarithmic)
through every pair of ticks keeps the pair whose implied labels (evenly stepped from the pair's)
best match what was read at every word, even in part; ticks farther than OUTLIER_PX from it are
misreadings (a dropped minus, a 5 read as 6) and rejected, and the rest are fitted by least
squares. The scale whose fit keeps more ticks wins (_better). An axis runs either way: values
growing rightwards (x) or upwards (y), as axes are drawn, or the other way (IR and NMR spectra
draw x from 4000 down to 400); the reversed fit is kept where it keeps more ticks, or as many
confirmed by more words, a label read one digit off among them (_directed).
Labels are read in the forms plotting libraries write them: 1,000 (thousands separators), 1e+03
(ggplot), 10^3 and matplotlib's 10 with a superscript 3, which Tesseract reads as 103
(_power_readings).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np
from PIL import Image

from linefuse import paths
from linefuse.data.labels import normalise
from linefuse.digitize.axes import Frame, Word, distance
from linefuse.digitize.label_onnx import read_labels
from linefuse.digitize.ocr import edit_distance, label_lines, read_pages

OUTLIER_PX = 2.0  # a tick this far (or OUTLIER_SHARE of the axis's span) off the fit is misread
OUTLIER_SHARE = 0.02
REFIT_PX = 1.5  # a tick kept must lie this near the least-squares fit of the ticks kept
MIN_TICKS = 2  # a mapping needs two ticks; with three or more, the residual can reject one
SURE_TICKS = 3  # Tesseract's readings that agree, beyond which the label reader's must add
CLEARLY_MORE = 2  # ... this many more ticks to win, or as many with a residual under TIGHTER
TIGHTER = 0.5  # of Tesseract's fit's (which is over TIGHTER px)
MAX_DECIMALS = 4  # of a tick label
WHOLE_STEPS = 0.15  # of a spacing: how far from a whole number of spacings found labels may stand
DECADE_SLACK = 0.1  # of a decade: neighbouring labels of a log axis are whole decades apart
LOG_TICKS = 4  # ticks a log fit must keep to win on its residual alone
POWER_GUESS = 0.5  # what Tesseract's reading of a power counts beside the label reader's (_support)
LOG_GAIN = 0.5  # a log fit wins when its residual is below this share of the linear fit's
# an axis's whole readings get a dropped decimal point put back (_points_dropped) only where
# this many words are read with one: a point in one word alone is a speck a restoration drew
POINTED_WORDS = 2
REVERSED_TICKS = 3  # words that confirm a descending fit at least (_directed): ticks it keeps ...
NEAR_LENGTH = 3  # ... or words read with one digit off, in labels this long (_confirmed)
# a number as plotting libraries write one: thousands separated by commas (1,000; 12,500.5),
# not a decimal comma (1,5: left unread, as before); and 10^3 or 10 with superscript digits
THOUSANDS = re.compile(r"[-+]?\d{1,3}(,\d{3})+(\.\d*)?")
POWER = re.compile(r"10\^\{?([-+]?\d+)\}?")
SUPERSCRIPT = "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079\u207b\u207a"
SUPERSCRIPTS = str.maketrans(SUPERSCRIPT, "0123456789-+")
# matplotlib's 10 with a superscript exponent (10^-3 ... 10^9), read as one word: 103, 10-3
READ_POWER = re.compile(r"10(-?\d)")
# ggplot's 1e3 with its 1, a glyph a pixel or two wide in a small font, not read: e3, e+4
UNIT_LOST = re.compile(r"e([-+]?\d{1,3})")
EXPONENT = re.compile(r"-?\d{1,3}")  # an exponent read alone
# ggplot's and plotnine's log labels, 1e+03: a power of ten in scientific notation
ONE_E = re.compile(r"1(\.0*)?e[-+]?\d{1,3}", re.IGNORECASE)
# what Tesseract reads of 10^n when it misses the exponent: no value where a power is drawn
BASES = ("1", "10")
# matplotlib's offset text: 1e6, 1e-5; its 1, a glyph two pixels wide in a small font, is
# often not read (e6), and its e, three pixels high, is read as a 6 (166), a 0 (106) or not
# at all (16); the label reader writes it as 1e^6 or 10^6; but the offset text is always 1, e
# and the exponent
MULTIPLIER = re.compile(r"(?:1?[e6]\^?|10\^?|1)([-+]?\d{1,2})")
WRITTEN_OUT = re.compile(r"[e^]")  # an exponent's mark: what a misread leaves out
MAX_EXPONENT = 300  # a float's
# 2,500 as Tesseract and the label reader read it: 2.500 (_separators_read_as_points)
SEPARATED = re.compile(r"[-+]?[1-9]\d{0,2}\.\d{3}")
PLAIN = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)")
DECIMAL = re.compile(r"\.\d")  # a decimal point as labels show one: before a digit
# each word is read darkened by each (digitize/ocr's gammas suit 9 px labels; the digitizer's
# words are cut tight to their ink, and lighter darkening keeps 5 px digits' holes open)
GAMMAS = (1.5, 3.0)
TEXT_CONTRAST = 200.0  # RGB distance from the background drawn black on the page


@dataclass(frozen=True)
class Tick:
    """One tick label: its pixel position along the axis, the value read, and its word's box."""

    position: float
    value: float
    text: str
    box: tuple[float, float, float, float]
    word: int = 0  # which word of its axis: readings of one word are candidates for one tick
    by_label_reader: bool = False  # read by LineFuse's label reader, not Tesseract
    # the value is 10^n, written out (10^3, 10³: _written_power) or from a word read as 10 then
    # n (a superscript exponent read on the line: _power_readings): a candidate of log fits only
    power: bool = False

    @property
    def pointed(self) -> bool:
        """Whether it was read with a decimal point as labels show one, before a digit."""
        return bool(DECIMAL.search(normalise(self.text)))


@dataclass(frozen=True)
class Axis:
    """One axis's mapping: value = inverse of pixel = offset + slope * f(value), f the identity
    (linear) or log10 (log). used are the ticks it was fitted to, rejected the ones it rejected
    (misread, or text that is no number); residual is their RMS distance off the fit in px. The
    slope's sign is the axis's direction: values may grow leftwards or downwards (direction)."""

    name: str
    scale: str
    offset: float
    slope: float
    used: list[Tick] = field(default_factory=list)
    rejected: list[Tick] = field(default_factory=list)
    residual: float = 0.0
    confidence: float = 0.0
    multiplier: float = 1.0  # its labels' values were scaled by (an offset text's: 1e6)

    def times(self, multiplier: float) -> Axis:
        """This axis with its labels' values times `multiplier` (a linear axis whose labels are
        in millions: 1e6 written beside them); its ticks keep the text read."""
        if multiplier == 1.0 or self.scale != "linear":
            return self
        scaled = [replace(t, value=t.value * multiplier) for t in self.used]
        rejected = [replace(t, value=t.value * multiplier) for t in self.rejected]
        return replace(
            self,
            slope=self.slope / multiplier,
            used=scaled,
            rejected=rejected,
            multiplier=self.multiplier * multiplier,
        )

    def value(self, pixel: np.ndarray | float) -> np.ndarray:
        """Data values at pixel positions along the axis (continuous pixels)."""
        mapped = (np.asarray(pixel, dtype=float) - self.offset) / self.slope
        return 10.0**mapped if self.scale == "log" else mapped

    def pixel(self, value: np.ndarray | float) -> np.ndarray:
        """Pixel positions of data values."""
        value = np.asarray(value, dtype=float)
        mapped = np.log10(value) if self.scale == "log" else value
        return self.offset + self.slope * mapped

    @property
    def direction(self) -> str:
        """'ascending' where values grow rightwards (x) or upwards (y), as most axes are drawn;
        'descending' where they grow the other way (an IR spectrum's x, 4000 to 400)."""
        growing = self.slope > 0 if self.name == "x" else self.slope < 0
        return "ascending" if growing else "descending"


def parse(text: str) -> float | None:
    """A tick label's number, or None when what was read is none: plain (-5, 0.25, with a
    unicode minus too), scientific (1e+03, 1E3, 1e-3), with thousands separators (1,000;
    10,000) or a power of ten written out (10^3, 10³). A comma that cannot separate
    thousands (1,5) is no number."""
    clean = _powers_written_out(normalise(text))
    if clean.endswith("-"):  # a tick mark beside a y label, read as a trailing minus
        clean = clean.rstrip("-")
    if THOUSANDS.fullmatch(clean):
        clean = clean.replace(",", "")
    if power := POWER.fullmatch(clean):
        return 10.0 ** int(power.group(1)) if abs(int(power.group(1))) <= MAX_EXPONENT else None
    try:
        value = float(clean)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _powers_written_out(clean: str) -> str:
    """A normalised reading with 10 and superscript digits (10³) as 10^3."""
    if clean[:2] == "10" and len(clean) > 2 and all(c in SUPERSCRIPT for c in clean[2:]):
        return "10^" + clean[2:].translate(SUPERSCRIPTS)
    return clean


def _written_power(text: str) -> bool:
    """Whether a reading is a power of ten written out (10^3, 10³): a log axis's label, for log
    fits only. A linear axis steps its labels evenly, so no library writes them as powers, and
    a pair of misread powers (10^4 and 10^1, the label reader guessing a 3 px exponent) makes
    a linear fit that nothing can check."""
    return bool(POWER.fullmatch(_powers_written_out(normalise(text))))


def _plain(text: str) -> str:
    """A normalised reading as the digits a plain label shows: 1,000, 1e+03 and 10^3 as 1000,
    1e-3 as 0.001; a plain number or what is no number as it is. So readings of one value in
    any form agree (_agreement) and count their decimals alike (_shared_decimals)."""
    if PLAIN.fullmatch(text) or (value := parse(text)) is None:
        return text
    return np.format_float_positional(value, trim="-")


def ink_page(image: np.ndarray, frame: Frame) -> np.ndarray:
    """The chart as dark text on white, whatever its colours (light text on a dark theme), for
    Tesseract."""
    far = distance(image, frame.background)
    dark = np.clip(255.0 - far * 255.0 / TEXT_CONTRAST, 0, 255).astype(np.uint8)
    return np.repeat(dark[..., None], 3, axis=2)


def read_ticks(
    items: list[tuple[np.ndarray, Frame]], inputs: list[np.ndarray | None] | None = None
) -> list[tuple[list[Tick], list[Tick], tuple[float, float]]]:
    """The x and y ticks of each (image, frame) and the multipliers its x and y labels are in
    (1 but where an offset text says otherwise: _multiplier), all read in one Tesseract call. Each
    word is read once per darkening (GAMMAS) and each distinct number read is a candidate tick:
    the fit keeps at most one per word, the one that agrees. A word with no number read is a
    tick with a NaN value (reported as rejected). `inputs`: for each item, the blurred chart it
    was restored from (of its size) or None; the label reader reads each word there too, at the
    box found in the restoration (_read_by_label_reader)."""
    pages = []
    for image, frame in items:
        gray = Image.fromarray(ink_page(image, frame)).convert("L")
        lines = []
        for word in frame.x_words + frame.y_words:
            lines += label_lines(gray, word.box, GAMMAS)
            if word.exponent is not None:  # read alone too: on the word's line it is misread
                lines += label_lines(gray, word.exponent, GAMMAS)
        for offset in _offsets(frame):
            lines += label_lines(gray, offset.box, GAMMAS)
        pages.append(lines)
    read = [text for page in read_pages(pages) for text, _ in page]
    crnn = iter(_read_by_label_reader(items, inputs or [None] * len(items)))
    variants, first, found = len(GAMMAS), 0, []
    for _, frame in items:
        axes = []
        for axis, words in (("x", frame.x_words), ("y", frame.y_words)):
            ticks = []
            for index, word in enumerate(words):
                texts = read[first : first + variants]
                first += variants
                by_reader = next(crnn)
                powered = any("^" in text for text in by_reader)  # the reader reads 10^n there
                if powered:
                    texts = [text for text in texts if normalise(text) not in BASES]
                candidates = _candidates(axis, index, word, texts)
                if powered:  # Tesseract's 10n is the power read on one line (10² as 107)
                    candidates = [
                        t
                        for t in candidates
                        if t.power or not READ_POWER.fullmatch(normalise(t.text).rstrip("."))
                    ]
                ticks += candidates
                if word.exponent is not None:
                    exponents = read[first : first + variants]
                    first += variants
                    ticks += _exponent_readings(exponents, ticks[-1])
                ticks += [
                    replace(tick, by_label_reader=True)
                    for tick in _candidates(axis, index, word, by_reader)
                    if math.isfinite(tick.value)
                ]
            ticks = _separators_read_as_points(ticks)
            axes.append(ticks + _points_dropped(ticks))
        multipliers = [1.0, 1.0]
        for axis, offset in enumerate((frame.x_offset, frame.y_offset)):
            if offset is not None:  # Tesseract's readings, the shipped reader's, the voters'
                readings, readers = next(crnn), len(paths.DIGITIZE_READERS)
                voted = [text for index, text in enumerate(readings) if index % readers]
                texts = read[first : first + variants] + readings[::readers]
                multipliers[axis] = _multiplier(texts, voted, offset.minus)
                first += variants
        found.append((axes[0], axes[1], tuple(multipliers)))
    return found


def _offsets(frame: Frame) -> list[Word]:
    """The frame's offset texts, the x axis's first, as read_ticks reads them."""
    return [offset for offset in (frame.x_offset, frame.y_offset) if offset is not None]


def _multiplier(texts: list[str], votes: Iterable[str] = (), minus: bool = False) -> float:
    """The power of ten an axis's offset text says its labels are in (1e6: millions), from
    its readings (Tesseract's and the shipped label reader's) and the voters' (`votes`): the
    exponent most of them read (of equals, the first read); 1 when none reads one. A misread
    digit is seldom read alike once the readings are many, but the voters are alike trained and
    misread a digit alike (a 7 drawn onto the box's top line, read 2 by both), so a voter's
    exponent counts only where a reading reads it too; where no reading reads an exponent, a
    voter's counts only written out (1e6, 10^6): nothing checks an exponent as the fit checks a
    tick's value, and the forms a misread e leaves (107, 15) are what a voter makes of a
    legend's edge above the plot (1070: every value scaled by 10^70). Tesseract reads a
    repeated narrow digit once (1e11 as 1e1, the 1s two pixels wide), so where a reading, or a
    voter's written out, holds the chosen exponent with one digit doubled, that one is taken.
    A minus sign's bar drawn in the word (`minus`: Word.minus) makes the exponent negative
    however it was read: a one-pixel bar is the glyph the readers lose first (1e−6 read 1e6)."""
    exponents = [int(m.group(1)) for t in texts if (m := MULTIPLIER.fullmatch(normalise(t)))]
    read = list(exponents)
    written = []
    for text in map(normalise, votes):
        if not (m := MULTIPLIER.fullmatch(text)):
            continue
        voted, out = int(m.group(1)), bool(WRITTEN_OUT.search(text))
        written += [voted] if out else []
        if voted in read or (not read and out):
            exponents.append(voted)
    if not exponents:
        return 1.0
    exponent = max(exponents, key=exponents.count)  # max keeps the first of equals
    doubled = [e for e in read + written if _one_digit_doubled(str(e), str(exponent))]
    exponent = doubled[0] if doubled else exponent
    return 10.0 ** (-abs(exponent) if minus else exponent)


def _one_digit_doubled(longer: str, shorter: str) -> bool:
    """Whether `longer` is `shorter` with one of its digits written twice (11 and 1)."""
    return any(
        longer[i] == longer[i + 1] and longer[:i] + longer[i + 1 :] == shorter
        for i in range(len(longer) - 1)
    )


def _read_by_label_reader(
    items: list[tuple[np.ndarray, Frame]], inputs: list[np.ndarray | None]
) -> list[list[str]]:
    """What each label reader (digitize/label_onnx.py: the shipped one, then its voters) reads
    in each word of each (image, frame) and in its offset texts, in read_ticks' order: in the
    image, and in its input where one is given. A restoration can redraw a label's digit wrong
    where the blurred input still holds it (and the readers were trained on blurred labels too),
    and a reader can misread a 10^n exponent the other reads right, so every reading is a
    candidate, each counted alike (_support), and the fit keeps the one that agrees."""
    texts = []
    for (image, frame), given in zip(items, inputs, strict=True):
        words = frame.x_words + frame.y_words + _offsets(frame)
        if not words:
            continue
        boxes = np.array([word.box for word in words], np.float32)
        read = [
            read_labels(np.asarray(pixels), boxes, reader)
            for pixels in (image, given)
            if pixels is not None
            for reader in paths.DIGITIZE_READERS
        ]
        texts += [list(readings) for readings in zip(*read, strict=True)]
    return texts


def _pointed(texts: list[str], word: Word) -> list[str]:
    """The readings with the decimal point that Tesseract dropped put back: where the word has
    a point glyph and a reading has one digit per other glyph and no point."""
    point = word.point
    if point is None:
        return []
    digits = len(word.glyphs) - 1
    found = []
    for text in texts:
        clean = normalise(text)
        if "." not in clean and len(clean) == digits and clean.isdigit():
            found.append(clean[:point] + "." + clean[point:])
    return found


def _points_dropped(ticks: list[Tick]) -> list[Tick]:
    """More candidates where an axis's labels have decimals: each whole number read, with the
    decimal point Tesseract most often drops put back (0.2 read as 02, 1.4 as 14). An axis's
    labels share their decimals, so they are those of the readings that kept their point, in
    two words at least (POINTED_WORDS)."""
    finite = [t for t in ticks if math.isfinite(t.value) and not t.power]
    texts = [(t.word, _plain(normalise(t.text))) for t in finite]
    pointed = {word for word, text in texts if "." in text and _led_by_digit(text)}
    decimals = _shared_decimals(text for _, text in texts)
    if decimals is None or len(pointed) < min(POINTED_WORDS, len({t.word for t in ticks})):
        return []
    shift = 10.0**decimals
    return [
        Tick(t.position, t.value / shift, t.text, t.box, t.word)
        for t in finite
        if PLAIN.fullmatch(normalise(t.text).rstrip("-")) and "." not in t.text and t.value != 0
    ]


def _separators_read_as_points(ticks: list[Tick]) -> list[Tick]:
    """An axis's ticks with thousands separators read as points taken for separators: both
    readers read 2,500 as 2.500. Plotting libraries show as many decimals as the labels' values
    need (a linear axis the same for all, a log axis each its own: 0.1, 1, 10), so where two
    words or more are read with three digits after a point and one to three before it (no
    leading zero: 0.500 is a decimal), and no reading with a point needs three decimals (2.500,
    5.000, 7.500: one; 0.1, 1.000, 10.000: one), those points are separators (2500, 5000,
    7500). Labels padded to three decimals by a fixed format (1.250, 1.500) would be taken for
    thousands too; no library draws those by default."""
    dotted = [t for t in ticks if math.isfinite(t.value) and "." in normalise(t.text)]
    separated = [t for t in dotted if SEPARATED.fullmatch(normalise(t.text).rstrip("-"))]
    if len({t.word for t in separated}) < 2 or max(_decimals(t.value) for t in dotted) >= 3:
        return ticks
    return [
        replace(t, value=t.value * 1000.0, text=normalise(t.text).replace(".", ","))
        if t in separated
        else t
        for t in ticks
    ]


def _shared_decimals(texts: Iterable[str]) -> int | None:
    """The decimals most of the texts read with a point show (0.0, 0.5, 1 -> 1); None when no
    text has a point. A point with no digit before it (.1, read from a label 20) is a misread:
    tick labels show the zero (0.1), and one such reading must not make a whole-number axis's
    labels read as tenths."""
    counts = [len(text.split(".")[1]) for text in texts if "." in text and _led_by_digit(text)]
    return max(set(counts), key=counts.count) if counts else None


def _led_by_digit(text: str) -> bool:
    """Whether a reading has a digit before its point (0.5, -1.5; not .5)."""
    return text.split(".")[0].lstrip("-+")[-1:].isdigit()


def _candidates(axis: str, index: int, word: Word, texts: list[str]) -> list[Tick]:
    """A word's distinct numbers read as ticks at its centre, or one NaN tick when none is."""
    position = word.position(0 if axis == "x" else 1)
    values = {}
    # a comma read between thousands (1,000) is the small glyph at the digits' foot, no point
    separated = any(THOUSANDS.fullmatch(normalise(text).rstrip("-")) for text in texts)
    readings = texts + ([] if separated else _pointed(texts, word))
    if word.point is not None and not separated and any("." in text for text in readings):
        readings = [text for text in readings if "." in text]  # without one, it is misread
    for text in readings:
        value = parse(text)
        if value is not None:
            values.setdefault(value, text)
    ticks = [
        Tick(position, value, text, word.box, index, power=_written_power(text))
        for value, text in values.items()
    ]
    ticks += _power_readings(texts, Tick(position, math.nan, "", word.box, index))
    return ticks or [Tick(position, math.nan, "/".join(texts), word.box, index)]


def _power_readings(texts: list[str], where: Tick) -> list[Tick]:
    """matplotlib labels a log axis 10 with a superscript exponent; Tesseract reads that on
    one line, 10^2 as 102 and 10^-3 as 10-3 (no number). Each reading 10 then one exponent digit
    is also the candidate 10^n at `where`, for log fits only (Tick.power), its text 10^n; and
    so is each reading of ggplot's 1en that lost its 1 (e3)."""
    exponents = {
        int(power.group(1))
        for text in texts
        for pattern in (READ_POWER, UNIT_LOST)
        if (power := pattern.fullmatch(normalise(text).rstrip(".")))
    }
    return [
        replace(where, value=10.0**n, text=f"10^{n}", power=True)
        for n in sorted(exponents)
        if abs(n) <= MAX_EXPONENT
    ]


def _exponent_readings(texts: list[str], where: Tick) -> list[Tick]:
    """A power's exponent read alone (Word.exponent): each integer read is the candidate 10^n
    at `where`, for log fits only (Tick.power), its text 10^n."""
    exponents = {int(clean) for text in texts if EXPONENT.fullmatch(clean := normalise(text))}
    return [
        replace(where, value=10.0**n, text=f"10^{n}", power=True, by_label_reader=False)
        for n in sorted(exponents)
        if abs(n) <= MAX_EXPONENT
    ]


def _read_as_powers(ticks: list[Tick]) -> bool:
    """Whether the label reader read MIN_TICKS words or more as powers of ten (10^n): a log axis
    so labelled, whose exponents it reads better than Tesseract (_support). Tesseract alone
    reads 107 as 10^7 where a blurred 750 is drawn."""
    return len({t.word for t in ticks if t.power and t.by_label_reader}) >= MIN_TICKS


def _support(tick: Tick, ticks: list[Tick]) -> float:
    """How many readers read the tick's value in its word: each label reader's reading counts
    1, and Tesseract's once however many of its readings agree; POWER_GUESS where both read a
    power there (the reader reads a 3 px exponent right far more often than Tesseract, which
    reads most as 7, on the line and alone)."""
    word = [u for u in ticks if u.word == tick.word]
    guessed = any(u.power and u.by_label_reader for u in word)
    same = [u for u in word if u.value == tick.value]
    tesseract = [POWER_GUESS if guessed and u.power else 1.0 for u in same if not u.by_label_reader]
    return sum(u.by_label_reader for u in same) + max(tesseract, default=0.0)


def _line_fit(points: np.ndarray, values: np.ndarray) -> tuple[float, float, float]:
    """Least squares pixel = offset + slope * value: (offset, slope, RMS residual in px)."""
    slope, offset = np.polyfit(values, points, 1)
    residual = float(np.sqrt(np.mean((offset + slope * values - points) ** 2)))
    return float(offset), float(slope), residual


def _digits(values: np.ndarray) -> int:
    """Significant digits of the values, summed: how far from round numbers they are."""
    return sum(len(f"{v:.6g}".lstrip("-0.").replace(".", "").rstrip("0")) for v in values)


def _robust_fit(
    points: np.ndarray,
    values: np.ndarray,
    words: np.ndarray,
    preferred: np.ndarray,
    tolerance: float,
    direction: float,
    read: Readings,
):
    """The fit through the pair of ticks whose labels agree best with what was read in every
    word (_agreement), refitted to the ticks within tolerance (of each word, its candidate
    nearest the fit): (offset, slope, residual, inliers), or None when fewer than MIN_TICKS
    words agree on any pair."""
    best = None
    for i, j in itertools.combinations(range(len(points)), 2):
        if values[i] == values[j] or words[i] == words[j]:
            continue
        slope = (points[j] - points[i]) / (values[j] - values[i])
        if slope * direction <= 0:  # values grow the way asked (_directed)
            continue
        off = np.abs(points[i] + slope * (values - values[i]) - points)
        inliers = _one_per_word(off, words, tolerance)
        # a pair that no third tick confirms must at least imply a round step; then a round
        # step (three misread ticks rarely step roundly: 0, 600, 1800 read where 0, 500, 1500
        # are drawn); then the labels read first; among pairs as well agreed with, more ticks on
        # the line, the labels read with their decimal point as read (not put back), then read
        # by more readers, the roundest values (a misread label is rarely rounder than the ones
        # drawn). A log axis labels each decade unless it spans many: after the round step, a
        # log pair whose line keeps every word wins, then one a decade a tick apart (3 px
        # exponents are guessed, and misread ones can step evenly by chance: 10^5, 10^3, 10^1
        # read where 10^3, 10^2, 10^1 are drawn); then, where labels were read as powers, the
        # line whose ticks more readers read (_support: the label reader's guesses are right
        # far more often than Tesseract's)
        # a log axis's round step is a whole number of decades
        nice = (_decades if read.log else _nice_step)(slope, read.spacing)
        every_word = bool(inliers.sum() == len(read.texts) > MIN_TICKS)
        key = (
            bool(inliers.sum() > MIN_TICKS or nice),
            nice,
            read.log and every_word,
            read.log and _one_decade(slope, read.spacing),
            read.powers and preferred[inliers, 2].sum(),
            _agreement(read, points[[i, j]], values[[i, j]]),
            inliers.sum(),
            nice,
            tuple(preferred[inliers, :2].sum(axis=0)),
            -_digits(values[inliers]),
            -off[inliers].sum(),
        )
        if best is None or key > best[0]:
            best = (key, inliers)
    if best is None or best[1].sum() < MIN_TICKS:
        return None
    inliers = best[1].copy()
    offset, slope, residual = _line_fit(points[inliers], values[inliers])
    # a misread near its true value (750 read as 730) can sit within tolerance of the pair's
    # line yet tilt the least-squares fit: the tick farthest off it goes while it is off by more
    # than REFIT_PX, refitting each time
    while inliers.sum() > MIN_TICKS:
        off = np.where(inliers, np.abs(offset + slope * values - points), 0.0)
        if off.max() <= REFIT_PX:
            break
        inliers[off.argmax()] = False
        offset, slope, residual = _line_fit(points[inliers], values[inliers])
    return offset, slope, residual, inliers


@dataclass(frozen=True)
class Readings:
    """What was read in each word of an axis: its position and its distinct texts (_clean); the
    decimals its labels share (those most read after a point: 0.0, 0.5 drawn, 0.0 and 5 read);
    `log` when the values fitted are log10 of the labels', `powers` when the label reader read
    them as powers of ten (_read_as_powers)."""

    positions: np.ndarray
    texts: tuple[tuple[str, ...], ...]
    spacing: float  # px between neighbouring words (_spacing)
    decimals: int = 0
    log: bool = False
    powers: bool = False

    @classmethod
    def of(cls, ticks: list[Tick]) -> Readings:
        """The readings of an axis's ticks (read_ticks' candidates), word by word."""
        by_word: dict[int, tuple[float, set[str]]] = {}
        for tick in ticks:
            # a word with no number read holds its readings joined by '/' (_candidates)
            texts = tick.text.split("/") if math.isnan(tick.value) else [tick.text]
            position, seen = by_word.setdefault(tick.word, (tick.position, set()))
            seen.update(clean for text in texts if (clean := _clean(text)))
        shared = _shared_decimals(t for _, seen in by_word.values() for t in seen) or 0
        positions = np.array([position for position, _ in by_word.values()])
        texts = tuple(tuple(sorted(seen)) for _, seen in by_word.values())
        return cls(positions, texts, _spacing(positions), min(shared, MAX_DECIMALS))


def _clean(text: str) -> str:
    """A reading as agreement compares it: normalised, without the trailing tick mark or point
    that Tesseract reads beside a y label (150-, 50.)."""
    return _plain(normalise(text).rstrip("-."))


def _decimals(value: float) -> int:
    """The decimals a label needs to show the value (at most MAX_DECIMALS)."""
    for decimals in range(MAX_DECIMALS):
        if abs(value - round(value, decimals)) <= 1e-6 * max(1.0, abs(value)):
            return decimals
    return MAX_DECIMALS


@lru_cache(maxsize=1 << 16)
def _likeness(expected: str, read: str) -> float:
    """1 for the same text, down to 0 as the edit distance reaches the longer one's length;
    squared, so that a label off by a digit or two (1.2 read where 15.6 is predicted) earns
    little beside one read right."""
    return (1.0 - edit_distance(read, expected) / max(len(expected), len(read))) ** 2


def _agreement(read: Readings, points: np.ndarray, values: np.ndarray) -> float:
    """How well the labels a pair of ticks (points, values) implies at each word match what was
    read there: the sum over words of the best reading's likeness. The labels step evenly, so a
    word k spacings from the pair's first is labelled values[0] + k * (the pair's value step);
    it shows as many decimals as the pair's labels, or as the axis's readings where that agrees
    better (on a log axis, the ones its own value needs: 0.1, 1, 10). A misread label still
    weighs for the true fit in part (35000 and 53000 read where 25000 and 5000 are drawn), and a
    fit whose labels are not what was read (0.20 ... 1.20, from a point put back, where 20 ...
    120 were read) loses to the one whose labels are; a count of exact readings tells neither."""
    predicted = _stepped(read, points, values)
    if predicted is None:
        return 0.0
    if read.log:
        # a log axis's labels show each the decimals its own value needs (0.1, 1, 10, 100); a
        # pair of misread powers can imply labels past float's range, shown as inf (no match)
        with np.errstate(over="ignore", invalid="ignore"):
            expected = [f"{v:.{_decimals(v)}f}" for v in 10.0**predicted]
        return _matched(_unpaired(expected, read, points), read.texts)
    # the labels with the axis's decimals read, or with the pair's alone where those agree
    # better (two misreads, 135.00 for 13500, must not make 4000 ... 500 expected as 4000.00)
    own = max(_decimals(v) for v in values)
    return max(
        _matched(_unpaired(_shown(predicted, max(shared, own)), read, points), read.texts)
        for shared in {0, read.decimals}
    )


def _unpaired(expected: list, read: Readings, points: np.ndarray) -> tuple:
    """The labels expected at each word, None at the pair's own words (they agree as read)."""
    for point in points:
        expected[int(np.abs(read.positions - point).argmin())] = None
    return tuple(expected)


def _stepped(read: Readings, points: np.ndarray, values: np.ndarray) -> np.ndarray | None:
    """The value a pair of ticks (points, values) implies at each word: a word k spacings from
    the pair's first is labelled values[0] + k * (the pair's value step); None where the pair
    lies within one spacing (not two ticks)."""
    spacings = np.round((read.positions - points[0]) / read.spacing)
    between = round(float((points[1] - points[0]) / read.spacing))
    if between == 0:
        return None
    return values[0] + spacings * (values[1] - values[0]) / between


def _shown(values: np.ndarray, decimals: int) -> list[str]:
    """Linear labels as an axis shows them, with `decimals` (rounded, then + 0.0: -0.0 shows as
    0.0)."""
    return [f"{v:.{decimals}f}" for v in np.round(values, decimals) + 0.0]


@lru_cache(maxsize=1 << 16)
def _matched(expected: tuple[str | None, ...], texts: tuple[tuple[str, ...], ...]) -> float:
    """The sum over words of the best reading's likeness to the label expected there (cached:
    many pairs of an axis expect the same labels)."""
    total = sum(
        1.0 if label is None else max((_likeness(label, text) for text in read), default=0.0)
        for label, read in zip(expected, texts, strict=True)
    )
    return round(total, 6)


def _spacing(points: np.ndarray) -> float:
    """The usual pixel distance between neighbouring tick positions; inf with one position.
    Where every step is one, two or three times the smallest (within WHOLE_STEPS of it), one or
    two labels not found between two leave a longer step: the median of the steps, each over
    its number of spacings."""
    steps = np.diff(np.unique(np.round(points, 1)))
    if not len(steps):
        return math.inf
    multiples = np.round(steps / steps.min())
    if multiples.max() <= 3 and np.all(np.abs(steps / steps.min() - multiples) <= WHOLE_STEPS):
        steps = steps / multiples
    return float(np.median(steps))


def _tick_step(slope: float, spacing: float) -> float | None:
    """The value step between neighbouring ticks: their pixel spacing over the fit's slope (in
    decades on a log fit); None with one tick position."""
    return abs(spacing / slope) if math.isfinite(spacing) else None


def _nice_step(slope: float, spacing: float) -> bool:
    """Whether the step between neighbouring ticks is a round one, 1, 2, 2.5, 3, 4 or 5 times a
    power of ten, as axes choose (matplotlib's 1, 2, 2.5 and 5; ggplot's and plotnine's extended
    breaks 3 and 4 too); a pair of misread labels rarely implies one."""
    step = _tick_step(slope, spacing)
    if step is None:
        return False
    mantissa = step / 10.0 ** math.floor(math.log10(step))
    return any(abs(mantissa - nice) < 0.03 * nice for nice in (1.0, 2.0, 2.5, 3.0, 4.0, 5.0, 10.0))


def _decades(slope: float, spacing: float) -> bool:
    """Whether neighbouring ticks of a log fit are a whole number of decades apart."""
    step = _tick_step(slope, spacing)
    whole = round(step) if step is not None else 0
    return whole >= 1 and abs(step - whole) < DECADE_SLACK * whole


def _one_decade(slope: float, spacing: float) -> bool:
    """Whether neighbouring ticks of a log fit are one decade apart."""
    step = _tick_step(slope, spacing)
    return step is not None and abs(step - 1.0) < 0.03


def _one_per_word(off: np.ndarray, words: np.ndarray, tolerance: float) -> np.ndarray:
    """Ticks within tolerance of a fit, at most one per word: the nearest."""
    inliers = np.zeros(len(off), dtype=bool)
    for word in np.unique(words):
        mine = np.flatnonzero(words == word)
        nearest = mine[off[mine].argmin()]
        inliers[nearest] = off[nearest] <= tolerance
    return inliers


def fit_axis(name: str, ticks: list[Tick]) -> Axis | None:
    """The axis's mapping from its ticks, linear or log, misread ticks rejected; None when fewer
    than MIN_TICKS agree. Tesseract's readings are fitted first, then with the label reader's
    joining them; that fit is kept where it keeps as many ticks while fewer than SURE_TICKS of
    Tesseract's agree (two ticks fit any line; the reader reads tiny and restored labels better),
    and CLEARLY_MORE more once they do (a digit the reader drops from every label makes a
    consistent, wrong axis that must not outvote Tesseract's), or as many that fit clearly
    closer (TIGHTER: a label Tesseract misread near its value, 1.25 as 1.28, that the reader
    read right; a consistent, wrong axis fits no closer), or every word where Tesseract's fit
    keeps fewer, or the same words with the decimal points Tesseract dropped
    (_points_tesseract_dropped)."""
    tesseract = _fit(name, [t for t in ticks if not t.by_label_reader], ticks)
    both = _fit(name, ticks, ticks)
    if tesseract is None or both is None:
        return both or tesseract
    # once SURE_TICKS of Tesseract's agree, the label reader's must add CLEARLY_MORE ticks
    more = CLEARLY_MORE if len(tesseract.used) >= SURE_TICKS else 0
    if len(both.used) >= len(tesseract.used) + more:
        return both
    tighter = both.residual < TIGHTER * tesseract.residual and tesseract.residual > TIGHTER
    if len(both.used) >= len(tesseract.used) and tighter:
        return both
    # the label reader's readings joined keep every word (SURE_TICKS or more) where Tesseract's
    # fit does not: one axis read whole beats one read in part (400 ... 700 read as 40, 20, 60,
    # 70, three of them in line); a digit the reader drops from every label leaves Tesseract
    # reading every word too
    words = len({t.word for t in ticks})
    if len(both.used) == words > len(tesseract.used) and len(both.used) >= SURE_TICKS:
        return both
    return both if _points_tesseract_dropped(tesseract, both) else tesseract


def _points_tesseract_dropped(tesseract: Axis, both: Axis) -> bool:
    """Whether `both` keeps the words Tesseract's fit keeps, each a power of ten (the same for
    all) below Tesseract's value, with a decimal point the label reader read in POINTED_WORDS
    words or more: Tesseract drops small points from every label (0.2 ... 1.0 read as 2, 4, 6,
    8, 10; 0.5, 1.0, 1.5 as 05, 10, 15), a consistent axis ten times too large. A digit the
    reader drops instead (1000 read as 100) leaves no point."""
    ours = {t.word: t.value for t in tesseract.used}
    theirs = {t.word: t.value for t in both.used}
    if ours.keys() != theirs.keys():
        return False
    ratios = [ours[w] / theirs[w] for w in ours if theirs[w] and ours[w]]
    powers = {round(math.log10(ratio), 6) if ratio > 0 else math.nan for ratio in ratios}
    if len(powers) != 1 or powers.pop() not in (1.0, 2.0, 3.0):
        return False
    pointed = {t.word for t in both.used if t.by_label_reader and DECIMAL.search(t.text)}
    return len(pointed) >= POINTED_WORDS


def _fit(name: str, candidates: list[Tick], ticks: list[Tick]) -> Axis | None:
    """fit_axis over `candidates` of the axis's `ticks`."""
    good = [t for t in candidates if math.isfinite(t.value)]
    if len({t.word for t in good}) < MIN_TICKS:
        return None
    points = np.array([t.position for t in good])
    values = np.array([t.value for t in good])
    words = np.array([t.word for t in good])
    # each tick's claims beyond the fit: read with its decimal point before a digit, as read
    # (not put back; a trailing point, 100., is a speck or a tick mark), by how many readings
    # (Tesseract, the label reader: a value both read is likelier than one either read), and
    # by how many readers as their powers are weighed (_support)
    preferred = np.array(
        [
            (
                t.pointed and parse(t.text) == t.value,
                sum(u.word == t.word and u.value == t.value for u in ticks),
                _support(t, ticks),
            )
            for t in good
        ]
    ).reshape(-1, 3)
    power = np.array([t.power for t in good])
    tolerance = max(OUTLIER_PX, OUTLIER_SHARE * float(np.ptp(points)))
    direction = 1.0 if name == "x" else -1.0
    fits = {}
    plain = ~power  # 10^n read as 10n is a candidate of log fits only
    if len(np.unique(words[plain])) >= MIN_TICKS:
        read = Readings.of([t for t, keep in zip(good, plain, strict=True) if keep])
        fit = _directed(
            points[plain], values[plain], words[plain], preferred[plain], tolerance, direction, read
        )
        if fit is not None:
            fits["linear"] = _over(fit, plain)
    positive = values > 0
    # two ticks fit any scale: a log axis needs a third to tell, or powers of ten
    if len(np.unique(words[positive])) >= 3 or len(np.unique(words[power])) >= MIN_TICKS:
        logs = np.log10(np.where(positive, values, 1.0))
        # a log axis labels powers of ten (1, 10, 100; 10^n): other values in line on a log
        # scale are misreads (a restoration's 0.5, 6.0 and 60 a decade a spacing apart)
        decade = positive & np.isclose(logs, np.round(logs), rtol=0.0, atol=1e-6)
        fit = _directed(
            points[decade],
            logs[decade],
            words[decade],
            preferred[decade],
            tolerance,
            direction,
            replace(Readings.of(candidates), log=True, powers=_read_as_powers(good)),
        )
        # a log axis labels whole decades (1, 10, 100): evenly spaced labels in another ratio
        # (10000, 20000, 40000: a misread linear axis) are no log axis
        if fit is not None and _decades(fit[1], _spacing(points[positive])):
            # inliers over all ticks: the other ones are off a log axis
            fits["log"] = _over(fit, decade)
    written = power | np.array([bool(ONE_E.fullmatch(normalise(t.text))) for t in good], bool)
    scale = _better(fits, written)
    if scale is None:
        return None
    offset, slope, residual, inliers = fits[scale]
    used = [t for t, keep in zip(good, inliers, strict=True) if keep]
    taken = {t.word for t in used}
    rejected = [t for t in ticks if t.word not in taken]
    return Axis(
        name=name,
        scale=scale,
        offset=offset,
        slope=slope,
        used=used,
        rejected=rejected,
        residual=residual,
        confidence=_confidence(len(used), len({t.word for t in ticks}), residual),
    )


def _over(fit: tuple, subset: np.ndarray) -> tuple:
    """A fit of a subset of the ticks with its inliers over all of them."""
    inliers = np.zeros(len(subset), dtype=bool)
    inliers[np.flatnonzero(subset)[fit[3]]] = True
    return (*fit[:3], inliers)


def _directed(
    points: np.ndarray,
    values: np.ndarray,
    words: np.ndarray,
    preferred: np.ndarray,
    tolerance: float,
    direction: float,
    read: Readings,
):
    """_robust_fit with values growing the usual way (`direction`: +1 rightwards for x, -1
    upwards for y, pixel rows growing downwards), unless the reversed fit keeps more ticks. A
    descending axis read right (4000, 3500, ... 500) leaves the usual direction a pair of
    misread labels at best, so the reversed fit keeps more; where both keep as many (misreads
    either way) the usual direction stands, unless the reversed fit is confirmed by more words
    (_confirmed: a label read one digit off). The reversed fit must be confirmed by
    REVERSED_TICKS words: two labels fit a line either way, and two misreads that descend (an
    axis read as 600, 10) would otherwise turn an unreadable axis into a wrong one."""
    usual = _robust_fit(points, values, words, preferred, tolerance, direction, read)
    if usual is not None and usual[3].sum() == len(np.unique(words)):
        return usual  # every word kept: nothing to gain
    reverse = _robust_fit(points, values, words, preferred, tolerance, -direction, read)
    if reverse is None:
        return usual
    other = points[usual[3]] if usual is not None else points[:0]
    confirmed = _confirmed(reverse, points, values, read, other)
    if confirmed < REVERSED_TICKS:
        return usual
    if usual is None:
        return reverse
    theirs = (usual[3].sum(), _confirmed(usual, points, values, read, points[reverse[3]]))
    return reverse if (reverse[3].sum(), confirmed) > theirs else usual


def _confirmed(
    fit: tuple, points: np.ndarray, values: np.ndarray, read: Readings, other: np.ndarray
) -> int:
    """The words that confirm a fit: the ticks it keeps, and on a linear axis the words read
    with one digit off the label the fit implies there (3000 read as 6000 in small serif
    digits), but for those at `other` (the positions of the ticks another fit keeps: a word
    read as that fit's tick is not a misread one of this)."""
    inliers = fit[3]
    kept, labels = points[inliers], values[inliers]
    # the labels step evenly from the kept ticks', as _agreement predicts them
    predicted = _stepped(read, kept[[0, -1]], labels[[0, -1]])
    if read.log or predicted is None:
        return int(inliers.sum())
    shown = _shown(predicted, max(read.decimals, *(_decimals(v) for v in labels)))
    nearly = 0
    for position, label, texts in zip(read.positions, shown, read.texts, strict=True):
        if np.any(np.isclose(kept, position)) or np.any(np.isclose(other, position)):
            continue
        nearly += any(_one_digit_off(label, text) for text in texts)
    return int(inliers.sum()) + nearly


def _one_digit_off(label: str, text: str) -> bool:
    """Whether `text` is `label` (NEAR_LENGTH characters or more) with one digit misread."""
    if len(text) != len(label) or len(label) < NEAR_LENGTH:
        return False
    differ = [(a, b) for a, b in zip(label, text, strict=True) if a != b]
    return len(differ) == 1 and differ[0][0].isdigit() and differ[0][1].isdigit()


def _better(fits: dict, written: np.ndarray) -> str | None:
    """The scale whose fit keeps more ticks, or as many (LOG_TICKS or more) with a clearly
    smaller residual; linear when in doubt. One exception: where every tick the log fit keeps
    is a power of ten as written (`written`: 10 then its exponent, Tick.power, or 1e+03), log
    wins as many ticks kept. The linear fit of those words reads labels such as 101, 102, 103
    (steps of one in the last digit of a three-character label starting 10), which a linear
    axis rarely draws and matplotlib's 10^1, 10^2, 10^3 read on one line always look like; or
    labels 1eA and 1eB, of which a linear axis in scientific notation (0e+00, 1e+05, 2e+05)
    writes one, and which a log axis's 1e2 ... 1e6 in a 5 px font show where two of its
    exponents are read right."""
    linear, log = fits.get("linear"), fits.get("log")
    if log is None:
        return None if linear is None else "linear"
    if linear is None:
        return "log"
    kept_linear, kept_log = linear[3].sum(), log[3].sum()
    if kept_log != kept_linear:
        return "log" if kept_log > kept_linear else "linear"
    if written[log[3]].all():
        return "log"
    # as many kept: a few ticks fit either closely, so log must fit many much better
    many = kept_log >= LOG_TICKS
    return "log" if many and log[2] < LOG_GAIN * linear[2] else "linear"


def _confidence(used: int, read: int, residual: float) -> float:
    """0..1: the share of the words read that the fit kept, times how far beyond two ticks (which
    any line fits) the fit is confirmed, times how tightly (a residual of 1 px halves it)."""
    confirmed = min(1.0, (used - 1) / 2)
    return float(used / max(read, 1) * confirmed / (1.0 + residual))
