"""`nsys stats --report cuda_gpu_trace --format csv`: one row per kernel, copy or set on the GPU.

nsys writes the table to stdout (after a `Processing [x.sqlite] with [.../cuda_gpu_trace.py]...`
line, sometimes NOTICE lines before it) or to `<base>_cuda_gpu_trace.csv` with `--output`. Its
columns (nsys 2024+; without `GreenCtx` before, `Throughput (MBps)` in older ones):

    Start (ns), Duration (ns), CorrId, GrdX, GrdY, GrdZ, BlkX, BlkY, BlkZ, Reg/Trd,
    StcSMem (MB), DymSMem (MB), Bytes (MB), Throughput (MB/s), SrcMemKd, DstMemKd,
    Device, Ctx, GreenCtx, Strm, Name

A kernel row has its grid and block; a copy or set has its bytes instead and a name in brackets
(`[CUDA memcpy Host-to-Device]`, `[CUDA memset]`). Times are in ns unless `--timeunit` chose
another unit (the header says which). `Device` is the GPU's name with its id: `NVIDIA H100
80GB HBM3 (0)`.

It is a timeline without launch calls, threads or NVTX ranges: kernels load with their times,
launch dimensions, registers, stream, device and correlation id; copies and sets are counted in
the file's facts (count, bytes to the kB the table keeps, duration_ns). Shared memory is left
unknown: the table rounds it to the kB (`0.025` MB).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from profkit.core.errors import BadInput
from profkit.core.rows import Parsed

from . import cupti_trace

FORMAT = "nsys-stats-trace"
SUFFIXES = (".csv",)  # file name endings it reads (lower case)
ROLE = "timeline"  # timeline | counters
SOURCE = "nsys"  # the tool whose launches it yields (launch.source)
PREFERENCE = 50  # among parsers of one role, lower is taken first: the export it came from holds more
SNIFF_ORDER = 80  # lower is asked first: before the ncu CSV pages, which take every other .csv
DESCRIPTION = "nsys stats cuda_gpu_trace CSV"

# what a CSV cannot prove: nsys writes no row count or end marker (docs/reliability.md)
CAVEAT = "an nsys stats table records no row count: a copy cut exactly at the end of a row would look whole"
_UNIT = r"(?: \((ns|us|ms|s)\))?"
HEADER = re.compile(rf'^\ufeff?"?Start{_UNIT}"?,"?Duration{_UNIT}"?,"?CorrId"?,')
_TO_NS = {None: 1, "ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_NEED = ("CorrId", "GrdX", "GrdY", "GrdZ", "BlkX", "BlkY", "BlkZ", "Name")
# what nsys prints around a table on stdout: never rows
_PREAMBLE = re.compile(r"^(\s*$|Processing \[|NOTICE:|WARNING:|\s+\S)")
_DEVICE = re.compile(r"^(.*\S)\s*\((\d+)\)$")
_MAX_DIM = 2**31 - 1  # CUDA's largest grid dimension


def _header_index(lines: list[str]) -> int | None:
    """The header's line: the first line that is not nsys's own preamble, if it is the header."""
    for i, line in enumerate(lines[:64]):
        if HEADER.match(line):
            return i
        if not _PREAMBLE.match(line):
            return None
    return None


def sniff(path: Path, head: bytes) -> bool:
    text = head.decode("utf-8", "replace")
    lines = text.splitlines()
    return _header_index(lines if len(head) < 4096 else lines[:-1]) is not None


def _int(path: Path, row: int, col: str, cell: str, scale: int = 1) -> int | None:
    """A cell as an integer (times scaled to ns); None where empty. A value that is not a
    number refuses the file."""
    cell = cell.strip()
    if cell == "":
        return None
    try:
        v = int(cell) * scale if scale == 1 or cell.lstrip("-").isdigit() else round(float(cell) * scale)
    except (ValueError, OverflowError):
        raise BadInput(path, f"row {row}: {col} {cell[:40]!r} is not a number") from None
    if not -(2**63) <= v < 2**63:
        raise BadInput(path, f"row {row}: {col} {cell[:40]!r} is beyond 64 bits")
    return v


def parse(path: Path) -> Parsed:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise BadInput(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    lines = text.splitlines(keepends=True)
    start = _header_index(lines)
    if start is None:
        raise BadInput(path, "no cuda_gpu_trace header (Start (ns),Duration (ns),CorrId,...): not nsys stats output")
    body = lines[start + 1 :]
    while body and not body[-1].strip():
        body.pop()
    if body and not body[-1].endswith(("\n", "\r")):
        # nsys ends every row: the file was cut inside its last one
        raise BadInput(path, "truncated: the last row has no line end (cut inside a row?)")
    more = next((x for x in body if _PREAMBLE.match(x) and x.strip()), None)
    if more is not None:  # `-r a,b` to stdout: another report follows
        raise BadInput(
            path,
            f"holds more than one nsys stats report ({more.strip()[:60]!r}): write each with --output and load "
            "the cuda_gpu_trace one",
        )
    try:
        rows = list(csv.reader(io.StringIO(lines[start] + "".join(x for x in body if x.strip()))))
    except csv.Error as e:  # a field over the csv module's limit, a NUL
        raise BadInput(path, f"malformed CSV ({e})") from None
    header = [h.strip().lstrip("\ufeff") for h in rows[0]]
    col = {re.sub(r" \(.*\)$", "", h): i for i, h in enumerate(header)}
    missing = [c for c in _NEED if c not in col]
    if missing:
        raise BadInput(path, f"an nsys stats table without columns {missing}: not a cuda_gpu_trace report")
    unit = HEADER.match(",".join(rows[0]))
    t_start, t_dur = (_TO_NS[u] for u in (unit.group(1), unit.group(2))) if unit else (1, 1)

    def cell(r: list[str], name: str) -> str:
        return r[col[name]] if name in col else ""

    kernels: list[dict] = []
    copies: dict[str, dict] = {}
    gpus: dict[int | None, str] = {}
    for n, r in enumerate(rows[1:], start=1):
        if len(r) != len(header):
            raise BadInput(path, f"row {n} has {len(r)} columns, the header {len(header)}: cut or malformed")
        s = _int(path, n, "Start", r[0], t_start)
        d = _int(path, n, "Duration", r[1], t_dur)
        if s is None or d is None:
            raise BadInput(path, f"row {n}: no start or duration")
        if s < 0 or d < 0:
            raise BadInput(path, f"row {n}: a negative start or duration ({r[0]}, {r[1]}): impossible times")
        name = cell(r, "Name")
        device = None
        m = _DEVICE.match(cell(r, "Device").strip())
        if m:
            device = int(m.group(2)) if len(m.group(2)) < 10 else None
            gpus.setdefault(device, m.group(1))
        dims = [_int(path, n, c, cell(r, c)) for c in ("GrdX", "GrdY", "GrdZ", "BlkX", "BlkY", "BlkZ")]
        if all(x is None for x in dims) and name.startswith("[CUDA mem"):
            kind = "memset" if name.startswith("[CUDA memset") else "memcpy"
            mb = cell(r, "Bytes").strip()
            try:
                size = round(float(mb) * 1e6) if mb else 0
            except (ValueError, OverflowError):
                raise BadInput(path, f"row {n}: Bytes {mb[:40]!r} is not a number") from None
            c = copies.setdefault(kind, {"count": 0, "bytes": 0, "duration_ns": 0})
            c["count"] += 1
            c["bytes"] += size if 0 <= size < 2**62 else 0
            c["duration_ns"] += d
            continue
        if not name:
            raise BadInput(path, f"row {n}: a kernel without a name")
        kernels.append(
            {
                "name": name,
                "start": s,
                "end": s + d,
                "correlation_id": _int(path, n, "CorrId", cell(r, "CorrId")),
                "grid": [x if x is not None and 0 < x <= _MAX_DIM else None for x in dims[:3]],
                "block": [x if x is not None and 0 < x <= 1024 else None for x in dims[3:]],
                "registers_per_thread": _int(path, n, "Reg/Trd", cell(r, "Reg/Trd")),
                "stream": _int(path, n, "Strm", cell(r, "Strm")),
                "device": device,
            }
        )
    if not kernels:
        raise BadInput(
            path,
            "an nsys stats cuda_gpu_trace table without kernel rows: nothing ran on the GPU"
            + (" but copies and sets" if copies else ""),
        )
    facts: dict = dict(copies)
    models = sorted(set(gpus.values()))
    if len(models) == 1:
        facts["gpu_name"] = models[0]
    elif models:  # several GPU models in one table: none is the run's
        facts["gpu_names"] = models
    facts["nsys_stats_report"] = "cuda_gpu_trace"
    return cupti_trace.timeline(path, FORMAT, SOURCE, kernels, {}, [], facts, caveat=CAVEAT)
