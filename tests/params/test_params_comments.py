"""params.yaml's comments say what a key is and why, never what a past run measured.

A figure in a comment goes stale as soon as the code or the data moves on; measurements live once,
in docs/experiments.md or a benchmarks/results/*.json that a comment may name. So a comment that
holds "dB", an arrow ("->", as in "+1.67 -> +1.80") or a timing (a number with s, sec, ms, min or
h, or "N x faster / slower") fails here, naming the line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest


def _repo_root() -> Path:
    """The folder holding params.yaml and pyproject.toml, wherever under tests/ this file lives."""
    for folder in Path(__file__).resolve().parents:
        if (folder / "params.yaml").is_file() and (folder / "pyproject.toml").is_file():
            return folder
    raise FileNotFoundError("no params.yaml above this test")


UNITS = r"(?:s|secs?|seconds?|ms|msecs?|milliseconds?|mins?|minutes?|h|hrs?|hours?)"
NUMBER = r"\d+(?:[.,]\d+)?"
MEASUREMENTS = (
    re.compile(r"\bdB\b"),  # a PSNR figure (in its own case: "db" in a path or a word is not one)
    re.compile(r"->|→"),  # before -> after
    re.compile(rf"{NUMBER}\s*{UNITS}\b", re.IGNORECASE),  # a duration: 12 s, 5 min, 0.3 ms, 2 h
    re.compile(rf"{NUMBER}\s*[x×]?\s*(?:faster|slower)\b", re.IGNORECASE),  # 1.8x faster
)
# where a quoted scalar may start: at the start of a line or after "- ", ": ", "? " or inside a
# flow collection; elsewhere a quote is part of a plain scalar
_QUOTE_MAY_FOLLOW = set("-:[{,?")


def yaml_comments(text: str) -> list[tuple[int, str]]:
    """(line number, comment text without its '#') of every comment in a YAML document.

    YAML starts a comment at a '#' that is outside a quoted scalar and at the start of a line or
    after whitespace (so 'a#b' and "'#'" are not comments). Quoted scalars may span lines: the
    scanner carries the quote state over line ends. A quote only opens a scalar where one may
    start, so an apostrophe inside a plain word (don't) opens nothing.
    """
    comments = []
    quote = None  # the open quote character, or None
    for number, line in enumerate(text.splitlines(), start=1):
        i = 0
        while i < len(line):
            char = line[i]
            if quote == '"':
                if char == "\\":
                    i += 2
                    continue
                if char == '"':
                    quote = None
            elif quote == "'":
                if char == "'":
                    if line[i + 1 : i + 2] == "'":  # '' is an escaped quote
                        i += 2
                        continue
                    quote = None
            elif char == "#" and (i == 0 or line[i - 1] in " \t"):
                comments.append((number, line[i + 1 :]))
                break
            elif char in "'\"":
                before = line[:i].rstrip(" \t")
                if not before or before[-1] in _QUOTE_MAY_FOLLOW:
                    quote = char
            i += 1
    return comments


def measurements(text: str) -> list[str]:
    """'line N: comment' for every comment that quotes a measurement."""
    found = []
    for number, comment in yaml_comments(text):
        hits = [hit.group(0) for pattern in MEASUREMENTS if (hit := pattern.search(comment))]
        if hits:
            found.append(f"line {number}: #{comment}  ({', '.join(map(repr, hits))})")
    return found


def test_params_comments_hold_no_measurements():
    offending = measurements((_repo_root() / "params.yaml").read_text())
    assert not offending, (
        "params.yaml comments quote measurements; say what the key is and why, and point to "
        "docs/experiments.md or benchmarks/results/*.json for the figures:\n" + "\n".join(offending)
    )


@pytest.mark.parametrize(
    "line",
    [
        "batch_size: 8  # 1000 steps of 8 beat 500 of 16 (+1.67 -> +1.80 dB); same time in fp32",
        "precision: auto  # bf16: 14-17x slower than fp32 on AVX2 only",
        "size: 384  # run whole: 1.8x faster than 128 px tiles",
        "shrink: 4  # val: the sharp chart's worst 42.6 → 45.1",
        "steps: 1  # 25 steps took 60 s of evaluate",
        "steps: 1  # 25 steps took 60s of evaluate",
        "pretrain: {steps: 1000}  # about 4 min on a 2-core CPU",
        "timeout_s: 600  # 10 minutes",
        "workers: 2  # forked scorers: 244 -> 213",
        'name: "a # b"  # a gain of 0.4 dB',
    ],
)
def test_a_measurement_in_a_comment_is_caught(line):
    assert measurements(line), line


@pytest.mark.parametrize(
    "line",
    [
        "crop: 64                       # train patches, px",
        "dpi: [72, 100]  # ... times dpi: about 180-360 x 137-270 px",
        "steps: 1000  # samples per step; why: docs/experiments.md",
        'url: "http://host/#fragment -> 5 s dB"  # a quoted # is no comment',
        "note: 'it''s # 3 dB'  # an escaped quote keeps the string open",
        "key: don't # the apostrophe opens no string",
        "path: a#b  # '#' inside a plain scalar starts no comment",
        "timeout_s: 600  # a request's time limit: its work stops and it gets 504",
        "max_pixels: 4000000  # larger images (from the header, before decoding): 413",
        "url: s3://dvc.db/x  # the remote's address",
    ],
)
def test_meaning_is_not_flagged(line):
    assert not measurements(line), measurements(line)


def test_quoted_scalars_spanning_lines_hide_their_hashes():
    text = 'a: "first line # not a comment -> 5 s\n  second line"  # the real comment\n'
    assert yaml_comments(text) == [(2, " the real comment")]
