"""nvprof's report (`nvprof -o x.nvvp`, also `.prof`): an SQLite file of CUPTI activity tables.

The tables are CUPTI's own records, one table a kind (`CUPTI_ACTIVITY_KIND_KERNEL` or
`_CONCURRENT_KERNEL`, `_RUNTIME`, `_DRIVER`, `_MEMCPY`, `_MEMSET`, `_MARKER`), names as ids
into `StringTable`; times in ns. They are the records profkit's own CUPTI trace holds, so they
become rows the same way (parsers/cupti_trace.py `timeline`): kernels with their launch calls
(by correlation id) and the NVTX ranges open on the launching thread. Copies and sets are
counted in the file's facts (count, bytes, duration_ns), as the Kineto parser does.
"""

from __future__ import annotations

import sqlite3
import struct
from contextlib import closing
from pathlib import Path

from profkit.core.dbfile import check_whole, open_readonly, work_budget
from profkit.core.errors import BadInput
from profkit.core.names import report_text
from profkit.core.rows import SHARED_ID, Parsed

from . import cupti_trace

FORMAT = "nvprof"
SUFFIXES = (".nvvp", ".prof")  # file name endings it reads (lower case)
ROLE = "timeline"  # timeline | counters
SOURCE = "cupti"  # the tool whose launches it yields (launch.source): nvprof is CUPTI's
PREFERENCE = 40  # among parsers of one role, lower is taken first (analyse: one file per role)
SNIFF_ORDER = 15  # lower is asked first: before the nsys export (both are SQLite)
DESCRIPTION = "nvprof report .nvvp (SQLite)"
SQLITE_MAGIC = b"SQLite format 3\x00"
_STEPS_FLOOR, _STEPS_PER_BYTE = 50_000_000, 2_000  # SQLite steps a file may take (a hostile one: refused)
_KERNELS = ("CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL", "CUPTI_ACTIVITY_KIND_KERNEL")
_CALLS = (("CUPTI_ACTIVITY_KIND_RUNTIME", "runtime"), ("CUPTI_ACTIVITY_KIND_DRIVER", "driver"))
_THREAD = 2  # CUPTI_ACTIVITY_OBJECT_THREAD: a marker's objectId holds (processId, threadId)


def _tables(conn) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def sniff(path: Path, head: bytes) -> bool:
    if not head.startswith(SQLITE_MAGIC):
        return False
    try:
        with closing(open_readonly(path, timeout_ms=5000, peek=True)) as conn:
            t = _tables(conn)
    except (sqlite3.DatabaseError, UnicodeDecodeError):
        return path.suffix.lower() in SUFFIXES  # unreadable: ours to refuse by its name
    return "StringTable" in t and "StringIds" not in t and any(k.startswith("CUPTI_ACTIVITY_KIND_") for k in t)


def parse(path: Path) -> Parsed:
    cut = check_whole(path)
    if cut:
        raise BadInput(path, cut)
    try:
        with closing(open_readonly(path, timeout_ms=5000, peek=True)) as conn:
            work_budget(conn, _STEPS_FLOOR + _STEPS_PER_BYTE * path.stat().st_size)
            return _parse(path, conn)
    except sqlite3.DatabaseError as e:
        if str(e) == "interrupted":
            raise BadInput(
                path, "reading it took far more SQLite steps than any real report needs: a hostile or corrupt file"
            ) from None
        raise BadInput(path, f"unreadable nvprof report ({e}); is the file truncated?") from None
    except UnicodeDecodeError as e:  # a table or column name that is not UTF-8 (a corrupt schema)
        raise BadInput(
            path, f"unreadable nvprof report: its schema holds a name that is not UTF-8 ({e.reason})"
        ) from None


def _columns(conn, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}


def _parse(path: Path, conn) -> Parsed:
    t = _tables(conn)
    if "StringTable" not in t:
        raise BadInput(path, "an SQLite file without nvprof's StringTable: not an nvprof report")
    kt = next((k for k in _KERNELS if k in t and conn.execute(f'SELECT 1 FROM "{k}" LIMIT 1').fetchone()), None)
    if kt is None:
        raise BadInput(
            path,
            "an nvprof report without kernel records (CUPTI_ACTIVITY_KIND_[CONCURRENT_]KERNEL "
            "missing or empty): nothing ran on the GPU, or kernels were not traced",
        )
    need = {"start", "end", "name", "correlationId", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"}
    kc = _columns(conn, kt)
    if not need <= kc:
        raise BadInput(path, f"{kt} lacks columns {sorted(need - kc)}")
    strings = {i: report_text(v) for i, v in conn.execute('SELECT _id_, value FROM "StringTable"')}

    def opt(c: str) -> str:
        return c if c in kc else "NULL"

    kernels = []
    for row in conn.execute(
        f'SELECT start, "end", name, correlationId, gridX, gridY, gridZ, blockX, blockY, blockZ,'
        f" {opt('registersPerThread')}, {opt('staticSharedMemory')}, {opt('dynamicSharedMemory')},"
        f' {opt("streamId")}, {opt("deviceId")} FROM "{kt}"'
    ):
        if not all(type(v) is int for v in row[:2]) or type(row[2]) is not int:
            raise BadInput(path, f"{kt}: a kernel whose start, end or name is not an integer: corrupt")
        if row[1] < row[0]:
            raise BadInput(path, f"{kt}: a kernel ends before it starts: impossible times (a corrupt report)")
        kernels.append(
            {
                "name": strings.get(row[2]) or str(row[2]),
                "start": row[0],
                "end": row[1],
                "correlation_id": row[3],
                "grid": list(row[4:7]),
                "block": list(row[7:10]),
                "registers_per_thread": row[10],
                "static_shared_memory": row[11],
                "dynamic_shared_memory": row[12],
                "stream": row[13],
                "device": row[14],
            }
        )
    calls: dict = {}
    for table, kind in _CALLS:
        if table not in t or not {"start", "end", "processId", "threadId", "correlationId"} <= _columns(conn, table):
            continue
        cb = "cbid" if "cbid" in _columns(conn, table) else "NULL"
        for start, end, pid, tid, corr, cbid in conn.execute(
            f'SELECT start, "end", processId, threadId, correlationId, {cb} FROM "{table}"'
        ):
            old = calls.get(corr)
            if old is not None and old["type"] == kind:
                raise BadInput(path, f"{table}: {SHARED_ID} {corr} (one per kernel: corrupt)")
            if old is None or kind == "runtime":  # the runtime call wraps a driver one of the same id
                # nvprof keeps a call's callback id, not its name
                calls[corr] = {
                    "type": kind,
                    "name": f"{kind} call {cbid}" if cbid is not None else None,
                    "start": start,
                    "end": end,
                    "pid": pid,
                    "tid": tid,
                }
    facts = {
        k: v
        for k, v in (
            ("memcpy", _copies(conn, t, "CUPTI_ACTIVITY_KIND_MEMCPY")),
            ("memset", _copies(conn, t, "CUPTI_ACTIVITY_KIND_MEMSET")),
        )
        if v
    }
    return cupti_trace.timeline(path, FORMAT, SOURCE, kernels, calls, _markers(conn, t, strings), facts)


def _copies(conn, t: set, table: str) -> dict | None:
    if table not in t or not {"start", "end", "bytes"} <= _columns(conn, table):
        return None
    n, size, took = conn.execute(f'SELECT count(*), sum(bytes), sum("end" - start) FROM "{table}"').fetchone()
    return {"count": n, "bytes": size, "duration_ns": took} if n else None


def _markers(conn, t: set, strings: dict) -> list[dict]:
    """NVTX markers as the CUPTI trace holds them: id, flags, timestamp, name, domain, pid, tid."""
    table = "CUPTI_ACTIVITY_KIND_MARKER"
    if table not in t or not {"flags", "timestamp", "id", "objectKind", "objectId", "name"} <= _columns(conn, table):
        return []
    dom = "domain" if "domain" in _columns(conn, table) else "NULL"
    out = []
    for flags, ts, mid, kind, obj, name, domain in conn.execute(
        f'SELECT flags, timestamp, id, objectKind, objectId, name, {dom} FROM "{table}"'
    ):
        if type(ts) is not int:
            continue  # a marker without a time marks nothing
        pid = tid = None
        if kind == _THREAD and isinstance(obj, bytes) and len(obj) >= 8:
            pid, tid = struct.unpack_from("<II", obj)
        out.append(
            {
                "id": mid,
                "flags": flags or 0,
                "timestamp": ts,
                "name": strings.get(name) if name else None,
                "domain": strings.get(domain) if domain else None,
                "pid": pid,
                "tid": tid,
            }
        )
    return out
