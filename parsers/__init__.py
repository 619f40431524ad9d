"""Report parsers: one file per format. Each has recognise(path, head) and parse(path),
and yields a profkit.report.Report of plain rows in normalised units; none writes SQL."""
from __future__ import annotations

from pathlib import Path

from profkit.errors import BadInput

from . import cupti_trace, ncu_csv, ncu_rep, nsys_rep, nsys_sqlite

# order matters: the most specific recogniser first
PARSERS = (nsys_rep, ncu_rep, nsys_sqlite, cupti_trace, ncu_csv)


def detect(path: Path):
    """The parser module for a file, or BadInput naming what it is not."""
    path = Path(path)
    if not path.exists():
        raise BadInput(path, "no such file")
    if path.is_dir():
        raise BadInput(path, "is a directory")
    with open(path, "rb") as f:
        head = f.read(4096)
    if not head:
        raise BadInput(path, "empty file")
    for p in PARSERS:
        if p.recognise(path, head):
            return p
    if head.startswith(b"SQLite format 3\x00"):
        raise BadInput(path, "an SQLite database, but not an Nsight Systems export (no StringIds / CUPTI tables)")
    raise BadInput(path, "unrecognised format (expected .nsys-rep, nsys SQLite export, .ncu-rep, ncu raw CSV, "
                         "or a profkit CUPTI trace)")
