"""Whole-run checks on a profkit database, shared by the crash-safety and concurrency tests.

WHOLE_RUNS is one SELECT, so a reader sees one snapshot (in WAL mode a statement reads one
committed state) and it runs through `profkit sql`'s read-only connection too.
"""
import sqlite3

WHOLE_RUNS = """
SELECT
  (SELECT count(*) FROM report_file f
    WHERE f.kernels != (SELECT count(*) FROM launch l WHERE l.file_id = f.id)
       OR f.ranges != (SELECT count(*) FROM nvtx_range n WHERE n.file_id = f.id)
       OR f.counters != (SELECT count(*) FROM counter c JOIN launch l ON l.id = c.launch_id
                         WHERE l.file_id = f.id)) AS broken_files,
  (SELECT count(*) FROM launch WHERE file_id NOT IN (SELECT id FROM report_file)) AS orphan_launches,
  (SELECT count(*) FROM nvtx_range WHERE file_id NOT IN (SELECT id FROM report_file)) AS orphan_ranges,
  (SELECT count(*) FROM counter WHERE launch_id NOT IN (SELECT id FROM launch)) AS orphan_counters,
  (SELECT count(*) FROM run WHERE run NOT IN (SELECT run FROM report_file)) AS runs_without_files,
  (SELECT count(*) FROM run) AS runs,
  (SELECT count(*) FROM report_file) AS files,
  (SELECT count(*) FROM launch) AS launches
"""
PROBLEMS = ("broken_files", "orphan_launches", "orphan_ranges", "orphan_counters", "runs_without_files")


def whole_runs(conn: sqlite3.Connection) -> dict:
    cur = conn.execute(WHOLE_RUNS)
    return dict(zip([d[0] for d in cur.description], cur.fetchone()))


def problems(state: dict) -> dict:
    return {k: state[k] for k in PROBLEMS if state[k]}


def dump(db) -> str:
    """Every row of every table, in order: 'unchanged' means this string is equal."""
    c = sqlite3.connect(db)
    try:
        return "\n".join(c.iterdump())
    finally:
        c.close()
