"""What the Nsight Compute CSV pages share (raw page: parsers/ncu_csv.py; details page and
`--metrics` output: parsers/ncu_csv_details.py): finding the header behind whatever the
program and ncu printed first, the NVTX columns, launch dimensions, the columns every page
has. Not a parser (the leading underscore keeps it out of the registry).

ncu writes its CSV to stdout, so files people keep often hold the program's own output and
ncu's `==PROF==` / `==WARNING==` lines before the header (and sometimes after it).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from profkit.core.errors import BadInput
from profkit.core.nvtx import path_of
from profkit.core.units import parse_number

# every ncu CSV page starts its header with these two columns (ncu 2019.x to 2025.x)
HEADER = re.compile(rb'^(?:\xef\xbb\xbf)?"?ID"?,"?Process ID"?,')
HEADER_TEXT = re.compile(r'^\ufeff?"?ID"?,"?Process ID"?,')
# ncu's own lines (==PROF==, ==WARNING==, ==ERROR==): never CSV rows
TOOL_LINE = re.compile(r"^==[A-Z]+==")
MAX_PREAMBLE = 64 << 20  # bytes of program output looked through for the header

# what a CSV page cannot prove: ncu writes no row count or end marker (docs/reliability.md)
CAVEAT = "a CSV page records no row count: a copy cut exactly at the end of a row would look whole"
PP_PREFIX = "thread Domain:Push/Pop_Range"
SE_PREFIX = "Id:Domain:Start/Stop_Range"
_QUOTED = re.compile(r'"([^"]*)"')
_DIMS = re.compile(r"^\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)$")


def header_line(path: Path, head: bytes) -> bytes | None:
    """The header line of an ncu CSV (None if there is none in the first MAX_PREAMBLE bytes)."""
    for line in head.splitlines()[:-1] if len(head) >= 4096 else head.splitlines():
        if HEADER.match(line):
            return line
    if len(head) < 4096:
        return None
    try:
        with open(path, "rb") as f:
            seen = 0
            for line in f:
                if HEADER.match(line):
                    return line.rstrip(b"\r\n")
                seen += len(line)
                if seen > MAX_PREAMBLE:
                    return None
    except OSError:
        return None
    return None


# header words of `nsys stats` reports (cuda_gpu_kern_sum, nvtx_kern_sum, cuda_api_sum, ...)
_NSYS_STATS = re.compile(r"^\"?(Time \(%\)|NVTX Range|Range)\"?,.*(Total Time \(ns\)|Instances|Kern Inst)")


def _whole_row(header_text: str, last: str) -> bool:
    """A final row without its line end is whole when its last value closes its quotes (ncu
    quotes every value) and it has as many columns as the header."""
    try:
        head, row = next(csv.reader([header_text])), next(csv.reader([last]))
    except (csv.Error, StopIteration):
        return False
    return last.rstrip(" ").endswith('"') and len(row) == len(head)


def read(path: Path) -> tuple[list[str], list[list[str]], int]:
    """(header, rows, lines skipped before the header) of an ncu CSV page. Lines ncu prints
    itself (==PROF== ...) and repeats of the header are dropped wherever they are."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (a spreadsheet saved it) is fine
    except UnicodeDecodeError as e:
        raise BadInput(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if HEADER_TEXT.match(line)), None)
    if start is None:
        if not text.strip():
            raise BadInput(path, "empty CSV")
        error = next((x.strip() for x in lines if x.startswith("==ERROR==")), None)
        if error:  # ncu failed and wrote only its messages where the CSV was to go
            raise BadInput(path, f"ncu's own output, no CSV in it (the capture failed): {error[:160]}")
        first = next((x.strip() for x in lines if x.strip()), "")[:60]
        if _NSYS_STATS.search(first):  # `nsys stats --format csv`: totals per name, no launches
            raise BadInput(
                path,
                "an nsys stats summary (totals per name, not one row per launch): load the "
                ".nsys-rep or .sqlite export it was made from",
            )
        raise BadInput(
            path, f'not an Nsight Compute CSV: no header row starting "ID","Process ID" (first line: {first!r})'
        )
    header_text = lines[start]
    body = [x for x in lines[start + 1 :] if not TOOL_LINE.match(x) and x != header_text]
    last = next((x for x in reversed(body) if x.strip()), header_text)
    if not last.endswith(("\n", "\r")) and not _whole_row(header_text, last):
        # ncu ends every row: the file was cut inside its last one. A file whose final line end
        # alone is missing (an editor or a copy dropped it; seen in a public details page) still
        # ends in a closing quote with every column there, and is the whole row.
        raise BadInput(path, "truncated: the last row has no line end (cut inside a row, its last value cut short?)")
    try:
        rows = list(csv.reader(io.StringIO(header_text + "".join(body))))
    except csv.Error as e:  # e.g. a field over the csv module's limit (131072 characters)
        raise BadInput(path, f"malformed CSV ({e})") from None
    return rows[0], rows[1:], start


def nvtx(pp_cell: str, se_cell: str) -> tuple[str | None, str | None]:
    """(innermost, path) from the NVTX columns of a capture with --nvtx, e.g.
        1271  "<default domain>:known:none:..."  "<default domain>:gemm:none:..."
        "0:profkit:gemm_window:none:none:RGB:0xff:REGISTERED:gemm_window"
    start/end ranges first, then the push/pop stack of the default domain, then other domains
    (as the .ncu-rep path orders them)."""
    se = []
    for entry in _QUOTED.findall(se_cell or ""):
        parts = entry.split(":")
        if len(parts) >= 9:
            se.append(":".join(parts[2:-6]))
    pp_default: list[str] = []
    pp_other: list[str] = []
    for entry in _QUOTED.findall(pp_cell or ""):
        parts = entry.split(":")
        if len(parts) >= 8:
            (pp_default if parts[0] == "<default domain>" else pp_other).append(":".join(parts[1:-6]))
    names = se + pp_default + pp_other
    return (names[-1], path_of(names)) if names else (None, None)


def nvtx_columns(header: list[str]) -> tuple[int | None, int | None]:
    pp = next((i for i, h in enumerate(header) if h.startswith(PP_PREFIX)), None)
    se = next((i for i, h in enumerate(header) if h.startswith(SE_PREFIX)), None)
    return pp, se


def dims(cell: str | None) -> tuple[int, int, int] | None:
    """'(256, 1, 1)' -> (256, 1, 1): the Grid Size / Block Size columns every page prints."""
    m = _DIMS.match((cell or "").strip())
    if not m:
        return None
    x, y, z = (int(g) for g in m.groups())
    return (x, y, z) if max(x, y, z) < 2**31 else None  # beyond CUDA's limits: no dimension


def given(row: list[str], idx: dict[str, int]) -> dict:
    """Kernel fields a page prints in its own columns (used where its metrics lack them)."""
    out: dict = {}
    for col, key in (("Grid Size", "grid"), ("Block Size", "block")):
        if col in idx:
            out[key] = dims(row[idx[col]])
    for col, key in (("Stream", "stream"), ("Device", "device")):
        if col in idx:
            v = parse_number(row[idx[col]])
            out[key] = int(v) if v is not None and v.is_integer() and abs(v) < 2**63 else None
    return out


def compute_capability(cell: str | None) -> tuple[int, int] | None:
    """'8.6' -> (8, 6)."""
    m = re.match(r"^\s*(\d+)\.(\d+)\s*$", cell or "")
    return (int(m.group(1)), int(m.group(2))) if m else None
