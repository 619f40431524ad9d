"""Nsight Systems SQLite export (`nsys export --type sqlite`).

Kernels come from CUPTI_ACTIVITY_KIND_KERNEL (names through StringIds), their launching
calls from CUPTI_ACTIVITY_KIND_RUNTIME (same correlationId, same process), NVTX ranges from
NVTX_EVENTS (push/pop = 59, start/end = 60, domains = 75), GPU facts from TARGET_INFO_GPU.
Newer exports may suffix table names (NVTX_EVENTS_V2...): tables are found by prefix.
"""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from profkit.dbfile import open_readonly
from profkit.errors import BadInput
from profkit.nvtx import project, range_paths
from profkit.rows import Parsed

FORMAT = "nsys-sqlite"
SUFFIXES = ('.sqlite',)  # file name endings it reads (lower case)
ROLE = "timeline"  # timeline | counters
SOURCE = "nsys"  # the tool whose launches it yields (launch.source)
PREFERENCE = 10  # among parsers of one role, lower is taken first (analyse: one file per role)
SNIFF_ORDER = 50  # lower is asked first: the most specific recognisers first
DESCRIPTION = "Nsight Systems SQLite export (nsys export --type sqlite)"
SQLITE_MAGIC = b"SQLite format 3\x00"
PUSH_POP, START_END, DOMAIN_CREATE = 59, 60, 75
_PID = 1 << 24


def _open(path: Path) -> sqlite3.Connection:
    return open_readonly(path, timeout_ms=5000)


def _tables(conn) -> dict[str, str]:
    """Canonical table name -> actual name, accepting version suffixes (_V2, _V3...)."""
    out: dict[str, str] = {}
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"):
        base = re.sub(r"_V\d+$", "", name)
        if base not in out or name > out[base]:
            out[base] = name
    return out


def sniff(path: Path, head: bytes) -> bool:
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


def parse(path: Path) -> Parsed:
    try:
        conn = _open(path)
        try:
            return _parse(path, conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        raise BadInput(path, f"unreadable SQLite export ({e}); is the file truncated?") from None
    except UnicodeDecodeError as e:  # a table name that is not UTF-8 (sqlite3 raises it bare)
        raise BadInput(path, f"unreadable SQLite export (text that is not UTF-8: {e.reason}); is the file corrupt?") from None


def _parse(path: Path, conn) -> Parsed:
    t = _tables(conn)
    if "StringIds" not in t:
        raise BadInput(path, "not an Nsight Systems export: no StringIds table")
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in t:
        raise BadInput(path, "no CUPTI_ACTIVITY_KIND_KERNEL table: no CUDA kernels traced (nsys profile -t cuda)")
    kt = t["CUPTI_ACTIVITY_KIND_KERNEL"]
    kc = _columns(conn, kt)
    need = {"start", "end", "correlationId", "gridX", "blockX"}
    if not need <= kc or not ({"shortName", "demangledName"} & kc):
        raise BadInput(path, f"{kt} lacks columns {sorted(need - kc) or ['shortName/demangledName']}")
    # times and ids are used as numbers: a corrupt row must stop here, not in the sweep or SQLite
    bad = _count(conn, kt, "typeof(start) != 'integer' OR typeof(\"end\") != 'integer' OR typeof(\"end\" - start) != 'integer'"
                 + (" OR typeof(globalPid) NOT IN ('integer', 'null')" if "globalPid" in kc else ""))
    if bad:
        raise BadInput(path, f"{kt}: {bad} rows whose start, end or process id is not a 64-bit integer")

    def col(name: str, default: str = "NULL") -> str:
        return f"k.{name}" if name in kc else default

    name_col = "demangledName" if "demangledName" in kc else "shortName"
    short_col = "shortName" if "shortName" in kc else "demangledName"
    rt = t.get("CUPTI_ACTIVITY_KIND_RUNTIME")
    if rt and "globalPid" in kc and {"correlationId", "globalTid", "start", "end", "nameId"} <= _columns(conn, rt):
        api_join = f"LEFT JOIN \"{rt}\" r ON r.correlationId = k.correlationId AND (r.globalTid / {_PID}) = (k.globalPid / {_PID})"
        api_cols = "r.nameId, r.start, r.end, r.globalTid"
    else:
        api_join, api_cols = "", "NULL, NULL, NULL, NULL"
    sql = f"""
        SELECT k.start, k.end, k.{name_col}, k.{short_col}, k.gridX, {col('gridY', '1')}, {col('gridZ', '1')},
               k.blockX, {col('blockY', '1')}, {col('blockZ', '1')}, {col('registersPerThread')},
               {col('staticSharedMemory')}, {col('dynamicSharedMemory')}, {col('streamId')}, {col('deviceId')},
               k.correlationId, {col('globalPid')}, {api_cols}
        FROM "{kt}" k {api_join}
        ORDER BY k.start"""
    strings = {k: _text(v) for k, v in conn.execute('SELECT id, value FROM "StringIds"')}
    rows = conn.execute(sql).fetchall()

    ranges = _ranges(path, conn, t, strings)
    calls = []
    for i, r in enumerate(rows):
        if type(r[18]) not in _INT_OR_NULL or type(r[20]) not in _INT_OR_NULL:
            raise BadInput(path, f"{rt}: a launch call whose start or thread id is not an integer")
        gtid = r[20] if r[20] is not None else r[16]
        if r[18] is not None and gtid is not None:
            calls.append((i, gtid // _PID, gtid % _PID, r[18]))
    proj = project(ranges, calls)
    kernels = []
    for i, r in enumerate(rows):
        rng, path_ = proj.get(i, (None, None))
        gtid = r[20]
        kernels.append((
            i, strings.get(r[2]) or str(r[2]), strings.get(r[3]) or str(r[3]), rng, path_, r[0], r[1], r[1] - r[0],
            r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15],
            strings.get(r[17]) if r[17] is not None else None, r[18], r[19],
            (gtid // _PID) % _PID if gtid is not None else None, gtid % _PID if gtid is not None else None,
        ))
    paths = range_paths(ranges)
    range_rows = [(r[0], r[1], r[2], r[3], r[4], r[5] % _PID if r[5] is not None else None, r[6], d, p)
                  for r, (d, p) in zip(ranges, paths)]
    rep = Parsed(str(path), FORMAT, SOURCE, kernels, range_rows, [], _facts(conn, t))
    return rep


def _ranges(path: Path, conn, t: dict, strings: dict) -> list[tuple]:
    """(domain, text, kind, start, end, pid, tid) with pid/tid as nsys global ids."""
    nt = t.get("NVTX_EVENTS")
    if not nt:
        return []
    cols = _columns(conn, nt)
    if not {"start", "end", "eventType"} <= cols:
        raise BadInput(path, f"{nt} lacks columns {sorted({'start', 'end', 'eventType'} - cols)}")
    gcond = " OR typeof(globalTid) NOT IN ('integer', 'null')" if "globalTid" in cols else ""
    bad = _count(conn, nt, f"eventType IN ({PUSH_POP}, {START_END}) AND (typeof(start) != 'integer'"
                           f" OR typeof(\"end\") NOT IN ('integer', 'null'){gcond})")
    if bad:
        raise BadInput(path, f"{nt}: {bad} ranges whose start, end or thread id is not a 64-bit integer")
    text = "text" if "text" in cols else "NULL"
    text_id = "textId" if "textId" in cols else "NULL"
    domain = "domainId" if "domainId" in cols else "0"
    gtid = "globalTid" if "globalTid" in cols else "NULL"
    domains = {0: None}
    out = []
    for start, end, etype, txt, tid_, dom, g in conn.execute(
            f'SELECT start, end, eventType, {text}, {text_id}, {domain}, {gtid} FROM "{nt}"'
            f" WHERE eventType IN ({PUSH_POP}, {START_END}, {DOMAIN_CREATE}) ORDER BY eventType DESC, start"):
        name = _text(txt) if txt is not None else strings.get(tid_)
        if etype == DOMAIN_CREATE:
            domains[dom] = name
            continue
        kind = "push_pop" if etype == PUSH_POP else "start_end"
        pid = g // _PID if g is not None else None
        out.append((domains.get(dom, f"domain{dom}") if dom else None, name, kind, start, end,
                    pid, g % _PID if g is not None else None))
    return out


# (rank, size) variables of the launchers: torchrun, Open MPI, MPICH/PMI, Slurm
_RANK_ENV = (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"),
             ("SLURM_PROCID", "SLURM_NTASKS"))


def _rank(conn, t: dict) -> int | None:
    """The process rank nsys recorded in the launched process's environment
    (META_DATA_CAPTURE rows `PROCESS_n:ENVIRONMENT_VARIABLE` = `NAME="value"`); None
    unless the job had more than one process."""
    if "META_DATA_CAPTURE" not in t:
        return None
    env: dict[str, str] = {}
    try:
        for (v,) in conn.execute(f'SELECT value FROM "{t["META_DATA_CAPTURE"]}" WHERE name LIKE \'%:ENVIRONMENT_VARIABLE\''):
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


def _text(v) -> str | None:
    """Text as str: a corrupt row may hold a blob or a number where nsys writes text."""
    if v is None or isinstance(v, str):
        return v
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


_INT_OR_NULL = (int, type(None))


def _count(conn, table: str, where: str) -> int:
    return conn.execute(f'SELECT count(*) FROM "{table}" WHERE {where}').fetchone()[0]


def _facts(conn, t: dict) -> dict:
    facts: dict = {}
    gt = t.get("TARGET_INFO_GPU")
    if gt:
        cols = _columns(conn, gt)
        want = [c for c in ("name", "uuid", "smCount", "l2CacheSize", "totalMemory", "memoryBandwidth",
                            "clockRate", "computeMajor", "computeMinor", "chipName") if c in cols]
        if want:
            row = conn.execute(f'SELECT {", ".join(want)} FROM "{gt}" ORDER BY id LIMIT 1').fetchone()
            if row:
                g = dict(zip(want, row))
                facts.update({"gpu_name": g.get("name"), "gpu_uuid": g.get("uuid"), "sm_count": g.get("smCount"),
                              "l2_bytes": g.get("l2CacheSize"), "memory_bytes": g.get("totalMemory"),
                              "memory_bandwidth_bytes_per_s": g.get("memoryBandwidth"),
                              "sm_clock_max_hz": g.get("clockRate"), "chip": g.get("chipName")})
    for table, key in (("META_DATA_EXPORT", "nsys_export"), ("META_DATA_CAPTURE", "nsys_capture")):
        if table in t:
            try:
                # keys as text: a corrupt row may hold a blob or NULL name (JSON needs str keys)
                facts[key] = {str(_text(k)): v for k, v in conn.execute(f'SELECT name, value FROM "{t[table]}"')}
            except sqlite3.DatabaseError:
                pass
    rank = _rank(conn, t)
    if rank is not None:
        facts["rank"] = rank
    return {k: v for k, v in facts.items() if v is not None}
