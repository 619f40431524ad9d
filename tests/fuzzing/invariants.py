"""What must hold after every case: a failed ingest leaves the database as it was; a
successful one adds exactly one whole file and touches nothing older."""
from __future__ import annotations

import sqlite3
from pathlib import Path

# --- database checks -----------------------------------------------------------------------------

def snapshot(db: Path) -> dict:
    """Every table's rows (sorted reprs) and the schema: what 'unchanged' is compared on."""
    c = sqlite3.connect(db)
    try:
        out = {"__schema__": sorted(c.execute("SELECT type, name, sql FROM sqlite_master").fetchall())}
        for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").fetchall():
            cols = [r[1] for r in c.execute(f'PRAGMA table_info("{t}")')]
            out[t] = (cols, sorted(repr(r) for r in c.execute(f'SELECT * FROM "{t}"')))
        return out
    finally:
        c.close()


def _rows(c: sqlite3.Connection, t: str, where: str = "", params=(), blank: tuple = ()) -> list[str]:
    """Sorted reprs of table t's rows (optionally filtered), columns in `blank` set to None."""
    cols = [r[1] for r in c.execute(f'PRAGMA table_info("{t}")')]
    sel = ", ".join("NULL" if x in blank else f'"{x}"' for x in cols)
    return sorted(repr(r) for r in c.execute(f'SELECT {sel} FROM "{t}" {where}', params))


def check_whole_file(db: Path, template: Path, run: str, existed: bool) -> str | None:
    """After a successful ingest: one new report_file whose rows are all there, older rows
    untouched (except the ncu->timeline links and metadata of the run it joined). None if ok."""
    c = sqlite3.connect(db)
    b = sqlite3.connect(template)
    try:
        if c.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            return "integrity_check failed"
        if c.execute("PRAGMA foreign_key_check").fetchall():
            return "foreign_key_check failed"
        old_ids = {r[0] for r in b.execute("SELECT id FROM report_file")}
        new = [r for r in c.execute("SELECT id, run, kernels, ranges, counters FROM report_file") if r[0] not in old_ids]
        if len(new) != 1:
            return f"{len(new)} new report_file rows"
        fid, frun, k, n, m = new[0]
        got = (c.execute("SELECT count(*) FROM launch WHERE file_id = ?", (fid,)).fetchone()[0],
               c.execute("SELECT count(*) FROM nvtx_range WHERE file_id = ?", (fid,)).fetchone()[0],
               c.execute("SELECT count(*) FROM counter WHERE launch_id IN (SELECT id FROM launch WHERE file_id = ?)",
                         (fid,)).fetchone()[0])
        if got != (k, n, m):
            return f"file {fid}: rows {got} != report_file counts {(k, n, m)}"
        if frun != run:
            return f"loaded into run {frun!r}, expected {run!r}"
        if existed and c.execute("SELECT count(*) FROM run").fetchone()[0] != b.execute("SELECT count(*) FROM run").fetchone()[0]:
            return "a run was added"
        for (t,) in b.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").fetchall():
            cols = [r[1] for r in b.execute(f'PRAGMA table_info("{t}")')]
            where, params, blank = "", (), ()
            if "file_id" in cols:
                where = f"WHERE file_id IS NOT {fid}"
            elif t == "report_file":
                where = f"WHERE id != {fid}"
            elif t == "counter" or "launch_id" in cols:  # counters, ncu rule results: rows of a launch
                where = f"WHERE launch_id NOT IN (SELECT id FROM launch WHERE file_id = {fid})"
            elif t in ("nvtx_path", "launch_name"):  # shared by files: a new file may add some, never change one
                where = f"WHERE id <= {b.execute(f'SELECT coalesce(max(id), 0) FROM {t}').fetchone()[0]}"
            elif t == "run":
                where, params = ("WHERE run != ?", (run,)) if not existed else ("", ())
                blank = ("meta", "gpu_name") if existed else ()  # the run it joined may gain metadata
            if t in ("launch", "launch_row") and existed:
                # and its ncu launches are relinked to the timeline, its sampled launches to their sibling
                blank = ("timeline_id", "sampled_from")
            if _rows(c, t, where, params, blank) != _rows(b, t, where, params, blank):
                return f"older rows of table {t} changed"
        return None
    finally:
        c.close()
        b.close()
