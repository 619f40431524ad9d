"""The store's ids of NVTX paths and launch names, added where new (every load writes ids,
not text, into its launch rows)."""

from __future__ import annotations

import sqlite3

from profkit.core.families import family_of
from profkit.core.nvtx import names_json


def path_ids(conn: sqlite3.Connection, paths) -> list[int | None]:
    """nvtx_path ids of name tuples (added where new; None for no path)."""
    out: list[int | None] = []
    for names in paths:
        if not names:
            out.append(None)
            continue
        js = names_json(names)
        row = conn.execute("SELECT id FROM nvtx_path WHERE names = ?", (js,)).fetchone()
        if row is None:
            row = (
                conn.execute(
                    "INSERT INTO nvtx_path (names, path, text, depth) VALUES (?, ?, ?, ?)",
                    (js, "/".join("" if n is None else n for n in names), names[-1], len(names) - 1),
                ).lastrowid,
            )
        out.append(row[0])
    return out


def name_ids(conn: sqlite3.Connection, names) -> dict:
    """launch_name ids of names (added where new): one statement per distinct name."""
    out = {}
    for n in dict.fromkeys(names):
        row = conn.execute("SELECT id FROM launch_name WHERE name = ?", (n,)).fetchone()
        if row is None:  # (a family is a few regular expressions over a long name: only for new ones)
            conn.execute("INSERT OR IGNORE INTO launch_name (name, family) VALUES (?, ?)", (n, family_of(n)))
            row = conn.execute("SELECT id FROM launch_name WHERE name = ?", (n,)).fetchone()
        out[n] = row[0]
    return out
