"""The bulk path of a report's load: a parser's rows.Bulk copied with INSERT ... SELECT from
the attached report (`src`), joined to what the parser computed (staged as temp tables or JSON
chunks); no tuple per row. The last share of the kernels is built by a side writer
(profkit.store.side_writer) meanwhile. Runs inside add_report's transaction.
"""

from __future__ import annotations

import sqlite3

from profkit.core.names import report_text
from profkit.core.rows import BULK_KERNEL_FIELDS, NAME_FIELDS, Parsed
from profkit.store.ids import name_ids, path_ids
from profkit.store.side_writer import SideWriter, table_ddl

# ranges per statement of a bulk load: between two, the store starts the side writer once the
# parser's kernel part is ready (1 M ranges: 4 statements)
RANGE_CHUNK = 1 << 18


def _name_tables(conn: sqlite3.Connection, names: list, apis: list) -> None:
    """temp.bulk_name and temp.bulk_api on `conn`: (report's name key, launch_name id) rows."""
    for t in ("bulk_name", "bulk_api"):
        conn.execute(f"DROP TABLE IF EXISTS temp.{t}")
        # (INTEGER: the affinity of the report's id columns, so that the join searches the key)
        conn.execute(f"CREATE TEMP TABLE {t} (key INTEGER PRIMARY KEY, id INTEGER) WITHOUT ROWID")
    conn.executemany("INSERT INTO temp.bulk_name VALUES (?, ?)", names)
    conn.executemany("INSERT INTO temp.bulk_api VALUES (?, ?)", apis)


def add_bulk(conn: sqlite3.Connection, run: str, file_id: int, rank: int | None, report: Parsed, progress=None) -> None:
    """A Bulk report: kernels and ranges by INSERT ... SELECT from the attached report,
    joined to what the parser computed (staged as temp tables); no tuple per row."""
    import numpy as np

    bulk = report.bulk
    if bulk is None:
        raise ValueError("internal: add_bulk is for a report with a Bulk part")
    conn.execute("PRAGMA cache_size = -262144")  # 256 MB of pages: a bulk copy spills less to the log mid-way
    conn.execute("PRAGMA temp.cache_size = -65536")  # the staged columns (1 M kernels: ~30 MB) stay off disk
    ids = np.array([-1 if i is None else i for i in path_ids(conn, bulk.paths)], dtype=np.int64)
    nk, nr = bulk.n_kernels, bulk.n_ranges
    tell = (lambda phase, total: lambda n: progress(phase, n, total)) if progress else (lambda *a: None)
    # the ranges first: meanwhile the parser's thread finishes the kernels (the launch-call
    # join and the calls' paths; SQLite writes without the GIL)
    chunks = bulk.range_chunks(ids, chunk=RANGE_CHUNK)
    bulk.stage_ranges(conn, ids, ranges_streamed=chunks is not None)
    if progress:
        progress("writing ranges", 0, nr)
    insert = (
        "INSERT INTO nvtx_event (run, file_id, rank, domain, kind, start_ns, end_ns, pid, tid, path_id)"
        " WITH {cte} q(seq, domain, kind, start_ns, end_ns, pid, tid, path_id) AS (" + bulk.range_sql + ")"
        " SELECT ?, ?, ?, domain, kind, start_ns, end_ns, pid, tid, path_id FROM q {order}"
    )
    kernels = None  # (part, path ids, insert, params, side writer) once the kernel part is ready
    try:
        if chunks is None:
            conn.execute(insert.format(cte="", order="ORDER BY seq"), (run, file_id, rank))
        else:
            # a chunk's rows come in array order (json_each is the outer loop): no sort of them
            for cte, params, done in chunks:
                conn.execute(insert.format(cte=cte + ",", order=""), params + (run, file_id, rank))
                if progress:
                    progress("writing ranges", done, nr)
                if kernels is None and bulk.kernels_ready():  # the side writer starts between two chunks
                    kernels = _begin_kernels(conn, bulk, run, file_id, rank, report.source, tell("staging", nk))
        if progress:
            progress("writing ranges", nr, nr)
        if kernels is None:
            kernels = _begin_kernels(conn, bulk, run, file_id, rank, report.source, tell("staging", nk))
        part, kids, insert, params, side = kernels
        chunks = part.ctes(conn, kids, hi=part.side_from if side else None)  # (None: staged as a table)
        if progress:
            progress("writing kernels", 0, nk)
        insert = insert.replace("/*INTO*/", "")
        if chunks is None:
            conn.execute(insert.replace("/*CTE*/", "").replace("/*ORDER*/", "ORDER BY q.seq"), (None,) + params)
        else:
            # json_each is the outer loop: a chunk's rows come in seq order, no sort
            for cte, packed, done in chunks:
                conn.execute(insert.replace("/*CTE*/", cte + ",").replace("/*ORDER*/", ""), (packed,) + params)
                if progress:
                    progress("writing kernels", done, nk)
        if side is not None:
            side.result()
            conn.execute("ATTACH ? AS side", (side.uri,))  # (detached by add_report, after COMMIT)
            side.close()
            kernels = None
            # the same schema, nothing but SELECT *: SQLite copies the records as they are
            conn.execute("INSERT INTO main.launch_row SELECT * FROM side.launch_row")
    finally:
        if kernels is not None and kernels[-1] is not None:  # an error or an interrupt: the writer stops
            kernels[-1].stop()
    if progress:
        progress("writing kernels", nk, nk)


def _begin_kernels(
    conn: sqlite3.Connection, bulk, run: str, file_id: int, rank: int | None, source: str, on_rows=None
) -> tuple:
    """Once the parser's kernel part is ready (waiting for it): its paths and names staged,
    the launch insert made, and the last share of the kernels given to a side writer
    (side_writer), which starts at once. A part whose columns do not pack into JSON is
    staged as temp.bulk_kernel here, first (Bulk.api_sql may read it). Returns (part, path
    ids, insert, its parameters after the JSON, side writer or None)."""
    import numpy as np

    part = bulk.kernel_part()  # (its errors refuse the file: the transaction rolls back)
    kids = np.array([-1 if i is None else i for i in path_ids(conn, part.paths)], dtype=np.int64)
    if not part.packs:
        bulk.stage_kernels(conn, part, kids, on_rows=on_rows)
    base = (conn.execute("SELECT coalesce(max(id), 0) FROM launch_row").fetchone()[0]) + 1
    fields = BULK_KERNEL_FIELDS + ("path_id",)
    null_name, name_rows = _stage_names(conn, bulk, part)
    plain = [f for f in fields if f not in NAME_FIELDS]
    # names through the staged keys (a few rows): the rows hold ids, no text
    insert = f"""
        INSERT INTO /*INTO*/launch_row (id, run, file_id, rank, source, {", ".join(plain)}, name_id, short_id, api_id)
        WITH /*CTE*/ q({", ".join(fields)}) AS ({bulk.kernel_sql})
        SELECT ?2 + q.seq, ?3, ?4, ?5, ?6, {", ".join("q." + f for f in plain)},
               coalesce(n.id, ?7), coalesce(s.id, ?7), a.id
        FROM q LEFT JOIN temp.bulk_name n ON n.key = q.kernel_name LEFT JOIN temp.bulk_name s ON s.key = q.short_name
        LEFT JOIN temp.bulk_api a ON a.key = q.api_name /*ORDER*/"""
    params = (base, run, file_id, rank, source, null_name)
    side = (
        None
        if part.side_from is None
        else SideWriter.start(
            bulk.source,
            table_ddl(conn, "launch_row"),
            lambda side_conn: _name_tables(side_conn, *name_rows),
            insert.replace("/*INTO*/", "side.").replace("/*ORDER*/", ""),
            params,
            part,
            kids,
            part.side_from,
            bulk.n_kernels,
        )
    )
    return part, kids, insert, params, side


def _stage_names(conn: sqlite3.Connection, bulk, part) -> tuple:
    """temp.bulk_name and temp.bulk_api: each name key of the bulk's kernel query -> its
    launch_name id (names added where new). Returns the id of the name of a NULL key, and
    the two tables' rows (a side writer stages them on its own connection)."""
    names, apis = conn.execute(bulk.name_sql).fetchall(), conn.execute(bulk.api_sql(part)).fetchall()
    names = [(k, report_text(t)) for k, t in names]  # (a BLOB where the report writes text: as the row path reads it)
    apis = [(k, report_text(t)) for k, t in apis]
    ids = name_ids(conn, (t for _, t in names + apis if t is not None))
    rows = (
        [(k, ids[t]) for k, t in names if k is not None],
        [(k, ids.get(t) if t is not None else None) for k, t in apis if k is not None],
    )
    _name_tables(conn, *rows)
    return next((ids[t] for k, t in names if k is None), None), rows


# the temp tables a bulk load stages on the store's connection
STAGING = ("bulk_kernel", "bulk_range", "bulk_domain", "bulk_name", "bulk_api", "bulk_rrow", "bulk_path")


def drop_staging(conn: sqlite3.Connection) -> None:
    for t in STAGING:
        conn.execute(f"DROP TABLE IF EXISTS temp.{t}")
