"""Query results as CSV or JSON, written row by row (constant memory) and valid for any value.

- NULL: empty field (CSV), null (JSON);
- numbers: as SQLite holds them; a REAL infinity (1e999) is `inf`/`-inf` in CSV and the string
  "Infinity"/"-Infinity" in JSON (JSON has no infinity);
- TEXT: as is (bytes that are not UTF-8 already shown as \\xNN by the reader);
- BLOB: its bytes as hexadecimal digits, like SQLite's hex();
- a value of any size is written in 1 MB pieces: a 900 MB blob is never one 2 GB string.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable

PIECE = 1 << 20


def _pieces_of_text(s: str):
    for i in range(0, len(s), PIECE):
        yield s[i : i + PIECE]


def _pieces_of_blob(b: bytes):
    for i in range(0, len(b), PIECE // 2):
        yield b[i : i + PIECE // 2].hex()


def _small(row: tuple) -> bool:
    return all(len(v) <= PIECE // 2 for v in row if isinstance(v, (str, bytes)))


def _fix(v):
    """A small value as the csv/json modules should see it (BLOB: hex digits)."""
    return v.hex() if isinstance(v, bytes) else v


def _csv_field(out, v) -> None:
    """One field of any size, written in pieces."""
    if v is None:
        return
    if isinstance(v, (bytes, bytearray, memoryview)):
        for p in _pieces_of_blob(bytes(v)):
            out.write(p)
        return
    if not isinstance(v, str):
        out.write(repr(v) if isinstance(v, float) and math.isfinite(v) else str(v))
        return
    out.write('"')
    if v.startswith(_FORMULA):
        out.write("'")  # (a number never takes this path: it is small)
    for p in _pieces_of_text(v):
        out.write(p.replace('"', '""'))
    out.write('"')


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _inert(v):
    """A text a spreadsheet would run as a formula (= + - @ first) made plain text with a
    leading apostrophe, as spreadsheets write it; a number, or text that is one, is kept."""
    if isinstance(v, str) and v.startswith(_FORMULA):
        try:
            float(v)
            return v
        except ValueError:
            return "'" + v
    return v


def write_csv(out, columns: list[str], rows: Iterable[tuple]) -> int:
    """A header row, then one line per row (RFC 4180 quoting; no live formula). Returns the rows written."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow([_inert(c) for c in columns])
    n = 0
    for row in rows:
        if _small(row):  # the csv module, fast; it would crash on a field of gigabytes
            w.writerow([_inert(_fix(v)) for v in row])
        else:
            for i, v in enumerate(row):
                if i:
                    out.write(",")
                _csv_field(out, v)
            out.write("\n")
        n += 1
    return n


def _json_value(out, v) -> None:
    if v is None:
        out.write("null")
    elif isinstance(v, bool):
        out.write("true" if v else "false")
    elif isinstance(v, int):
        out.write(str(v))
    elif isinstance(v, float):
        if math.isfinite(v):
            out.write(repr(v))
        else:
            out.write("null" if v != v else ('"Infinity"' if v > 0 else '"-Infinity"'))
    elif isinstance(v, (bytes, bytearray, memoryview)):
        out.write('"')
        for p in _pieces_of_blob(bytes(v)):
            out.write(p)
        out.write('"')
    else:
        out.write('"')
        for p in _pieces_of_text(str(v)):
            out.write(json.dumps(p, ensure_ascii=False)[1:-1])
        out.write('"')


def _json_fix(v):
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, float) and not math.isfinite(v):
        return None if v != v else ("Infinity" if v > 0 else "-Infinity")
    return v


def write_json(out, columns: list[str], rows: Iterable[tuple]) -> int:
    """A JSON array of objects, one row per line. Returns the rows written."""
    keys = [json.dumps(c, ensure_ascii=False) for c in columns]
    out.write("[")
    n = 0
    for row in rows:
        out.write(",\n  " if n else "\n  ")
        if _small(row):
            out.write(json.dumps(dict(zip(columns, map(_json_fix, row))), ensure_ascii=False))
        else:
            out.write("{")
            for i, (k, v) in enumerate(zip(keys, row)):
                out.write(", " if i else "")
                out.write(k)
                out.write(": ")
                _json_value(out, v)
            out.write("}")
        n += 1
    out.write("\n]\n" if n else "]\n")
    return n
