"""The store: the only writer of the database, and the one object users and analyses hold.

`Store` is a facade over the store's modules, each one job:
  schema.py       the tables and views as numbered migrations; migrate(), schema_version()
  transaction.py  the one transaction helper every writer runs in
  connection.py   what a file is, the writer's connection, journal modes (WAL while writing,
                  a rollback journal at rest), read-only opening of a profkit database
  readonly.py     the connection user SQL runs on (an authorizer refuses every change)
  write.py        a parsed report's load, labels, advice, trials, bench rows, run meta
  bulk.py         a bulk report's load (INSERT ... SELECT from the report), side_writer.py
  link.py         ncu launches tied to the timeline launches they profiled
  read.py         runs, meta, rows, counters, the timeline's source
  snapshot.py     answers kept in memory (snapshot, keep_counters, remember)
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager

from profkit.core.dbfile import ColumnsError, Joined, Ready, read_columns, read_columns_on
from profkit.core.errors import ProfkitError
from profkit.core.rows import Parsed
from profkit.store import read, write
from profkit.store.connection import default_db, open_reader, open_writer, ready_to_read, settle, what_is
from profkit.store.read import command_of, lab_op
from profkit.store.readonly import open_readonly
from profkit.store.snapshot import Cache

SPLIT = 200_000  # row ids from which int_columns_by_ids reads two halves at once


def _inline(sql: str, params: tuple) -> str:
    """`sql` with its `?` parameters (strings and integers) written in as literals."""
    parts = sql.split("?")
    if len(parts) != len(params) + 1:
        raise ValueError(f"{len(parts) - 1} parameters in the SQL, {len(params)} given")
    out = [parts[0]]
    for v, part in zip(params, parts[1:]):
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise TypeError(f"no SQL literal for {v!r}")
        out.append(("'" + v.replace("'", "''") + "'" if isinstance(v, str) else str(v)) + part)
    return "".join(out)


# (names importers take from here: the CLI, analyses and notebooks)
__all__ = ["Store", "opened", "default_db", "what_is", "open_readonly", "command_of", "lab_op"]


class Store:
    """The database. Use as a context manager: ``with Store(path) as s: ...`` closes it on
    every exit.

    Store(path): for writing (ingest, classify): creates the database when `create` and the
    file is missing. Store(path, readonly=True): for reading (every command that only reads):
    the file must exist and be a profkit database; nothing is created or changed, except that
    a profkit database written by an older profkit is brought up to date first (its schema,
    one transaction). Neither touches a file that is not a profkit database: it is refused with
    one line saying what it is.
    """

    def __init__(self, path: str | os.PathLike, readonly: bool = False, create: bool = True):
        self.path = str(path)
        self.readonly = readonly
        self._cache = Cache()
        if readonly:
            ready_to_read(self.path)
            self.conn = open_reader(self.path)
            return
        kind = what_is(path)
        if kind == "missing" and not create:
            raise ProfkitError(f"{self.path}: no such database (profkit ingest FILE... --db {self.path} makes one)")
        if kind not in ("missing", "empty", "profkit"):
            raise ProfkitError(kind)
        self.conn = open_writer(self.path)

    def close(self) -> None:
        if not self.readonly:
            settle(self.conn)
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- reading (profkit.store.read) ----------------------------------------------------
    def has_file(self, sha256: str) -> tuple[str, str] | None:
        return read.has_file(self.conn, sha256)

    def runs(self) -> list[str]:
        return read.runs(self.conn)

    def require_run(self, run: str | None) -> str:
        return read.require_run(self.conn, self.path, run)

    def query(self, sql: str, params=()) -> list[dict]:
        return self._cache.query(self.conn, sql, params)

    def run_meta(self, run: str) -> dict:
        return read.run_meta(self.conn, run)

    def counters(self, run: str, metrics=None, sampled: bool = True) -> dict[int, dict[str, float]]:
        """{kernel_id: {ncu metric: value}} of a run (only `metrics` when given): the one
        counters reader of classify, roofline, compare and advise. With `sampled`, a launch
        without counters of its own that a sampled capture linked to its measured sibling
        (kernels.sampled_from) reads the sibling's (the same dict, never copied to the database)."""
        return self._cache.counters(self.conn, run, metrics, sampled)

    def timeline_source(self, run: str) -> str | None:
        """The tool whose launches are the run's timeline: the most preferred one it has
        (nsys over the CUPTI tracer, ...); None for a counters-only run."""
        return read.timeline_source(self.conn, run)

    def trials(self, kernel: str, source_hash: str, shape: str, gpu: str) -> dict[str, dict]:
        """config (JSON) -> trial row, of one kernel (this source), shape and GPU (profkit tune)."""
        rows = self.query(
            "SELECT config, ok, ms, rel_err, error FROM tune_trial WHERE kernel = ? AND source_hash = ?"
            " AND shape = ? AND gpu = ?",
            (kernel, source_hash, shape, gpu),
        )
        return {r["config"]: r for r in rows}

    # --- answers kept in memory (profkit.store.snapshot) ---------------------------------
    @contextmanager
    def snapshot(self):
        """Within it, the same read (`query`, `counters`) is answered once, from memory: for
        callers that read one thing again and again without writing (the main job's claims
        compare every variant pair of a run, each reading the run's kernels and counters).
        Rows are shared between answers: read them, do not change them. Writing inside is an
        error (it would leave the answers stale)."""
        with self._cache.snapshot():
            yield self

    @contextmanager
    def keep_counters(self):
        """Within it, each run's counters are read from the database once; every later read of
        them (any metrics, sampled or not) is answered from that read: for the main job, whose
        classify, advise, claims and rooflines each read every run's counters. A report this
        Store adds forgets its run's; a commit by another connection forgets all (PRAGMA
        data_version). Rows are shared between answers: read them, do not change them."""
        with self._cache.keep_counters():
            yield self

    def int_columns(
        self,
        sql: str,
        params: tuple,
        n: int,
        blob: bool = False,
        at_most: int | None = None,
        strict: bool = False,
        later: bool = False,
    ):
        """The first `n` columns of a query as int64 arrays (NULLs coalesced in the SQL), with
        `blob` one last bytes column as (codes, distinct values): read_columns' answer. Through a
        reader of the file of its own (rows become columns in C, several times faster than a
        Python tuple per row) where it sees what this connection does: a file, nothing
        uncommitted, and nothing written by this connection (the reader is another copy of SQLite:
        closing it, it takes itself for the file's last connection and removes the -wal that
        holds this connection's writes, `database disk image is malformed` after); else on this
        connection. `at_most`: a bound on its rows (filled in place). `strict`: read_columns'
        (on this connection, where no read is strictly typed: ColumnsError). `later`:
        a read whose result() is the answer, under way on a thread of its own while the caller
        works (on this connection: read when asked)."""
        if self.path != ":memory:" and not self.conn.in_transaction and not self.conn.total_changes:
            return read_columns(
                self.path,
                _inline(sql, params),
                n,
                blob,
                n_rows=at_most,
                bound=at_most is not None,
                strict=strict,
                later=later,
            )

        def here():
            if strict:
                raise ColumnsError("no strictly typed read on a connection that has written")
            return read_columns_on(self.conn, sql, params, n, blob)

        return Ready(here) if later else here()

    def int_columns_by_ids(
        self,
        sql: str,
        params: tuple,
        n: int,
        ids: tuple[int, int],
        blob: bool = False,
        strict: bool = False,
        later: bool = False,
    ):
        """int_columns of `sql`, whose `{between}` follows a row id column and stands for a range
        of the ids `ids` (first, last: the rows are at most its length): from SPLIT ids on, its two halves read at once
        (SQLite and the ADBC driver work without the GIL; halves of the rows, each walked once),
        their columns end to end."""
        lo, hi = ids
        if hi - lo + 1 < SPLIT:
            return self.int_columns(
                sql.replace("{between}", f"BETWEEN {lo} AND {hi}"), params, n, blob, max(hi - lo + 1, 0), strict, later
            )
        mid = (lo + hi) // 2
        reads = Joined(
            [
                self.int_columns(
                    sql.replace("{between}", f"BETWEEN {a} AND {b}"), params, n, blob, b - a + 1, strict, True
                )
                for a, b in ((lo, mid), (mid + 1, hi))
            ]
        )
        return reads if later else reads.result()

    def remember(self, key: tuple, compute):
        """compute(), answered once per key within snapshot() (outside it: computed each time).
        For what a caller derives from the snapshot's reads (selection.groups)."""
        return self._cache.remember(key, compute)

    # --- writing (profkit.store.write), each in one transaction --------------------------
    @contextmanager
    def indexes_after(self):
        """Within it, a load into a database without counters builds the counters' metric
        index once, at the end, instead of row by row (profkit analyse on a fresh database)."""
        with write.indexes_after(self.conn):
            yield self

    def add_report(
        self, run: str, report: Parsed, sha256, rank: int | None = None, progress=None, guard=None, before_commit=None
    ) -> dict:
        """Load one parsed report into `run` in a single transaction; `rank` is the process
        rank of a multi-process run (None for a single process). progress(phase, done,
        total): rows written so far. sha256: the file's hash, or an object whose result()
        gives it (taken in another thread meanwhile): the file is then checked for a repeat
        just before COMMIT instead of first (skipped all the same). guard(conn): called inside
        the transaction, before any row is written (its error rolls back): the caller's checks
        against what the database holds, safe from another writer between check and write.
        before_commit(): called last inside the transaction (its error rolls back)."""
        self._cache.writing(run)
        return write.add_report(self.conn, run, report, sha256, rank, progress, guard, before_commit)

    def replace_labels_iter(self, run: str, rows, tick=None):
        """Replace a run's labels in one transaction, written in chunks as `rows` (an iterator)
        yields them; yields each row on. Committed once the rows are exhausted."""
        self._cache.writing()
        return write.replace_labels_iter(self.conn, run, rows, tick)

    def write_labels(self, run: str, fill) -> None:
        """Replace a run's labels in one transaction: fill(write.Labels) writes them."""
        self._cache.writing()
        write.write_labels(self.conn, run, fill)

    def replace_labels(self, run: str, rows: list[dict]) -> None:
        """Replace a run's classification labels in one transaction."""
        self._cache.writing()
        write.replace_labels(self.conn, run, rows)

    def replace_advice(self, run: str, scope: str | None, rows: list[dict]) -> None:
        """Replace a run's advice for one scope ('' or None: the whole run) in one transaction."""
        self._cache.writing()
        write.replace_advice(self.conn, run, scope, rows)

    def set_op_model(self, rows: list[tuple]) -> bool:
        """Store the operator model's numbers of op rows (ops_table.set_model) in one transaction;
        False where this store cannot write now (read-only, or inside a snapshot)."""
        if self.readonly or self._cache.memo is not None or not rows:
            return False
        write.set_op_model(self.conn, rows)
        return True

    def replace_phases(self, run: str, rows: list[dict]) -> None:
        """Replace a run's phases (profkit.analyses.phases) in one transaction."""
        self._cache.writing()
        write.replace_phases(self.conn, run, rows)

    def add_trial(
        self, kernel: str, source_hash: str, shape: str, gpu: str, config: str, ok, ms, rel_err, error
    ) -> None:
        """One tuning trial, committed at once (a killed tune keeps what it did)."""
        write.add_trial(self.conn, kernel, source_hash, shape, gpu, config, ok, ms, rel_err, error)

    def add_bench_rows(self, rows: list[dict]) -> None:
        self._cache.writing()
        write.add_bench_rows(self.conn, rows)

    def set_run_meta(self, run: str, facts: dict) -> None:
        self._cache.writing()
        write.set_run_meta(self.conn, run, facts)

    def set_gpu(self, run: str, gpu: str) -> bool:
        self._cache.writing()
        return write.set_gpu(self.conn, run, gpu)


@contextmanager
def opened(db):
    """A Store from a Store (left open), a database path, or an sqlite3 connection to a
    database file (notebooks pass any of them); closed on exit when opened here."""
    if isinstance(db, Store):
        yield db
        return
    if isinstance(db, sqlite3.Connection):
        db = db.execute("PRAGMA database_list").fetchone()[2]
        if not db:
            raise ProfkitError("an in-memory connection: profkit needs a database file")
    with Store(db) as s:
        yield s
