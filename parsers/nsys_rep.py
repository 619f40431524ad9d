"""Nsight Systems report (`.nsys-rep`): exported to SQLite with `nsys export`, then read by
parsers/nsys_sqlite.py. Needs nsys on PATH (or $NSYS). parsers/nsys_qdrep.py shares the export
step (parse_report) for the older `.qdrep`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import weakref
from contextlib import ExitStack
from pathlib import Path

from profkit.core.errors import BadInput, ToolMissing
from profkit.core.rows import Parsed
from profkit.core.tempfiles import workdir

from . import nsys_sqlite

FORMAT = "nsys-rep"
SUFFIXES = (".nsys-rep",)  # file name endings it reads (lower case)
ROLE = "timeline"  # timeline | counters
SOURCE = "nsys"  # the tool whose launches it yields (launch.source)
PREFERENCE = 20  # among parsers of one role, lower is taken first (analyse: one file per role)
SNIFF_ORDER = 10  # lower is asked first: the most specific recognisers first
DESCRIPTION = "Nsight Systems report .nsys-rep (needs nsys)"


def sniff(path: Path, head: bytes) -> bool:
    return path.suffix.lower() == ".nsys-rep"


def find_nsys(explicit: str | None = None) -> str:
    for cand in (explicit, os.environ.get("NSYS"), shutil.which("nsys")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    raise ToolMissing(
        "Nsight Systems (nsys) is not installed: put it on PATH or set $NSYS; "
        "or export elsewhere with `nsys export --type sqlite` and ingest the .sqlite"
    )


# The report's closing record (a protobuf message) holds, in order, the capture's date, host,
# then the writing nsys's version (field 6) and build (field 7): `2\x0a2025.3.1.0:\x08...` in
# ours of nsys 2025.3.1, `2\x132020.5.1.85-5ee086b:\x13...` in a public .qdrep of nsys 2020.5.
_WRITER = re.compile(rb"\x32([\x05-\x40])(20\d\d\.\d{1,2}\.\d{1,3}[0-9A-Za-z.+\-]*)\x3a")
_TAIL = 64 << 10  # bytes at the end of the report looked through for that record


def writer_version(path: Path) -> str | None:
    """The version of the nsys that wrote a .nsys-rep / .qdrep, from its closing record (None
    when the file holds none that reads as one)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - _TAIL))
            tail = f.read()
    except OSError:
        return None
    found = [m.group(2) for m in _WRITER.finditer(tail) if m.group(1)[0] == len(m.group(2))]
    return found[-1].decode("ascii") if found else None


def _written_by(path: Path) -> str:
    v = writer_version(path)
    return f"written by nsys {v}" if v else "written by an nsys whose version it does not record"


def export(path: Path, out: Path, nsys: str | None = None) -> Path:
    try:
        exe = find_nsys(nsys)
    except ToolMissing:
        raise ToolMissing(
            f"{path}: an Nsight Systems report; reading it needs nsys, which is not installed ({_written_by(path)}"
            f"): put it on PATH or set $NSYS, or run `nsys export --type sqlite {path.name}` elsewhere with that "
            "version or newer and ingest the .sqlite"
        ) from None
    proc = subprocess.run(
        [exe, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(out), str(path)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0 or not out.exists():
        # nsys says why over several lines (its last is often a bare "Exportation error:"); a
        # report of a newer nsys fails inside nsys's protobuf reader, which names no version:
        # the first words say both
        said = " ".join(x.strip() for x in (proc.stderr + "\n" + proc.stdout).splitlines() if x.strip())
        said = (said[:300] + " ...") if len(said) > 300 else said or "no output"
        raise BadInput(
            path,
            f"{_written_by(path)}, installed {_version(exe)}: nsys export failed: {said}; a report "
            "written by a newer Nsight Systems needs that version or newer to export",
        )
    return out


def _version(exe: str) -> str:
    try:
        v = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        v = ""
    return v.replace("NVIDIA Nsight Systems version ", "nsys ") or "nsys, version unknown"


def parse(path: Path) -> Parsed:
    return parse_report(path, FORMAT)


def parse_report(path: Path, fmt: str) -> Parsed:
    """Export an Nsight Systems report (`.nsys-rep`, or `.qdrep` before it) to SQLite in a
    scratch folder (profkit.core.tempfiles: removed on every exit) and read that; errors name the
    report, not the scratch export.

    A large export read through the column path (rep.bulk) is read again by the store, which
    copies its kernel rows from the file: the scratch folder then stays until `rep.release()`
    (ingest calls it once the file is written), the report is garbage, or the process exits."""
    path = Path(path)
    stack = ExitStack()
    try:
        d = stack.enter_context(workdir("nsys"))
        sqlite = export(path, d / "export.sqlite")  # (a report's own name may hold anything)
        try:
            rep = nsys_sqlite.parse(sqlite)
        except BadInput as e:
            raise BadInput(path, e.problem) from None
    except BaseException:
        stack.close()
        raise
    if rep.bulk is None:
        stack.close()
    else:
        # the store calls it once it has read the rows: the scratch export goes then
        rep.release = weakref.finalize(rep, stack.close)  # type: ignore[attr-defined]
    rep.path, rep.format = str(path), fmt
    return rep
