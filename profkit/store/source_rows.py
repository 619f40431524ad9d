"""Writing ncu's Source Counters (the `sass` and `source_lines` views, schema migration 14): a
report's per-instruction rows and the source text it embeds, inside the report's own load
transaction (Store.add_report)."""

from __future__ import annotations

import sqlite3


def add(conn: sqlite3.Connection, file_id: int, seq_to_id: dict[int, int], report) -> None:
    """The report's sass rows (Parsed.sass, keyed by kernel seq) and embedded source lines."""
    sass = getattr(report, "sass", None)
    if sass:
        conn.executemany(
            "INSERT INTO sass_row (launch_id, pc, address, instruction, file, line, inst_executed, samples,"
            " samples_not_issued, stalls, stalls_not_issued) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ((seq_to_id[r[0]],) + tuple(r[1:]) for r in sass),
        )
    lines = getattr(report, "source_lines", None)
    if lines:
        conn.executemany(
            "INSERT OR IGNORE INTO source_text (file_id, file, line, text) VALUES (?, ?, ?, ?)",
            ((file_id,) + tuple(r) for r in lines),
        )
