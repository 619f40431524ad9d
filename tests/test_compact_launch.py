"""Schema 10 (issue 19): launch rows hold name ids and a path id, `launch` is a view with the
table's old columns in their old order, and every view shows what it showed before."""

import lzma
import re
import sqlite3

import pytest
from profdata import DATA, FIELD_H100, FIELD_REPORTS, KNOWN_NSYS, PROFILES

from profkit.store.ingest import ingest
from profkit.store.schema import MIGRATIONS
from profkit.store.store import Store

V9 = DATA / "schema-v9" / "profkit-v9.db.xz"  # written by profkit at schema 8 and 9 (README there)
# tables and views made by migrations after 9: schema 10's own and those of later ones
NEW = {"launch_row", "launch_name", "launch_nvtx", "schema_migrations"} | {
    m.group(1) for v, _, sql in MIGRATIONS if v > 10 for m in re.finditer(r"CREATE (?:TABLE|VIEW) (\w+)", sql)
}


def _v9(tmp_path) -> str:
    db = tmp_path / "v9.db"
    db.write_bytes(lzma.decompress(V9.read_bytes()))
    return str(db)


def _dump(db: str, names=None) -> dict:
    """name -> (columns, declared types, every row in order) of each table and view."""
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        out = {}
        for (name,) in c.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name"
        ):
            if names is not None and name not in names:
                continue
            info = c.execute(f'PRAGMA table_info("{name}")').fetchall()
            order = ", ".join(str(i + 1) for i in range(len(info)))
            rows = [
                tuple((type(v).__name__, v) for v in r) for r in c.execute(f'SELECT * FROM "{name}" ORDER BY {order}')
            ]
            out[name] = ([r[1] for r in info], [r[2] for r in info], rows)
        return out
    finally:
        c.close()


def test_a_populated_v9_database_migrates_with_every_view_unchanged(tmp_path):
    db = _v9(tmp_path)
    before = _dump(db)
    assert len(before["launch"][2]) == 569 and len(before["counters"][2]) > 50_000 and before["rules"][2]
    assert before["classifications"][2] and before["advice"][2] and before["nvtx_range"][2]
    Store(db).close()
    after = _dump(db)
    assert {n for n in after if (n not in NEW or n in before) and n != "schema_migrations"} == {
        n for n in before if n != "schema_migrations"
    }
    for name in before:
        if name != "schema_migrations":
            got = after[name]
            if name == "kernels":  # schemas 12 and 18 append columns: the columns before them are unchanged
                assert got[0][-3:] == ["family", "nvtx_inherited", "nvtx_tid"]
                ti = got[0].index("tid")
                assert all(r[-2] == ("int", 0) and r[-1] == r[ti] for r in got[2])  # no launch inherits
                got = (got[0][:-3], got[1][:-3], sorted(r[:-3] for r in got[2]))
            if name == "label":  # schema 21: the evidence of the labels stored before stays whole in each row
                at = [got[0].index(x) for x in before[name][0]]
                assert all(r[i] == ("NoneType", None) for r in got[2] for i in range(len(r)) if i not in at)
                got = (before[name][0], [got[1][i] for i in at], [tuple(r[i] for i in at) for r in got[2]])
                assert got[1] == ["INTEGER", "TEXT", "TEXT", "TEXT", "TEXT"]  # (reason, evidence: NULL allowed)
                got = (got[0], before[name][1], got[2])
            assert got == before[name], name  # `launch` too: a view now, the same columns and rows
    c = sqlite3.connect(db)
    try:
        assert c.execute("SELECT type FROM sqlite_master WHERE name = 'launch'").fetchone() == ("view",)
        # the three ws launches loaded under schema 8 in a range named with '/' keep their own text
        assert c.execute("SELECT count(*), min(nvtx_range) FROM launch_nvtx").fetchone() == (
            3,
            "/layer1/Conv + /relu/Relu",
        )
        assert c.execute("PRAGMA foreign_key_check").fetchall() == []
        assert c.execute("SELECT count(*) FROM launch_name").fetchone()[0] < 100  # names once, not per launch
    finally:
        c.close()


def test_a_migrated_database_takes_new_reports_like_a_new_one(tmp_path):
    """A report loaded after the migration gets the same rows as in a database made at schema 10."""
    old, new = _v9(tmp_path), str(tmp_path / "new.db")
    report = PROFILES / "e2e-decode" / "e2e-decode.nsys.sqlite.xz"  # not in the v9 database
    for db in (old, new):
        ingest(db, [report], run="again")
    view = "SELECT {} FROM kernels WHERE run = 'again' ORDER BY start_ns, kernel_id"
    cols = "kernel_name, short_name, nvtx_range, nvtx_path, nvtx_names, duration_ns, api_name, pid, tid"
    with Store(old) as a, Store(new) as b:
        got, want = a.query(view.format(cols)), b.query(view.format(cols))
        assert got == want and len(got) > 100 and any(r["nvtx_path"] for r in got) and any(r["api_name"] for r in got)


@pytest.mark.parametrize("db_kind", ["new", "migrated"])
def test_foreign_keys_still_refuse_a_row_of_a_missing_launch(tmp_path, db_kind):
    db = str(tmp_path / "t.db") if db_kind == "new" else _v9(tmp_path)
    ingest(db, [PROFILES / "e2e-decode" / "e2e-decode.nsys.sqlite.xz"], run="fk")  # (not in the v9 database)
    with Store(db) as s:
        c = s.conn
        assert c.execute("PRAGMA foreign_keys").fetchone() == (1,)
        last, name = c.execute("SELECT max(id), max(name_id) FROM launch_row").fetchone()
        c.execute("BEGIN")
        c.execute("INSERT INTO counter (launch_id, metric, unit, value) VALUES (?, 'm', 'u', 1)", (last,))
        c.execute(
            "INSERT INTO label (kernel_id, run, label, reason, evidence) VALUES (?, 'fk', 'x', 'y', '{}')", (last,)
        )
        for sql in (
            "INSERT INTO counter (launch_id, metric, unit, value) VALUES (?, 'm', 'u', 1)",
            "INSERT INTO label (kernel_id, run, label, reason, evidence) VALUES (?, 'fk', 'x', 'y', '{}')",
            "INSERT INTO rule_result (launch_id, rule, message) VALUES (?, 'r', 'm')",
            "INSERT INTO launch_nvtx (launch_id) VALUES (?)",
        ):
            with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
                c.execute(sql, (last + 1,))
        with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):  # a name id naming nothing
            c.execute("UPDATE launch_row SET name_id = ? WHERE id = ?", (name + 1000, last))
        c.execute("ROLLBACK")


def _real_exports():
    found = [KNOWN_NSYS, FIELD_H100 / "ws.nsys.sqlite"]
    if FIELD_REPORTS.is_dir():  # public reports of other people: many kernels and API names
        found += sorted(FIELD_REPORTS.glob("*/*.sqlite"))[:4]
    return found


# how the column path writes its kernels: JSON chunks of all of them or of 7; a side writer
# building the last share meanwhile (copied in by SQLite's transfer); the kernel's three
# columns packed in one JSON value, or the launch call's rowid in a second array and table
_WRITES = {
    "one chunk": (None, False, True),
    "chunks of 7 kernels": (7, False, True),
    "side writer": (None, True, True),
    "side writer, chunks of 7, two arrays": (7, True, False),
}


@pytest.mark.parametrize("writes", list(_WRITES))
@pytest.mark.parametrize("export", _real_exports(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_column_path_stores_the_row_paths_launches(export, writes, tmp_path, monkeypatch):
    """The bulk load (names mapped through the report's string ids, kernels in JSON chunks)
    writes every view's rows exactly as the row path (a name per row) does."""
    from profkit.parsers import nsys_sqlite

    from profkit.core import rows as rows_module
    from profkit.core.errors import ProfkitError
    from profkit.store import side_writer

    chunk, use_side, three = _WRITES[writes]
    if chunk:
        monkeypatch.setattr(rows_module, "_KERNEL_CHUNK", chunk)
    monkeypatch.setattr(rows_module, "SIDE_MIN_KERNELS", 0 if use_side else 10**18)
    if not three:
        monkeypatch.setattr(rows_module, "_PACK_BITS", 0)
    sides = []
    start = side_writer.SideWriter.start.__func__
    monkeypatch.setattr(
        side_writer.SideWriter,
        "start",
        classmethod(lambda cls, *a, **k: sides.append(start(cls, *a, **k)) or sides[-1]),
    )

    bulk_loads = []
    from profkit.store import bulk as bulk_module

    add_bulk = bulk_module.add_bulk
    monkeypatch.setattr(bulk_module, "add_bulk", lambda *a, **k: bulk_loads.append(1) or add_bulk(*a, **k))
    got = {}
    for side, rows in (("column", 0), ("row", 10**18)):
        monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", rows)
        db = str(tmp_path / f"{side}.db")
        try:
            ingest(db, [export], run="r")
        except ProfkitError as e:
            got[side] = str(e)
            continue
        got[side] = _dump(db, {"launch", "kernels", "nvtx_range"})
        cols, types, rows = got[side]["launch"]  # path ids are numbered in another order (paths compare by text)
        at = cols.index("path_id")
        got[side]["launch"] = (
            cols[:at] + cols[at + 1 :],
            types[:at] + types[at + 1 :],
            [r[:at] + r[at + 1 :] for r in rows],
        )
    if isinstance(got["row"], str):
        assert got["column"] == got["row"]
        pytest.skip(f"not loadable: {got['row']}")
    assert bulk_loads == [1], "the column path was not taken"
    assert len(sides) == use_side and all(sides), "the side writer was not used as asked"
    assert got["column"] == got["row"]
    assert got["row"]["launch"][2], "no launches: nothing compared"


@pytest.mark.parametrize("side", [False, True], ids=["one writer", "side writer"])
@pytest.mark.parametrize(
    "change",
    [
        "R nameId = '' WHERE r % 2 = 0",  # launch-call names that are not keys (found by the fuzzer)
        "K correlationId = 'c' || correlationId WHERE r % 9 = 0",  # join keys as text: SQLite's join
        "K shortName = 'text ' || r WHERE r % 7 = 0",  # a kernel name as text, not a key
    ],
)
def test_odd_keys_load_as_the_row_path_loads_them(change, side, tmp_path, monkeypatch):
    """An export whose keys are not all integers takes the column path's slower ways (the
    calls' names read through a staged kernel table, SQLite's join, the name scan): the store
    writes what the row path writes. (The fuzzer found the first one ending in 'no such table:
    temp.bulk_kernel' once the names were staged before the kernels.)"""
    import shutil

    from profkit.parsers import nsys_sqlite

    from profkit.core import rows as rows_module

    p = tmp_path / "odd.nsys.sqlite"
    shutil.copy(KNOWN_NSYS, p)
    c = sqlite3.connect(p)
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"):  # (without NOT NULL, same rowids)
        c.execute(f"CREATE TABLE k AS SELECT rowid AS r, * FROM {t} ORDER BY rowid")
        c.execute(f"DROP TABLE {t}")
        c.execute(f"ALTER TABLE k RENAME TO {t}")
    table = {"K": "CUPTI_ACTIVITY_KIND_KERNEL", "R": "CUPTI_ACTIVITY_KIND_RUNTIME"}[change[0]]
    assert c.execute(f"UPDATE {table} SET {change[2:]}").rowcount
    c.commit()
    c.close()
    monkeypatch.setattr(rows_module, "SIDE_MIN_KERNELS", 0 if side else 10**18)
    got = {}
    for path, rows in (("column", 0), ("row", 10**18)):
        monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", rows)
        ingest(str(tmp_path / f"{path}.db"), [p], run="r")
        got[path] = _dump(str(tmp_path / f"{path}.db"), {"launch", "kernels", "nvtx_range"})
        cols, types, launches = got[path]["launch"]  # (path ids are numbered in another order)
        at = cols.index("path_id")
        got[path]["launch"] = (
            cols[:at] + cols[at + 1 :],
            types[:at] + types[at + 1 :],
            [x[:at] + x[at + 1 :] for x in launches],
        )
    assert got["column"] == got["row"] and got["row"]["launch"][2]


def test_a_launchs_own_range_text_is_kept_where_it_is_not_its_paths(db):
    """A parser that hands paths as plain text (not NvtxPath) has them split at '/' by the store:
    a TensorRT range named with '/' then has names whose innermost is not the launch's range
    text. The launch keeps its own text (launch_nvtx), as the launch table did."""
    from profkit.parsers import nsys_sqlite

    from profkit.core.rows import KERNEL_FIELDS, RANGE_FIELDS

    rep = nsys_sqlite.parse(FIELD_H100 / "ws.nsys.sqlite")
    assert rep.bulk is None  # (the row path: _add_rows)
    at, rp = KERNEL_FIELDS.index("nvtx_path"), RANGE_FIELDS.index("path")
    rep.kernels = [k[:at] + (None if k[at] is None else str(k[at]),) + k[at + 1 :] for k in rep.kernels]
    rep.ranges = [r[:rp] + (None if r[rp] is None else str(r[rp]),) + r[rp + 1 :] for r in rep.ranges]
    kr, kp = KERNEL_FIELDS.index("nvtx_range"), KERNEL_FIELDS.index("nvtx_path")
    want = [{"nvtx_range": k[kr], "nvtx_path": None if k[kp] is None else str(k[kp])} for k in rep.kernels]
    with Store(db) as s:
        s.add_report("ws", rep, "sha")
        assert s.query("SELECT nvtx_range, nvtx_path FROM launch ORDER BY seq") == want
        assert s.query("SELECT nvtx_range, nvtx_path FROM kernels ORDER BY kernel_id") == want
        own = s.query("SELECT nvtx_range FROM launch_nvtx")
        assert [r["nvtx_range"] for r in own] == ["/layer1/Conv + /relu/Relu"] * 3


def test_the_pytorch_clean_up_keeps_a_paths_exact_names():
    """emit_nvtx's suffixes come off name by name: a range named with '/' stays one name."""
    from profkit.parsers import nsys_sqlite
    from profkit.parsers._ops import clean_torch_ranges

    from profkit.core.nvtx import NvtxPath
    from profkit.core.rows import KERNEL_FIELDS

    rep = nsys_sqlite.parse(FIELD_H100 / "ws.nsys.sqlite")
    clean_torch_ranges(rep)
    at = KERNEL_FIELDS.index("nvtx_path")
    paths = [k[at] for k in rep.kernels if k[at] is not None]
    assert paths and all(isinstance(p, NvtxPath) for p in paths)
    assert sum(p.names[-1] == "/layer1/Conv + /relu/Relu" for p in paths) == 3
