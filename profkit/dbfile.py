"""Opening SQLite files that profkit must not change: a profkit database for a query, an
nsys export being parsed, a database being exported. The one read-only opener."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

BUSY_TIMEOUT_MS = 60_000


def open_readonly(path: str | os.PathLike, timeout_ms: int = BUSY_TIMEOUT_MS, **kw) -> sqlite3.Connection:
    """A read-only connection to an existing SQLite file (mode=ro, query_only); `kw` goes to
    sqlite3.connect (e.g. check_same_thread)."""
    # as_uri() percent-escapes the path: a raw '#', '?' or '%' would cut or change the URI
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=timeout_ms / 1000, **kw)
    conn.execute(f"PRAGMA busy_timeout = {timeout_ms}")
    conn.execute("PRAGMA query_only = 1")
    return conn


class ColumnsError(Exception):
    """A column query failed (a corrupt or hostile file): the caller says what it was reading."""


def read_columns(path: str | os.PathLike, sql: str, n_int: int, blob: bool = False, on_rows=None,
                 batch_rows: int = 1 << 16, dtypes=None, n_rows: int | None = None):
    """The result of `sql` on a read-only SQLite file as numpy columns: the first `n_int`
    columns are 64-bit integers, never NULL (the query coalesces); with `blob`, one last
    column of bytes, never NULL, comes back deduplicated as (codes, values).

    Read through Arrow's ADBC SQLite driver where installed (rows become columns in C, no
    Python object per value), else through sqlite3 in batches. `on_rows(n)`: rows read so far.
    `dtypes`: a narrower numpy type per integer column (the query guarantees the range).
    `n_rows`: the row count where known cheaply: columns are then filled in place.
    Returns (list of arrays, (codes, values) or None).
    """
    dtypes = dtypes or ["int64"] * n_int
    try:
        import adbc_driver_sqlite.dbapi  # noqa: F401
    except ImportError:
        return _read_sqlite3(path, sql, n_int, blob, on_rows, batch_rows, dtypes)
    try:
        return _read_adbc(path, sql, n_int, blob, on_rows, batch_rows, dtypes, n_rows)
    except ColumnsError:
        raise
    except Exception:  # the driver infers a column's type from its first rows: an odd file reads the slow way
        return _read_sqlite3(path, sql, n_int, blob, on_rows, batch_rows, dtypes)


def _read_adbc(path, sql, n_int, blob, on_rows, batch_rows, dtypes, n_rows=None):
    import adbc_driver_sqlite.dbapi as adbc
    import numpy as np
    import pyarrow.compute as pc

    index: dict[bytes, int] = {}
    done = 0
    with adbc.connect(f"{Path(path).resolve().as_uri()}?mode=ro") as conn:
        with conn.cursor() as cur:
            if n_rows is None:  # a join: counting would run it twice; batches then one copy
                parts = list(_read_adbc_batches(cur, sql, n_int, blob, on_rows, batch_rows, dtypes, index))
                out = [np.concatenate([p[0][i] for p in parts]) if parts else np.zeros(0, dtype=dtypes[i])
                       for i in range(n_int)]
                codes = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, dtype=np.int32)
                return out, (codes, list(index)) if blob else None
            n = n_rows  # columns filled in place: no second copy of millions of rows
            out = [np.empty(n, dtype=dtypes[i]) for i in range(n_int)]
            codes = np.empty(n, dtype=np.int32)
            cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(batch_rows)})
            cur.execute(sql)
            for batch in cur.fetch_record_batch():
                k = batch.num_rows
                if done + k > n:
                    raise ColumnsError("the file changed while it was read")
                for i in range(n_int):
                    out[i][done:done + k] = batch.column(i).to_numpy()
                if blob:
                    enc = pc.dictionary_encode(batch.column(n_int))
                    local = np.array([index.setdefault(v, len(index)) for v in enc.dictionary.to_pylist()],
                                     dtype=np.int32)
                    if k:
                        codes[done:done + k] = local[enc.indices.to_numpy()]
                done += k
                if on_rows:
                    on_rows(done)
    if done != n:
        raise ColumnsError("the file changed while it was read")
    return out, (codes, list(index)) if blob else None


def _read_adbc_batches(cur, sql, n_int, blob, on_rows, batch_rows, dtypes, index):
    import numpy as np
    import pyarrow.compute as pc

    cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(batch_rows)})
    cur.execute(sql)
    done = 0
    for batch in cur.fetch_record_batch():
        cols = [np.asarray(batch.column(i).to_numpy(), dtype=dtypes[i]) for i in range(n_int)]
        codes = np.zeros(0, dtype=np.int32)
        if blob:
            enc = pc.dictionary_encode(batch.column(n_int))
            local = np.array([index.setdefault(v, len(index)) for v in enc.dictionary.to_pylist()], dtype=np.int32)
            codes = local[enc.indices.to_numpy()] if batch.num_rows else codes
        done += batch.num_rows
        if on_rows:
            on_rows(done)
        yield cols, codes


def _read_sqlite3(path, sql, n_int, blob, on_rows, batch_rows, dtypes, n_rows=None):
    import numpy as np

    ints: list[list] = [[] for _ in range(n_int)]
    codes: list = []
    index: dict[bytes, int] = {}
    done = 0
    conn = open_readonly(path)
    try:
        cur = conn.execute(sql)
        while True:
            rows = cur.fetchmany(batch_rows)
            if not rows:
                break
            try:
                a = np.array([r[:n_int] for r in rows] if blob else rows, dtype=np.int64).reshape(len(rows), n_int)
            except (TypeError, ValueError, OverflowError) as e:
                raise ColumnsError(f"a value that is not a 64-bit integer ({e})") from None
            for i in range(n_int):
                ints[i].append(a[:, i].astype(dtypes[i]))
            if blob:
                codes.append(np.array([index.setdefault(bytes(r[n_int]), len(index)) for r in rows], dtype=np.int32))
            done += len(rows)
            if on_rows:
                on_rows(done)
    finally:
        conn.close()
    out = []
    for i in range(n_int):  # one column at a time: the batches of the next are still apart
        out.append(np.concatenate(ints[i]) if ints[i] else np.zeros(0, dtype=dtypes[i]))
        ints[i] = None
    return out, ((np.concatenate(codes) if codes else np.zeros(0, dtype=np.int32)), list(index)) if blob else None
