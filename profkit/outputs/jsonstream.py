"""JSON a piece at a time: the text of ``json.dumps(obj, indent=2)``, byte for byte, without
building it whole.

json's indenting encoder is pure Python: it makes a string object per value and joins them all
at the end, so a list of millions of numbers costs several times its text in memory (compare's
per-call times at 16 M NVTX ranges: 0.95 GB more than the analysis for 206 MB of text). Here a
long list is encoded CHUNK values at a time: floats alone joined from their reprs (json's text
of a finite float), other numbers, true, false and null by json's C encoder. Floats that are
whole thousandths (times in us made from integer ns: most of what a long list holds) are
written as digits column by column, their repr's text without a Python string per value.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np

CHUNK = 1 << 16  # values of a list encoded at once
PIECE = 1 << 20  # characters handed on at once (pieces())
# values whose JSON text holds no ", " of its own: a chunk of them is split on it safely
_PLAIN = frozenset((float, int, bool, type(None)))


def pieces(obj, indent: int = 2) -> Iterator[str]:
    """The text of json.dumps(obj, indent=indent) in pieces of about PIECE characters."""
    held: list[str] = []
    size = 0
    for s in _encode(obj, indent, 0):
        held.append(s)
        size += len(s)
        if size >= PIECE:
            yield "".join(held)
            held, size = [], 0
    if held:
        yield "".join(held)


def _plain(chunk, sep: str) -> str | None:
    """The JSON text of a chunk of numbers (and true, false, null), its values joined by `sep`;
    None for a chunk holding anything else."""
    types = set(map(type, chunk))
    if types == {float}:
        text = _thousandths(chunk, sep)
        if text is not None:
            return text
        text = sep.join(map(float.__repr__, chunk))  # json's text of a float: its repr
        if "n" not in text:  # (nan, inf: json writes NaN, Infinity)
            return text
    if types <= _PLAIN:
        return json.dumps(list(chunk)).replace(", ", sep)[1:-1]
    return None


_WHOLE = 10**15  # thousandths below this have at most 15 digits: repr writes them all, no fewer


def _thousandths(chunk: list[float], sep: str) -> str | None:
    """sep.join(map(float.__repr__, chunk)) where every value is the double nearest k / 1000 for
    a whole 0 <= k < 10**15 (else None). Such a value's repr is that decimal (a decimal of at
    most 15 digits is the only one that short to round to its double), in fixed notation (it
    lies between 1e-3 and 1e12), trailing zeros of its fraction dropped but one ("12.5",
    "0.001", "7.0"): made as one array of characters, a row per value."""
    a = np.array(chunk, dtype=np.float64)
    k = np.rint(a * 1000)
    # (nan and inf fail these; -0.0, whose repr keeps its sign, fails the last)
    if not ((k / 1000 == a).all() and (k < _WHOLE).all() and not np.signbit(a).any()):
        return None
    whole, frac = np.divmod(k.astype(np.int64), 1000)
    width = len(str(int(whole.max()))) if len(whole) else 1
    rows = np.zeros((len(a), width + 5), dtype=np.uint8)  # 0: no character
    rows[:, 0] = ord(",")  # each value's separator, "," until the text is whole
    rest = whole
    for p in range(width):  # the whole part's digits, right to left; its leading zeros dropped
        rest, d = np.divmod(rest, 10)
        rows[:, width - p] = d + ord("0") if p == 0 else np.where(whole >= 10**p, d + ord("0"), 0)
    rows[:, width + 1] = ord(".")
    rows[:, width + 2] = frac // 100 + ord("0")  # (".0" for a whole number)
    rows[:, width + 3] = np.where(frac % 100 != 0, frac // 10 % 10 + ord("0"), 0)
    rows[:, width + 4] = np.where(frac % 10 != 0, frac % 10 + ord("0"), 0)
    flat = rows.ravel()
    # (the first value has no separator before it)
    return flat[flat != 0].tobytes().decode()[1:].replace(",", sep)


def _encode(obj, step: int, depth: int) -> Iterator[str]:
    close = "\n" + " " * (step * depth)
    pad = close + " " * step
    if isinstance(obj, dict) and obj and all(type(k) is str for k in obj):
        sep = "{" + pad
        for k, v in obj.items():
            yield sep + json.dumps(k) + ": "
            yield from _encode(v, step, depth + 1)
            sep = "," + pad
        yield close + "}"
    elif isinstance(obj, (list, tuple)) and obj:
        sep = "[" + pad
        for i in range(0, len(obj), CHUNK):
            chunk = obj[i : i + CHUNK]
            text = _plain(chunk, "," + pad)
            if text is not None:
                yield sep + text
                sep = "," + pad
            else:
                for v in chunk:
                    yield sep
                    yield from _encode(v, step, depth + 1)
                    sep = "," + pad
        yield close + "]"
    else:
        # a scalar, an empty container or a dict with keys json turns into text: json's own text,
        # its lines indented to this depth (an indented text's only newlines are its layout)
        yield json.dumps(obj, indent=step).replace("\n", close)
