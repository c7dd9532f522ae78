"""Tick-label text: the alphabet every reader of labels shares, and its CTC encoding.

Tesseract (digitize/ocr.py) is restricted to it, and the label reader (digitize/label_reader.py)
predicts it: what tick labels hold. matplotlib draws U+2212 as its minus sign, read as '-', and
its log labels as 10 with a superscript exponent, written 10^2.
"""

from __future__ import annotations

import re

ALPHABET = "0123456789.-+e^"
MINUS = str.maketrans({"\u2212": "-"})
# matplotlib's log labels are mathtext, $\mathdefault{10^{2}}$: what they show is 10^2
MATHTEXT = re.compile(r"^\$\\mathdefault\{(.*)\}\$$")
EXPONENT = re.compile(r"\^\{(.*)\}")


def normalise(text: str) -> str:
    """A label's text as compared: matplotlib's minus as '-', its mathtext wrapper and an
    exponent's braces dropped (10^{-1} as 10^-1), no white space."""
    clean = "".join(text.translate(MINUS).split())
    return EXPONENT.sub(r"^\1", MATHTEXT.sub(r"\1", clean))


def readable(text: str) -> bool:
    """Whether every character of the normalised label is in ALPHABET (and there is one)."""
    clean = normalise(text)
    return bool(clean) and all(c in ALPHABET for c in clean)


def encode(text: str) -> list[int]:
    """CTC targets: 1 + the index of each character in ALPHABET (0 is CTC's blank)."""
    return [ALPHABET.index(c) + 1 for c in normalise(text)]


def decode(indices) -> str:
    """A greedy CTC path as text: repeats merged, blanks (0) dropped."""
    text, previous = [], 0
    for index in (int(i) for i in indices):
        if index != previous and index != 0:
            text.append(ALPHABET[index - 1])
        previous = index
    return "".join(text)
