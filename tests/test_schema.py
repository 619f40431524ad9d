import json
import re
import sqlite3

from profdata import ROOT

from profkit.store.schema import LATEST, VIEWS
from profkit.store.store import Store


def test_views_have_their_documented_columns(db):
    Store(db).close()
    with sqlite3.connect(db) as c:
        for view, cols in VIEWS.items():
            have = [r[1] for r in c.execute(f"PRAGMA table_info({view})")]
            assert set(cols) <= set(have), (view, set(cols) - set(have))
        assert c.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] == LATEST


def test_docs_list_every_view_column():
    doc = (ROOT / "docs" / "schema.md").read_text()
    for view, cols in VIEWS.items():
        m = re.search(rf"### `{view}\(([^)]*)\)`", doc)
        assert m, view
        documented = {c.strip() for c in m.group(1).split(",")}
        assert set(cols) <= documented, (view, set(cols) - documented)


def test_migrations_are_idempotent(db):
    Store(db).close()
    Store(db).close()
    with sqlite3.connect(db) as c:
        assert [r[0] for r in c.execute("SELECT version FROM schema_migrations")] == list(range(1, LATEST + 1))


def test_a_version_2_database_migrates_to_ranks(db):
    """A database written before ranks existed (migrations 1-2, one real report loaded)
    gains `rank` (NULL) in every view and keeps its rows."""
    from profdata import KNOWN_NSYS
    from profkit.parsers import nsys_sqlite

    from profkit.store.connection import connect
    from profkit.store.ingest import sha256_of
    from profkit.store.schema import MIGRATIONS
    from profkit.store.schema import statements as _statements

    c = connect(db)
    c.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)")
    for version, name, sql in MIGRATIONS[:2]:
        for stmt in _statements(sql):
            c.execute(stmt)
        c.execute("INSERT INTO schema_migrations VALUES (?, ?, 'then')", (version, name))
    rep = nsys_sqlite.parse(KNOWN_NSYS)
    c.execute("INSERT INTO run (run, created_at) VALUES ('old', 'then')")
    c.execute("INSERT INTO source_file (run, path, sha256, format, loaded_at, kernels, ranges, counters)"
              " VALUES ('old', 'k', ?, 'nsys-sqlite', 'then', 166, 0, 0)", (sha256_of(KNOWN_NSYS),))
    c.executemany("INSERT INTO launch (run, file_id, source, seq, kernel_name, duration_ns) VALUES ('old', 1, 'nsys', ?, ?, ?)",
                  [(k[0], k[1], k[7]) for k in rep.kernels])
    before = c.execute("SELECT * FROM kernels ORDER BY kernel_id").fetchall()
    c.close()

    s = Store(db)
    try:
        assert s.query("SELECT max(version) v FROM schema_migrations")[0]["v"] == LATEST >= 4
        assert s.query("SELECT count(*) n FROM report_file") == [{"n": 1}]  # migration 4 renamed source_file
        after = s.conn.execute("SELECT * FROM kernels ORDER BY kernel_id").fetchall()
        n = len(before[0])  # rank (migration 3) and sampled_from (7) appended, NULL
        assert [r[:n] for r in after] == before and {r[n:n + 3] for r in after} == {(None, None, None)}  # and nvtx_names (9)
        assert all(r[n + 3] for r in after)  # family (12): backfilled from each kernel's name
        assert {r[n + 4:] for r in after} == {(0, None)}  # nvtx_inherited, nvtx_tid (18): none, no thread
        assert s.query("SELECT count(*) n, count(rank) r FROM kernels") == [{"n": 166, "r": 0}]
        for view in ("counters", "classifications"):
            assert "rank" in [r[1] for r in s.conn.execute(f"PRAGMA table_info({view})")]
    finally:
        s.close()


def test_a_version_4_database_gains_structured_paths(db):
    """Migration 5: paths loaded before it get names (their text split at '/'), ranges move to
    nvtx_event behind the nvtx_range view, and a report loaded after it keeps a '/' in a name."""
    from profdata import ROOT

    from profkit.store.connection import connect
    from profkit.store.ingest import ingest
    from profkit.store.schema import MIGRATIONS
    from profkit.store.schema import statements as _statements

    c = connect(db)
    c.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)")
    for version, name, sql in MIGRATIONS[:4]:
        for stmt in _statements(sql):
            c.execute(stmt)
        c.execute("INSERT INTO schema_migrations VALUES (?, ?, 'then')", (version, name))
    c.execute("INSERT INTO run (run, created_at) VALUES ('old', 'then')")
    c.execute("INSERT INTO report_file (run, path, sha256, format, loaded_at, kernels, ranges, counters)"
              " VALUES ('old', 'k', 'x', 'nsys-sqlite', 'then', 2, 2, 0)")
    c.executemany("INSERT INTO launch (run, file_id, source, seq, kernel_name, nvtx_range, nvtx_path) VALUES ('old', 1, 'nsys', ?, 'k', ?, ?)",
                  [(0, "b", "a/b"), (1, None, None)])
    c.executemany("INSERT INTO nvtx_range (run, file_id, text, kind, start_ns, end_ns, depth, path) VALUES ('old', 1, ?, 'push_pop', 1, 9, ?, ?)",
                  [("a", 0, "a"), ("b", 1, "a/b")])
    c.close()
    with Store(db) as s:
        assert s.query("SELECT nvtx_path, nvtx_names FROM kernels ORDER BY kernel_id") == [
            {"nvtx_path": "a/b", "nvtx_names": '["a","b"]'}, {"nvtx_path": None, "nvtx_names": None}]
        assert s.query("SELECT text, depth, path, names FROM nvtx_range ORDER BY id") == [
            {"text": "a", "depth": 0, "path": "a", "names": '["a"]'}, {"text": "b", "depth": 1, "path": "a/b", "names": '["a","b"]'}]
    # the H100 capture's ONNX-style range name keeps its '/' as one name
    ws = ROOT / "tests" / "data" / "field-h100" / "ws.nsys.sqlite"
    ingest(db, [ws], run="ws")
    with Store(db) as s:
        rows = s.query("SELECT DISTINCT nvtx_path, nvtx_names FROM kernels WHERE run = 'ws' AND nvtx_path LIKE '%/layer1/Conv%'")
        assert rows and all(json.loads(r["nvtx_names"])[-1] == "/layer1/Conv + /relu/Relu" for r in rows)
        r = s.query("SELECT depth, names FROM nvtx_range WHERE run = 'ws' AND text = '/layer1/Conv + /relu/Relu'")[0]
        assert json.loads(r["names"])[-1] == "/layer1/Conv + /relu/Relu" and r["depth"] == len(json.loads(r["names"])) - 1


def test_a_deferred_index_is_built_once_at_the_end_and_restored_when_missing(db):
    """indexes_after: a load into a database without counters writes them without the metric
    index and builds it when it ends (the same text as migration 1's); a database with
    counters keeps it; a writer that finds it missing (a load killed inside) builds it."""
    from profdata import KNOWN_NCU

    from profkit.store.ingest import ingest
    from profkit.store.schema import DEFERRABLE_INDEXES

    def index_sql(s):
        row = s.conn.execute("SELECT sql FROM sqlite_master WHERE name = 'counter_metric'").fetchone()
        return row and row[0]

    with Store(db) as s:
        made = index_sql(s)
        assert made == DEFERRABLE_INDEXES["counter_metric"]
        with s.indexes_after():
            assert index_sql(s) is None
            ingest(db, [KNOWN_NCU], run="k", store=s)
            assert index_sql(s) is None
        assert index_sql(s) == made
        with s.indexes_after():  # counters held now: the index stays
            assert index_sql(s) == made
        plan = " ".join(r[3] for r in s.conn.execute("EXPLAIN QUERY PLAN SELECT count(*) FROM counter WHERE metric = 'x'"))
        assert "counter_metric" in plan
        s.conn.execute("DROP INDEX counter_metric")
    with Store(db) as s:
        assert index_sql(s) == made
