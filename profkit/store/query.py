"""User SQL over a profkit database (`profkit sql`): read-only, stoppable, time-limited and
streamed.

- read-only: the file is opened read-only (store.open_readonly: mode=ro, query_only, and an
  authorizer that refuses writes, ATTACH, PRAGMA changes, extension loading and functions
  that leak or load code);
- stoppable: a progress handler runs every few thousand SQLite steps and ends the query as
  soon as `stop()` says so (the CLI's Ctrl-C) or the time limit passes; SQLite alone never
  returns to Python during a statement, so without it Ctrl-C waits for the query;
- bounded: temporary data (sorts, DISTINCT, GROUP BY, CTEs) stays in memory, never in temp
  files, and `memory_mb` caps SQLite's whole heap (the CLI's --memory);
- streamed: rows come in batches, so a 5 M-row result needs the memory of one batch.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from profkit.core.errors import ProfkitError
from profkit.store.readonly import ReadOnlyConnection, open_readonly

PROGRESS_STEPS = 10_000  # SQLite steps between checks: about a millisecond of work
BATCH = 1_000


class QueryError(ProfkitError):
    exit_code = 6


class QueryStopped(ProfkitError):
    exit_code = 130


class QueryTimeout(ProfkitError):
    exit_code = 6


@dataclass
class Result:
    columns: list[str]
    cursor: sqlite3.Cursor = field(repr=False)
    _explain: Callable = field(repr=False)
    _stop: Callable[[], bool] | None = field(default=None, repr=False)

    def rows(self) -> Iterator[tuple]:
        """The result's rows, fetched a batch at a time (the time limit and stop() still apply)."""
        while True:
            if self._stop is not None and self._stop():  # (while the rows are being written out)
                raise QueryStopped("query stopped")
            try:
                batch = self.cursor.fetchmany(BATCH)
            except (sqlite3.Error, MemoryError) as e:
                raise self._explain(e) from None
            if not batch:
                return
            yield from batch


def _text(b: bytes) -> str:
    # TEXT that is not UTF-8 (SQLite stores what it is given) shows its odd bytes as \xNN
    return b.decode("utf-8", "backslashreplace")


class Query:
    """One statement on a read-only connection: ``with Query(db, sql) as r: for row in r.rows()``."""

    def __init__(
        self,
        db: str | os.PathLike,
        sql: str,
        timeout: float | None = None,
        stop: Callable[[], bool] | None = None,
        memory_mb: int | None = None,
    ):
        self.db, self.sql, self.timeout, self.stop, self.memory_mb = db, sql, timeout, stop, memory_mb
        self.conn: ReadOnlyConnection | None = None
        self._why: str | None = None

    def _tick(self) -> int:
        if self.stop is not None and self.stop():
            self._why = "stop"
            return 1
        if self.deadline is not None and time.monotonic() > self.deadline:
            self._why = "timeout"
            return 1
        return 0

    def _explain(self, e: BaseException) -> ProfkitError:
        if isinstance(e, MemoryError):
            return QueryError(
                f"the query needs more than {self.memory_mb} MB of working memory (sorting, DISTINCT, "
                "GROUP BY, temporary results): narrow it, or raise --memory"
            )
        msg = str(e)
        if msg == "interrupted" and self._why == "stop":
            return QueryStopped("query stopped")
        if msg == "interrupted" and self._why == "timeout":
            return QueryTimeout(f"query stopped after {self.timeout:g} s (--timeout S to allow longer, 0 for no limit)")
        denied = getattr(self.conn, "denied", None)
        if msg.startswith("not authorized") and denied:
            return QueryError(
                f"refused: {denied}: profkit sql reads the database read-only (no writes, ATTACH, "
                "PRAGMA changes or extension loading)"
            )
        if "readonly" in msg or "read-only" in msg:
            return QueryError(f"refused: {msg}: profkit sql reads the database read-only")
        return QueryError(f"query failed: {msg}")

    def __enter__(self) -> Result:
        conn = self.conn = open_readonly(self.db)
        self._heap = _heap_limit(self.memory_mb << 20) if self.memory_mb else None
        conn.text_factory = _text
        self.deadline = time.monotonic() + self.timeout if self.timeout else None
        conn.set_progress_handler(self._tick, PROGRESS_STEPS)
        try:
            cur = conn.execute(self.sql)
        except (sqlite3.Error, MemoryError) as e:
            self.__exit__()
            raise self._explain(e) from None
        except UnicodeDecodeError:
            self.__exit__()
            raise QueryError("a column name of the result is not UTF-8 text: name it with AS") from None
        return Result(_unique([d[0] for d in cur.description or []]), cur, self._explain, self.stop)

    def __exit__(self, *exc) -> None:
        if self.conn is not None:
            self.conn.close()
        if self._heap is not None:
            _heap_limit(self._heap)


def _heap_limit(n: int) -> int:
    """Set SQLite's hard heap limit (bytes; 0: none) for this process; returns the one before.
    Set through a connection of its own: the query's authorizer refuses every PRAGMA change."""
    c = sqlite3.connect(":memory:")
    try:
        before = c.execute("PRAGMA hard_heap_limit").fetchone()[0]
        c.execute(f"PRAGMA hard_heap_limit = {int(n)}")
        return before
    finally:
        c.close()


def _unique(names: list[str]) -> list[str]:
    """Column names made unique (SELECT 1 AS a, 2 AS a): a, a:2 (JSON keys must differ); a
    made name skips any name the query itself gives (3 AS "a:2" keeps its own)."""
    taken = set(names)
    used: set[str] = set()
    out = []
    for n in names:
        name, k = n, 1
        while name in used:
            k += 1
            name = f"{n}:{k}"
            while name in taken and name != n:
                k += 1
                name = f"{n}:{k}"
        used.add(name)
        out.append(name)
    return out
