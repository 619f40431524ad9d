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
