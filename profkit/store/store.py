"""The store: the only writer of the database. Each report loads in one transaction.

WAL and a busy timeout let several ingests share one database; a failed or killed load
leaves no trace, because nothing is visible until COMMIT. The last writer out puts the database
back in rollback-journal mode, so at rest it is one file that readers open read-only without
creating anything beside it (docs/reliability.md).
"""
from __future__ import annotations

import json
import os
import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from profkit.core.dbfile import BUSY_TIMEOUT_MS, SQLITE_MAGIC, open_readonly as _open_file_readonly, wal_mode
from profkit.core.metrics import Counters
from profkit.core.errors import NoSuchRun, ProfkitError
from profkit.parsers import registry as _parsers, timeline_sources
from profkit.core import sampling
from profkit.core.nvtx import names_json, names_of
from profkit.core.rows import BULK_KERNEL_FIELDS, KERNEL_FIELDS, NAME_FIELDS, Parsed
from profkit.store.side_writer import SideWriter, table_ddl
from profkit.store import ops_table
from profkit.store.schema import LATEST, MIGRATIONS, REBUILDS


WAL_SWITCH_TIMEOUT_MS = 120_000


def default_db() -> str:
    """The database a command uses when none is named: $PROFKIT_DB, else profkit.db here.
    Resolved once, at the command line's edge; the library always takes a path."""
    return os.environ.get("PROFKIT_DB") or "profkit.db"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def connect(path: str | os.PathLike) -> sqlite3.Connection:
    # a URI connection: a bulk load ATTACHes the report read-only (mode=ro needs URI filenames)
    conn = sqlite3.connect(Path(path).absolute().as_uri(), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                           uri=True)
    # A database at rest is in rollback-journal mode (settle()): switching it to WAL waits for
    # readers still inside a statement, at most profkit sql's default --timeout (60 s): wait longer
    conn.execute(f"PRAGMA busy_timeout = {WAL_SWITCH_TIMEOUT_MS}")
    # 16 KB pages for a new database (no effect on one that exists): a 1 M-launch load writes
    # 4x fewer pages (149 k pwrite calls at 4 KB) and ran 0.4-0.5 s faster (benchmarks/RESULTS.md)
    conn.execute("PRAGMA page_size = 16384")
    _to_wal(conn)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _to_wal(conn: sqlite3.Connection) -> None:
    """journal_mode = WAL, waiting as long as the busy timeout allows. SQLite answers "database
    is locked" at once, without its busy handler, where another connection holds the lock the
    switch needs in a way that could deadlock (seen: 2-10 % of two ingests started together on
    a database at rest, one of them refused): so retry here until the same deadline."""
    import time

    deadline = time.monotonic() + WAL_SWITCH_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def settle(conn: sqlite3.Connection) -> None:
    """Before a writer closes: back to a rollback journal when no one else has the database
    open, so that at rest it is one file, and readers (mode=ro) create no -wal/-shm beside it
    and work in a folder they cannot write. With others still in, it stays WAL (they need it)
    and the last writer out settles it."""
    switch_journal(conn, "DELETE")


def switch_journal(conn: sqlite3.Connection, mode: str) -> bool:
    """journal_mode = mode if no one else has the database open, never waiting for them (they
    keep the mode they work in). True if the database is now in `mode`.

    A bulk load switches to DELETE and back to WAL (store.add_report): it writes hundreds of MB
    of new pages, each written twice in WAL mode (the log, then the checkpoint) and read back
    once, where a rollback journal writes pages appended past the old end of file once and
    journals only the few it changes."""
    try:
        conn.execute("PRAGMA busy_timeout = 0")
        return str(conn.execute(f"PRAGMA journal_mode = {mode}").fetchone()[0]).lower() == mode.lower()
    except sqlite3.Error:
        return False
    finally:
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        except sqlite3.Error:
            pass


def _tables_of(path: Path) -> set[str] | None:
    """The table and view names of an SQLite file, read without changing it; None if SQLite
    cannot read it."""
    try:
        conn = _open_file_readonly(path, timeout_ms=5000, peek=True)
        try:
            return {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        finally:
            conn.close()
    except (sqlite3.Error, UnicodeDecodeError):
        return None


def what_is(path: str | os.PathLike) -> str:
    """'missing', 'empty' (no bytes, or SQLite with no tables), 'profkit', or one line saying
    what else the file is (an nsys export, a report, another SQLite database, ...)."""
    p = Path(path)
    if not p.exists():
        return "missing"
    if p.is_dir():
        return f"{path} is a folder, not a profkit database"
    try:
        with open(p, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        return f"{path}: cannot read it ({e.strerror or e})"
    if not head:
        return "empty"
    if head.startswith(SQLITE_MAGIC):
        tables = _tables_of(p)
        if tables is None:
            return f"{path} is an SQLite file SQLite cannot read (damaged?), not a usable profkit database"
        if "schema_migrations" in tables:
            return "profkit"
        if not tables:
            return "empty"
    for parser in _parsers():
        try:
            if parser.sniff(p, head):
                what = parser.DESCRIPTION.split(" (")[0]
                return f"{path} is a report ({what}), not a profkit database: load it with profkit ingest {path}"
        except Exception:  # a sniffer that trips over a foreign file: just not that format
            continue
    if head.startswith(SQLITE_MAGIC):
        return f"{path} is an SQLite database, but not a profkit one (no schema_migrations table)"
    return f"{path} is not a profkit database (not an SQLite file)"


def schema_version(conn: sqlite3.Connection) -> int:
    try:
        row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
        return row[0] or 0
    except sqlite3.OperationalError:
        return 0


def migrate(conn: sqlite3.Connection) -> int:
    """Apply pending migrations, each in its own transaction. Returns the version reached."""
    if schema_version(conn) >= LATEST:
        return LATEST
    # off while a migration rebuilds a table others reference (SQLite's 12-step ALTER: its
    # DROP TABLE would delete the referencing rows' parents); the references are checked below
    fk = conn.execute("PRAGMA foreign_keys").fetchone()[0]
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)")
            have = schema_version(conn)
            for version, name, sql in MIGRATIONS:
                if version > have:
                    before, after = REBUILDS.get(version, ((), ()))
                    broken = _broken_references(conn, before)
                    for stmt in _statements(sql):
                        conn.execute(stmt)
                    if _broken_references(conn, after) > broken:
                        raise ProfkitError(f"internal: migration {version} ({name}) broke references between "
                                           f"tables; the database is left as it was")
                    conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, _now()))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.execute(f"PRAGMA foreign_keys = {'ON' if fk else 'OFF'}")
    return LATEST


def _broken_references(conn: sqlite3.Connection, tables) -> int:
    """Rows of these tables (those that exist) whose foreign keys point at nothing."""
    have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return sum(len(conn.execute(f'PRAGMA foreign_key_check("{t}")').fetchall()) for t in tables if t in have)


def _statements(sql: str):
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                yield buf
            buf = ""


def ready_to_read(path: str | os.PathLike) -> None:
    """Raise one line unless `path` is a profkit database to read: it must exist and be one
    (a report, an empty file, another SQLite database are named). A profkit database written
    by an older profkit, or left in WAL mode by one, is brought up to date once where the
    folder is writable (its schema, its journal mode): the one write a reader may do."""
    kind = what_is(path)
    if kind == "missing":
        raise ProfkitError(f"{path}: no such database (profkit ingest FILE... --db {path} makes one)")
    if kind == "empty":
        raise ProfkitError(f"{path}: an empty database: no runs loaded yet (profkit ingest FILE...)")
    if kind != "profkit":
        raise ProfkitError(kind)
    if _needs_upkeep(str(path)):
        Store(path).close()  # migrates, and settles the journal mode on close


def _needs_upkeep(path: str) -> bool:
    """An older schema to migrate, or WAL left on by an older profkit with no writer about
    (readers of a WAL file leave -wal/-shm files behind)."""
    if not os.access(Path(path).resolve().parent, os.W_OK):
        return False
    if wal_mode(path) and not os.path.exists(path + "-wal"):
        return True
    try:
        conn = _open_file_readonly(path, timeout_ms=5000, peek=True)
        try:
            return schema_version(conn) < LATEST
        finally:
            conn.close()
    except sqlite3.Error:
        return False


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
        if readonly:
            ready_to_read(self.path)
        else:
            kind = what_is(path)
            if kind == "missing" and not create:
                raise ProfkitError(f"{self.path}: no such database (profkit ingest FILE... --db {self.path} makes one)")
            if kind not in ("missing", "empty", "profkit"):
                raise ProfkitError(kind)
        try:
            if readonly:
                self.conn = _open_file_readonly(self.path)
                self.conn.execute("PRAGMA foreign_keys = ON")
                version = schema_version(self.conn)
                if version < LATEST:
                    raise ProfkitError(f"{self.path}: a profkit database of schema {version}; this profkit reads "
                                       f"{LATEST} and cannot update it here (no write access): open it once "
                                       f"where it can be written")
            else:
                self.conn = connect(self.path)
                migrate(self.conn)
        except sqlite3.DatabaseError as e:
            raise ProfkitError(f"{self.path}: not a usable profkit database ({e})") from None

    def close(self) -> None:
        if not self.readonly:
            settle(self.conn)
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- reading -------------------------------------------------------------------------
    def has_file(self, sha256: str) -> tuple[str, str] | None:
        row = self.conn.execute("SELECT run, path FROM report_file WHERE sha256 = ?", (sha256,)).fetchone()
        return tuple(row) if row else None

    def runs(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT run FROM run ORDER BY created_at, run")]

    def require_run(self, run: str | None) -> str:
        runs = self.runs()
        if not runs:
            raise NoSuchRun(f"{self.path}: no runs loaded yet (profkit ingest FILE...)")
        if run is None:
            return runs[-1]
        if run not in runs:
            raise NoSuchRun(f"{self.path}: no run named {run!r}; runs: {', '.join(runs)}")
        return run

    _memo: dict | None = None

    @contextmanager
    def snapshot(self):
        """Within it, the same read (`query`, `counters`) is answered once, from memory: for
        callers that read one thing again and again without writing (the main job's claims
        compare every variant pair of a run, each reading the run's kernels and counters).
        Rows are shared between answers: read them, do not change them. Writing inside is an
        error (it would leave the answers stale)."""
        self._memo = {}
        try:
            yield self
        finally:
            self._memo = None

    _kept: dict | None = None  # run -> its counters (keep_counters)
    _kept_version: int | None = None

    @contextmanager
    def keep_counters(self):
        """Within it, each run's counters are read from the database once; every later read of
        them (any metrics, sampled or not) is answered from that read: for the main job, whose
        classify, advise, claims and rooflines each read every run's counters. A report this
        Store adds forgets its run's; a commit by another connection forgets all (PRAGMA
        data_version). Rows are shared between answers: read them, do not change them."""
        self._kept, self._kept_version = {}, None
        try:
            yield self
        finally:
            self._kept = None

    def _kept_counters(self, run: str, metrics, sampled: bool) -> dict[int, dict[str, float]]:
        version = self.conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._kept_version:
            self._kept.clear()
            self._kept_version = version
        base = self._kept.get(run)
        if base is None:
            base = self._kept[run] = self._counters(run, None, sampled=False)
        if metrics is None:
            out = dict(base)
        else:  # as _counters reads them: the launches in the same order, each one's metrics in its order
            wanted = set(metrics)
            out = {}
            for kid, c in base.items():
                if not wanted.isdisjoint(c):
                    sub = Counters()
                    for m, v in c.items():
                        if m in wanted:
                            dict.__setitem__(sub, m, v)
                    out[kid] = sub
        if sampled and out:
            self._add_sampled(run, out)
        return out

    def remember(self, key: tuple, compute):
        """compute(), answered once per key within snapshot() (outside it: computed each time).
        For what a caller derives from the snapshot's reads (selection.groups)."""
        if self._memo is None:
            return compute()
        key = ("remember",) + key
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def _writing(self) -> None:
        if self._memo is not None:
            raise ProfkitError("internal: a write inside Store.snapshot()")

    def query(self, sql: str, params=()) -> list[dict]:
        if self._memo is not None:
            key = ("query", sql, tuple(params))
            if key not in self._memo:
                self._memo[key] = self._query(sql, params)
            return list(self._memo[key])
        return self._query(sql, params)

    def _query(self, sql: str, params=()) -> list[dict]:
        cur = self.conn.execute(sql, params)
        cols = [d[0] for d in cur.description or ()]
        return [dict(zip(cols, r)) for r in cur]

    def run_meta(self, run: str) -> dict:
        row = self.conn.execute("SELECT meta FROM run WHERE run = ?", (run,)).fetchone()
        return json.loads(row[0] or "{}") if row else {}

    def counters(self, run: str, metrics=None, sampled: bool = True) -> dict[int, dict[str, float]]:
        if self._kept is not None:
            return self._kept_counters(run, metrics, sampled)
        if self._memo is not None:
            key = ("counters", run, None if metrics is None else tuple(metrics), sampled)
            if key not in self._memo:
                self._memo[key] = self._counters(run, metrics, sampled)
            return dict(self._memo[key])
        return self._counters(run, metrics, sampled)

    def _counters(self, run: str, metrics=None, sampled: bool = True) -> dict[int, dict[str, float]]:
        """{kernel_id: {ncu metric: value}} of a run (only `metrics` when given): the one
        counters reader of classify, roofline, compare and advise. With `sampled`, a launch
        without counters of its own that a sampled capture linked to its measured sibling
        (kernels.sampled_from) reads the sibling's (the same dict, never copied to the database)."""
        q, params = "SELECT kernel_id, metric, value FROM counters WHERE run = ?", [run]
        if metrics is not None:
            metrics = list(metrics)
            q += f" AND metric IN ({','.join('?' * len(metrics))})"
            params += metrics
        out: dict[int, dict[str, float]] = {}
        for kid, metric, value in self.conn.execute(q, params):
            got = out.get(kid)
            if got is None:
                got = out[kid] = Counters()
            dict.__setitem__(got, metric, value)  # filling: nothing looked up yet
        if sampled and out:
            self._add_sampled(run, out)
        return out

    def _add_sampled(self, run: str, out: dict) -> None:
        for kid, measured in self.conn.execute(
                "SELECT id, sampled_from FROM launch WHERE run = ? AND sampled_from IS NOT NULL", (run,)):
            if kid not in out and measured in out:
                out[kid] = out[measured]

    def timeline_source(self, run: str) -> str | None:
        """The tool whose launches are the run's timeline: the most preferred one it has
        (nsys over the CUPTI tracer, ...); None for a counters-only run."""
        have = {r[0] for r in self.conn.execute("SELECT DISTINCT source FROM launch WHERE run = ?", (run,))}
        return next((s for s in timeline_sources() if s in have), None)

    # --- writing -------------------------------------------------------------------------
    def add_report(self, run: str, report: Parsed, sha256, rank: int | None = None, progress=None,
                   guard=None) -> dict:
        """Load one parsed report into `run` in a single transaction; `rank` is the process
        rank of a multi-process run (None for a single process). progress(phase, done,
        total): rows written so far. sha256: the file's hash, or an object whose result()
        gives it (taken in another thread meanwhile): the file is then checked for a repeat
        just before COMMIT instead of first (skipped all the same). guard(conn): called inside
        the transaction, before any row is written (its error rolls back): the caller's checks
        against what the database holds, safe from another writer between check and write."""
        self._writing()
        if self._kept is not None:
            self._kept.pop(run, None)
        c = self.conn
        bulk = report.bulk
        journal = None
        if bulk is not None:  # ATTACH, foreign_keys and journal_mode cannot change inside a transaction
            journal = switch_journal(c, "DELETE")
            c.execute("ATTACH ? AS src", (f"{Path(bulk.source).resolve().as_uri()}?mode=ro",))
            # a bulk copy writes ids it just made (run, file, paths): checking each of millions
            # of rows against them costs three index searches a row
            c.execute("PRAGMA foreign_keys = OFF")
        try:
            c.execute("BEGIN IMMEDIATE")
            try:
                late = not isinstance(sha256, str)
                if not late and c.execute("SELECT 1 FROM report_file WHERE sha256 = ?", (sha256,)).fetchone():
                    c.execute("ROLLBACK")
                    return {"skipped": True}
                if guard is not None:
                    guard(c)
                # (a late hash: a placeholder no file has, replaced before COMMIT)
                file_id = self._add_file(run, report, f"pending:{os.getpid()}:{id(sha256)}" if late else sha256, rank)
                if bulk is not None:
                    self._add_bulk(run, file_id, rank, report, progress)
                else:
                    self._add_rows(run, file_id, rank, report)
                self._link(run)
                if late:
                    digest = sha256.result()
                    if c.execute("SELECT 1 FROM report_file WHERE sha256 = ?", (digest,)).fetchone():
                        c.execute("ROLLBACK")
                        return {"skipped": True}
                    c.execute("UPDATE report_file SET sha256 = ? WHERE id = ?", (digest, file_id))
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
        finally:
            if bulk is not None:
                for t in ("bulk_kernel", "bulk_range", "bulk_domain", "bulk_name", "bulk_api", "bulk_rrow", "bulk_path"):
                    c.execute(f"DROP TABLE IF EXISTS temp.{t}")
                if any(r[1] == "side" for r in c.execute("PRAGMA database_list")):
                    c.execute("DETACH side")  # (a side writer's rows: the database goes with it)
                c.execute("DETACH src")
                c.execute("PRAGMA foreign_keys = ON")
                if journal:
                    switch_journal(c, "WAL")
        return {"skipped": False, "file_id": file_id, **report.summary()}

    def _add_file(self, run: str, report: Parsed, sha256: str, rank: int | None) -> int:
        c = self.conn
        facts = report.facts or {}
        if not c.execute("SELECT 1 FROM run WHERE run = ?", (run,)).fetchone():
            c.execute("INSERT INTO run (run, created_at, gpu_name, meta) VALUES (?, ?, ?, ?)",
                      (run, _now(), facts.get("gpu_name"), json.dumps(facts, sort_keys=True, default=str)))
        else:
            self._merge_meta(run, facts)
        cur = c.execute(
            "INSERT INTO report_file (run, path, sha256, format, loaded_at, kernels, ranges, counters, facts, rank)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run, report.path, sha256, report.format, _now(), len(report.kernels), len(report.ranges),
             len(report.counters), json.dumps(facts, sort_keys=True, default=str), rank))
        return cur.lastrowid

    def _path_ids(self, paths) -> list[int | None]:
        """nvtx_path ids of name tuples (added where new; None for no path)."""
        c = self.conn
        out: list[int | None] = []
        for names in paths:
            if not names:
                out.append(None)
                continue
            js = names_json(names)
            row = c.execute("SELECT id FROM nvtx_path WHERE names = ?", (js,)).fetchone()
            if row is None:
                row = (c.execute("INSERT INTO nvtx_path (names, path, text, depth) VALUES (?, ?, ?, ?)",
                                 (js, "/".join("" if n is None else n for n in names), names[-1],
                                  len(names) - 1)).lastrowid,)
            out.append(row[0])
        return out

    def _name_ids(self, names) -> dict:
        """launch_name ids of names (added where new): one statement per distinct name."""
        c = self.conn
        out = {}
        for n in dict.fromkeys(names):
            c.execute("INSERT OR IGNORE INTO launch_name (name) VALUES (?)", (n,))
            out[n] = c.execute("SELECT id FROM launch_name WHERE name = ?", (n,)).fetchone()[0]
        return out

    def _add_rows(self, run: str, file_id: int, rank: int | None, report: Parsed) -> None:
        """A report of tuples (every parser but the bulk one)."""
        c = self.conn
        at = KERNEL_FIELDS.index("nvtx_path")
        kernel_names = [names_of(k[at]) for k in report.kernels]
        range_names = [names_of(r[8]) or (r[1],) for r in report.ranges]
        distinct = list(dict.fromkeys(n for n in kernel_names + range_names if n))
        ids = dict(zip(distinct, self._path_ids(distinct)))
        base = (c.execute("SELECT coalesce(max(id), 0) FROM launch_row").fetchone()[0]) + 1
        kn, ks, kr, ka = (KERNEL_FIELDS.index(f) for f in ("kernel_name", "short_name", "nvtx_range", "api_name"))
        names = self._name_ids(n for k in report.kernels for n in (k[kn], k[ks], k[ka]) if n is not None)
        names[None] = None
        plain = [i for i, f in enumerate(KERNEL_FIELDS)
                 if f not in ("kernel_name", "short_name", "nvtx_range", "nvtx_path", "api_name")]
        cols = (("id", "run", "file_id", "rank", "source") + tuple(KERNEL_FIELDS[i] for i in plain)
                + ("name_id", "short_id", "api_id", "path_id"))
        sql = f"INSERT INTO launch_row ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        c.executemany(sql, ((base + i, run, file_id, rank, report.source) + tuple(k[j] for j in plain)
                            + (names[k[kn]], names[k[ks]], names[k[ka]], ids.get(n) if n else None)
                            for i, (k, n) in enumerate(zip(report.kernels, kernel_names))))
        # a launch whose innermost range or path text is not its path's text and path (the view
        # shows these instead)
        own = [(base + i, k[kr], str(k[at]) if k[at] is not None else None)
               for i, (k, n) in enumerate(zip(report.kernels, kernel_names))
               if (k[kr], str(k[at]) if k[at] is not None else None)
               != ((n[-1], "/".join("" if x is None else x for x in n)) if n else (None, None))]
        c.executemany("INSERT INTO launch_nvtx (launch_id, nvtx_range, nvtx_path) VALUES (?, ?, ?)", own)
        seq_to_id = {k[0]: base + i for i, k in enumerate(report.kernels)}
        c.executemany(
            "INSERT INTO nvtx_event (run, file_id, rank, domain, kind, start_ns, end_ns, pid, tid, path_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ((run, file_id, rank, r[0], r[2], r[3], r[4], r[5], r[6], ids[n]) for r, n in zip(report.ranges, range_names)))
        c.executemany("INSERT INTO counter (launch_id, metric, unit, value) VALUES (?, ?, ?, ?)",
                      ((seq_to_id[s], m, u, v) for s, m, u, v in report.counters))
        c.executemany("INSERT INTO rule_result (launch_id, section, rule, severity, message, speedup_type,"
                      " estimated_speedup_pct) VALUES (?, ?, ?, ?, ?, ?, ?)",
                      ((seq_to_id[r[0]],) + tuple(r[1:]) for r in report.rules))
        ops_table.write(c, run, file_id, rank, report.ops, seq_to_id)

    def _add_bulk(self, run: str, file_id: int, rank: int | None, report: Parsed, progress=None) -> None:
        """A Bulk report: kernels and ranges by INSERT ... SELECT from the attached report,
        joined to what the parser computed (staged as temp tables); no tuple per row."""
        import numpy as np

        c = self.conn
        bulk = report.bulk
        c.execute("PRAGMA cache_size = -262144")  # 256 MB of pages: a bulk copy spills less to the log mid-way
        c.execute("PRAGMA temp.cache_size = -65536")  # the staged columns (1 M kernels: ~30 MB) stay off disk
        ids = np.array([-1 if i is None else i for i in self._path_ids(bulk.paths)], dtype=np.int64)
        nk, nr = bulk.n_kernels, bulk.n_ranges
        tell = (lambda phase, total: (lambda n: progress(phase, n, total))) if progress else (lambda *a: None)
        # the ranges first: meanwhile the parser's thread finishes the kernels (the launch-call
        # join and the calls' paths; SQLite writes without the GIL)
        chunks = bulk.range_chunks(ids, chunk=_RANGE_CHUNK)
        bulk.stage_ranges(c, ids, ranges_streamed=chunks is not None)
        if progress:
            progress("writing ranges", 0, nr)
        insert = ("INSERT INTO nvtx_event (run, file_id, rank, domain, kind, start_ns, end_ns, pid, tid, path_id)"
                  " WITH {cte} q(seq, domain, kind, start_ns, end_ns, pid, tid, path_id) AS (" + bulk.range_sql + ")"
                  " SELECT ?, ?, ?, domain, kind, start_ns, end_ns, pid, tid, path_id FROM q {order}")
        kernels = None  # (part, path ids, insert, params, side writer) once the kernel part is ready
        try:
            if chunks is None:
                c.execute(insert.format(cte="", order="ORDER BY seq"), (run, file_id, rank))
            else:
                # a chunk's rows come in array order (json_each is the outer loop): no sort of them
                for cte, params, done in chunks:
                    c.execute(insert.format(cte=cte + ",", order=""), params + (run, file_id, rank))
                    if progress:
                        progress("writing ranges", done, nr)
                    if kernels is None and bulk.kernels_ready():  # the side writer starts between two chunks
                        kernels = self._begin_kernels(bulk, run, file_id, rank, report.source, tell("staging", nk))
            if progress:
                progress("writing ranges", nr, nr)
            if kernels is None:
                kernels = self._begin_kernels(bulk, run, file_id, rank, report.source, tell("staging", nk))
            part, kids, insert, params, side = kernels
            chunks = part.ctes(c, kids, hi=part.side_from if side else None)  # (None: staged as a table)
            if progress:
                progress("writing kernels", 0, nk)
            insert = insert.replace("/*INTO*/", "")
            if chunks is None:
                c.execute(insert.replace("/*CTE*/", "").replace("/*ORDER*/", "ORDER BY q.seq"), (None,) + params)
            else:
                # json_each is the outer loop: a chunk's rows come in seq order, no sort
                for cte, packed, done in chunks:
                    c.execute(insert.replace("/*CTE*/", cte + ",").replace("/*ORDER*/", ""), (packed,) + params)
                    if progress:
                        progress("writing kernels", done, nk)
            if side is not None:
                side.result()
                c.execute("ATTACH ? AS side", (side.uri,))  # (detached by add_report, after COMMIT)
                side.close()
                kernels = None
                # the same schema, nothing but SELECT *: SQLite copies the records as they are
                c.execute("INSERT INTO main.launch_row SELECT * FROM side.launch_row")
        finally:
            if kernels is not None and kernels[-1] is not None:  # an error or an interrupt: the writer stops
                kernels[-1].stop()
        if progress:
            progress("writing kernels", nk, nk)

    def _begin_kernels(self, bulk, run: str, file_id: int, rank: int | None, source: str, on_rows=None) -> tuple:
        """Once the parser's kernel part is ready (waiting for it): its paths and names staged,
        the launch insert made, and the last share of the kernels given to a side writer
        (side_writer), which starts at once. A part whose columns do not pack into JSON is
        staged as temp.bulk_kernel here, first (its api_sql may read it). Returns (part, path
        ids, insert, its parameters after the JSON, side writer or None)."""
        import numpy as np

        c = self.conn
        part = bulk.kernel_part()  # (its errors refuse the file: the transaction rolls back)
        kids = np.array([-1 if i is None else i for i in self._path_ids(part.paths)], dtype=np.int64)
        if not part.packs:
            bulk.stage_kernels(c, part, kids, on_rows=on_rows)
        base = (c.execute("SELECT coalesce(max(id), 0) FROM launch_row").fetchone()[0]) + 1
        fields = BULK_KERNEL_FIELDS + ("path_id",)
        null_name, name_ids = self._stage_names(bulk, part)
        plain = [f for f in fields if f not in NAME_FIELDS]
        # names through the staged keys (a few rows): the rows hold ids, no text
        insert = f"""
            INSERT INTO /*INTO*/launch_row (id, run, file_id, rank, source, {', '.join(plain)}, name_id, short_id, api_id)
            WITH /*CTE*/ q({', '.join(fields)}) AS ({bulk.kernel_sql})
            SELECT ?2 + q.seq, ?3, ?4, ?5, ?6, {', '.join('q.' + f for f in plain)},
                   coalesce(n.id, ?7), coalesce(s.id, ?7), a.id
            FROM q LEFT JOIN temp.bulk_name n ON n.key = q.kernel_name LEFT JOIN temp.bulk_name s ON s.key = q.short_name
            LEFT JOIN temp.bulk_api a ON a.key = q.api_name /*ORDER*/"""
        params = (base, run, file_id, rank, source, null_name)
        side = None if part.side_from is None else SideWriter.start(
            bulk.source, table_ddl(c, "launch_row"), lambda conn: _name_tables(conn, *name_ids),
            insert.replace("/*INTO*/", "side.").replace("/*ORDER*/", ""), params, part, kids, part.side_from,
            bulk.n_kernels)
        return part, kids, insert, params, side

    def _stage_names(self, bulk, part) -> tuple:
        """temp.bulk_name and temp.bulk_api: each name key of the bulk's kernel query -> its
        launch_name id (names added where new). Returns the id of the name of a NULL key, and
        the two tables' rows (a side writer stages them on its own connection)."""
        c = self.conn
        names, apis = c.execute(bulk.name_sql).fetchall(), c.execute(part.api_sql).fetchall()
        ids = self._name_ids(t for _, t in names + apis if t is not None)
        rows = ([(k, ids[t]) for k, t in names if k is not None],
                [(k, ids.get(t) if t is not None else None) for k, t in apis if k is not None])
        _name_tables(c, *rows)
        return next((ids[t] for k, t in names if k is None), None), rows

    def replace_labels(self, run: str, rows: list[dict]) -> None:
        """Replace a run's classification labels in one transaction."""
        self._writing()
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute("DELETE FROM label WHERE run = ?", (run,))
            c.executemany("INSERT INTO label (kernel_id, run, label, reason, evidence) VALUES (?, ?, ?, ?, ?)",
                          [(r["kernel_id"], run, r["label"], r["reason"], r["evidence"]) for r in rows])
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def set_op_model(self, rows: list[tuple]) -> bool:
        """Store the operator model's numbers of op rows (ops_table.set_model) in one transaction;
        False where this store cannot write now (read-only, or inside a snapshot)."""
        if self.readonly or self._memo is not None or not rows:
            return False
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            ops_table.set_model(c, rows)
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise
        return True

    def replace_advice(self, run: str, scope: str | None, rows: list[dict]) -> None:
        """Replace a run's advice for one scope ('' or None: the whole run) in one transaction."""
        self._writing()
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute("DELETE FROM advice_item WHERE run = ? AND scope = ?", (run, scope or ""))
            cols = ("run", "scope", "rank", "kind", "nvtx_path", "kernel_name", "label", "share", "share_wall",
                    "recoverable_ns", "action", "how", "evidence")
            c.executemany(f"INSERT INTO advice_item ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                          [tuple(r[k] for k in cols) for r in rows])
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def replace_phases(self, run: str, rows: list[dict]) -> None:
        """Replace a run's phases (profkit.analyses.phases) in one transaction."""
        self._writing()
        c = self.conn
        cols = ("run", "seq", "name", "kind", "start_ns", "end_ns", "launches", "gpu_ns", "steps", "step_ns",
                "step_spread_ns", "steady", "how")
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute("DELETE FROM phase WHERE run = ?", (run,))
            c.executemany(f"INSERT INTO phase ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                          [tuple(r[k] for k in cols) for r in rows])
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def trials(self, kernel: str, source_hash: str, shape: str, gpu: str) -> dict[str, dict]:
        """config (JSON) -> trial row, of one kernel (this source), shape and GPU (profkit tune)."""
        rows = self.query("SELECT config, ok, ms, rel_err, error FROM tune_trial WHERE kernel = ? AND source_hash = ?"
                          " AND shape = ? AND gpu = ?", (kernel, source_hash, shape, gpu))
        return {r["config"]: r for r in rows}

    def add_trial(self, kernel: str, source_hash: str, shape: str, gpu: str, config: str, ok, ms, rel_err,
                  error) -> None:
        """One tuning trial, committed at once (a killed tune keeps what it did)."""
        self.conn.execute(
            "INSERT OR REPLACE INTO tune_trial (kernel, source_hash, shape, gpu, config, ok, ms, rel_err, error,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (kernel, source_hash, shape, gpu, config, None if ok is None else int(ok), ms, rel_err, error, _now()))

    def add_bench_rows(self, rows: list[dict]) -> None:
        self._writing()
        cols = ("op", "variant", "shape", "dtype", "gpu", "driver", "torch", "triton", "date", "ok", "rel_err", "ms",
                "gbps", "tflops", "pct_of_copy", "speedups", "note")
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            c.executemany(f"INSERT INTO bench_result ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                          [tuple(r.get(k) for k in cols) for r in rows])
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def _merge_meta(self, run: str, facts: dict) -> None:
        row = self.conn.execute("SELECT meta, gpu_name FROM run WHERE run = ?", (run,)).fetchone()
        meta = json.loads(row[0] or "{}")
        for k, v in facts.items():
            meta.setdefault(k, v)
        self.conn.execute("UPDATE run SET meta = ?, gpu_name = coalesce(gpu_name, ?) WHERE run = ?",
                          (json.dumps(meta, sort_keys=True, default=str), facts.get("gpu_name"), run))

    def set_run_meta(self, run: str, facts: dict) -> None:
        self._writing()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self._merge_meta(run, facts)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def _link(self, run: str) -> None:
        """Tie each ncu launch to the timeline launch it profiled, within its rank.

        The k-th ncu launch of kernel S under NVTX path P is the k-th timeline launch of S
        under P (ncu and the timeline ran the same deterministic workload); the path keeps
        a step's kernels apart from the same kernels in other steps. Launches left over
        then pair by innermost range alone (the tools may order a path's start/end and
        push/pop ranges differently), then by the longest path prefix the timeline has:
        ncu can report a range that nsys saw closed (NCCL's ncclCommInitRankConfig stayed
        open on the main thread in ncu 2025.3, seen on an H200 pair), one extra innermost
        range. nsys wins over the CUPTI tracer when a run has both.
        """
        c = self.conn
        if not c.execute("SELECT 1 FROM launch WHERE run = ? AND source = 'ncu' LIMIT 1", (run,)).fetchone():
            return  # no ncu launch to tie (a run's timeline loads first): nothing changes below
        c.execute("UPDATE launch_row SET timeline_id = NULL WHERE run = ? AND source = 'ncu'", (run,))
        tl = self.timeline_source(run)
        if not tl:
            return
        timeline = (tl,)
        sampled = self._sampled_files(run)
        if sampled:
            self._link_sampled(run, tl, sampled)
        skip = f" AND file_id NOT IN ({','.join(str(f) for f in sampled)})" if sampled else ""
        for key in ("nvtx_path", "nvtx_range"):
            c.execute(f"""
                WITH t AS (SELECT id, rank, {key} AS r, short_name,
                                  row_number() OVER (PARTITION BY rank, {key}, short_name ORDER BY start_ns, seq) AS k
                           FROM launch l WHERE run = :run AND source = :tl AND id NOT IN
                               (SELECT timeline_id FROM launch x WHERE x.run = :run AND x.source = 'ncu'
                                AND x.timeline_id IS NOT NULL)),
                     n AS (SELECT id, rank, {key} AS r, short_name,
                                  row_number() OVER (PARTITION BY rank, {key}, short_name ORDER BY file_id, seq) AS k
                           FROM launch WHERE run = :run AND source = 'ncu' AND timeline_id IS NULL{skip}),
                     m AS (SELECT n.id AS nid, t.id AS tid FROM n JOIN t
                           ON t.short_name = n.short_name AND t.r IS n.r AND t.rank IS n.rank AND t.k = n.k)
                UPDATE launch_row SET timeline_id = (SELECT tid FROM m WHERE nid = launch_row.id)
                WHERE run = :run AND source = 'ncu' AND timeline_id IS NULL{skip}""", {"run": run, "tl": timeline[0]})
        self._link_by_prefix(run, timeline[0], skip)
        if sampled:
            self._link_siblings(run, tl)

    def _sampled_files(self, run: str) -> dict[int, sampling.Spec]:
        """ncu reports of the run that `profkit capture` sampled: {file_id: what ncu was told}."""
        out = {}
        for fid, facts in self.conn.execute(
                "SELECT id, facts FROM report_file WHERE run = ? AND facts LIKE '%ncu_filter%'", (run,)):
            spec = json.loads(facts or "{}").get("ncu_filter")
            if isinstance(spec, dict):
                out[fid] = sampling.Spec.from_dict(spec)
        return out

    def _rows(self, where: str, params) -> tuple[list[int], list[tuple]]:
        got = self.conn.execute(f"SELECT id, {', '.join(sampling.FIELDS)} FROM launch WHERE {where} ORDER BY id",
                                params).fetchall()
        return [r[0] for r in got], [r[1:] for r in got]

    def _link_sampled(self, run: str, tl: str, files: dict[int, sampling.Spec]) -> None:
        """A sampled report's launches pair with the timeline launches the same sampling rule
        picks on the timeline (profkit.core.sampling.pairs), within each rank."""
        for fid, spec in files.items():
            nids, nrows = self._rows("file_id = ? AND source = 'ncu'", (fid,))
            rank = self.conn.execute("SELECT rank FROM report_file WHERE id = ?", (fid,)).fetchone()[0]
            tids, trows = self._rows("run = ? AND source = ? AND rank IS ?", (run, tl, rank))
            self.conn.executemany("UPDATE launch_row SET timeline_id = ? WHERE id = ?",
                                  [(tids[t], nids[n]) for n, t in sampling.pairs(trows, nrows, spec)])

    def _link_siblings(self, run: str, tl: str) -> None:
        """Each timeline launch without counters of its own points at the measured launch of the
        same kernel and configuration (sampled_from): classify labels it from those counters."""
        c = self.conn
        c.execute("UPDATE launch_row SET sampled_from = NULL WHERE run = ?", (run,))
        for (rank,) in c.execute("SELECT DISTINCT rank FROM launch WHERE run = ? AND source = ?", (run, tl)).fetchall():
            tids, trows = self._rows("run = ? AND source = ? AND rank IS ?", (run, tl, rank))
            at = {t: i for i, t in enumerate(tids)}
            measured = {at[t] for (t,) in c.execute(
                "SELECT DISTINCT timeline_id FROM launch WHERE run = ? AND source = 'ncu' AND timeline_id IS NOT NULL"
                " AND rank IS ?", (run, rank)) if t in at}
            c.executemany("UPDATE launch_row SET sampled_from = ? WHERE id = ?",
                          [(tids[m], tids[i]) for i, m in sampling.siblings(trows, measured).items()])

    def _link_by_prefix(self, run: str, tl: str, skip: str = "") -> None:
        c = self.conn
        left = c.execute("SELECT id, rank, nvtx_path, short_name FROM launch WHERE run = ? AND source = 'ncu'"
                         f" AND timeline_id IS NULL AND nvtx_path LIKE '%/%'{skip} ORDER BY file_id, seq", (run,)).fetchall()
        if not left:
            return
        free: dict = {}
        for tid, rank, path, short in c.execute(
                "SELECT id, rank, nvtx_path, short_name FROM launch l WHERE run = ? AND source = ? AND id NOT IN"
                " (SELECT timeline_id FROM launch x WHERE x.run = l.run AND x.source = 'ncu' AND x.timeline_id IS NOT NULL)"
                " ORDER BY start_ns, seq", (run, tl)):
            free.setdefault((rank, path, short), []).append(tid)
        pairs = []
        for nid, rank, path, short in left:
            while "/" in path:
                path = path.rsplit("/", 1)[0]
                todo = free.get((rank, path, short))
                if todo:
                    pairs.append((todo.pop(0), nid))
                    break
        c.executemany("UPDATE launch_row SET timeline_id = ? WHERE id = ?", pairs)


# ranges per statement of a bulk load: between two, the store starts the side writer once the
# parser's kernel part is ready (1 M ranges: 4 statements)
_RANGE_CHUNK = 1 << 18


def _name_tables(conn: sqlite3.Connection, names: list, apis: list) -> None:
    """temp.bulk_name and temp.bulk_api on `conn`: (report's name key, launch_name id) rows."""
    for t in ("bulk_name", "bulk_api"):
        conn.execute(f"DROP TABLE IF EXISTS temp.{t}")
        # (INTEGER: the affinity of the report's id columns, so that the join searches the key)
        conn.execute(f"CREATE TEMP TABLE {t} (key INTEGER PRIMARY KEY, id INTEGER) WITHOUT ROWID")
    conn.executemany("INSERT INTO temp.bulk_name VALUES (?, ?)", names)
    conn.executemany("INSERT INTO temp.bulk_api VALUES (?, ?)", apis)


def command_of(meta: dict) -> list[str] | None:
    """The command a run's workload ran: as `profkit capture` recorded it, else the launched
    process's arguments an nsys capture recorded (PROCESS_0:COMMAND, PROCESS_0:ARGUMENT_n)."""
    cmd = meta.get("command")
    if isinstance(cmd, list):
        return [str(c) for c in cmd]
    cap = meta.get("nsys_capture")
    if isinstance(cap, dict) and "PROCESS_0:COMMAND" in cap:
        n = sum(1 for k in cap if str(k).startswith("PROCESS_0:ARGUMENT_"))
        return [str(cap["PROCESS_0:COMMAND"])] + [str(cap.get(f"PROCESS_0:ARGUMENT_{i}", "")) for i in range(n)]
    return None


def lab_op(meta: dict) -> str | None:
    """The lab workload a run was captured from (its command ran profkit.kernels.run OP)."""
    cmd = command_of(meta) or []
    if "profkit.kernels.run" in cmd:
        i = cmd.index("profkit.kernels.run") + 1
        return cmd[i] if i < len(cmd) else None
    return None


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


class ReadOnlyConnection(sqlite3.Connection):
    """A connection whose authorizer refuses every change; `denied` says what it refused last."""

    denied: str | None = None


def open_readonly(path: str | os.PathLike) -> ReadOnlyConnection:
    """A connection to a profkit database that cannot change it, whatever SQL it is given.

    Three locks: the file is opened read-only, query_only is set, and an authorizer denies
    every write, ATTACH, PRAGMA change, and functions that load code or leak addresses.
    Temporary data stays in memory (no temp files; profkit.store.query caps SQLite's heap).
    """
    ready_to_read(path)
    conn = _open_file_readonly(path, factory=ReadOnlyConnection)
    conn.execute("PRAGMA temp_store = MEMORY")

    def authorizer(action, arg1, arg2, dbname, source):
        verdict = _read_only_authorizer(action, arg1, arg2, dbname, source)
        if verdict != sqlite3.SQLITE_OK:
            conn.denied = _describe(action, arg1, arg2)
        return verdict

    conn.set_authorizer(authorizer)
    return conn


_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
_READ_PRAGMAS = {"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo", "foreign_key_list",
                 "database_list", "compile_options", "function_list", "pragma_list", "table_list", "collation_list",
                 "module_list"}
# functions that load code (load_extension, fts3_tokenizer with two arguments), hand out a process
# address (fts3_tokenizer with one, fts5), parse raw r-tree nodes, or touch files (the shell's)
_REFUSED_FUNCTIONS = {"load_extension", "fts3_tokenizer", "fts5", "rtreenode", "rtreedepth", "rtreecheck",
                      "sqlite_log", "readfile", "writefile", "edit"}
_ACTIONS = {getattr(sqlite3, n): n[7:].replace("_", " ") for n in (
    "SQLITE_CREATE_INDEX", "SQLITE_CREATE_TABLE", "SQLITE_CREATE_TEMP_INDEX", "SQLITE_CREATE_TEMP_TABLE",
    "SQLITE_CREATE_TEMP_TRIGGER", "SQLITE_CREATE_TEMP_VIEW", "SQLITE_CREATE_TRIGGER", "SQLITE_CREATE_VIEW",
    "SQLITE_DELETE", "SQLITE_DROP_INDEX", "SQLITE_DROP_TABLE", "SQLITE_DROP_TEMP_INDEX", "SQLITE_DROP_TEMP_TABLE",
    "SQLITE_DROP_TEMP_TRIGGER", "SQLITE_DROP_TEMP_VIEW", "SQLITE_DROP_TRIGGER", "SQLITE_DROP_VIEW",
    "SQLITE_INSERT", "SQLITE_PRAGMA", "SQLITE_TRANSACTION", "SQLITE_UPDATE", "SQLITE_ATTACH", "SQLITE_DETACH",
    "SQLITE_ALTER_TABLE", "SQLITE_REINDEX", "SQLITE_ANALYZE", "SQLITE_CREATE_VTABLE", "SQLITE_DROP_VTABLE",
    "SQLITE_FUNCTION", "SQLITE_SAVEPOINT") if hasattr(sqlite3, n)}


def _describe(action, arg1, arg2) -> str:
    what = _ACTIONS.get(action, f"action {action}")
    if action == sqlite3.SQLITE_FUNCTION:
        return f"function {arg2}()"
    if action == sqlite3.SQLITE_PRAGMA:
        return f"PRAGMA {arg1}" + (f" = {arg2}" if arg2 is not None else "")
    target = arg2 if action in (sqlite3.SQLITE_DROP_INDEX, sqlite3.SQLITE_CREATE_INDEX) else arg1
    return f"{what} on {target}" if target else what


def _read_only_authorizer(action, arg1, arg2, dbname, source):
    if action in _ALLOWED:
        if action == sqlite3.SQLITE_FUNCTION and arg2 and arg2.lower() in _REFUSED_FUNCTIONS:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK
    # read-only pragmas take a table or index name: PRAGMA table_info(launch) is a read
    if action == sqlite3.SQLITE_PRAGMA and arg1 and arg1.lower() in _READ_PRAGMAS:
        return sqlite3.SQLITE_OK
    # SQLite asks this when it sets up a table-valued function (json_each, pragma_table_info):
    # a real change to the schema table would still meet mode=ro and query_only
    if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master" and dbname == "main" and source is None:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY
