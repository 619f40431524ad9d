"""A second writer for a bulk load (profkit.store.bulk.add_bulk).

SQLite writes a database from one connection at a time, and building a launch row (reading
the report's kernel and launch call, packing 30 columns, two indexes) costs ~1.6 us, so 1 M
launches kept one core busy for 1.6 s while the other idled. A SideWriter builds the last
share of a file's launch rows on a thread of its own (SQLite runs without the GIL) into a
private in-memory database of the same schema, while the store's connection builds the rest.
The store then copies them in with one `INSERT INTO launch_row SELECT * FROM side.launch_row`,
which SQLite runs as its transfer optimisation (records and index entries copied as they are,
~0.45 us a row), inside its own transaction: the file still loads whole or not at all, and
nothing is left on disk (the database lives in memory: SQLite's memdb, named with a leading
'/' so that two connections of this process share it, and gone when the last one closes).
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import uuid
from pathlib import Path

# a memdb database: a name with a leading '/' is shared by this process's connections
_SIDE_URI = "file:/profkit-side-{}?vfs=memdb"
# CREATE TABLE/INDEX [IF NOT EXISTS] name -> the same in schema `side`
_CREATE = re.compile(r"^(\s*CREATE\s+(?:UNIQUE\s+)?(?:TABLE|INDEX)\s+(?:IF\s+NOT\s+EXISTS\s+)?)", re.I)


def table_ddl(conn: sqlite3.Connection, table: str) -> list[str]:
    """The CREATE statements of a table of `conn`'s main database and of its indexes."""
    return [
        sql
        for (sql,) in conn.execute(
            "SELECT sql FROM main.sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL ORDER BY type DESC", (table,)
        )
    ]


class SideWriter:
    """Runs `insert` (a statement writing into side.<table>, see start()) on chunks of a kernel
    part, in a thread, into an in-memory database the caller ATTACHes as `side` once result()
    returns."""

    def __init__(self, conn: sqlite3.Connection, uri: str):
        self.conn, self.uri = conn, uri
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._stop = False

    @classmethod
    def start(
        cls, source: str, ddl: list[str], stage, insert: str, params: tuple, part, path_ids, lo: int, hi: int
    ) -> SideWriter | None:
        """A writer building kernels lo..hi of `part` (rows.KernelPart) with `insert` (its CTE
        marked /*CTE*/, writing into side.<table>) and `params` (after the chunk's JSON), from
        the report at `source` (attached as src) and the tables `ddl` creates (made in `side`).
        stage(conn) makes the temp tables the statement reads besides the part's. None where
        this SQLite has no shared in-memory databases (the caller writes those kernels itself)."""
        uri = _SIDE_URI.format(f"{os.getpid()}-{uuid.uuid4().hex}")
        conn = sqlite3.connect("file::memory:", uri=True, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("ATTACH ? AS side", (uri,))
            conn.execute("ATTACH ? AS src", (f"{Path(source).resolve().as_uri()}?mode=ro",))
            for sql in ddl:
                conn.execute(_CREATE.sub(r"\1side.", sql, count=1))
            stage(conn)
        except sqlite3.Error:
            conn.close()
            return None
        w = cls(conn, uri)
        w._thread = threading.Thread(
            target=w._run, args=(insert, params, part, path_ids, lo, hi), name="profkit-side-writer", daemon=True
        )
        w._thread.start()
        return w

    def _run(self, insert: str, params: tuple, part, path_ids, lo: int, hi: int) -> None:
        c = self.conn
        try:
            c.execute("BEGIN")
            for cte, packed, _ in part.ctes(c, path_ids, lo, hi):
                if self._stop:
                    raise _Stopped()
                c.execute(insert.replace("/*CTE*/", cte + ","), (packed,) + params)
            c.execute("COMMIT")
        except BaseException as e:  # raised in the caller's thread by result()
            self._error = e

    def result(self) -> None:
        """Wait for the rows; raise the writer's error here."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(0.1)
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """Stop the writer (an error or an interrupt in the caller) and let its database go."""
        self._stop = True  # (seen between statements; interrupt() ends the one running)
        while self._thread is not None and self._thread.is_alive():
            self.conn.interrupt()
            self._thread.join(0.05)
        self.close()

    def close(self) -> None:
        """The writer's connection closed: its database lives on while the caller has it
        attached, and goes when the caller detaches it."""
        self.conn.close()


class _Stopped(Exception):
    pass
