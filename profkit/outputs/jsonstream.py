"""JSON a piece at a time: the text of ``json.dumps(obj, indent=2)``, byte for byte, without
building it whole.

json's indenting encoder is pure Python: it makes a string object per value and joins them all
at the end, so a list of millions of numbers costs several times its text in memory (compare's
per-call times at 16 M NVTX ranges: 0.95 GB more than the analysis for 206 MB of text). Here a
long list is encoded CHUNK values at a time: floats alone joined from their reprs (json's text
of a finite float), other numbers, true, false and null by json's C encoder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

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
        text = sep.join(map(float.__repr__, chunk))  # json's text of a float: its repr
        if "n" not in text:  # (nan, inf: json writes NaN, Infinity)
            return text
    if types <= _PLAIN:
        return json.dumps(list(chunk)).replace(", ", sep)[1:-1]
    return None


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
