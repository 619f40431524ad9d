"""Terminal output: tables and lines where every name is plain text.

Run, file, kernel and range names are data: never rich markup (a kernel named
``evil[/x]kernel`` prints as such), never terminal control (an escape code in a file name
prints as ``\\x1b``). Every CLI line and table cell goes through here.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console
from rich.table import Table
from rich.text import Text


def plain(value) -> str:
    """A value as one printable line: control characters (ESC, CR, BEL, ...) and undecodable
    bytes shown escaped, so nothing a report holds can drive the terminal."""
    s = "" if value is None else str(value)
    if s.isprintable():
        return s
    return "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape", "backslashreplace").decode("ascii") for ch in s
    )


def console(stream=None) -> Console:
    """A console that never parses markup; wide when piped or captured (one row per line).
    Message lines never wrap (soft_wrap), so a script can match one line per file whatever
    $COLUMNS says; tables still fit the width. Without `stream` it writes to whatever
    sys.stdout is at print time."""
    tty = (stream or sys.stdout).isatty()
    cols = os.environ.get("COLUMNS", "")
    width = None if tty else int(cols) if cols.isdigit() and int(cols) >= 40 else 200  # $COLUMNS wins when piped
    return Console(file=stream, highlight=False, markup=False, emoji=False, width=width, soft_wrap=True)


CELL_CHARS = 2_000  # a terminal cell longer than this is cut (with a note); --csv/--json give all of it


def cell(value, floats: str = "{:,.1f}") -> Text:
    if value is None:
        return Text("")
    if isinstance(value, float):
        return Text(floats.format(value))
    if isinstance(value, (bytes, bytearray, memoryview)):
        b = bytes(value)
        hexed = b[: CELL_CHARS // 2].hex()
        return Text(f"x'{hexed}'" + (f"... ({len(b):,} bytes)" if len(b) > CELL_CHARS // 2 else ""))
    s = value if isinstance(value, str) else str(value)
    if len(s) > CELL_CHARS:
        return Text(plain(s[:CELL_CHARS]) + f"... ({len(s):,} characters)")
    return Text(plain(s))


def pages(columns: list[str], rows, title: str | None = None, floats: str = "{:,.1f}", size: int = 1_000):
    """Tables of at most `size` rows each, from a stream of row tuples: a result of any length
    prints in the memory of one page (each page sizes its own columns)."""
    page: list[dict] = []
    first = True
    for r in rows:
        page.append(dict(zip(columns, r)))
        if len(page) == size:
            yield table(page, title if first else None, floats, columns)
            page, first = [], False
    if page or first:
        yield table(page, title if first else None, floats, columns)


def table(
    rows: list[dict], title: str | None = None, floats: str = "{:,.1f}", columns: list[str] | None = None
) -> Table:
    t = Table(title=Text(plain(title)) if title else None, show_lines=False, header_style="bold")
    cols = list(columns) if columns is not None else list(rows[0]) if rows else []
    for c in cols:
        numeric = bool(rows) and isinstance(rows[0][c], (int, float)) and not isinstance(rows[0][c], bool)
        t.add_column(Text(plain(c)), overflow="fold", justify="right" if numeric else "left")
    for r in rows:
        t.add_row(*[cell(r[c], floats) for c in cols])
    return t
