"""The one way the store writes: a transaction that commits whole or leaves nothing.

Every writer (a report's load, labels, advice, bench rows, run meta, a migration) runs inside
`transaction(conn)`: BEGIN IMMEDIATE takes the write lock first, so a check made inside
(a file already loaded?) still holds at COMMIT; any exception, KeyboardInterrupt included,
rolls back and goes on up.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


class Transaction:
    """The open transaction; rollback() ends it early without an error (a report found to be
    loaded already)."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn, self.open = conn, True

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")
        self.open = False


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[Transaction]:
    conn.execute("BEGIN IMMEDIATE")
    t = Transaction(conn)
    try:
        yield t
        if t.open:
            conn.execute("COMMIT")
    except BaseException:
        # (SQLite has already rolled back where an error ended the transaction itself: a
        # ROLLBACK then would raise and hide the error)
        if t.open and conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
