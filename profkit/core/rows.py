"""Plain rows a parser yields: no SQL into profkit's database. The store is their only reader.

Rows are tuples (not dicts) in the field order below. A kernel's `nvtx_path` is an
`NvtxPath` (profkit.core.nvtx.path_of(names)): the readable path that keeps the exact names.

Reports of millions of rows come as `Bulk` instead: which tables and columns of the report's
own read-only SQLite file to copy, plus numpy columns (what the parser computed, e.g. NVTX
paths). The store copies them with INSERT ... SELECT, never building a tuple per row; `kernels` and `ranges` then
build tuples only when someone iterates them (tests, small reports).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# one kernel launch
KERNEL_FIELDS = (
    "seq",
    "kernel_name",
    "short_name",
    "nvtx_range",
    "nvtx_path",
    "start_ns",
    "end_ns",
    "duration_ns",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "registers_per_thread",
    "shared_mem_static",
    "shared_mem_dynamic",
    "stream",
    "device",
    "correlation_id",
    "api_name",
    "api_start_ns",
    "api_end_ns",
    "pid",
    "tid",
)
# one NVTX range (push/pop or start/end)
RANGE_FIELDS = ("domain", "text", "kind", "start_ns", "end_ns", "pid", "tid", "depth", "path")
# a Bulk's kernel query yields these columns (the store adds the NVTX ones from its path table);
# in NAME_FIELDS it yields the report's keys of the names (Bulk.name_sql, Bulk.api_sql), not their text
BULK_KERNEL_FIELDS = tuple(f for f in KERNEL_FIELDS if f not in ("nvtx_range", "nvtx_path"))
NAME_FIELDS = ("kernel_name", "short_name", "api_name")
# a host call the idle causes need (profkit.analyses.idle): kind sync | alloc | module | memcpy | memset
HOST_CALL_FIELDS = ("kind", "name", "start_ns", "end_ns", "pid", "tid")
# a memory copy or set on the GPU: kind memcpy | memset, direction HtoD | DtoH | DtoD | ..., pageable 0/1
GPU_COPY_FIELDS = ("kind", "direction", "bytes", "pageable", "start_ns", "end_ns", "stream")
# one counter of one kernel: (kernel seq, metric, unit, value)
COUNTER_FIELDS = ("seq", "metric", "unit", "value")
# one result of ncu's guided analysis for one kernel: severity INF | OPT | WRN | ERR (ncu's own
# abbreviations), speedup_type local | global, estimated_speedup_pct None where ncu gave none
RULE_FIELDS = ("seq", "section", "rule", "severity", "message", "speedup_type", "estimated_speedup_pct")
# one SASS instruction of one kernel from ncu's Source Counters: pc is its offset from the
# function's first instruction, address the absolute one; file/line where the binary has line
# info; stalls and stalls_not_issued are JSON {reason: warp samples}, nonzero reasons only
SASS_FIELDS = (
    "seq",
    "pc",
    "address",
    "instruction",
    "file",
    "line",
    "inst_executed",
    "samples",
    "samples_not_issued",
    "stalls",
    "stalls_not_issued",
)
# one line of a source file a report embeds (ncu --import-source yes): (file, line, text)
SOURCE_LINE_FIELDS = ("file", "line", "text")
# one operator with recorded shapes that launched kernels: input dims, types, strides and
# concrete inputs as the trace wrote them (JSON text), the trace's own FLOP count (with_flops),
# the seqs of the kernels it launched, where the shapes came from (record_shapes | nvtx), and the
# tensor identity emit_nvtx records: the operator's own id and, per input, the producing
# operator's [id, output index] (JSON; NULL where the trace has none)
OP_FIELDS = (
    "op",
    "start_ns",
    "end_ns",
    "pid",
    "tid",
    "input_dims",
    "input_types",
    "input_strides",
    "concrete",
    "trace_flops",
    "kernel_seqs",
    "source",
    "torch_op_id",
    "input_op_ids",
)


@dataclass
class Parsed:
    path: str
    format: str  # a parser's FORMAT: nsys-sqlite | ncu-rep | ncu-csv | ncu-csv-details | cupti-trace | ...
    source: str  # nsys | ncu | cupti: what produced the launches
    kernels: list[tuple] = field(default_factory=list)
    ranges: list[tuple] = field(default_factory=list)
    counters: list[tuple] = field(default_factory=list)
    facts: dict = field(default_factory=dict)  # gpu_name, gpu_uuid, sm_count, tool versions, ...
    rules: list[tuple] = field(default_factory=list)  # ncu rule results (RULE_FIELDS)
    sass: list[tuple] = field(default_factory=list)  # per-instruction Source Counters (SASS_FIELDS)
    source_lines: list[tuple] = field(default_factory=list)  # embedded source (SOURCE_LINE_FIELDS)
    ops: list[tuple] = field(default_factory=list)  # operators with shapes (OP_FIELDS)
    bulk: Bulk | None = None  # set: kernels and ranges are the Bulk's (LazyRows)
    # kernel rows stored after a Bulk's kernels (a column-path report's CUDA graph replays)
    extra_kernels: list[tuple] = field(default_factory=list)
    host_calls: list[tuple] = field(default_factory=list)  # HOST_CALL_FIELDS
    gpu_copies: list[tuple] = field(default_factory=list)  # GPU_COPY_FIELDS
    # what the format cannot prove about this file being whole (a CSV cut exactly after a row
    # looks whole): said with the load; None when its framing proved it whole
    caveat: str | None = None

    def __post_init__(self) -> None:
        self.facts = bounded_meta(self.facts)  # every parser's facts, whatever report they came from

    def summary(self) -> dict:
        return {
            "kernels": len(self.kernels) + len(self.extra_kernels),
            "ranges": len(self.ranges),
            "counters": len(self.counters),
            "rules": len(self.rules),
        }


def kernel_row(**kw) -> tuple:
    return tuple(kw.get(f) for f in KERNEL_FIELDS)


def ncu_kernel_row(
    seq: int, name: str, short: str, nvtx_range, nvtx_path, values: dict, given: dict | None = None
) -> tuple:
    """A kernel row from one ncu launch: launch facts come from its normalised counters
    (values: metric -> (value, unit)), else from `given` (kernel fields a CSV prints in its own
    columns: grid and block as (x, y, z), stream, device). Launch dimensions without either:
    only the total (launch__grid_size / launch__block_size) in grid_x / block_x, y and z
    unknown (NULL); reports of older ncu versions carry only the totals (docs/schema.md)."""
    from profkit.core.metrics import LAUNCH_FIELDS, LAUNCH_TOTALS

    kw = {"seq": seq, "kernel_name": name, "short_name": short, "nvtx_range": nvtx_range, "nvtx_path": nvtx_path}
    for col, metric in LAUNCH_FIELDS.items():
        if metric in values:
            kw[col] = count(values[metric][0])
    given = given or {}
    for col in ("stream", "device"):
        if kw.get(col) is None and given.get(col) is not None:
            kw[col] = given[col]
    for axes, total in LAUNCH_TOTALS.items():
        cols = tuple(f"{axes}_{a}" for a in "xyz")
        if any(kw.get(c) is not None for c in cols):
            continue
        if given.get(axes) is not None:
            kw.update(zip(cols, given[axes]))
        elif total in values:
            kw[cols[0]] = count(values[total][0])
    return kernel_row(**kw)


# A report's metadata (its facts, a capture.json) is copied at every step of a load: parsed,
# scrubbed of secrets, encoded as JSON, written into the run and read back. Real metadata is
# under 12 K characters in all, its longest text ~2 K (an environment variable), so these
# bounds leave it whole while one hostile value costs bounded time (a 24 MB text took seconds).
MAX_META_TEXT = 64 << 10  # characters of one text or key (a blob: bytes)
MAX_META = 1 << 20  # characters of one report's metadata in all, counted in order
_NUMBER = 8  # what a number, a boolean or null counts


def left_out(n: int, what: str = "characters") -> str:
    """The note stored in place of what bounded_meta leaves out."""
    return f"<{n:,} {what} left out>"


def bounded_meta(meta):
    """`meta` as stored: a text or key over MAX_META_TEXT characters is replaced by
    `<N characters left out>`; once MAX_META characters are taken (texts and keys by their
    length, numbers by 8, in the metadata's own order), each later text becomes such a note and
    the rest of a list or object one `<N items left out>` (an object's: under the key `<left out>`,
    `<N keys left out>`); so does nesting past 64 levels.
    Small metadata comes back unchanged (equal); only the order of a dict's keys is kept."""
    return _bound(meta, [MAX_META], 0)


def _bound(v, budget: list[int], depth: int):
    if isinstance(v, (str, bytes)):
        n = len(v)
        if n > MAX_META_TEXT or n > budget[0]:
            budget[0] -= 32  # (the note's own length: the budget still runs out)
            return left_out(n, "bytes" if isinstance(v, bytes) else "characters")
        budget[0] -= n
        return v
    if isinstance(v, dict):
        if depth > 64:
            return left_out(len(v), "keys")
        out: dict = {}
        for i, (k, x) in enumerate(v.items()):
            if budget[0] <= 0:
                out.setdefault("<left out>", left_out(len(v) - i, "keys"))
                break
            key = _bound(k, budget, depth + 1) if isinstance(k, (str, bytes)) else k
            out.setdefault(key, _bound(x, budget, depth + 1))
        return out
    if isinstance(v, (list, tuple)):
        if depth > 64:
            return left_out(len(v), "items")
        items = []
        for i, x in enumerate(v):
            if budget[0] <= 0:
                items.append(left_out(len(v) - i, "items"))
                break
            items.append(_bound(x, budget, depth + 1))
        return tuple(items) if isinstance(v, tuple) else items
    budget[0] -= _NUMBER
    return v


# Two launch calls of one kind (runtime, or driver) with one kernel's correlation id: every
# timeline parser refuses the file (a runtime call over a driver call of the same id is the
# one call that launched it; nsys says the same in its own words)
SHARED_ID = "a second launch call with correlation id"


def storable_text(v) -> bool:
    """A str that SQLite can store as text: a JSON "\\ud800" escape (a hostile or broken trace)
    reads as a lone surrogate, which UTF-8 cannot encode."""
    if type(v) is not str:
        return False
    if v.isascii():
        return True
    try:
        v.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def count(v: float) -> int | None:
    """A counter value as an integer fact (grid size, SM count); inf or beyond 64 bits (a
    corrupt report) cannot be one and is left unknown."""
    return int(round(v)) if math.isfinite(v) and abs(v) < 2**63 else None


class LazyRows(Sequence):
    """Rows counted without being built: tuples are made on first access (tests, capture's
    progress total); the store never asks for them."""

    def __init__(self, n: int, build: Callable[[], list]):
        self._n, self._build = n, build
        self._rows: list | None = None

    def __len__(self) -> int:
        return self._n

    def _all(self) -> list:
        if self._rows is None:
            self._rows = self._build()
        return self._rows

    def __getitem__(self, i):
        return self._all()[i]

    def __iter__(self):
        return iter(self._all())


@dataclass
class Bulk:
    """Kernels and NVTX ranges as a description of what to copy from the report plus numpy
    columns (see the module docstring). The parser names the report's tables and the columns
    to read from them; the SQL that joins them to the staged columns (kernel_sql, range_sql,
    api_sql) is made here, from the description, and run by the store on its own connection
    (profkit.store.bulk), so no parser writes SQL against the store's tables.

    source: the report (a read-only SQLite file) the store ATTACHes as `src`.
    kernel_table: the report's kernel table, read as `k` (a kernel part's krow is its rowid);
    call_table: its launch-call table, read as `r` (a kernel part's rrow), or None.
    kernel_columns: SQL expressions over `k` and `r` yielding BULK_KERNEL_FIELDS after seq, one
        per field. Their kernel_name and short_name are keys of name_sql, their api_name a key
        of the kernel part's api keys (the report's string ids): the store maps a few distinct
        keys, not a text per row.
    string_table: the report's (id, value) table the api_name keys' text is read from where the
        kernel part lists no keys (KernelPart.api_sql None).
    name_sql: a SELECT over `src` yielding (key, text): each distinct key of kernel_columns'
        kernel_name and short_name once, with the name it stands for.
    range_table: the report's NVTX range table, read as `n` (r_row is its rowid), or None.
    range_columns: SQL expressions over `n` and `d` yielding domain, kind, start_ns, end_ns, pid,
        tid; `d` is the row of `domains` whose id is range_domain (an expression over `n`).
    r_row, r_path: per range in order: its rowid in the report, its path (index into `paths`).
    paths: distinct NVTX paths of the ranges as name tuples. domains: (id, name) rows.
    n_kernels: how many kernel rows kernel_part() gives.
    kernels: a zero-argument callable giving the KernelPart, computed in a thread of the parser
        (the launch-call join and the calls' NVTX paths) while the store writes the ranges; it
        waits for that work and raises its errors (BadInput: the file is refused) in the caller.
        ready(): whether that work is done (the store asks between its statements).
    """

    source: str
    kernel_table: str
    kernel_columns: tuple
    range_table: str | None
    range_columns: tuple
    range_domain: str
    # numpy arrays or plain lists of ints, as the parser built them
    r_row: Any
    r_path: Any
    paths: list
    domains: list
    n_kernels: int
    kernels: Callable[[], KernelPart]
    call_table: str | None = None
    string_table: str | None = None
    name_sql: str = "SELECT NULL, NULL WHERE 0"
    ready: Callable[[], object] | None = None  # a zero-argument callable: whether kernel_part() would return at once

    def __post_init__(self) -> None:
        if len(self.kernel_columns) != len(BULK_KERNEL_FIELDS) - 1 or len(self.range_columns) != 6:
            raise ValueError("internal: a Bulk's columns do not match BULK_KERNEL_FIELDS and the range fields")

    @property
    def kernel_sql(self) -> str:
        """A SELECT over `src` and bulk_kernel(seq, krow, rrow, path_id) (unqualified: a temp
        table, or a CTE over the kernel part's JSON, see KernelPart.ctes) yielding
        BULK_KERNEL_FIELDS and a last column path_id, one row per bulk_kernel row; no ORDER BY."""
        call = f' LEFT JOIN src."{self.call_table}" r ON r.rowid = b.rrow' if self.call_table else ""
        return (
            f"SELECT b.seq AS seq, {', '.join(self.kernel_columns)}, b.path_id"
            f' FROM bulk_kernel b JOIN src."{self.kernel_table}" k ON k.rowid = b.krow{call}'
        )

    @property
    def range_sql(self) -> str:
        """A SELECT over `src`, bulk_range(seq, row, path_id) (unqualified: a temp table, or a
        CTE of one chunk, see range_chunks) and temp.bulk_domain(id, name) yielding seq, domain,
        kind, start_ns, end_ns, pid, tid, path_id, one row per bulk_range row; no ORDER BY."""
        if not self.range_table:
            return "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0"
        return (
            f"SELECT b.seq, {', '.join(self.range_columns)}, b.path_id"
            f' FROM bulk_range b JOIN src."{self.range_table}" n ON n.rowid = b.row'
            f" LEFT JOIN temp.bulk_domain d ON d.id = {self.range_domain}"
        )

    def api_sql(self, part: KernelPart) -> str:
        """(key, text) for each distinct api_name key of the part's kernels: the part's own
        list, else every key of the calls the staged temp.bulk_kernel names."""
        if part.api_sql is not None:
            return part.api_sql
        key = self.kernel_columns[BULK_KERNEL_FIELDS.index("api_name") - 1]
        return (
            f'SELECT DISTINCT {key}, s.value FROM temp.bulk_kernel b JOIN src."{self.call_table}" r'
            f' ON r.rowid = b.rrow LEFT JOIN src."{self.string_table}" s ON s.id = {key}'
        )

    def kernel_part(self) -> KernelPart:
        return self.kernels()

    def kernels_ready(self) -> bool:
        return self.ready is None or bool(self.ready())

    @property
    def n_ranges(self) -> int:
        return len(self.r_row)

    def stage_ranges(self, conn, path_ids, ranges_streamed: bool = False) -> None:
        """temp.bulk_range and temp.bulk_domain on `conn` (which has `src` attached); path_id is
        path_ids[path] (the store's ids). ranges_streamed: the caller feeds bulk_range by
        range_chunks instead (an empty temp table is made all the same)."""
        for t in ("bulk_range", "bulk_domain"):
            conn.execute(f"DROP TABLE IF EXISTS temp.{t}")
        conn.execute("CREATE TEMP TABLE bulk_range (seq INTEGER PRIMARY KEY, row INTEGER, path_id INTEGER)")
        conn.execute("CREATE TEMP TABLE bulk_domain (id INTEGER PRIMARY KEY, name TEXT)")
        conn.executemany("INSERT INTO bulk_domain VALUES (?, ?)", self.domains)
        if not ranges_streamed:
            _fill(conn, "bulk_range", ("row", "path_id"), self.r_row, _mapped(self.r_path, path_ids), None)

    @staticmethod
    def stage_kernels(conn, part: KernelPart, path_ids, on_rows=None) -> None:
        """temp.bulk_kernel on `conn`: the kernel part, its paths as path_ids[path]."""
        conn.execute("DROP TABLE IF EXISTS temp.bulk_kernel")
        conn.execute(
            "CREATE TEMP TABLE bulk_kernel (seq INTEGER PRIMARY KEY, krow INTEGER, rrow INTEGER, path_id INTEGER)"
        )
        _fill(conn, "bulk_kernel", ("krow", "path_id"), part.krow, _mapped(part.path, path_ids), on_rows)
        _fill(conn, "bulk_kernel", ("rrow",), part.rrow, None, None)

    def range_chunks(self, path_ids, chunk: int = 1 << 20):
        """The ranges as (bulk_range CTE, its parameters) per chunk of rows, the rows of a JSON
        array SQLite unpacks in C: nothing staged for millions of ranges. None when the values
        do not pack (then `stage` fills temp.bulk_range)."""
        import json

        import numpy as np

        if not _packable(self.r_row, self.r_path):
            return None
        ids = np.asarray(path_ids, dtype=np.int64)
        mask = (1 << _PACK) - 1

        def chunks():
            for lo in range(0, self.n_ranges, chunk):
                packed = _pack(self.r_row[lo : lo + chunk], _mapped(self.r_path[lo : lo + chunk], ids))
                yield (
                    f"bulk_range(seq, row, path_id) AS (SELECT j.key + ?, j.value >> {_PACK}, "
                    f"NULLIF(j.value & {mask}, {mask}) FROM json_each(?) j)",
                    (lo, json.dumps(packed.tolist())),
                    min(lo + chunk, self.n_ranges),
                )

        return chunks()

    def _query(self, sql: str, *more: str):
        import sqlite3

        conn = sqlite3.connect(":memory:", uri=True)  # uri: ATTACH takes the read-only URI
        try:
            conn.execute("ATTACH ? AS src", (_ro_uri(self.source),))
            self.stage_ranges(conn, list(range(len(self.paths))))
            part = self.kernel_part()
            self.stage_kernels(conn, part, list(range(len(part.paths))))
            rows = conn.execute(f"SELECT * FROM ({sql}) ORDER BY 1").fetchall()
            return (rows, *(conn.execute(m).fetchall() for m in more)) if more else rows
        finally:
            conn.close()

    def kernel_rows(self) -> list[tuple]:
        """The kernels as KERNEL_FIELDS tuples (built in memory: for tests and small reports)."""
        from profkit.core.nvtx import NvtxPath

        part = self.kernel_part()
        paths = [NvtxPath(p) for p in part.paths]
        rows, names, apis = self._query(self.kernel_sql, self.name_sql, self.api_sql(part))
        names, apis = dict(names), dict(apis)
        kn, ks, ka = (BULK_KERNEL_FIELDS.index(f) for f in NAME_FIELDS)
        at = ks + 1
        out = []
        for r in rows:
            p = paths[r[-1]] if r[-1] is not None else None
            r = list(r)
            r[kn], r[ks], r[ka] = names[r[kn]], names[r[ks]], apis.get(r[ka])
            r = tuple(r)
            out.append(r[:at] + (p.names[-1] if p is not None else None, p) + r[at:-1])
        return out

    def range_rows(self) -> list[tuple]:
        """The ranges as RANGE_FIELDS tuples (built in memory)."""
        from profkit.core.nvtx import NvtxPath

        paths = [NvtxPath(p) for p in self.paths]
        out = []
        for seq, dom, kind, s, e, pid, tid, p in self._query(self.range_sql):
            path = paths[p]
            out.append((dom, path.names[-1], kind, s, e, pid, tid, len(path.names) - 1, path))
        return out


@dataclass
class KernelPart:
    """A Bulk's kernels: per kernel in seq order the rowids kernel_sql joins on (rrow -1: no
    launch call) and its path (index into `paths`, -1: no range); api_sql: a SELECT over `src`
    yielding (key, text) for each distinct key of kernel_columns' api_name (a key it does not
    list, or NULL: no name), or None: the store reads the keys of the kernels' calls
    (Bulk.api_sql)."""

    # numpy arrays or plain lists of ints, as the parser built them
    krow: Any
    rrow: Any
    path: Any
    paths: list
    api_sql: str | None = "SELECT NULL, NULL WHERE 0"
    packs: bool = False  # the columns pack into JSON (pack()); else the store stages a temp table
    first: tuple | None = None  # the first chunk's JSON (packed, rrows), made by pack() in the parser's thread
    # kernels from side_from on are a share a second writer may build (profkit.store.side_writer), at
    # most SIDE_SHARE of a chunk; side: their JSON, made by pack() too. None: no share
    side_from: int | None = None
    side: tuple | None = None
    # bits of (rrow + 1, path + 1) when all three columns pack into one value (a file of up to
    # a few M kernels and tens of M calls: no rrow array, no temp table of it); else None
    bits: tuple | None = None

    def _json(self, lo: int, hi: int) -> tuple[str, str | None]:
        import json

        import numpy as np

        if self.bits:
            rb, pb = self.bits
            k, r, p = (np.asarray(x[lo:hi], dtype=np.int64) for x in (self.krow, self.rrow, self.path))
            return json.dumps(((k << (rb + pb)) | ((r + 1) << pb) | (p + 1)).tolist()), None
        return (
            json.dumps(_pack(self.krow[lo:hi], self.path[lo:hi]).tolist()),
            json.dumps(np.asarray(self.rrow[lo:hi], dtype=np.int64).tolist()),
        )

    def pack(self) -> None:
        """Whether the columns pack as JSON arrays SQLite unpacks in C (ctes() reads them); the
        side share, if the file is worth one; the JSON of the first chunk and of the side share."""
        import numpy as np

        if not _packable(self.krow, self.path):
            return
        self.packs, n = True, len(self.krow)
        if n:
            kb = max(int(np.max(self.krow)).bit_length(), 1)  # (rowids >= 0: _packable)
            rb, pb = (max((int(np.max(x)) + 1).bit_length(), 1) for x in (self.rrow, self.path))
            if kb + rb + pb <= _PACK_BITS and int(np.min(self.rrow)) >= -1:  # (a negative rowid: no)
                self.bits = (rb, pb)
        if n >= max(SIDE_MIN_KERNELS, 2):
            self.side_from = n - int(min(n, _KERNEL_CHUNK) * SIDE_SHARE)
            self.side = self._json(self.side_from, n)
        self.first = self._json(0, min(n if self.side_from is None else self.side_from, _KERNEL_CHUNK))

    def ctes(self, conn, path_ids, lo: int = 0, hi: int | None = None):
        """Per chunk of kernels lo..hi (a `bulk_kernel` CTE, its JSON parameter, kernels done),
        with two small temp tables made on `conn` (the chunk's rrow by seq, path index ->
        path_ids): no per-kernel temp table filled row by row and updated. A chunk's rows come
        in seq order. None when the columns do not pack."""
        if not self.packs:
            return None
        mask, hi = (1 << _PACK) - 1, len(self.krow) if hi is None else hi
        for t in ("bulk_rrow", "bulk_path"):
            conn.execute(f"DROP TABLE IF EXISTS temp.{t}")
        conn.execute("CREATE TEMP TABLE bulk_rrow (seq INTEGER PRIMARY KEY, rrow INTEGER)")
        conn.execute("CREATE TEMP TABLE bulk_path (idx INTEGER PRIMARY KEY, id INTEGER)")
        conn.executemany(
            "INSERT INTO temp.bulk_path VALUES (?, ?)",
            ((i, int(x)) for i, x in enumerate(path_ids) if x is not None and x >= 0),
        )

        def made(a: int, b: int):
            """The JSON of a..b: made by pack() where it was (handed over once), else now."""
            if a == 0 and self.first is not None and b == min(self.side_from or b, _KERNEL_CHUNK):
                out, self.first = self.first, None
            elif a == self.side_from and self.side is not None and b == len(self.krow):
                out, self.side = self.side, None
            else:
                out = self._json(a, b)
            return out

        def chunks():
            for a in range(lo, hi, _KERNEL_CHUNK):
                b = min(a + _KERNEL_CHUNK, hi)
                packed, rrows = made(a, b)
                if self.bits:
                    rb, pb = self.bits
                    yield (
                        f"bulk_kernel(seq, krow, rrow, path_id) AS (SELECT j.key + {a}, j.value >> {rb + pb},"
                        f" NULLIF((j.value >> {pb}) & {(1 << rb) - 1}, 0) - 1, p.id FROM json_each(?1) j"
                        f" LEFT JOIN temp.bulk_path p ON p.idx = (j.value & {(1 << pb) - 1}) - 1)",
                        packed,
                        b,
                    )
                    continue
                conn.execute("DELETE FROM temp.bulk_rrow")
                conn.execute(
                    f"INSERT INTO temp.bulk_rrow SELECT j.key + {a}, NULLIF(j.value, -1) FROM json_each(?) j", (rrows,)
                )
                del rrows
                yield (
                    f"bulk_kernel(seq, krow, rrow, path_id) AS (SELECT j.key + {a}, j.value >> {_PACK}, r.rrow, p.id"
                    f" FROM json_each(?1) j JOIN temp.bulk_rrow r ON r.seq = j.key + {a}"
                    f" LEFT JOIN temp.bulk_path p ON p.idx = (j.value & {mask}))",
                    packed,
                    b,
                )

        return chunks()


def _mapped(p, path_ids):
    """Path indices -> the store's path ids (-1 stays -1)."""
    import numpy as np

    ids = np.asarray(path_ids, dtype=np.int64)
    p = np.asarray(p, dtype=np.int64)
    return np.where(p >= 0, ids[np.maximum(p, 0)], -1) if len(ids) else np.full(len(p), -1, dtype=np.int64)


_PACK = 24  # low bits of a packed value: a path id (all ones: none)
_PACK_BITS = 62  # bits a kernel's three packed columns may take (KernelPart.bits): a JSON integer is an int64
_KERNEL_CHUNK = 1 << 20  # kernels per JSON chunk (KernelPart.ctes): 10 M kernels' JSON at once was ~0.7 GB
# a side writer (profkit.store.side_writer) builds the last SIDE_SHARE of a chunk of kernels while the
# store writes the rest: it builds a row in ~1.8 us, the store copies it in ~0.45 us, and builds
# its own in ~1.8 us beside it (benchmarks/results/ingest.md); below SIDE_MIN_KERNELS it is
# not worth its thread
SIDE_SHARE = 0.5
SIDE_MIN_KERNELS = 200_000


def _pack(a, b):
    """a << _PACK | b per row (b < 0: all ones, none), as int64: what the JSON queries unpack."""
    import numpy as np

    b = np.asarray(b, dtype=np.int64)
    return (np.asarray(a, dtype=np.int64) << _PACK) | np.where(b < 0, (1 << _PACK) - 1, b)


def _packable(a, b) -> bool:
    import numpy as np

    a = np.asarray(a)
    return len(a) == 0 or (
        a.min() >= 0 and a.max() < (1 << (62 - _PACK)) and np.asarray(b).max(initial=-1) < (1 << _PACK) - 1
    )


def _fill(conn, table: str, cols: tuple, a, b, on_rows, chunk: int = 1 << 20) -> int:
    """Write columns into a temp table keyed by seq (0..n-1): as JSON arrays that SQLite
    unpacks in C (a value is a << 24 | b), one statement per chunk; values too large to pack
    go through executemany. A second call with one column updates the rows the first made."""
    import json

    import numpy as np

    a = np.asarray(a, dtype=np.int64)
    n = len(a)
    packable = b is None or _packable(a, b)
    for lo in range(0, n, chunk):
        hi = min(lo + chunk, n)
        if b is None:  # update: one column
            conn.execute(
                f"UPDATE {table} SET {cols[0]} = NULLIF(j.value, -1) FROM json_each(?) j WHERE {table}.seq = j.key + ?",
                (json.dumps(a[lo:hi].tolist()), lo),
            )
        elif packable:
            packed = _pack(a[lo:hi], b[lo:hi])
            conn.execute(
                f"INSERT INTO {table} (seq, {cols[0]}, {cols[1]}) SELECT j.key + ?, j.value >> {_PACK},"
                f" NULLIF(j.value & {(1 << _PACK) - 1}, {(1 << _PACK) - 1}) FROM json_each(?) j",
                (lo, json.dumps(packed.tolist())),
            )
        else:
            conn.executemany(
                f"INSERT INTO {table} (seq, {cols[0]}, {cols[1]}) VALUES (?, ?, NULLIF(?, -1))",
                zip(range(lo, hi), a[lo:hi].tolist(), np.asarray(b[lo:hi]).tolist()),
            )
        if on_rows:
            on_rows(hi)
    return n


def _ro_uri(path: str) -> str:
    from pathlib import Path

    return f"{Path(path).resolve().as_uri()}?mode=ro"
