"""Opening a profkit database: what a file is, the writer's connection and its journal modes.

WAL and a busy timeout let several ingests share one database. The last writer out puts the
database back in rollback-journal mode (settle), so at rest it is one file that readers open
read-only without creating anything beside it (docs/reliability.md).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from profkit.core.dbfile import BUSY_TIMEOUT_MS, SQLITE_MAGIC, check_path_length, wal_mode
from profkit.core.dbfile import open_readonly as _open_file_readonly
from profkit.core.errors import ProfkitError
from profkit.core.signals import watch
from profkit.parsers import registry as _parsers
from profkit.store.schema import LATEST, migrate, restore_indexes, schema_version

WAL_SWITCH_TIMEOUT_MS = 120_000


def default_db() -> str:
    """The database a command uses when none is named: $PROFKIT_DB, else profkit.db here.
    Resolved once, at the command line's edge; the library always takes a path."""
    return os.environ.get("PROFKIT_DB") or "profkit.db"


def connect(path: str | os.PathLike) -> sqlite3.Connection:
    check_path_length(path)
    # a URI connection: a bulk load ATTACHes the report read-only (mode=ro needs URI filenames)
    conn = sqlite3.connect(
        Path(path).absolute().as_uri(), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, uri=True
    )
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
    return watch(conn)  # Ctrl-C and SIGTERM end a statement that would not


def _to_wal(conn: sqlite3.Connection) -> None:
    """journal_mode = WAL, waiting as long as the busy timeout allows. SQLite answers "database
    is locked" at once, without its busy handler, where another connection holds the lock the
    switch needs in a way that could deadlock (seen: 2-10 % of two ingests started together on
    a database at rest, one of them refused): so retry here until the same deadline."""
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

    A bulk load switches to DELETE and back to WAL (profkit.store.write.add_report): it writes
    hundreds of MB of new pages, each written twice in WAL mode (the log, then the checkpoint)
    and read back once, where a rollback journal writes pages appended past the old end of file
    once and journals only the few it changes."""
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


def open_writer(path: str) -> sqlite3.Connection:
    """The writer's connection to a profkit database (made where missing), its schema brought
    up to date."""
    try:
        conn = connect(path)
        migrate(conn)
        restore_indexes(conn)
        return conn
    except sqlite3.DatabaseError as e:
        raise ProfkitError(f"{path}: not a usable profkit database ({e})") from None


def open_reader(path: str) -> sqlite3.Connection:
    """A read-only connection to a profkit database of the latest schema."""
    try:
        conn = _open_file_readonly(path)
        conn.execute("PRAGMA foreign_keys = ON")
        version = schema_version(conn)
    except sqlite3.DatabaseError as e:
        raise ProfkitError(f"{path}: not a usable profkit database ({e})") from None
    if version < LATEST:
        conn.close()
        raise ProfkitError(
            f"{path}: a profkit database of schema {version}; this profkit reads "
            f"{LATEST} and cannot update it here (no write access): open it once "
            f"where it can be written"
        )
    return conn


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
    if not p.is_file():  # (stat only: opening a FIFO to look would block until a writer came)
        return (
            f"{path} is not a regular file (a device, a FIFO or a socket), not a profkit database: "
            "--db names a database file"
        )
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
        conn = open_writer(str(path))  # migrates
        settle(conn)
        conn.close()


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
