"""Nsight Systems SQLite export (`nsys export --type sqlite`).

Kernels come from CUPTI_ACTIVITY_KIND_KERNEL (names through StringIds), their launching
calls from CUPTI_ACTIVITY_KIND_RUNTIME (same correlationId, same process), NVTX ranges from
NVTX_EVENTS (push/pop = 59, start/end = 60, domains = 75), GPU facts from TARGET_INFO_GPU and
TARGET_INFO_CUDA_GPU. Exports of every age load: newer ones may suffix table names
(NVTX_EVENTS_V2...: tables are found by prefix); those of the `.qdrep` era have TARGET_INFO_GPU
without `id`, or only TARGET_INFO_CUDA_GPU, and the export metadata is META_DATA_EXPORT or
EXPORT_META_DATA (nsys 2023.1). An export without kernel records loads nothing and says why.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path

from profkit.core import environment, tempfiles
from profkit.core.dbfile import (
    ColumnsError,
    Pending,
    TooManyRows,
    check_whole,
    open_readonly,
    read_columns,
    read_columns_in_parts,
    wal_mode,
    work_budget,
)
from profkit.core.errors import BadInput
from profkit.core.hostcalls import call_name, host_kind
from profkit.core.names import MAX_NAME, name_too_long, report_text
from profkit.core.nvtx import I64_MAX, Nesting, project, range_paths
from profkit.core.rows import Bulk, KernelPart, LazyRows, Parsed, bounded_meta
from profkit.core.units import normalise
from profkit.core.unpack import XZ_MAGIC, unxz

from ._ops import clean_torch_ranges, ops_from_kernel_ranges

FORMAT = "nsys-sqlite"
SUFFIXES = (".sqlite", ".sqlite.xz")  # file name endings it reads (lower case)
ROLE = "timeline"  # timeline | counters
SOURCE = "nsys"  # the tool whose launches it yields (launch.source)
PREFERENCE = 10  # among parsers of one role, lower is taken first (analyse: one file per role)
SNIFF_ORDER = 50  # lower is asked first: the most specific recognisers first
DESCRIPTION = "Nsight Systems SQLite export (nsys export --type sqlite)"
SQLITE_MAGIC = b"SQLite format 3\x00"
PUSH_POP, START_END, DOMAIN_CREATE = 59, 60, 75
_PID = 1 << 24
_NOT_INT = -(1 << 63)  # a launch call's nameId read as this: not an integer (the least int64, sorted first)
# from this many kernels + NVTX rows on, the column path (its fixed cost, ~0.2 s, pays off)
BULK_MIN_ROWS = 200_000


# reading a real export costs under 1 SQLite step per byte of file (measured on every export
# in profiles/ and the field reports): 50 per byte, plus a floor, stops only hostile files
STEPS_PER_BYTE, STEPS_FLOOR = 50, 50_000_000
# the tables profkit reads: each must be a plain table (nsys writes no views, virtual tables
# or computed columns; a view over a self-join loaded 4.6 M bogus kernels from 446 KB)
_READ = (
    "StringIds",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_DRIVER",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "NVTX_EVENTS",
    "TARGET_INFO_GPU",
    "TARGET_INFO_CUDA_GPU",
    "META_DATA_CAPTURE",
    "META_DATA_EXPORT",
    "EXPORT_META_DATA",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "ENUM_CUDA_MEM_KIND",
)


_TEXT = functools.partial(bytes.decode, encoding="utf-8", errors="backslashreplace")


def _open(path: Path) -> sqlite3.Connection:
    conn = open_readonly(path, timeout_ms=5000, peek=True)  # (no -wal/-shm beside a WAL-mode export)
    # text that is not UTF-8 (a name of a corrupt or hand-made export) as \xNN escapes, as names
    # are kept everywhere (docs/reliability.md 5), not an error that reads as a truncated file
    conn.text_factory = _TEXT
    work_budget(conn, STEPS_FLOOR + STEPS_PER_BYTE * path.stat().st_size)
    return conn


def _refuse_hostile(path: Path, conn, t: dict) -> None:
    """Only plain tables are read: a view, a virtual table or a computed column can make
    reading cost anything and yield rows the file does not hold."""
    for base in _READ:
        name = t.get(base)
        if not name:
            continue
        kind, sql = conn.execute("SELECT type, coalesce(sql, '') FROM sqlite_master WHERE name = ?", (name,)).fetchone()
        if kind != "table" or sql.lstrip()[:14].upper().startswith("CREATE VIRTUAL"):
            raise BadInput(
                path,
                f"{name} is a {'virtual table' if kind == 'table' else kind}, not a table: "
                f"nsys writes plain tables (a hand-made or hostile export)",
            )
        if any(r[6] in (2, 3) for r in conn.execute(f'PRAGMA table_xinfo("{name}")')):
            raise BadInput(
                path, f"{name} has computed columns: nsys writes plain tables (a hand-made or hostile export)"
            )
        if re.search(r"\)\s*WITHOUT\s+ROWID\b[^)]*$", sql, re.I):  # read by rowid, as nsys writes them
            raise BadInput(path, f"{name} is a WITHOUT ROWID table: nsys writes plain tables (a hand-made export)")


def _tables(conn) -> dict[str, str]:
    """Canonical table name -> actual name, accepting version suffixes (_V2, _V3...)."""
    out: dict[str, str] = {}
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"):
        base = re.sub(r"_V\d+$", "", name)
        if base not in out or name > out[base]:
            out[base] = name
    return out


def sniff(path: Path, head: bytes) -> bool:
    if head.startswith(XZ_MAGIC) and path.name.lower().endswith(".sqlite.xz"):
        return True  # an export shipped small (profiles/): unpacked and checked by parse
    if not head.startswith(SQLITE_MAGIC):
        return False
    try:
        conn = _open(path)
        try:
            t = _tables(conn)
        finally:
            conn.close()
    except (sqlite3.DatabaseError, UnicodeDecodeError):
        return True  # an SQLite header but unreadable: ours to reject with a clear reason
    return "StringIds" in t and any(k.startswith(("CUPTI_ACTIVITY_KIND", "NVTX_EVENTS", "TARGET_INFO")) for k in t)


def _columns(conn, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}


def parse(path: Path, progress=None) -> Parsed:
    """progress(phase, done, total): rows read so far in each phase (total None: unknown).
    A `.sqlite.xz` is unpacked (bounded) into this process's scratch folder first: the store
    attaches the export while it writes, after parse returns."""
    if path.name.lower().endswith(".xz"):
        inner = tempfiles.process_dir() / f"{len(list(tempfiles.process_dir().iterdir()))}-{path.name[:-3]}"
        unxz(path, inner)
        try:
            return parse(inner, progress)
        except BadInput as e:  # name the file the user gave, not the scratch copy
            raise BadInput(path, f"{e.problem} (inside the .xz)") from None
    cut = check_whole(path)
    if cut:
        raise BadInput(path, cut)
    with _refusing(path):
        conn = _open(path)
        try:
            return _parse(path, conn, progress)
        finally:
            conn.close()


@contextmanager
def _refusing(path: Path):
    """A file SQLite cannot read, read whole, or read as text: refused in one line (BadInput),
    in the parse and in the kernel part its thread finishes while the store writes."""
    try:
        yield
    except ColumnsError as e:
        raise BadInput(path, f"unreadable SQLite export ({e})") from None
    except sqlite3.DatabaseError as e:
        if str(e) == "interrupted":  # work_budget
            raise BadInput(
                path,
                f"reading it took over {STEPS_PER_BYTE} SQLite steps per byte, far more than any "
                f"real export needs: a hostile or corrupt file",
            ) from None
        raise BadInput(path, f"unreadable SQLite export ({e}); is the file truncated?") from None
    except UnicodeDecodeError as e:  # a table name that is not UTF-8 (sqlite3 raises it bare)
        raise BadInput(
            path, f"unreadable SQLite export (text that is not UTF-8: {e.reason}); is the file corrupt?"
        ) from None


def _parse(path: Path, conn, progress=None) -> Parsed:
    t = _tables(conn)
    if "StringIds" not in t:
        raise BadInput(path, "not an Nsight Systems export: no StringIds table")
    _refuse_hostile(path, conn, t)
    kt = t.get("CUPTI_ACTIVITY_KIND_KERNEL")
    if not kt or not conn.execute(f'SELECT 1 FROM "{kt}" LIMIT 1').fetchone():
        raise BadInput(path, _no_kernels(conn, t))
    kc = _columns(conn, kt)
    need = {"start", "end", "correlationId", "gridX", "blockX"}
    if not need <= kc or not ({"shortName", "demangledName"} & kc):
        raise BadInput(path, f"{kt} lacks columns {sorted(need - kc) or ['shortName/demangledName']}")

    def col(name: str, default: str = "NULL") -> str:
        return f"k.{name}" if name in kc else default

    name_col = "demangledName" if "demangledName" in kc else "shortName"
    short_col = "shortName" if "shortName" in kc else "demangledName"
    rt = t.get("CUPTI_ACTIVITY_KIND_RUNTIME")
    if rt and "globalPid" in kc and {"correlationId", "globalTid", "start", "end", "nameId"} <= _columns(conn, rt):
        api_join = f'LEFT JOIN "{rt}" r ON r.correlationId = k.correlationId AND (r.globalTid / {_PID}) = (k.globalPid / {_PID})'
        api_cols = "r.nameId, r.start, r.end, r.globalTid"
    else:
        api_join, api_cols = "", "NULL, NULL, NULL, NULL"
    # rowid spans, not counts: a count reads every page of the table (0.1 s at 1 M kernels,
    # before any thread starts); a span bounds it from the b-tree's ends
    size = path.stat().st_size
    most = _span(conn, kt, size)
    if _bulk_ok(path, conn, t, kt) and most + _span(conn, t.get("NVTX_EVENTS"), size) >= BULK_MIN_ROWS:
        return _parse_bulk(path, conn, t, kt, kc, rt if api_join else None, name_col, short_col, most, progress)
    bad = _count(conn, kt, "NOT (" + _NUMERIC_KERNEL.format(pid="globalPid" if "globalPid" in kc else "NULL") + ")")
    if bad:
        raise BadInput(path, _not_numeric(kt, bad))
    backwards = _count(conn, kt, '"end" < start')
    if backwards:
        raise BadInput(path, _backwards(kt, backwards))
    sql = f"""
        SELECT k.start, k.end, k.{name_col}, k.{short_col}, k.gridX, {col("gridY", "1")}, {col("gridZ", "1")},
               k.blockX, {col("blockY", "1")}, {col("blockZ", "1")}, {col("registersPerThread")},
               {col("staticSharedMemory")}, {col("dynamicSharedMemory")}, {col("streamId")}, {col("deviceId")},
               k.correlationId, {col("globalPid")}, {api_cols}
        FROM "{kt}" k {api_join}
        ORDER BY k.start"""
    strings = {k: _text(v) for k, v in conn.execute('SELECT id, value FROM "StringIds"')}
    rows = conn.execute(sql).fetchall()
    if len(rows) > _count(conn, kt, "1"):  # one launch call per kernel: more rows means repeated ids
        raise BadInput(path, f"{rt}: several launch calls share one kernel's correlation id and process: corrupt")

    rows = sorted(rows + _graph_rows(conn, t, kc, strings), key=lambda r: r[0])
    ranges = _ranges(path, conn, t, strings)
    calls = []
    for i, r in enumerate(rows):
        if type(r[18]) not in _INT_OR_NULL or type(r[20]) not in _INT_OR_NULL:
            raise BadInput(path, f"{rt}: a launch call whose start or thread id is not an integer")
        gtid = r[20] if r[20] is not None else r[16]
        if r[18] is not None and gtid is not None:
            calls.append((i, _sql_div(gtid, _PID), _sql_mod(gtid, _PID), r[18]))
    proj = project(ranges, calls)
    kernels = []
    for i, r in enumerate(rows):
        rng, path_ = proj.get(i, (None, None))
        gtid = r[20]
        kernels.append(
            (
                i,
                strings.get(r[2]) or str(r[2]),
                strings.get(r[3]) or str(r[3]),
                rng,
                path_,
                r[0],
                r[1],
                r[1] - r[0],
                r[4],
                r[5],
                r[6],
                r[7],
                r[8],
                r[9],
                r[10],
                r[11],
                r[12],
                r[13],
                r[14],
                r[15],
                strings.get(r[17]) if r[17] is not None else None,
                r[18],
                r[19],
                # (no launch call in the window: the process from the kernel's own globalPid)
                _sql_mod(_sql_div(gtid if gtid is not None else r[16], _PID), _PID)
                if gtid is not None or r[16] is not None
                else None,
                _sql_mod(gtid, _PID) if gtid is not None else None,
            )
        )
    paths = range_paths(ranges)
    range_rows = [
        (r[0], r[1], r[2], r[3], r[4], _sql_mod(r[5], _PID) if r[5] is not None else None, r[6], d, p)
        for r, (d, p) in zip(ranges, paths)
    ]
    rep = Parsed(str(path), FORMAT, SOURCE, kernels, range_rows, [], _facts(conn, t, _device_of(conn, kt, kc)))
    rep.ops = ops_from_kernel_ranges(kernels)  # nsys --pytorch=autograd-shapes-nvtx / emit_nvtx(record_shapes=True)
    if rep.ops:
        clean_torch_ranges(rep)
    rep.host_calls, rep.gpu_copies = host_calls(conn, t), gpu_copies(conn, t)
    return rep


def _graph_rows(conn, t: dict, kc: set, strings: dict) -> list[tuple]:
    """CUDA graph replays as launches, in the row path's row shape (start, end, name, short,
    grid and block, registers, shared memory, stream, device, correlation id, process, then
    the launching call's nameId, start, end, thread). nsys traces a graph launch as one
    CUPTI_ACTIVITY_KIND_GRAPH_TRACE row by default, its kernels absent from the kernel table:
    without these rows a graphed program's steps are invisible. Where the export traced the
    graphs' nodes (--cuda-graph-trace=node: kernels carry a graphNodeId) its kernels are
    the launches and no replay is added."""
    gt = t.get("CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    if not gt:
        return []
    gc = _columns(conn, gt)
    if not {"start", "end", "correlationId"} <= gc:
        return []
    if (
        "graphNodeId" in kc
        and conn.execute(
            f'SELECT 1 FROM "{t["CUPTI_ACTIVITY_KIND_KERNEL"]}" WHERE graphNodeId IS NOT NULL LIMIT 1'
        ).fetchone()
    ):
        return []

    def g(name: str) -> str:
        return f"g.{name}" if name in gc else "NULL"

    rt = t.get("CUPTI_ACTIVITY_KIND_RUNTIME")
    if rt and "globalPid" in gc and {"correlationId", "globalTid", "start", "end", "nameId"} <= _columns(conn, rt):
        join = f'LEFT JOIN "{rt}" r ON r.correlationId = g.correlationId AND (r.globalTid / {_PID}) = (g.globalPid / {_PID})'
        call = "r.nameId, r.start, r.end, r.globalTid"
    else:
        join, call = "", "NULL, NULL, NULL, NULL"
    out = []
    for r in conn.execute(
        f'SELECT g.start, g."end", {g("graphId")}, {g("graphExecId")}, {g("streamId")},'
        f' {g("deviceId")}, g.correlationId, {g("globalPid")}, {call} FROM "{gt}" g {join}'
        " WHERE typeof(g.start) = 'integer' AND typeof(g.\"end\") = 'integer' ORDER BY g.start"
    ):
        name = f"CUDA graph {r[2]} (exec {r[3]})"
        out.append(
            (
                r[0],
                r[1],
                name,
                name,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                r[4],
                r[5],
                r[6],
                r[7],
                r[8] if type(r[8]) is int else None,
                r[9],
                r[10],
                r[11],
            )
        )
    return out


# CUPTI_ACTIVITY_KIND_SYNCHRONIZATION types that block the host (2: a stream waits on an event)
_SYNC_TYPES = {1: "cudaEventSynchronize", 3: "cudaStreamSynchronize", 4: "cudaDeviceSynchronize"}


def host_calls(conn, t: dict) -> list[tuple]:
    """(kind, name, start_ns, end_ns, pid, tid) of the synchronising, allocating, module-loading,
    copying and setting calls, by start; CUPTI's synchronisation records where no such call
    carries their correlation id."""
    st = t["StringIds"]
    ids: dict[int, tuple[str, str]] = {}
    for k, v in conn.execute(f"SELECT id, value FROM \"{st}\" WHERE value GLOB 'cu*'"):
        if type(k) is int and isinstance(v, str):
            kind = host_kind(call_name(v))
            if kind:
                ids[k] = (kind, call_name(v))
    out: list[tuple] = []
    corr: set = set()
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        name = t.get(table)
        if not ids or not name or not {"nameId", "start", "end", "globalTid", "correlationId"} <= _columns(conn, name):
            continue
        keys = sorted(ids)
        for a in range(0, len(keys), 500):
            part = keys[a : a + 500]
            for nid, s, e, gtid, c in conn.execute(
                f'SELECT nameId, start, "end", globalTid, correlationId FROM "{name}" WHERE nameId IN '
                f"({','.join('?' * len(part))})",
                part,
            ):
                if type(s) is int and type(e) is int:
                    kind, nm = ids[nid]
                    out.append((kind, nm, s, e) + _pid_tid(gtid))
                    if kind == "sync":
                        corr.add(c)
    sy = t.get("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    if sy and {"start", "end", "syncType", "correlationId"} <= _columns(conn, sy):
        pid = "globalPid" if "globalPid" in _columns(conn, sy) else "NULL"
        for s, e, typ, c, gpid in conn.execute(f'SELECT start, "end", syncType, correlationId, {pid} FROM "{sy}"'):
            if typ in _SYNC_TYPES and c not in corr and type(s) is int and type(e) is int:
                out.append(("sync", _SYNC_TYPES[typ], s, e, _pid_tid(gpid)[0], None))
    out.sort(key=lambda r: r[2])
    return out


def _pid_tid(gid) -> tuple:
    if type(gid) is not int:
        return None, None
    return _sql_mod(_sql_div(gid, _PID), _PID), _sql_mod(gid, _PID)


# CUpti_ActivityMemcpyKind
_COPY_KINDS = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}


def gpu_copies(conn, t: dict) -> list[tuple]:
    """(kind memcpy|memset, direction, bytes, pageable 0/1, start_ns, end_ns, stream) of the
    GPU's memory copies and sets, by start. Pageable: either side is pageable host memory
    (the memory kind ENUM_CUDA_MEM_KIND names PAGEABLE; CUPTI's 1 where it is absent)."""
    pageable = 1
    mk = t.get("ENUM_CUDA_MEM_KIND")
    if mk and {"id", "name"} <= _columns(conn, mk):
        row = conn.execute(f"SELECT id FROM \"{mk}\" WHERE name LIKE '%PAGEABLE'").fetchone()
        pageable = row[0] if row else pageable
    out: list[tuple] = []
    mt = t.get("CUPTI_ACTIVITY_KIND_MEMCPY")
    if mt and {"start", "end", "bytes", "copyKind"} <= (cols := _columns(conn, mt)):
        src, dst = (c if c in cols else "NULL" for c in ("srcKind", "dstKind"))
        stream = "streamId" if "streamId" in cols else "NULL"
        for s, e, b, k, sk, dk, sid in conn.execute(
            f'SELECT start, "end", bytes, copyKind, {src}, {dst}, {stream} FROM "{mt}"'
        ):
            if type(s) is int and type(e) is int:
                out.append(("memcpy", _COPY_KINDS.get(k, "unknown"), b, int(pageable in (sk, dk)), s, e, sid))
    st = t.get("CUPTI_ACTIVITY_KIND_MEMSET")
    if st and {"start", "end", "bytes"} <= (cols := _columns(conn, st)):
        kind = "memKind" if "memKind" in cols else "NULL"
        stream = "streamId" if "streamId" in cols else "NULL"
        for s, e, b, mk_, sid in conn.execute(f'SELECT start, "end", bytes, {kind}, {stream} FROM "{st}"'):
            if type(s) is int and type(e) is int:
                out.append(("memset", "device" if mk_ != pageable else "host", b, int(mk_ == pageable), s, e, sid))
    out.sort(key=lambda r: r[4])
    return out


def _rowids(conn, table: str) -> tuple:
    """(min rowid, max rowid) of a table, from its b-tree's ends (one query with both
    aggregates would scan it); (None, None) when it is empty."""
    return conn.execute(f'SELECT (SELECT min(rowid) FROM "{table}"), (SELECT max(rowid) FROM "{table}")').fetchone()


# a row of a real export's kernel or NVTX table takes more bytes of the file than this
_ROW_BYTES = 16


def _span(conn, table: str | None, size: int, ends: tuple | None = None) -> int:
    """An upper bound of a table's rows: its rowid span, read from the b-tree's ends (or
    `ends`, read already); its count where the span is more rows than a file of `size` bytes
    holds (sparse rowids: a hand-made or hostile file, whose span would size the columns read
    into it)."""
    lo, hi = ends if ends is not None else _rowids(conn, table) if table else (None, None)
    if lo is None:
        return 0
    return (
        hi - lo + 1
        if hi - lo + 1 <= size // _ROW_BYTES
        else conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    )


def _bulk_ok(path: Path, conn, t: dict, kt: str) -> bool:
    """The column path reads tables by rowid and joins StringIds by id: real exports. Views or
    WITHOUT ROWID tables, StringIds ids that are not its rowid (they could repeat, multiplying
    rows), a file in WAL mode (its other readers would leave -wal/-shm files beside it: the
    row path opens it immutable) or in UTF-16 take the row path, whose reading has a work
    budget."""
    if wal_mode(path) or conn.execute("PRAGMA encoding").fetchone()[0] != "UTF-8":
        return False  # (the store ATTACHes the file: SQLite attaches only its own text encoding)
    for name in (kt, t.get("CUPTI_ACTIVITY_KIND_RUNTIME"), t.get("NVTX_EVENTS"), t.get("StringIds")):
        if name is None:
            continue
        row = conn.execute("SELECT type, sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()
        if not row or row[0] != "table" or "WITHOUT ROWID" in re.sub(r"\s+", " ", str(row[1] or "")).upper():
            return False
    ids = [r for r in conn.execute(f'PRAGMA table_info("{t["StringIds"]}")') if r[1] == "id"]
    return (
        not _torch_shapes(conn, t)
        and bool(ids)
        and ids[0][5] == 1
        and str(ids[0][2]).upper() == "INTEGER"
        and sum(r[5] > 0 for r in conn.execute(f'PRAGMA table_info("{t["StringIds"]}")')) == 1
    )


def _torch_shapes(conn, t: dict) -> bool:
    """PyTorch's operator ranges with shapes (emit_nvtx(record_shapes=True), nsys
    --pytorch=autograd-shapes-nvtx) among the export's first 10,000 ranges: the row path builds
    the ops table from their names. Every operator opens one, so the first ranges show them."""
    nt = t.get("NVTX_EVENTS")
    if not nt:
        return False
    cols = _columns(conn, nt)
    text = "text" if "text" in cols else "NULL"
    by_id = (
        f'(SELECT value FROM "{t["StringIds"]}" WHERE id = n.textId)'
        if "textId" in cols and "StringIds" in t
        else "NULL"
    )
    head = f'SELECT coalesce(n.{text}, {by_id}) AS s FROM (SELECT * FROM "{nt}" LIMIT 10000) AS n'
    if text == "NULL":
        head = head.replace("n.NULL", "NULL")
    return conn.execute(f"SELECT 1 FROM ({head}) WHERE s LIKE '%, sizes = [%' LIMIT 1").fetchone() is not None


def _parse_bulk(
    path: Path, conn, t: dict, kt: str, kc: set, rt: str | None, name_col: str, short_col: str, most: int, progress
) -> Parsed:
    """Kernels and ranges as columns (rows.Bulk): the kernel->launch-call join runs in SQLite,
    the NVTX projection in numpy (profkit.core.nvtx.Nesting); kernel rows themselves are
    copied by the store straight from this file."""
    import numpy as np

    def tell(phase):
        return (lambda n: progress(phase, n, None)) if progress else None

    # the kernels' order, their numeric checks and device in one read (each was a scan of its
    # own), in a thread beside the NVTX ranges' read; it counts them too
    pid = "globalPid" if "globalPid" in kc else "NULL"
    dev = (
        "CASE WHEN deviceId IS NULL THEN -1 WHEN typeof(deviceId) = 'integer' AND deviceId >= 0 THEN deviceId "
        "ELSE -2 END"
        if "deviceId" in kc
        else "-1"
    )
    # and the name keys (the few distinct ones are found here, not by a scan in the store) and
    # the launch-call join's keys (correlation id, process), each with flags: NULL, not an integer
    key_cols = (name_col, short_col, "correlationId", pid)
    keys = " ".join(f"CASE WHEN typeof({c}) = 'integer' THEN {c} ELSE 0 END, " for c in key_cols)
    flags = " | ".join(
        f"(({c} IS NULL) << {2 * i}) | ((typeof({c}) NOT IN ('integer', 'null')) << {2 * i + 1})"
        for i, c in enumerate(key_cols)
    )
    typed = (
        f"SELECT rowid, CASE WHEN typeof(start) = 'integer' THEN start ELSE 0 END, "
        f'{_NUMERIC_KERNEL.format(pid=pid)}, {dev}, {keys}{flags} FROM "{kt}"'
    )
    # the same columns as they are: a clean export's values are all integers, which ADBC's
    # strictly typed read proves (typeof() for each value and key cost 0.5 s of 0.8 at 1 M)
    raw = (
        f'SELECT rowid, start, "end", {pid}, {"deviceId" if "deviceId" in kc else "-1"}, {name_col}, {short_col},'
        f' correlationId FROM "{kt}"'
    )

    def read_kernels():
        import numpy as np

        try:
            row, start, end, gpid, dev, name, short, corr = read_columns(
                path, raw, 8, n_rows=most, bound=True, strict=True
            )[0]
        except ColumnsError:  # a NULL, or a value of another type: typeof() tells them apart
            return _KernelRead(*read_columns(path, typed, 9, n_rows=most, bound=True)[0])
        numeric = ~_sub_overflows(end, start)  # ("end" - start is then a real number in SQLite)
        backwards = int(np.count_nonzero(numeric & (end < start)))
        if backwards:
            raise BadInput(path, _backwards(kt, backwards))
        del end
        if "deviceId" in kc:
            dev = np.where(dev >= 0, dev, -2)
        return _KernelRead(row, start, numeric, dev, name, short, corr, gpid, np.zeros(len(row), dtype=np.uint8))

    kernels_read = Pending(read_kernels, name="profkit-kernels")
    # the kernel -> launch call join (the longest read: every runtime row) runs in a thread of
    # its own (SQLite and the ADBC driver work without the GIL) while this one reads the NVTX
    # ranges
    join = _LaunchCalls(path, kt, rt, t["StringIds"], most, kernels_read.result).start() if rt else None
    try:
        _refuse_long_kernel_names(path, conn, t, kt, name_col, short_col)
        r = _range_columns(path, conn, t, tell("NVTX ranges"))
        read = kernels_read.result()
        if read.names is None:
            _refuse_long_name_keys(path, conn, kt, name_col, short_col)
        krow_all, kstart_all, numeric, kdev, name_keys = read.row, read.start, read.numeric, read.dev, read.names
        read.row = read.start = read.numeric = read.dev = None  # (the join's thread holds it: used here, let go)
        n_kernels = len(krow_all)
        if not numeric.all():
            raise BadInput(path, _not_numeric(kt, int(len(numeric) - np.count_nonzero(numeric))))
        device = _device_in(conn, kt, kc, kdev)
        del numeric, kdev
        _release_arrow_memory()
    except BaseException:
        if join is not None:
            join.stop()
        raise
    names: list = r["names"] if r is not None else []
    longest = max((x for x in names if x is not None), key=len, default="")
    if len(longest) > MAX_NAME:
        if join is not None:
            join.stop()
        raise BadInput(path, name_too_long(longest))
    # The kernels (the rest of the join, their order, their calls' paths) are finished by a
    # thread of their own while the store writes the ranges, whose paths need no call
    ranges_done = threading.Event()
    nested: list = []  # the ranges' Nesting, once made: the kernel part places the calls in it
    kernel_rows = [krow_all, kstart_all]  # (handed over: the kernel part lets them go once ordered)
    del krow_all, kstart_all
    kernels = Pending(
        lambda: _refused_part(path, t, rt, join, kernel_rows, r, ranges_done, nested), name="profkit-kernels"
    )
    try:
        if progress:
            progress("NVTX projection", 0, None)
        if r is not None:
            thread = r["gtid"]  # a range without a thread: a key no other range has (calls: _kernel_part)
            if len(thread) and not r["has_thread"].all():
                thread[~r["has_thread"]] = (int(thread.min()) // _PID - 1) * _PID
            nest = Nesting(
                names, thread, None, r["start"], r["end"], r["name"], r["pushpop"], pid_of=lambda x: x // _PID
            )
            paths = list(nest.paths)  # (the calls' placing may add paths to nest.paths)
            # rows in the row path's order: start/end ranges, then push/pop, each by start (ties: file order)
            order = np.lexsort((r["row"], r["start"], r["pushpop"]))
            rows, domains = r["row"][order], r["domains"]
            r["row"] = None  # (the kernel part needs no range rowid)
            rpath = nest.range_path[order]
            nested.append(nest)
            del order
        else:
            paths, rpath, rows, domains = [], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), []
    finally:
        ranges_done.set()

    def col(name: str, default: str = "NULL") -> str:
        return f"k.{name}" if name in kc else default

    graphs = _graph_rows(conn, t, kc, {})
    st = t["StringIds"]
    # a kernel whose launch call lies outside the capture's window still has its process: the
    # kernel table's own globalPid (as on the row path)
    own_pid = "(k.globalPid / 16777216) % 16777216" if "globalPid" in kc else "NULL"
    api = (
        (
            "r.nameId",
            "r.start",
            "r.end",
            f"coalesce((r.globalTid / 16777216) % 16777216, {own_pid})",
            "r.globalTid % 16777216",
        )
        if rt
        else ("NULL", "NULL", "NULL", own_pid, "NULL")
    )
    # the kernel table's columns (k), its launch call's (r): names as keys (the kernel's string
    # ids, its call's nameId): the store maps the few distinct ones to names through name_sql
    # and the kernel part's api keys, no text per row (rows.Bulk)
    kernel_columns = (
        f"k.{name_col}",
        f"k.{short_col}",
        "k.start",
        "k.end",
        "k.end - k.start",
        "k.gridX",
        col("gridY", "1"),
        col("gridZ", "1"),
        "k.blockX",
        col("blockY", "1"),
        col("blockZ", "1"),
        col("registersPerThread"),
        col("staticSharedMemory"),
        col("dynamicSharedMemory"),
        col("streamId"),
        col("deviceId"),
        "k.correlationId",
        *api,
    )
    # a name key's text, as the row path reads it: the string, else the key itself, else 'None'
    name_sql = f"""
        WITH d AS (SELECT DISTINCT k.{name_col} AS a, k.{short_col} AS b FROM src."{kt}" k)
        SELECT x, coalesce(NULLIF(s.value, ''), CAST(x AS TEXT), 'None')
        FROM (SELECT a AS x FROM d UNION SELECT b FROM d) LEFT JOIN src."{st}" s ON s.id = x"""
    if name_keys is not None:  # every key an integer or NULL: the distinct ones, read with the kernels
        ints, has_null = name_keys
        name_sql = f"""SELECT j.value, coalesce(NULLIF(s.value, ''), CAST(j.value AS TEXT), 'None')
            FROM json_each('{json.dumps(ints.tolist())}') j LEFT JOIN src."{st}" s ON s.id = j.value""" + (
            " UNION ALL SELECT NULL, 'None'" if has_null else ""
        )
    nt = t.get("NVTX_EVENTS")
    cols = _columns(conn, nt) if nt else set()
    dom = "n.domainId" if "domainId" in cols else "NULL"
    g = "n.globalTid" if "globalTid" in cols else "NULL"
    # the NVTX table's columns (n); d: the domain `dom` names (domains, from DOMAIN_CREATE events)
    range_columns = (
        f"CASE WHEN typeof({dom}) = 'integer' AND {dom} != 0 THEN coalesce(d.name, 'domain' || {dom}) END",
        f"CASE n.eventType WHEN {PUSH_POP} THEN 'push_pop' ELSE 'start_end' END",
        "n.start",
        'n."end"',
        f"({g} / {_PID}) % {_PID}",
        f"{g} % {_PID}",
    )
    bulk = Bulk(
        str(path),
        kt,
        kernel_columns,
        nt,
        range_columns,
        dom,
        rows,
        rpath,
        paths,
        domains,
        n_kernels,
        kernels.result,
        call_table=rt,
        string_table=st,
        name_sql=name_sql,
        ready=kernels.done,
    )
    facts = _facts(conn, t, device)
    out = Parsed(
        str(path),
        FORMAT,
        SOURCE,
        # a Bulk's rows, read when asked (Parsed.bulk says so): Parsed types them as lists
        LazyRows(bulk.n_kernels, bulk.kernel_rows),  # type: ignore[arg-type]
        LazyRows(bulk.n_ranges, bulk.range_rows),  # type: ignore[arg-type]
        [],
        facts,
        bulk=bulk,
    )
    out.host_calls, out.gpu_copies = host_calls(conn, t), gpu_copies(conn, t)
    # graph replays are few (one a step): stored as rows after the bulk's kernels, without
    # their call's NVTX path (the bulk's range nesting is the store's to place calls in)
    strings = _strings(conn, t, np.unique(np.array([r[17] for r in graphs if type(r[17]) is int] or [0])))
    out.extra_kernels = [
        (n_kernels + i, r[2], r[3], None, None, r[0], r[1], r[1] - r[0])
        + tuple(r[4:15])
        + (
            r[15],
            strings.get(r[17]) if r[17] is not None else None,
            r[18],
            r[19],
            _sql_mod(_sql_div(r[20], _PID), _PID) if r[20] is not None else None,
            _sql_mod(r[20], _PID) if r[20] is not None else None,
        )
        for i, r in enumerate(sorted(graphs, key=lambda r: r[0]))
    ]
    return out


class _KernelRead:
    """The kernels' read, its key columns made into
    - names: (the distinct integer name keys, whether a key is NULL); None where a key is
      neither (the store's name query scans then);
    - keys: a _Keys of the kernels (rowid, correlation id, process) for the launch-call join;
      None where one is neither an integer nor NULL (the join then runs in SQLite, whose
      comparisons of other types numpy does not copy).
    row, start, numeric, dev: per kernel its rowid, start, whether its numbers are integers,
    its device (-1 none, -2 not one); count: how many (kept where the parse lets them go)."""

    def __init__(self, row, start, numeric, dev, name, short, corr, gpid, flags):
        import numpy as np

        self.row, self.start, self.numeric, self.dev, self.count = row, start, numeric, dev, len(row)
        self.names = (
            None
            if (flags & 0b1010).any()
            else (
                np.union1d(np.unique(name[(flags & 1) == 0]), np.unique(short[(flags & 4) == 0])),
                bool((flags & 0b0101).any()),
            )
        )
        self.keys = None if (flags & 0b10100000).any() else _Keys(row, corr, _pid_of(gpid), (flags & 0b01010000) == 0)


class _Keys:
    """Rows and their join keys: correlation id, process (SQLite's globalId / 2^24, truncated);
    `usable`: neither is NULL (a NULL key joins nothing)."""

    def __init__(self, row, corr, pid, usable):
        self.row, self.corr, self.pid, self.usable = row, corr, pid, usable


def _sub_overflows(a, b):
    """Where a - b leaves int64 (numpy wraps it around; SQLite makes it a real number)."""
    d = a - b
    return ((a ^ b) & (a ^ d)) < 0


def _sql_div(a: int, b: int) -> int:
    """a / b as SQLite divides integers (b > 0): truncated toward zero, as the column path's
    SQL computes a process and thread id from a global one (Python's // floors: a negative id
    of a hostile file would differ)."""
    q = abs(a) // b
    return q if a >= 0 else -q


def _sql_mod(a: int, b: int) -> int:
    """a % b as SQLite takes it (b > 0): the sign of a."""
    return a - b * _sql_div(a, b)


def _pid_of(gid):
    """gid / 2^24 as SQLite divides integers: truncated toward zero (numpy's // floors)."""
    q = gid // _PID
    q += ((gid % _PID) != 0) & (gid < 0)
    return q


def _matched(kernels: _Keys, calls: _Keys, most: int):
    """(kernel index, call index) of every kernel and call with equal keys, as SQLite's join
    of them would pair them; None where the keys do not fit numpy's one-key search (the join
    runs in SQLite). More than `most` pairs raise TooManyRows, before they are made."""
    import numpy as np

    pids = np.unique(kernels.pid[kernels.usable])
    m = max(len(pids), 1)
    big = max((max(-int(x.min()), int(x.max())) for x in (kernels.corr, calls.corr) if len(x)), default=0)
    if big >= (1 << 62) // (m + 1):
        return None  # corr * m + process index would overflow
    # (one array at a time, each let go once used: 10 M kernels' and calls' keys are 80 MB each)
    kkey = np.minimum(np.searchsorted(pids, kernels.pid), m - 1)
    kkey += kernels.corr * m
    kkey[~kernels.usable] = np.iinfo(np.int64).max  # (past every call's key)
    order = np.argsort(kkey, kind="stable")
    sk = kkey[order]
    del kkey
    cp = np.searchsorted(pids, calls.pid)
    c_ok = calls.usable & (cp < len(pids))
    c_ok[c_ok] &= pids[cp[c_ok]] == calls.pid[c_ok]
    np.minimum(cp, m - 1, out=cp)
    cp += calls.corr * m
    ckey = cp
    del cp
    lo = np.searchsorted(sk, ckey, "left")
    n = np.searchsorted(sk, ckey, "right")
    n -= lo
    n[~c_ok] = 0
    total = int(n.sum())
    if total > most:
        raise TooManyRows(f"more than {most} rows")
    del ckey, sk, c_ok
    ci = np.repeat(np.arange(len(n), dtype=np.int32 if len(n) < 2**31 else np.int64), n)
    first = np.repeat(lo, n) + (np.arange(total) - np.repeat(np.cumsum(n) - n, n))
    del lo, n
    return order[first], ci


def _release_arrow_memory() -> None:
    """Hand the column reads' freed Arrow buffers back (Arrow's allocator keeps them: at 16 M
    ranges ~200 MB of the peak, held while the projection and the writes run)."""
    try:
        import pyarrow

        pyarrow.default_memory_pool().release_unused()
    except ImportError:
        pass


def _refused_part(path: Path, *a) -> KernelPart:
    """_kernel_part, its read errors (a corrupt page of the runtime table, found by the join)
    refusing the file as the parse would."""
    with _refusing(path):
        return _kernel_part(path, *a)


def _kernel_part(
    path: Path, t: dict, rt: str | None, join, kernel_rows: list, r, ranges_done, nested: list
) -> KernelPart:
    """The kernels in seq order, each with its launch call's rowid and NVTX path (rows.KernelPart):
    the launch-call join's result, the kernels no call launched, the calls placed in the ranges."""
    import numpy as np

    krow_all, kstart_all = kernel_rows  # every kernel's rowid and start, in file order
    kernel_rows.clear()
    try:
        if join is not None:
            jk, jr, cstart, cgtid, jk_sorted, api_keys = join.result()
        else:
            jk = jr = cstart = cgtid = jk_sorted = api_keys = np.zeros(0, dtype=np.int64)
    finally:
        if join is not None:
            join.stop()
    # rowids come back ascending from a table scan; else one sort order serves both lookups
    order_all = None if len(krow_all) < 2 or (np.diff(krow_all) > 0).all() else np.argsort(krow_all, kind="stable")
    all_sorted = krow_all if order_all is None else krow_all[order_all]
    # kernels no call launched keep one row without a call (the row path's LEFT JOIN); a
    # joined rowid is one of krow_all's, so a sorted search finds it exactly
    called = np.zeros(len(all_sorted), dtype=bool)
    called[np.searchsorted(all_sorted, jk_sorted)] = True
    lone = all_sorted[~called]
    del called, jk_sorted
    krow = np.concatenate((jk, lone))
    rrow = np.concatenate((jr, np.full(len(lone), -1, dtype=np.int64)))
    has_call = np.concatenate((np.ones(len(jk), dtype=bool), np.zeros(len(lone), dtype=bool)))
    cstart = np.concatenate((cstart, np.zeros(len(lone), dtype=np.int64)))
    cgtid = np.concatenate((cgtid, np.zeros(len(lone), dtype=np.int64)))
    pos = np.searchsorted(all_sorted, krow)
    if order_all is not None:
        pos = order_all[pos]
    seq_order = np.lexsort((rrow, krow, kstart_all[pos]))  # ORDER BY start (ties: file order)
    del jk, jr, lone, pos, all_sorted, order_all, krow_all, kstart_all
    krow = krow[seq_order]  # (one column at a time: 10 M kernels' five at once were 0.4 GB more)
    rrow = rrow[seq_order]
    has_call = has_call[seq_order]
    cstart = cstart[seq_order]
    cgtid = cgtid[seq_order]
    del seq_order
    k_path = np.full(len(krow), -1, dtype=np.int64)
    paths: list = []
    if r is not None:
        ranges_done.wait()
        if not nested:
            raise BadInput(path, "the NVTX ranges could not be projected")  # (the parse itself raised why)
        nest, calls = nested[0], np.flatnonzero(has_call)
        thread, has_thread = r["gtid"], r["has_thread"]
        if (
            len(thread)
            and not has_thread.all()
            and len(calls)
            and (cgtid[calls] // _PID == int(thread[~has_thread][0]) // _PID).any()
        ):
            # a call in the process made up for ranges without a thread (a hostile file): a key no call has
            thread = thread.copy()
            thread[~has_thread] = (min(int(thread.min()), int(cgtid.min())) // _PID - 1) * _PID
            nest = Nesting(
                r["names"], thread, None, r["start"], r["end"], r["name"], r["pushpop"], pid_of=lambda x: x // _PID
            )
        c_thread, c_time = cgtid[calls], cstart[calls]
        del cgtid, cstart
        k_path[calls] = nest.place(c_thread, None, c_time)
        paths = nest.paths
        del c_thread, c_time
    st = t["StringIds"]
    if not rt:
        api_sql = "SELECT NULL, NULL WHERE 0"
    elif len(api_keys) and api_keys[0] == _NOT_INT:  # a nameId that is not an integer: the store reads them all
        api_sql = None
    else:
        api_sql = (
            f"SELECT j.value, s.value FROM json_each('{json.dumps(api_keys.tolist())}') j"
            f' LEFT JOIN src."{st}" s ON s.id = j.value'
        )
    part = KernelPart(krow, rrow, k_path, paths, api_sql)
    if api_sql is not None:  # (else the store stages the kernels as a table to read the keys from)
        part.pack()  # the JSON the store reads the kernels' columns from, made here, beside the ranges' writing
    return part


_SPLIT_ROWS = 2_000_000  # rowids past which the NVTX ranges read in two threads


class _LaunchCalls:
    """The kernel -> launch call join of one export, read in a thread: per launched kernel
    its rowid, its call's rowid, start and thread (rowids also sorted, for the checks).

    Most runtime rows are not launch calls (1 M kernels came with 11 M calls: cuGetProcAddress,
    cuKernelGetName, ...), and probing the kernels for each costs most of the join. So the
    calls named as launches (_LAUNCH_CALL) join first; only when kernels are left without a
    call are the other calls joined too, so the result is the full join's, exactly."""

    def __init__(self, path: Path, kt: str, rt: str, st: str, most: int, kernels):
        # most: an upper bound of the kernels (a join bomb stops there); kernels(): the kernels'
        # own read (a _KernelRead: its count and join keys), asked once the calls are read
        self.path, self.kt, self.rt, self.st, self.most, self.kernels = path, kt, rt, st, most, kernels
        self.rows, self._stop = 0, False
        self._out: tuple | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="profkit-launch-calls", daemon=True)

    def start(self) -> _LaunchCalls:
        self._thread.start()
        return self

    def _seen(self, n: int) -> None:
        if self._stop:
            raise _Stopped()
        self.rows = n

    def _launch_name_ids(self) -> list[int]:
        conn = _open(self.path)
        try:
            return [
                i
                for i, v in conn.execute(f"SELECT id, value FROM \"{self.st}\" WHERE value GLOB 'cu*'")
                if type(i) is int and isinstance(v, str) and _LAUNCH_CALL.match(v)
            ]
        finally:
            conn.close()

    def _join(self, where: str, max_rows: int, done: int = 0):
        P, kt, rt = _PID, self.kt, self.rt
        cols, _ = read_columns(
            self.path,
            f"""
            SELECT k.rowid, r.rowid, CASE WHEN typeof(r.start) = 'integer' THEN r.start ELSE 0 END,
                   CASE WHEN typeof(r.globalTid) = 'integer' THEN r.globalTid ELSE 0 END,
                   typeof(r.start) = 'integer' AND typeof(r.globalTid) = 'integer',
                   CASE WHEN typeof(r.nameId) = 'integer' THEN r.nameId ELSE {_NOT_INT} END
            FROM "{rt}" r CROSS JOIN "{kt}" k
              ON r.correlationId = k.correlationId AND (r.globalTid / {P}) = (k.globalPid / {P})
            {where}""",
            6,
            on_rows=lambda n: self._seen(done + n),
            max_rows=max_rows,
        )  # (a join bomb stops there)
        return cols

    def _calls(self, where: str):
        """The join in numpy: the calls' columns read alone (no probe of the kernels per call),
        paired with the kernels' keys read beside the NVTX ranges; None where the keys are not
        all integers (or NULL) or do not fit one int64 (then _join, in SQLite)."""
        import numpy as np

        try:  # the columns as they are, where all are integers (read_kernels)
            row, start, gtid, name, corr = read_columns(
                self.path,
                f"""
                SELECT r.rowid, r.start, r.globalTid, r.nameId, r.correlationId FROM "{self.rt}" r {where}""",
                5,
                on_rows=self._seen,
                strict=True,
            )[0]
            ok, flags = np.ones(len(row), dtype=bool), np.zeros(len(row), dtype=np.uint8)
        except ColumnsError:
            row = None
        if row is None:
            row, start, gtid, ok, name, corr, flags = self._typed_calls(where)
        kernels = self.kernels().keys
        if kernels is None or (flags & 2).any():
            return None
        pairs = _matched(kernels, _Keys(row, corr, _pid_of(gtid), flags == 0), self.most)
        del corr, flags
        if pairs is None:
            return None
        ki, ci = pairs
        out = [kernels.row[ki]]
        del ki
        for col in (row, start, gtid, ok, name):  # (one at a time: 10 M calls' columns are 80 MB each)
            out.append(col[ci])
        return out

    def _typed_calls(self, where: str) -> list:
        """The calls' columns with typeof(): a NULL or a value of another type in them."""
        cols, _ = read_columns(
            self.path,
            f"""
            SELECT r.rowid, CASE WHEN typeof(r.start) = 'integer' THEN r.start ELSE 0 END,
                   CASE WHEN typeof(r.globalTid) = 'integer' THEN r.globalTid ELSE 0 END,
                   typeof(r.start) = 'integer' AND typeof(r.globalTid) = 'integer',
                   CASE WHEN typeof(r.nameId) = 'integer' THEN r.nameId ELSE {_NOT_INT} END,
                   CASE WHEN typeof(r.correlationId) = 'integer' THEN r.correlationId ELSE 0 END,
                   (r.correlationId IS NULL OR r.globalTid IS NULL)
                   | ((typeof(r.correlationId) NOT IN ('integer', 'null')
                       OR typeof(r.globalTid) NOT IN ('integer', 'null')) << 1)
            FROM "{self.rt}" r {where}""",
            7,
            on_rows=self._seen,
        )
        return cols

    def _run(self) -> None:
        import numpy as np

        try:
            ids = ",".join(map(str, self._launch_name_ids()))
            if ids:
                first = self._calls(f"WHERE r.nameId IN ({ids})")
                if first is None:
                    first = self._join(f"WHERE r.nameId IN ({ids})", self.most)
                read = self.kernels()
                rest, n_kernels, read.keys = None, read.count, None  # (the keys: used)
                if len(first[0]) < n_kernels:  # kernels left: calls under other names may own them
                    rest = self._join(
                        f"WHERE r.nameId IS NULL OR r.nameId NOT IN ({ids})", n_kernels - len(first[0]), len(first[0])
                    )
                cols = first if rest is None or not len(rest[0]) else [np.concatenate(x) for x in zip(first, rest)]
            else:
                cols = self._join("", self.most)
            jk, jr, cstart, cgtid, ok, name = cols
            jk_sorted = np.sort(jk)  # (np.unique hashes: 8x slower than a sort at 1 M ids)
            self._out = (jk, jr, cstart, cgtid, ok, jk_sorted, np.unique(name))  # the calls' API name keys
        except BaseException as e:  # handed to the caller's thread by result()
            self._error = e

    def result(self, on_rows=None):
        """(jk, jr, cstart, cgtid, jk sorted, distinct API name keys) once the join is read; its errors
        raise here."""
        while self._thread.is_alive():
            self._thread.join(0.1)
            if on_rows:
                on_rows(self.rows)
        if isinstance(self._error, TooManyRows) or (
            self._out is not None and len(self._out[5]) > 1 and (self._out[5][1:] == self._out[5][:-1]).any()
        ):
            raise BadInput(
                self.path, f"{self.rt}: several launch calls share one kernel's correlation id and process: corrupt"
            )  # one launch call per kernel
        if self._error is not None:
            raise self._error
        jk, jr, cstart, cgtid, ok, jk_sorted, api_keys = self._out
        self._out = None  # (the caller owns the columns now: 10 M kernels' are ~0.6 GB)
        if len(ok) and not ok.all():
            raise BadInput(self.path, f"{self.rt}: a launch call whose start or thread id is not an integer")
        return jk, jr, cstart, cgtid, jk_sorted, api_keys

    def stop(self) -> None:
        """Stop the read at its next batch (an error or an interrupt in the caller) and wait."""
        self._stop = True
        self._thread.join()


class _Stopped(Exception):
    pass


def _refuse_long_name_keys(path: Path, conn, kt: str, name_col: str, short_col: str) -> None:
    """A kernel whose name column holds the name itself (text or a BLOB where a string id
    belongs; the row path reads it as the name) over MAX_NAME refuses the file, as the row path
    does. Scanned only where the kernels' read found a key that is not an integer."""
    for c in (name_col, short_col):
        rows = conn.execute(
            f"SELECT k.{c} FROM \"{kt}\" k WHERE typeof(k.{c}) IN ('text', 'blob') AND length(k.{c}) > {MAX_NAME}"
        )
        for (v,) in rows:  # (a BLOB's length is its bytes: decoded, it may be shorter)
            text = _text(v) or ""
            if len(text) > MAX_NAME:
                raise BadInput(path, name_too_long(text))


def _refuse_long_kernel_names(path: Path, conn, t: dict, kt: str, name_col: str, short_col: str) -> None:
    """A kernel named by a string over MAX_NAME refuses the file (the row path's check, done in
    SQLite: the column path never holds its kernel rows in Python)."""
    st = t["StringIds"]
    long = [
        i
        for (i,) in conn.execute(f'SELECT id FROM "{st}" WHERE length(value) > {MAX_NAME} LIMIT 1000')
        if type(i) is int
    ]
    if not long:
        return
    ids = ",".join(map(str, long))
    hit = conn.execute(
        f'SELECT s.value FROM "{st}" s WHERE s.id IN ({ids}) AND EXISTS (SELECT 1 FROM "{kt}" k '
        f"WHERE k.{name_col} = s.id OR k.{short_col} = s.id) LIMIT 1"
    ).fetchone()
    if hit:
        raise BadInput(path, name_too_long(_text(hit[0]) or ""))


def _range_columns(path: Path, conn, t: dict, on_rows) -> dict | None:
    """NVTX push/pop and start/end ranges as columns, names resolved (text, else StringIds
    through textId), domains named by their DOMAIN_CREATE events."""
    import numpy as np

    nt = t.get("NVTX_EVENTS")
    if not nt:
        return None
    cols = _columns(conn, nt)
    if not {"start", "end", "eventType"} <= cols:
        raise BadInput(path, f"{nt} lacks columns {sorted({'start', 'end', 'eventType'} - cols)}")
    gcond = " OR typeof(globalTid) NOT IN ('integer', 'null')" if "globalTid" in cols else ""
    text = "text" if "text" in cols else "NULL"
    # a textId beyond 32 bits names nothing (hostile); narrow columns keep 16 M ranges small
    text_id = (
        "CASE WHEN typeof(textId) = 'integer' AND textId BETWEEN -2147483648 AND 2147483647 THEN textId END"
        if "textId" in cols
        else "NULL"
    )
    gtid = "globalTid" if "globalTid" in cols else "NULL"
    where = f'FROM "{nt}" WHERE eventType IN ({PUSH_POP}, {START_END})'
    lo, hi = _rowids(conn, nt)
    row_t = "int32" if -(2**31) <= (lo or 0) and (hi or 0) < 2**31 else "int64"
    select = f"""
        SELECT rowid, CASE WHEN typeof(start) = 'integer' THEN start ELSE 0 END,
               CASE WHEN typeof("end") = 'integer' THEN "end" ELSE {I64_MAX} END, eventType = {PUSH_POP},
               CASE WHEN typeof({gtid}) = 'integer' THEN {gtid} ELSE 0 END, coalesce({text_id}, 0),
               ({gtid} IS NULL) | (({text} IS NULL) << 1) | (({text_id} IS NULL) << 2)
               | ((typeof(start) != 'integer' OR typeof("end") NOT IN ('integer', 'null'){gcond}) << 3),
               coalesce(CAST({text} AS BLOB), x'')
        {where}"""
    # the same as they are, NULLs as the typed query has them: a clean export's values are all
    # integers, which ADBC's strictly typed read proves (typeof() on each cost a third of the read)
    plain = f"""
        SELECT rowid, start, ifnull("end", {I64_MAX}), eventType = {PUSH_POP}, ifnull({gtid}, 0),
               ifnull({"textId" if "textId" in cols else "NULL"}, 0),
               ({gtid} IS NULL) | (({text} IS NULL) << 1) | (({"textId" if "textId" in cols else "NULL"} IS NULL) << 2),
               coalesce(CAST({text} AS BLOB), x'')
        {where}"""
    # millions of ranges read in two halves by rowid, a thread each (the longest read of a
    # range-heavy export: 16 M ranges ~10 s of one core); counted per half, filled in place
    halves = (
        [(lo, lo + (hi - lo) // 2), (lo + (hi - lo) // 2 + 1, hi)]
        if lo is not None and hi - lo > _SPLIT_ROWS
        else [(lo, hi)]
    )
    if len(halves) > 1:  # (placed back to back by their counts)
        counts = [
            conn.execute(f"SELECT count(*) {where} AND rowid BETWEEN {a} AND {b}").fetchone()[0] for a, b in halves
        ]
        parts = [(f"{{}} AND rowid BETWEEN {a} AND {b} ORDER BY rowid", n) for (a, b), n in zip(halves, counts)]
    else:  # one read, filled in place up to the rowid span and cut: no count scan before it
        parts = [("{} ORDER BY rowid", _span(conn, nt, path.stat().st_size, (lo, hi)))]
    dtypes = [row_t, "int64", "int64", "bool", "int64", "int32", "int8"]
    try:
        (rowid, start, end, pushpop, g, tid_, flags), (code, raw) = read_columns_in_parts(
            path,
            [(q.format(plain), n) for q, n in parts],
            7,
            blob=True,
            on_rows=on_rows,
            dtypes=dtypes[:5] + ["int64", "int8"],
            bound=len(parts) == 1,
            strict=True,
        )
        wide = (tid_ < -(2**31)) | (tid_ >= 2**31)  # a textId beyond 32 bits names nothing (the typed query's CASE)
        if wide.any():
            flags[wide] |= 4
            tid_[wide] = 0
        tid_ = tid_.astype(np.int32)
        del wide
    except ColumnsError:  # a value of another type: typeof() finds it (a bad row refuses the file)
        (rowid, start, end, pushpop, g, tid_, flags), (code, raw) = read_columns_in_parts(
            path,
            [(q.format(select), n) for q, n in parts],
            7,
            blob=True,
            on_rows=on_rows,
            dtypes=dtypes,
            bound=len(parts) == 1,
        )
    bad = int(np.count_nonzero(flags & 8))  # checked in the same pass as the read
    if bad:
        raise BadInput(path, f"{nt}: {bad} ranges whose start, end or thread id is not a 64-bit integer")
    # a name: the text if any, else the registered string of textId (None if neither)
    from_text = (flags & 2) == 0
    by_id = ~from_text & ((flags & 4) == 0)
    has_thread = (flags & 1) == 0
    del flags
    ids = np.unique(tid_[by_id])
    strings = _strings(conn, t, ids)
    names: list = []
    index: dict = {}

    def code_of(v) -> int:
        if v not in index:
            index[v] = len(names)
            names.append(v)
        return index[v]

    text_code = np.array([code_of(b.decode("utf-8", "replace")) for b in raw], dtype=np.int32)
    id_code = np.array([code_of(strings.get(i)) for i in ids.tolist()], dtype=np.int32)
    none_code = code_of(None)
    name = np.full(len(start), none_code, dtype=np.int32)
    if len(text_code):
        name[from_text] = text_code[code[from_text]]
    del code, from_text
    if len(ids):
        name[by_id] = id_code[np.searchsorted(ids, tid_[by_id])]
    del tid_, by_id
    # domains: DOMAIN_CREATE events name them (the last in start order wins); 0 is the default
    dom_names: dict = {}
    if "domainId" in cols:
        tid_col = "textId" if "textId" in cols else "NULL"
        for d, txt, tid1 in conn.execute(
            f'SELECT domainId, {text}, {tid_col} FROM "{nt}" WHERE eventType = {DOMAIN_CREATE} ORDER BY start'
        ):
            if type(d) is int:
                dom_names[d] = (
                    _text(txt)
                    if txt is not None
                    else _strings(conn, t, np.array([tid1])).get(tid1)
                    if type(tid1) is int
                    else None
                )
    return {
        "row": rowid,
        "start": start,
        "end": end,
        "pushpop": pushpop,
        "gtid": g,
        "has_thread": has_thread,
        "name": name,
        "names": names,
        "domains": sorted((d, label) for d, label in dom_names.items() if d),
    }


def _strings(conn, t: dict, ids) -> dict:
    """StringIds values of these ids."""
    out: dict = {}
    ids = ids.tolist()
    for a in range(0, len(ids), 500):
        part = ids[a : a + 500]
        for k, v in conn.execute(
            f'SELECT id, value FROM "{t["StringIds"]}" WHERE id IN ({",".join("?" * len(part))})', part
        ):
            out[k] = _text(v)
    return out


def _device_of(conn, kt: str, kc: set) -> int | None:
    """The CUDA device most launches ran on (its facts are the run's GPU)."""
    if "deviceId" not in kc:
        return None
    row = conn.execute(
        f'SELECT deviceId FROM "{kt}" WHERE deviceId IS NOT NULL GROUP BY deviceId '
        "ORDER BY count(*) DESC, deviceId LIMIT 1"
    ).fetchone()
    return row[0] if row else None


def _device_in(conn, kt: str, kc: set, dev) -> int | None:
    """_device_of from the kernels' deviceId column as read (-1: NULL, -2: not a
    non-negative integer, then SQL decides as _device_of does)."""
    import numpy as np

    if "deviceId" not in kc:
        return None
    if (dev == -2).any():
        return _device_of(conn, kt, kc)
    dev = dev[dev >= 0]
    if not len(dev):
        return None
    if dev.max() < 1 << 16:
        return int(np.argmax(np.bincount(dev)))  # (ties: the smallest id, as ORDER BY count DESC, deviceId)
    ids, counts = np.unique(dev, return_counts=True)
    return int(ids[np.argmax(counts)])


# kernel launch calls of the runtime and driver APIs (cudaLaunchKernel_v7000, cuLaunchKernelEx,
# cudaLaunchCooperativeKernel, cudaGraphLaunch, cudaLaunch of CUDA < 7, cuLaunchGrid)
_LAUNCH_CALL = re.compile(r"^cu(da)?(Launch(Cooperative)?Kernel|GraphLaunch|LaunchGrid|Launch(_v\d+)?$)")


def _no_kernels(conn, t: dict) -> str:
    """Why an export holds no kernel record, in one line: the capture did not trace CUDA, it
    traced launch calls but not the GPU side, or no kernel ran."""
    kt = t.get("CUPTI_ACTIVITY_KIND_KERNEL")
    table = f"{kt} is empty" if kt else "no CUPTI_ACTIVITY_KIND_KERNEL table"
    traced = _capture_traces(conn, t)
    cupti = [k for k in t if k.startswith("CUPTI_ACTIVITY_KIND_")]
    if traced is not None and "Cuda" not in traced:
        what = ", ".join(_TRACE_NAMES.get(x, x) for x in traced) or "nothing"
        return (
            f"no kernels ({table}): captured without the CUDA trace (nsys traced {what}); "
            f"capture with `nsys profile -t cuda,nvtx`"
        )
    if traced is None and not cupti:
        return f"no kernels ({table}): no CUDA trace in this export (no CUPTI tables); capture with `nsys profile -t cuda,nvtx`"
    calls = _api_calls(conn, t)
    launches = {n: c for n, c in calls.items() if _LAUNCH_CALL.match(n)}
    if launches:
        top = ", ".join(f"{c} {n}" for n, c in sorted(launches.items(), key=lambda x: -x[1])[:3])
        return (
            f"no kernels ({table}) although the CUDA trace holds {_n(sum(launches.values()), 'kernel launch call')} "
            f"({top}): the GPU side of the trace (kernel records) was not collected or not exported"
        )
    copies = sum(
        _count(conn, t[k], "1") for k in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET") if k in t
    )
    if not calls:
        return f"no kernels ({table}): the CUDA trace was on but the program made no CUDA call: no kernel ran"
    copied = f" and {_n(copies, 'memory copy or set', 'memory copies or sets')}" if copies else ""
    return (
        f"no kernels ({table}): the CUDA trace was on and holds {_n(sum(calls.values()), 'CUDA API call')}"
        f"{copied} but no kernel launch: no kernel ran while nsys traced"
    )


def _n(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


_TRACE_NAMES = {
    "NvtxEvents": "NVTX",
    "Cuda": "CUDA",
    "OsRuntime": "OS runtime",
    "Cudnn": "cuDNN",
    "Cublas": "cuBLAS",
    "Mpi": "MPI",
    "OpenGL": "OpenGL",
    "Vulkan": "Vulkan",
    "OpenAcc": "OpenACC",
    "OpenMP": "OpenMP",
}


def _capture_traces(conn, t: dict) -> list[str] | None:
    """The traces the capture had on (META_DATA_CAPTURE `CAPTURE_EVENT_TYPE` rows: Cuda,
    NvtxEvents, ...); None where the export does not say (exports before ~2021)."""
    mt = t.get("META_DATA_CAPTURE")
    if not mt:
        return None
    try:
        got = [str(_text(v)) for (v,) in conn.execute(f"SELECT value FROM \"{mt}\" WHERE name = 'CAPTURE_EVENT_TYPE'")]
    except sqlite3.DatabaseError:
        return None
    return got or None


def _api_calls(conn, t: dict) -> dict[str, int]:
    """CUDA runtime and driver calls by name (nsys keeps both in CUPTI_ACTIVITY_KIND_RUNTIME)."""
    out: dict[str, int] = {}
    for k in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if k in t and "nameId" in _columns(conn, t[k]):
            for name, n in conn.execute(
                f'SELECT s.value, count(*) FROM "{t[k]}" r LEFT JOIN "{t["StringIds"]}" s '
                f"ON s.id = r.nameId GROUP BY r.nameId"
            ):
                name = str(_text(name))
                out[name] = out.get(name, 0) + n
    return out


def _ranges(path: Path, conn, t: dict, strings: dict) -> list[tuple]:
    """(domain, text, kind, start, end, pid, tid) with pid/tid as nsys global ids."""
    nt = t.get("NVTX_EVENTS")
    if not nt:
        return []
    cols = _columns(conn, nt)
    if not {"start", "end", "eventType"} <= cols:
        raise BadInput(path, f"{nt} lacks columns {sorted({'start', 'end', 'eventType'} - cols)}")
    gcond = " OR typeof(globalTid) NOT IN ('integer', 'null')" if "globalTid" in cols else ""
    bad = _count(
        conn,
        nt,
        f"eventType IN ({PUSH_POP}, {START_END}) AND (typeof(start) != 'integer'"
        f" OR typeof(\"end\") NOT IN ('integer', 'null'){gcond})",
    )
    if bad:
        raise BadInput(path, f"{nt}: {bad} ranges whose start, end or thread id is not a 64-bit integer")
    text = "text" if "text" in cols else "NULL"
    text_id = "textId" if "textId" in cols else "NULL"
    domain = "domainId" if "domainId" in cols else "0"
    gtid = "globalTid" if "globalTid" in cols else "NULL"
    domains: dict[int, str | None] = {0: None}
    out = []
    for start, end, etype, txt, tid_, dom, g in conn.execute(
        f'SELECT start, end, eventType, {text}, {text_id}, {domain}, {gtid} FROM "{nt}"'
        f" WHERE eventType IN ({PUSH_POP}, {START_END}, {DOMAIN_CREATE}) ORDER BY eventType DESC, start"
    ):
        name = _text(txt) if txt is not None else strings.get(tid_)
        if etype == DOMAIN_CREATE:
            domains[dom] = name
            continue
        kind = "push_pop" if etype == PUSH_POP else "start_end"
        pid = _sql_div(g, _PID) if g is not None else None
        out.append(
            (
                domains.get(dom, f"domain{dom}") if dom else None,
                name,
                kind,
                start,
                end,
                pid,
                _sql_mod(g, _PID) if g is not None else None,
            )
        )
    return out


# (rank, size) variables of the launchers: torchrun, Open MPI, MPICH/PMI, Slurm
_RANK_ENV = (
    ("RANK", "WORLD_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
)


def _rank(conn, t: dict) -> int | None:
    """The process rank nsys recorded in the launched process's environment
    (META_DATA_CAPTURE rows `PROCESS_n:ENVIRONMENT_VARIABLE` = `NAME="value"`); None
    unless the job had more than one process."""
    if "META_DATA_CAPTURE" not in t:
        return None
    env: dict[str, str] = {}
    try:
        for (v,) in conn.execute(
            f"SELECT value FROM \"{t['META_DATA_CAPTURE']}\" WHERE name LIKE '%:ENVIRONMENT_VARIABLE'"
        ):
            k, _, val = str(v).partition("=")
            env.setdefault(k, val.strip('"'))
    except sqlite3.DatabaseError:
        return None
    for rank, size in _RANK_ENV:
        try:
            if rank in env and int(env.get(size, "0")) > 1:
                return int(env[rank])
        except ValueError:
            continue
    return None


_text = report_text


_INT_OR_NULL = (int, type(None))


def _count(conn, table: str, where: str) -> int:
    return conn.execute(f'SELECT count(*) FROM "{table}" WHERE {where}').fetchone()[0]


# times and ids are used as numbers: a corrupt row must stop the parse, not the sweep or SQLite
_NUMERIC_KERNEL = (
    "typeof(start) = 'integer' AND typeof(\"end\") = 'integer' AND typeof(\"end\" - start) = 'integer'"
    " AND typeof({pid}) IN ('integer', 'null')"
)


def _not_numeric(kt: str, bad: int) -> str:
    return f"{kt}: {bad} rows whose start, end or process id is not a 64-bit integer"


def _backwards(kt: str, n: int) -> str:
    """A kernel whose end precedes its start: refused, as every timeline parser does."""
    which = "1 kernel ends before it starts" if n == 1 else f"{n:,} kernels end before they start"
    return f"{kt}: {which}: impossible times (a corrupt export)"


def _capture_facts(rows: list[tuple[str, object]]) -> dict:
    """nsys's capture settings as kept with the run. nsys records the traced process's whole
    environment and command line; only the variables that change a profile or place a rank
    keep their values (environment.kept_env), the names of the rest are listed, and secret-looking
    arguments are redacted: public exports have carried live access tokens this way."""
    out: dict = {}
    env: dict[str, dict[str, str]] = {}
    args: dict[str, list[str]] = {}  # in order, so `--token VALUE` pairs are seen together
    for name, value in rows:
        proc, sep, field = name.partition(":")
        if sep and field == "ENVIRONMENT_VARIABLE":
            k, eq, v = str(_text(value)).partition("=")
            if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", k):  # not NAME=VALUE: nothing to name
                out[f"{proc}:ENVIRONMENT_ENTRIES_NOT_VARIABLES"] = (
                    out.get(f"{proc}:ENVIRONMENT_ENTRIES_NOT_VARIABLES", 0) + 1
                )
                continue
            env.setdefault(proc, {}).setdefault(k, v.strip('"'))
        elif sep and (field == "COMMAND" or field.startswith("ARGUMENT_")):
            args.setdefault(proc, []).append(name)
            out[name] = str(_text(value))
        else:  # WORKING_DIR, launch arguments as one line, whatever else nsys records
            out[name] = environment.redact_text(_text(value) or "") if isinstance(value, (str, bytes)) else value
    for names in args.values():
        for name, v in zip(names, environment.redact_args([out[n] for n in names])):
            out[name] = v
    for proc, variables in env.items():
        out[f"{proc}:ENVIRONMENT"] = environment.redact_env(variables)
        out[f"{proc}:ENVIRONMENT_NOT_KEPT"] = sorted(set(variables) - set(out[f"{proc}:ENVIRONMENT"]))
    return out


# GPU facts: (fact, TARGET_INFO_GPU column, TARGET_INFO_CUDA_GPU column, unit of the latter as
# CUPTI documents CUpti_ActivityDevice); TARGET_INFO_GPU holds base units
_GPU_FACTS = (
    ("gpu_name", "name", "name", None),
    ("gpu_uuid", "uuid", None, None),
    ("chip", "chipName", None, None),
    ("sm_count", "smCount", "numMultiprocessors", ""),
    ("l2_bytes", "l2CacheSize", "l2CacheSize", "byte"),
    ("memory_bytes", "totalMemory", "globalMemorySize", "byte"),
    ("memory_bandwidth_bytes_per_s", "memoryBandwidth", "globalMemoryBandwidth", "kbyte/second"),
    ("sm_clock_max_hz", "clockRate", "coreClockRate", "khz"),
    ("cc_major", "computeMajor", "computeCapabilityMajor", ""),
    ("cc_minor", "computeMinor", "computeCapabilityMinor", ""),
)
# the CUDA device id column: kernels' deviceId is the CUDA ordinal
_DEVICE_COLUMNS = {"TARGET_INFO_GPU": ("cuDevice", "id", "deviceId"), "TARGET_INFO_CUDA_GPU": ("deviceId",)}


def _gpu_row(conn, table: str, device: int | None) -> dict:
    """The row of the GPU the kernels ran on (else the first GPU), as {column: value}."""
    cur = conn.execute(f'SELECT * FROM "{table}" LIMIT 64')
    rows = [dict(zip((d[0] for d in cur.description), r)) for r in cur.fetchall()]
    base = re.sub(r"_V\d+$", "", table)  # a versioned name (_V2...) is the same table
    dev = next((c for c in _DEVICE_COLUMNS.get(base, ()) if rows and c in rows[0]), None)
    if dev:
        rows.sort(key=lambda r: (r[dev] != device, str(r[dev])))
    return rows[0] if rows else {}


def _gpu_facts(conn, t: dict, device: int | None) -> dict:
    """GPU facts from TARGET_INFO_GPU, gaps filled from TARGET_INFO_CUDA_GPU (older exports have
    one or the other, the `.qdrep` era both with little in TARGET_INFO_GPU)."""
    new = _gpu_row(conn, t["TARGET_INFO_GPU"], device) if "TARGET_INFO_GPU" in t else {}
    old = _gpu_row(conn, t["TARGET_INFO_CUDA_GPU"], device) if "TARGET_INFO_CUDA_GPU" in t else {}
    facts: dict = {}
    for fact, col, old_col, unit in _GPU_FACTS:
        v = new.get(col)
        if v is None and old_col and old.get(old_col) is not None:
            v = old[old_col]
            if unit and isinstance(v, (int, float)):
                v = int(normalise(v, unit)[0]) or None  # 0: the export did not know it
        if isinstance(v, bytes):
            v = _text(v)
        facts[fact] = v
    if (
        facts.get("memory_bytes") is not None
        and isinstance(facts["memory_bytes"], (int, float))
        and facts["memory_bytes"] < 1 << 24
    ):
        facts["memory_bytes"] = None  # some exports hold MiB here (32510 for a 32 GB V100): not bytes
    major, minor = facts.pop("cc_major"), facts.pop("cc_minor")
    if isinstance(major, int) and isinstance(minor, int):
        facts["compute_capability"] = f"{major}.{minor}"
    return facts


# the export's own metadata table: META_DATA_EXPORT, EXPORT_META_DATA in nsys 2023.1
_EXPORT_META = ("META_DATA_EXPORT", "EXPORT_META_DATA")


def _facts(conn, t: dict, device: int | None = None) -> dict:
    facts: dict = _gpu_facts(conn, t, device)
    for key, tables in (("nsys_export", _EXPORT_META), ("nsys_capture", ("META_DATA_CAPTURE",))):
        table = next((t[x] for x in tables if x in t), None)
        if table:
            try:
                # keys as text: a corrupt row may hold a blob or NULL name (JSON needs str keys);
                # each bounded before the capture rows are redacted (Parsed bounds the whole)
                rows = [
                    (bounded_meta(str(_text(k))), bounded_meta(v))
                    for k, v in conn.execute(f'SELECT name, value FROM "{table}"')
                ]
            except sqlite3.DatabaseError:
                continue
            facts[key] = _capture_facts(rows) if key == "nsys_capture" else dict(rows)
    # the version of the nsys that wrote the export (a `.qdrep` exported today says today's);
    # not `nsys_version`, which capture.json gives the capturing nsys
    version = (facts.get("nsys_export") or {}).get("EXPORT_PRODUCT_VERSION")
    if version is not None:
        facts["nsys_export_version"] = str(_text(version))
    rank = _rank(conn, t)
    if rank is not None:
        facts["rank"] = rank
    return {k: v for k, v in facts.items() if v is not None}
