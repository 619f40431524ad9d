"""A stop asked for by a signal, seen inside a long SQLite statement.

SQLite does not return to Python while a statement runs, so a Ctrl-C or SIGTERM waits for the
statement to end: on a view redefined to run forever, never. Every connection profkit opens
runs a progress check (watch) that ends its statement once a signal has been recorded; the CLI
edge then reports the signal, not the SQLite error it caused."""

from __future__ import annotations

import sqlite3

STOPPED: list[int] = []  # signals received, in order
CHECK_EVERY = 50_000  # SQLite virtual-machine steps between checks (well under a millisecond)


def record(signum: int) -> None:
    STOPPED.append(signum)


def stopped() -> int | None:
    """The first signal received, or None."""
    return STOPPED[0] if STOPPED else None


def watch(conn: sqlite3.Connection) -> sqlite3.Connection:
    """End any statement on CONN once a signal has been recorded (its handler runs inside the
    check; an exception it raises is swallowed by sqlite3 and the statement stops as
    'interrupted')."""
    conn.set_progress_handler(lambda: bool(STOPPED), CHECK_EVERY)
    return conn
