"""Opening SQLite files that profkit must not change: a profkit database for a query, an
nsys export being parsed, a database being exported. The one read-only opener, and the
checks that an SQLite file is whole and that reading it stays within a budget."""

from __future__ import annotations

import os
import sqlite3
import struct
from pathlib import Path

from profkit.core.errors import BadInput
from profkit.core.signals import STOPPED, watch

BUSY_TIMEOUT_MS = 60_000
SQLITE_MAGIC = b"SQLite format 3\x00"


def _uri(path: str | os.PathLike, **params) -> str:
    # as_uri() percent-escapes the path: a raw '#', '?' or '%' would cut or change the URI
    return Path(path).resolve().as_uri() + "?" + "&".join(f"{k}={v}" for k, v in params.items())


def wal_mode(path: str | os.PathLike) -> bool:
    """The file's header says write-ahead logging (bytes 18-19 = 2): readers need its -shm."""
    with open(path, "rb") as f:
        head = f.read(20)
    return head[:16] == SQLITE_MAGIC and head[18:20] == b"\x02\x02"


def _folder_writable(path: Path) -> bool:
    # os.access answers for root too (a read-only mount says no); nothing is written to find out
    return os.access(path.parent, os.W_OK)


SQLITE_MAX_PATH = 512  # bytes of an absolute file name SQLite's unix VFS opens (MAX_PATHNAME)


def check_path_length(path) -> None:
    """Refuse a file SQLite cannot open by its name (it says only 'unable to open database
    file', which reads as a damaged file)."""
    n = len(os.fsencode(os.path.abspath(path)))
    if n > SQLITE_MAX_PATH:
        raise BadInput(
            path,
            f"its path is {n} bytes, longer than SQLite opens ({SQLITE_MAX_PATH}): "
            "move it, or link to it from a shorter path",
        )


def open_readonly(
    path: str | os.PathLike, timeout_ms: int = BUSY_TIMEOUT_MS, peek: bool = False, **kw
) -> sqlite3.Connection:
    """A read-only connection to an existing SQLite file (mode=ro, query_only); `kw` goes to
    sqlite3.connect (e.g. check_same_thread). It writes nothing to the file or beside it, except
    the -shm index a WAL-mode file needs while profkit writes it (SQLite's rule).

    A WAL-mode file with no -wal beside it in a folder this process cannot write cannot change
    while it is read (any writer would have to create the -wal there): it is opened immutable,
    which needs no -shm, so a database in a read-only folder can be queried. `peek`: the same
    for a quick look at the schema wherever the file is (a writer that starts meanwhile can
    only make the look stale, and no -wal/-shm is left behind)."""
    check_path_length(path)
    p = Path(path)
    if wal_mode(p) and not os.path.exists(f"{p}-wal") and (peek or not _folder_writable(p.resolve())):
        conn = sqlite3.connect(_uri(p, mode="ro", immutable=1), uri=True, timeout=timeout_ms / 1000, **kw)
    else:
        conn = sqlite3.connect(_uri(p, mode="ro"), uri=True, timeout=timeout_ms / 1000, **kw)
    conn.execute(f"PRAGMA busy_timeout = {timeout_ms}")
    conn.execute("PRAGMA query_only = 1")
    return watch(conn)  # Ctrl-C and SIGTERM end a statement that would not


class ColumnsError(Exception):
    """A column query failed (a corrupt or hostile file): the caller says what it was reading."""


class TooManyRows(ColumnsError):
    """A column query returned more than its max_rows (a join that multiplies rows)."""


def read_columns(
    path: str | os.PathLike,
    sql: str,
    n_int: int,
    blob: bool = False,
    on_rows=None,
    batch_rows: int = 1 << 16,
    dtypes=None,
    n_rows: int | None = None,
    max_rows: int | None = None,
    bound: bool = False,
    strict: bool = False,
    later: bool = False,
):
    """The result of `sql` on a read-only SQLite file as numpy columns: the first `n_int`
    columns are 64-bit integers, never NULL (the query coalesces); with `blob`, one last
    column of bytes, never NULL, comes back deduplicated as (codes, values).

    Read through Arrow's ADBC SQLite driver where installed (rows become columns in C, no
    Python object per value), else through sqlite3 in batches. `on_rows(n)`: rows read so far.
    `dtypes`: a narrower numpy type per integer column (the query guarantees the range).
    `n_rows`: the row count where known cheaply: columns are then filled in place. With
    `bound`, n_rows is only an upper bound (a table's rowid span: its b-tree ends, where a
    count would read every page): filled in place, then cut to the rows read.
    `strict`: through ADBC only, whose columns keep one type: a value that is not a 64-bit
    integer (or a NULL the query left) raises ColumnsError, as does a missing ADBC, instead of
    the sqlite3 read (which would truncate a real number): the caller asks with typeof() then.
    `max_rows`: more rows than this raise TooManyRows as soon as they are read (a join that
    multiplies rows stops there, not after filling memory).
    Returns (list of arrays, (codes, values) or None); with `later`, a Pending read whose
    result() is that (the caller works meanwhile: the read runs on a thread of its own).
    """
    dtypes = dtypes or ["int64"] * n_int
    if max_rows is not None:
        told = on_rows

        def on_rows(done):
            if done > max_rows:
                raise TooManyRows(f"more than {max_rows} rows")
            if told:
                told(done)

    if not _has_adbc():
        if strict:
            raise ColumnsError("no ADBC driver: no strictly typed read")
        if not later:
            return _read_sqlite3(path, sql, n_int, blob, on_rows, batch_rows, dtypes)
        return Pending(_read_sqlite3, path, sql, n_int, blob, on_rows, batch_rows, dtypes)

    halt: list = []  # Pending.cancel()'s word: the read stops at its next batch
    each = on_rows

    def on_batch(done):
        if halt:
            raise ColumnsError("the read was stopped")
        if each:
            each(done)

    def read():
        try:
            return _read_adbc(path, sql, n_int, blob, on_batch, batch_rows, dtypes, n_rows, max_rows, bound)
        except ColumnsError:
            raise
        except Exception as e:  # the driver infers a column's type from its first rows: an odd file reads the slow way
            # (a type the driver refused, or anything else it could not read: a strict caller's typed read judges it)
            if strict:
                raise ColumnsError(f"not read as 64-bit integers ({e})") from None
        return _read_sqlite3(path, sql, n_int, blob, on_batch, batch_rows, dtypes)

    pending = Pending(read, halt=halt)
    return pending if later else pending.result()


def _has_adbc() -> bool:
    try:
        import adbc_driver_sqlite  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


class Pending:
    """fn(*args) under way on a thread of its own (a daemon): result() waits where signals land
    and returns its value or raises its error, each time it is asked. On a signal meanwhile, or
    cancel(), `halt` gets an item (a read checks it between batches) and a read of its thread's
    through ADBC is cancelled, the thread left behind (the driver runs a statement in C without
    signal checks: a view redefined to run forever would hold Ctrl-C and SIGTERM off for good)."""

    def __init__(self, fn, *args, name: str = "profkit-read", halt: list | None = None) -> None:
        import threading

        self._got: list = []
        self._halt = [] if halt is None else halt  # cancel() appends: fn's own checks see it

        def run() -> None:
            try:
                self._got.append((True, fn(*args)))
            except BaseException as e:  # raised in the waiting thread by result()
                self._got.append((False, e))

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def result(self):
        try:
            while self._thread.is_alive():
                self._thread.join(0.1)
        except BaseException:
            self.cancel()
            raise
        ok, value = self._got[0]
        if not ok:
            raise value
        return value

    def done(self) -> bool:
        return not self._thread.is_alive()

    def cancel(self) -> None:
        self._halt.append(True)
        _cancel(self._thread)

    def stop(self) -> None:
        """cancel() and wait for the thread to end, its answer or error dropped: before this
        process writes the file (a reader of another copy of SQLite that closes after a write
        takes itself for the file's last connection)."""
        self.cancel()
        try:
            self.result()
        except Exception:  # noqa: BLE001 - the answer is not wanted
            pass


class Ready:
    """A Pending's face for work done where it is asked for: result() runs fn() then (once).
    `inner`: a read fn() waits on, which cancel() and stop() reach."""

    def __init__(self, fn, inner=None) -> None:
        self._fn, self._got, self._inner = fn, None, inner

    def result(self):
        if self._fn is not None:
            self._got, self._fn = self._fn(), None
        return self._got

    def done(self) -> bool:
        return self._inner is None or self._inner.done()

    def cancel(self) -> None:
        if self._inner is not None:
            self._inner.cancel()

    def stop(self) -> None:
        if self._inner is not None:
            self._inner.stop()


class Joined:
    """Reads of consecutive stretches of rows (Pending or Ready, each read_columns' answer) as
    one: result() is their columns end to end (the byte columns' codes merged), cancel() and
    stop() reach each."""

    def __init__(self, reads: list) -> None:
        self._reads = reads

    def result(self):
        import numpy as np

        try:
            got = [r.result() for r in self._reads]
        except BaseException:
            self.stop()  # (the others may still run: they end before the caller goes on)
            raise
        cols = [np.concatenate(x) for x in zip(*(g[0] for g in got))]
        return cols, (_merge_codes([g[1] for g in got]) if got[0][1] is not None else None)

    def done(self) -> bool:
        return all(r.done() for r in self._reads)

    def cancel(self) -> None:
        for r in self._reads:
            r.cancel()

    def stop(self) -> None:
        for r in self._reads:
            r.stop()


_OPEN: dict[int, _Adbc] = {}  # reader thread -> its open ADBC connection (cancelled on a signal)


def _cancel(t) -> None:
    """Cancel the statement of reader thread `t` (best effort: the driver may not stop)."""
    conn = _OPEN.get(t.ident or -1)
    stmt = getattr(conn, "_stmt", None)
    if stmt is not None:
        try:
            stmt.cancel()
        except Exception:  # noqa: BLE001 - a driver without cancel: the daemon reader is left as it is
            pass


class _Adbc:
    """A read-only ADBC SQLite connection through the driver manager's low-level API (its
    DB-API module imports pyarrow.dataset and pandas: 0.2 s before the first row).
    cursor() is itself: execute(sql) then fetch_record_batch(), one query at a time."""

    def __init__(self, path):
        import threading

        import adbc_driver_manager
        import adbc_driver_sqlite

        self._am = adbc_driver_manager
        self._db = adbc_driver_sqlite.connect(f"{Path(path).resolve().as_uri()}?mode=ro")
        self._conn = adbc_driver_manager.AdbcConnection(self._db)
        # a reader that starts while another opens the write-ahead log waits, as sqlite3's do
        # (the driver sets no busy timeout: "database is locked" at once)
        busy = adbc_driver_manager.AdbcStatement(self._conn)
        try:
            busy.set_sql_query(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            busy.execute_update()
        finally:
            busy.close()
        self._stmt = None
        self.batch_rows = 1 << 16
        self._thread = threading.get_ident()
        _OPEN[self._thread] = self

    def cursor(self) -> _Adbc:
        return self

    def execute(self, sql: str) -> None:
        if self._stmt is not None:
            self._stmt.close()
            self._stmt = None
        self._stmt = self._am.AdbcStatement(self._conn)
        self._stmt.set_options(**{"adbc.sqlite.query.batch_rows": str(self.batch_rows)})
        self._stmt.set_sql_query(sql)
        self._stream, _ = self._stmt.execute_query()

    def fetch_record_batch(self):
        import pyarrow

        return pyarrow.RecordBatchReader._import_from_c(self._stream.address)

    def __enter__(self) -> _Adbc:
        return self

    def __exit__(self, *exc) -> None:  # (twice: as the connection and as its cursor)
        if _OPEN.get(self._thread) is self:
            del _OPEN[self._thread]
        for name in ("_stmt", "_conn", "_db"):
            x = getattr(self, name)
            setattr(self, name, None)
            if x is not None:
                x.close()


def _numpy(a):
    """An Arrow array of integers as numpy, without a copy where it has no nulls (Arrow's
    to_numpy imports pandas on its first call: 0.16 s). A batch of another type (the driver
    infers each batch's types: a batch of real numbers) raises TypeError, never truncated
    into the integer columns."""
    import numpy as np

    kind = {"int": "i", "uint": "u"}.get(str(a.type).rstrip("0123456789"))
    if not kind:
        raise TypeError(f"a column of {a.type}, not of integers")
    if a.null_count == 0:
        size = a.type.bit_width // 8
        return np.frombuffer(a.buffers()[1], dtype=f"{kind}{size}", count=len(a), offset=a.offset * size)
    return a.to_numpy()


def _read_adbc(path, sql, n_int, blob, on_rows, batch_rows, dtypes, n_rows=None, max_rows=None, bound=False):
    import numpy as np

    index: dict[bytes, int] = {}
    with _Adbc(path) as conn:
        with conn.cursor() as cur:
            if n_rows is None and max_rows is not None and not blob:
                # a bounded join: filled in place up to its bound, no second copy of its rows
                out = [np.empty(max_rows, dtype=dtypes[i]) for i in range(n_int)]
                done = _fill_adbc(cur, sql, n_int, blob, on_rows, batch_rows, out, None, index, exact=False)
                return [a[:done] for a in out], None
            if n_rows is None:  # a join: counting would run it twice; batches then one copy
                parts = list(_read_adbc_batches(cur, sql, n_int, blob, on_rows, batch_rows, dtypes, index))
                out = [
                    np.concatenate([p[0][i] for p in parts]) if parts else np.zeros(0, dtype=dtypes[i])
                    for i in range(n_int)
                ]
                codes = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, dtype=np.int32)
                return out, (codes, list(index)) if blob else None
            n = n_rows  # columns filled in place: no second copy of millions of rows
            out = [np.empty(n, dtype=dtypes[i]) for i in range(n_int)]
            codes = np.empty(n, dtype=np.int32)
            try:
                done = _fill_adbc(cur, sql, n_int, blob, on_rows, batch_rows, out, codes, index, exact=not bound)
            except TooManyRows:  # more rows than the rowid span held
                raise ColumnsError("the file changed while it was read") from None
            if done < n:
                out, codes = [a[:done] for a in out], codes[:done]
    return out, (codes, list(index)) if blob else None


def _fill_adbc(cur, sql, n_int, blob, on_rows, batch_rows, out, codes, index, exact: bool = True) -> int:
    """Fill the arrays `out` (and `codes` with `blob`: indices into `index`, bytes -> code)
    with the rows of `sql`: exactly len(out[0]) of them, or with `exact` False at most that
    many (TooManyRows past it). Returns the number of rows."""
    import numpy as np
    import pyarrow.compute as pc

    n, done = len(out[0]), 0
    cur.batch_rows = batch_rows
    cur.execute(sql)
    for batch in cur.fetch_record_batch():
        k = batch.num_rows
        if done + k > n:
            raise ColumnsError("the file changed while it was read") if exact else TooManyRows(f"more than {n} rows")
        for i in range(n_int):
            out[i][done : done + k] = _numpy(batch.column(i))
        if blob:
            enc = pc.dictionary_encode(batch.column(n_int))
            local = np.array([index.setdefault(v, len(index)) for v in enc.dictionary.to_pylist()], dtype=np.int32)
            if k:
                codes[done : done + k] = local[_numpy(enc.indices)]
        done += k
        if on_rows:
            on_rows(done)
    if exact and done != n:
        raise ColumnsError("the file changed while it was read")
    return done


def read_columns_in_parts(
    path: str | os.PathLike,
    parts: list[tuple[str, int]],
    n_int: int,
    blob: bool = False,
    on_rows=None,
    batch_rows: int = 1 << 16,
    dtypes=None,
    bound: bool = False,
    strict: bool = False,
):
    """read_columns of the queries `parts` [(sql, its row count)], a thread each, into one set
    of columns in part order (SQLite and the ADBC driver work without the GIL: on a machine
    with several cores the parts read at once). Without ADBC, one after the other. `bound`
    (one part only): its count is an upper bound; `strict`: as read_columns'."""
    import threading

    import numpy as np

    dtypes = dtypes or ["int64"] * n_int
    if bound and len(parts) > 1:
        raise ValueError("an upper bound serves one part only: parts are placed by their counts")
    if not _has_adbc() or len(parts) < 2:
        return _read_parts_in_turn(path, parts, n_int, blob, on_rows, batch_rows, dtypes, bound, strict)
    total = sum(n for _, n in parts)
    out = [np.empty(total, dtype=dtypes[i]) for i in range(n_int)]
    codes = np.empty(total, dtype=np.int32)
    indexes: list[dict] = [{} for _ in parts]
    seen = [0] * len(parts)
    errors: list[BaseException] = []
    starts = np.concatenate(([0], np.cumsum([n for _, n in parts]))).tolist()

    def one(k: int) -> None:
        def counted(done: int) -> None:
            if errors:
                raise ColumnsError("another part failed")
            seen[k] = done

        try:
            a, b = starts[k], starts[k + 1]
            with _Adbc(path) as conn:
                with conn.cursor() as cur:
                    _fill_adbc(
                        cur,
                        parts[k][0],
                        n_int,
                        blob,
                        counted,
                        batch_rows,
                        [x[a:b] for x in out],
                        codes[a:b],
                        indexes[k],
                    )
        except BaseException as e:  # raised in the caller's thread below
            errors.append(e)

    threads = [
        threading.Thread(target=one, args=(k,), name=f"profkit-read-{k}", daemon=True) for k in range(len(parts))
    ]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.1)
                if on_rows:
                    on_rows(sum(seen))
    except BaseException as e:  # an interrupt: the parts stop at their next batch, or are cancelled
        errors.append(e)
        for t in threads:
            t.join(1.0)
            if t.is_alive():
                _cancel(t)
        raise
    if errors:
        first = next(
            (e for e in errors if not isinstance(e, ColumnsError) or str(e) != "another part failed"), errors[0]
        )
        if isinstance(first, ColumnsError) or not isinstance(first, Exception):
            raise first
        if strict:  # (as read_columns)
            raise ColumnsError(f"not read as 64-bit integers ({first})") from None
        del out, codes  # the driver inferred a column's type from its first rows: read_columns' slow way
        return _read_parts_in_turn(path, parts, n_int, blob, on_rows, batch_rows, dtypes)
    if not blob:
        return out, None
    return out, _merge_codes([(codes[starts[k] : starts[k + 1]], list(ix)) for k, ix in enumerate(indexes)], into=codes)


def _read_parts_in_turn(path, parts, n_int, blob, on_rows, batch_rows, dtypes, bound=False, strict=False):
    import numpy as np

    got, before = [], 0
    for sql, n in parts:
        told = (lambda done, before=before: on_rows(before + done)) if on_rows else None
        got.append(read_columns(path, sql, n_int, blob, told, batch_rows, dtypes, n_rows=n, bound=bound, strict=strict))
        before += len(got[-1][0][0])
    out = [np.concatenate([g[0][i] for g in got]) if len(got) > 1 else got[0][0][i] for i in range(n_int)]
    return out, (_merge_codes([g[1] for g in got]) if blob else None)


def _merge_codes(coded, into=None):
    """Per-part (codes, values) as one (codes, values): each part's codes renumbered into the
    values of all; in place when the parts' codes are views of `into`, back to back."""
    import numpy as np

    index: dict = {}
    outs = []
    for part_codes, part_values in coded:
        remap = np.array([index.setdefault(v, len(index)) for v in part_values], dtype=np.int32)
        new = remap[part_codes] if len(part_codes) else np.asarray(part_codes, dtype=np.int32)
        if into is not None:
            part_codes[:] = new
        else:
            outs.append(new)
    if into is not None:
        return into, list(index)
    return (np.concatenate(outs) if outs else np.zeros(0, dtype=np.int32)), list(index)


def _read_adbc_batches(cur, sql, n_int, blob, on_rows, batch_rows, dtypes, index):
    import numpy as np
    import pyarrow.compute as pc

    cur.batch_rows = batch_rows
    cur.execute(sql)
    done = 0
    for batch in cur.fetch_record_batch():
        cols = [np.asarray(_numpy(batch.column(i)), dtype=dtypes[i]) for i in range(n_int)]
        codes = np.zeros(0, dtype=np.int32)
        if blob:
            enc = pc.dictionary_encode(batch.column(n_int))
            local = np.array([index.setdefault(v, len(index)) for v in enc.dictionary.to_pylist()], dtype=np.int32)
            codes = local[_numpy(enc.indices)] if batch.num_rows else codes
        done += batch.num_rows
        if on_rows:
            on_rows(done)
        yield cols, codes


def _read_sqlite3(path, sql, n_int, blob, on_rows, batch_rows, dtypes, n_rows=None):
    conn = open_readonly(path)
    try:
        return _columns_sqlite3(conn, sql, (), n_int, blob, on_rows, batch_rows, dtypes)
    finally:
        conn.close()


def read_columns_on(conn: sqlite3.Connection, sql: str, params, n_int: int, blob: bool = False):
    """read_columns' answer from an open connection (one whose uncommitted rows the query must
    see), through sqlite3 in batches."""
    return _columns_sqlite3(conn, sql, params, n_int, blob, None, 1 << 16, ["int64"] * n_int)


def _columns_sqlite3(conn, sql, params, n_int, blob, on_rows, batch_rows, dtypes):
    import numpy as np

    ints: list[list] = [[] for _ in range(n_int)]
    codes: list = []
    index: dict[bytes, int] = {}
    done = 0
    cur = conn.execute(sql, params)
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
    out = []
    for i in range(n_int):  # one column at a time: the batches of the next are still apart
        out.append(np.concatenate(ints[i]) if ints[i] else np.zeros(0, dtype=dtypes[i]))
        ints[i] = None
    return out, ((np.concatenate(codes) if codes else np.zeros(0, dtype=np.int32)), list(index)) if blob else None


def check_whole(path: str | os.PathLike) -> str | None:
    """None when an SQLite file holds every page its header counts, else one line: a cut copy
    (SQLite itself reads a cut file without a word until it touches a missing page)."""
    p = Path(path)
    size = p.stat().st_size
    with open(p, "rb") as f:
        head = f.read(100)
    if len(head) < 100 or head[:16] != SQLITE_MAGIC:
        return "truncated: shorter than an SQLite header" if SQLITE_MAGIC.startswith(head[:16]) else None
    page = struct.unpack(">H", head[16:18])[0]
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        return f"corrupt SQLite header (page size {page})"
    changes, pages = struct.unpack(">II", head[24:32])
    valid_for = struct.unpack(">I", head[92:96])[0]
    if head[18:20] == b"\x02\x02" and os.path.exists(f"{p}-wal"):
        return None  # pages may live in the -wal: SQLite checks those
    if pages and changes == valid_for:  # the in-header size is current (SQLite >= 3.7.0 writes it)
        if size < pages * page:
            return (
                f"truncated: its header counts {pages} pages of {page} bytes ({pages * page} bytes), "
                f"the file has {size}"
            )
        return None
    if size % page:
        return f"truncated: {size} bytes is not a whole number of {page}-byte pages"
    return None


def work_budget(conn: sqlite3.Connection, steps: int, every: int = 100_000) -> None:
    """Stop any statement on conn once SQLite has run `steps` virtual-machine steps in all
    (an export whose reading costs far more than its size can justify is hostile: a view
    over a self-join, a join that multiplies rows). The statement fails with 'interrupted'."""
    done = [0]

    def tick():
        done[0] += every
        return done[0] > steps or bool(STOPPED)  # (and a signal, as signals.watch)

    conn.set_progress_handler(tick, every)
