"""`profkit kernels` sums the launches as columns: the same rows as the SQL over the kernels view."""

import shutil
import sqlite3

from profkit.analyses import phases, summary
from profkit.store.store import Store


def _both(s, run, top, window=None):
    return summary._kernels_columns(s, run, top, window), summary._kernels_sql(s, run, top, window)


def test_kernels_as_columns_are_the_views_rows_on_every_shipped_run(profiles_db_built):
    """Every shipped run (inherited paths of a multi-thread run, launch_nvtx paths, ncu rows,
    several ranks), whole and in its steady state, a few and all of its rows: ties in total
    time keep GROUP BY's order, as SQLite's sort leaves them."""
    with Store(str(profiles_db_built), readonly=True) as s:
        runs = [r for (r,) in s.conn.execute("SELECT DISTINCT run FROM launch_row ORDER BY run")]
        ties = 0
        for run in runs:
            win, _ = phases.selected(s, run, None)
            for top in (3, 10**6):
                for w in {None, win}:
                    cols, sql = _both(s, run, top, w)
                    assert cols == sql, (run, top, w)
            totals = [r["total_us"] for r in sql]
            ties += len(totals) - len(set(totals))
        assert len(runs) >= 20 and ties > 0


def test_kernels_with_no_duration_and_odd_values(profiles_db_built, tmp_path):
    """A launch without a duration counts but adds nothing (a group of such: no total, mean or
    share); a duration stored as a real number sends the run to the SQL."""
    db = str(tmp_path / "k.db")
    shutil.copyfile(profiles_db_built, db)
    with sqlite3.connect(db) as c:
        ids = [i for (i,) in c.execute("SELECT id FROM launch_row WHERE run = 'e2e-decode' ORDER BY id")]
        c.executemany("UPDATE launch_row SET duration_ns = NULL WHERE id = ?", [(i,) for i in ids[::7]])
        name = c.execute("SELECT short_id FROM launch_row WHERE id = ?", (ids[1],)).fetchone()[0]
        c.execute("UPDATE launch_row SET duration_ns = NULL WHERE run = 'e2e-decode' AND short_id = ?", (name,))
        c.execute(
            "UPDATE launch_row SET duration_ns = 1500.5 WHERE id = (SELECT min(id) FROM launch_row WHERE run = 'known')"
        )
    with Store(db, readonly=True) as s:
        cols, sql = _both(s, "e2e-decode", 10**6)
        assert cols == sql
        assert any(r["total_us"] is None and r["pct"] is None for r in cols)
        assert summary._kernels_columns(s, "known", 10, None) is None
        assert summary.kernels(s, "known", 10) == summary._kernels_sql(s, "known", 10, None)
