"""Hostile inputs (issue 17, items 6 and 7): nsys exports built to make reading cost anything
(a view over a 3-way self-join loaded 4.6 M bogus kernels from 446 KB), files that never end
(a FIFO, /dev/zero behind a report's name), file names that are not UTF-8.

Each is refused in one line, quickly, with the database unchanged; the export itself is never
changed (it is opened read-only).
"""
import hashlib
import json
import lzma
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner
from dbcheck import dump
from profdata import DATA, KNOWN_CUPTI, KNOWN_NSYS, PROFILES

from profkit.cli import cli


def run(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in r.output, r.output
    return r


def _export(tmp_path, name="hostile.nsys.sqlite", *sql):
    p = tmp_path / name
    shutil.copy(KNOWN_NSYS, p)
    c = sqlite3.connect(p)
    for s in sql:
        c.execute(s)
    c.commit()
    c.close()
    return p


def _refused(tmp_path, export, words):
    db = tmp_path / "t.db"
    assert run("ingest", "--db", db, KNOWN_CUPTI, "--run", "before").exit_code == 0
    before, digest = dump(db), hashlib.sha256(export.read_bytes()).hexdigest()
    r = run("ingest", "--db", db, export)
    assert r.exit_code == 2 and r.output.count("\n") == 1 and words in r.output, r.output
    assert dump(db) == before and hashlib.sha256(export.read_bytes()).hexdigest() == digest


def test_kernel_table_as_a_view_over_a_self_join(tmp_path):
    p = _export(tmp_path, "view.nsys.sqlite", "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO k0",
                "CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS SELECT a.* FROM k0 a, k0 b, k0 c")
    _refused(tmp_path, p, "CUPTI_ACTIVITY_KIND_KERNEL is a view, not a table")


def test_string_table_as_a_virtual_table(tmp_path):
    p = _export(tmp_path, "vt.nsys.sqlite", "ALTER TABLE StringIds RENAME TO s0",
                "CREATE VIRTUAL TABLE StringIds USING fts4(id, value)", "INSERT INTO StringIds SELECT id, value FROM s0")
    _refused(tmp_path, p, "StringIds is a virtual table")


def test_computed_columns(tmp_path):
    p = _export(tmp_path, "gen.nsys.sqlite", "ALTER TABLE StringIds RENAME TO s0",
                "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, raw TEXT, value TEXT AS (raw || zeroblob(1000)))",
                "INSERT INTO StringIds (id, raw) SELECT id, value FROM s0")
    _refused(tmp_path, p, "StringIds has computed columns")


def test_launch_calls_sharing_ids_multiply_nothing(tmp_path):
    """Every runtime row copied 4 times: one kernel would join 4 launch calls (4x the kernels)."""
    p = _export(tmp_path, "dup.nsys.sqlite", "CREATE TABLE r2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME",
                "INSERT INTO r2 SELECT * FROM r2", "INSERT INTO r2 SELECT * FROM r2",
                "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME", "ALTER TABLE r2 RENAME TO CUPTI_ACTIVITY_KIND_RUNTIME")
    _refused(tmp_path, p, "several launch calls share one kernel's correlation id")


def test_a_join_bomb_in_plain_tables_meets_the_work_budget(tmp_path):
    """Plain tables, real columns: 12,000 kernels and 12,000 launch calls of one correlation id
    and process make a 144 M-row join from a few MB. Reading may cost 50 SQLite steps per
    byte of file (real exports: under 1): it stops there."""
    p = _export(tmp_path, "bomb.nsys.sqlite",
                "CREATE TABLE k2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1",
                "CREATE TABLE r2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = "
                "(SELECT correlationId FROM k2)",
                "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL", "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME",
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12000) "
                "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT k2.* FROM k2, n",
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12000) "
                "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT r2.* FROM r2, n",
                "DROP TABLE k2", "DROP TABLE r2")
    c = sqlite3.connect(p)
    c.execute("VACUUM")
    c.close()
    _refused(tmp_path, p, "SQLite steps per byte")


def test_triggers_in_an_export_do_nothing(tmp_path):
    """Reading fires no trigger, and the export is opened read-only: it loads unchanged."""
    p = _export(tmp_path, "trig.nsys.sqlite", "CREATE TABLE log (x)",
                "CREATE TRIGGER t AFTER INSERT ON StringIds BEGIN INSERT INTO log VALUES (1); END")
    digest = hashlib.sha256(p.read_bytes()).hexdigest()
    r = run("ingest", "--db", tmp_path / "t.db", p)
    assert r.exit_code == 0 and "166 kernels" in r.output
    assert hashlib.sha256(p.read_bytes()).hexdigest() == digest


def _ingest_child(tmp_path, path):
    return subprocess.run([sys.executable, "-m", "profkit.cli", "ingest", "--db", str(tmp_path / "t.db"), str(path)],
                          capture_output=True, text=True, timeout=60)


def test_a_fifo_named_like_a_report_is_refused(tmp_path):
    fifo = tmp_path / "pipe.nsys.sqlite"
    os.mkfifo(fifo)
    r = _ingest_child(tmp_path, fifo)  # (reading it would block for ever: the test's timeout would say)
    assert r.returncode == 2 and r.stderr == f"profkit: {fifo}: is a FIFO, not a regular file\n"


@pytest.mark.parametrize("name", ["zero.ncu-rep", "zero.nsys.sqlite", "zero.cupti.jsonl"])
def test_dev_zero_behind_a_report_name_is_refused(tmp_path, name):
    link = tmp_path / name
    link.symlink_to("/dev/zero")
    r = _ingest_child(tmp_path, link)
    assert r.returncode == 2 and r.stderr == f"profkit: {link}: is a device, not a regular file\n"
    assert not (tmp_path / "t.db").exists()


def test_a_file_name_that_is_not_utf8(tmp_path):
    """The issue: byte 0xff in a file name ended ingest in UnicodeEncodeError (at the insert)."""
    name = os.fsdecode(b"caf\xff.nsys.sqlite")
    shutil.copy(KNOWN_NSYS, tmp_path / name)
    env = dict(os.environ, LC_ALL="C.UTF-8")
    r = subprocess.run([sys.executable, "-m", "profkit.cli", "ingest", "--db", str(tmp_path / "t.db"),
                        os.fsencode(tmp_path / name)], capture_output=True, env=env)
    assert r.returncode == 0 and b"caf\\xff.nsys.sqlite: nsys-sqlite -> run caf\\xff: 166 kernels" in r.stdout, r
    r = subprocess.run([sys.executable, "-m", "profkit.cli", "runs", "--db", str(tmp_path / "t.db")],
                       capture_output=True, env=env)
    assert r.returncode == 0 and b"caf\\xff" in r.stdout
    again = subprocess.run([sys.executable, "-m", "profkit.cli", "ingest", "--db", str(tmp_path / "t.db"),
                            os.fsencode(tmp_path / name)], capture_output=True, env=env)
    assert again.returncode == 0 and b"already loaded" in again.stdout


def test_output_to_an_ascii_terminal(tmp_path):
    """A terminal that cannot show a name's characters gets them escaped, not a traceback."""
    db = tmp_path / "t.db"
    assert run("ingest", "--db", db, KNOWN_CUPTI, "--run", "Prüfung 報告").exit_code == 0
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    r = subprocess.run([sys.executable, "-m", "profkit.cli", "runs", "--db", str(db)], capture_output=True, env=env)
    assert r.returncode == 0 and b"Pr\\xfcfung \\u5831\\u544a" in r.stdout, r


def test_a_huge_range_name_is_refused(tmp_path):
    """One 24 MB NVTX range name: every launch under it would repeat it in the database."""
    p = _export(tmp_path, "name.nsys.sqlite")
    c = sqlite3.connect(p)
    col = "text" if "text" in [r[1] for r in c.execute("PRAGMA table_info(NVTX_EVENTS)")] else None
    if col:
        c.execute("UPDATE NVTX_EVENTS SET text = ? WHERE rowid = (SELECT min(rowid) FROM NVTX_EVENTS "
                  "WHERE eventType = 59)", ("x" * (24 << 20),))
    else:
        c.execute("UPDATE StringIds SET value = ? WHERE id = (SELECT textId FROM NVTX_EVENTS WHERE eventType = 59 "
                  "ORDER BY rowid LIMIT 1)", ("x" * (24 << 20),))
    c.commit()
    c.close()
    _refused(tmp_path, p, "over profkit's limit of 1,048,576 for one name")


def test_ranges_nested_thousands_deep_are_refused():
    """N nested ranges make N^2 path text from N names: the paths stop at 256x the names."""
    from profkit.core.errors import ProfkitError
    from profkit.core.nvtx import range_paths

    deep = [(None, "r" * 100, "push_pop", i, 10**9 - i, 1, 1) for i in range(12_000)]  # 1.2 MB of names
    with pytest.raises(ProfkitError, match="nested thousands deep"):
        range_paths(deep)
    real = [(None, f"step {i}", "push_pop", 10 * i, 10 * i + 5, 1, 1) for i in range(100_000)]  # wide, not deep
    assert len(range_paths(real)) == 100_000


# --- the column path (ingest at scale: exports of 200,000+ rows) ------------------------------
# Real exports that large take the column path (numpy columns, kernel rows copied by the store
# from the ATTACHed file), which has no SQLite progress handler to stop a join: its own bounds
# must refuse the same files. Here the path is forced on small files.

@pytest.fixture
def column_path(monkeypatch):
    from profkit.parsers import nsys_sqlite

    taken = []
    real = nsys_sqlite._parse_bulk
    monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", 0)
    monkeypatch.setattr(nsys_sqlite, "_parse_bulk", lambda *a, **k: taken.append(1) or real(*a, **k))
    return taken


def _dup_calls():
    return ("CREATE TABLE r2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME", "INSERT INTO r2 SELECT * FROM r2",
            "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME", "ALTER TABLE r2 RENAME TO CUPTI_ACTIVITY_KIND_RUNTIME")


def test_column_path_refuses_launch_calls_sharing_ids(tmp_path, column_path):
    p = _export(tmp_path, "dup.nsys.sqlite", *_dup_calls())
    _refused(tmp_path, p, "several launch calls share one kernel's correlation id")
    assert column_path


def test_column_path_refused_while_it_loads_leaves_no_database_and_writes_no_other_file(tmp_path, column_path):
    """The column path finishes its kernels (the launch-call join) in a thread while the store
    writes the ranges, so a flaw found there refuses the file inside its transaction: a
    database the ingest created is removed again, and when several files are named every
    one is proven whole before the first is written."""
    bad = _export(tmp_path, "dup.nsys.sqlite", *_dup_calls())
    db = tmp_path / "new.db"
    r = run("ingest", "--db", db, bad)
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "several launch calls share" in r.output, r.output
    assert column_path and not [f.name for f in tmp_path.iterdir() if f.name.startswith("new.db")]
    good = tmp_path / "good.rank0.nsys.sqlite"  # (another rank: a run takes one timeline per rank)
    shutil.copy(KNOWN_NSYS, good)
    r = run("ingest", "--db", db, good, bad)
    assert r.exit_code == 2 and "several launch calls share" in r.output, r.output
    assert not db.exists()  # (good.nsys.sqlite was not written either)
    assert run("ingest", "--db", db, KNOWN_CUPTI, "--run", "before").exit_code == 0
    before = dump(db)
    r = run("ingest", "--db", db, good, bad)
    assert r.exit_code == 2 and dump(db) == before


def test_column_path_stops_a_join_bomb_at_the_kernel_count(tmp_path, column_path, monkeypatch):
    """2,000 kernels and 2,000 launch calls of one id: a 4 M-row join stops once it has more
    rows than there are kernels (TooManyRows), not after making them all: the join in numpy
    counts its pairs before it makes them."""
    from profkit.parsers import nsys_sqlite

    from profkit.core.dbfile import TooManyRows

    stopped, real = [], nsys_sqlite._matched

    def spy(kernels, calls, most):
        try:
            return real(kernels, calls, most)
        except TooManyRows:
            stopped.append(most)
            raise

    monkeypatch.setattr(nsys_sqlite, "_matched", spy)
    p = _export(tmp_path, "bomb.nsys.sqlite",
                "CREATE TABLE k2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1",
                "CREATE TABLE r2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = "
                "(SELECT correlationId FROM k2)",
                "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL", "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME",
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) "
                "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT k2.* FROM k2, n",
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) "
                "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT r2.* FROM r2, n",
                "DROP TABLE k2", "DROP TABLE r2")
    _refused(tmp_path, p, "several launch calls share one kernel's correlation id")
    assert column_path and stopped == [2000]


def test_column_path_refuses_a_corrupt_page_only_its_launch_call_read_meets(tmp_path, column_path):
    """A page of the runtime table overwritten (found by the fuzzer: a bit flip there): only the
    launch calls' read, in the thread that finishes the kernels while the ranges are written,
    meets it. The file is refused in one line, as the parse refuses a corrupt file, and the
    database is as it was."""
    p = _export(tmp_path, "corrupt.nsys.sqlite")
    c = sqlite3.connect(p)
    try:
        page, size = c.execute("SELECT pageno, (SELECT page_size FROM pragma_page_size) FROM dbstat "
                               "WHERE name = 'CUPTI_ACTIVITY_KIND_RUNTIME' AND pagetype = 'leaf' "
                               "ORDER BY pageno LIMIT 1 OFFSET 5").fetchone()
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no dbstat table to find a page of the runtime table with")
    finally:
        c.close()
    # the page's header (its type byte first) and cell pointers: garbage. (Garbage in the cell
    # pointers alone, as before, failed 2 full runs: SQLite itself read that page without an error
    # in 4 of 40 fresh processes (a full scan of the table, 2026-11-23), the pointers masked into
    # the page and the bytes past its end whatever memory held; a bad type byte it refuses each time.)
    with open(p, "r+b") as f:
        f.seek((page - 1) * size)
        f.write(b"\xff" * 72)
    _refused(tmp_path, p, "unreadable SQLite export (database disk image is malformed)")
    assert column_path


def test_column_path_refuses_a_huge_kernel_name(tmp_path, column_path):
    p = _export(tmp_path, "kname.nsys.sqlite")
    c = sqlite3.connect(p)
    c.execute("UPDATE StringIds SET value = ? WHERE id = (SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL "
              "LIMIT 1)", ("k" * (2 << 20),))
    c.commit()
    c.close()
    _refused(tmp_path, p, "over profkit's limit of 1,048,576 for one name")
    assert column_path


@pytest.mark.parametrize("value", ["text", "blob"])
def test_column_path_refuses_a_huge_name_held_in_the_kernel_table(tmp_path, column_path, value):
    """Found by the fuzzer: a 24 MB text in the kernel table's name column itself (where a string
    id belongs; the row path reads it as the name and refuses it) loaded through the column path,
    which put it through the family patterns (16-27 s). Refused as the row path refuses it."""
    name = "k" * (2 << 20)
    p = _export(tmp_path, "kname.nsys.sqlite")
    c = sqlite3.connect(p)
    c.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = ? WHERE rowid = "
              "(SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)", (name if value == "text" else name.encode(),))
    c.commit()
    c.close()
    _refused(tmp_path, p, "a kernel or range name of 2,097,152 characters")
    assert column_path


def test_column_path_loads_a_long_name_held_in_the_kernel_table(tmp_path, column_path):
    """A name in the kernel table itself under the limit loads, as on the row path."""
    p = _export(tmp_path, "kname.nsys.sqlite")
    c = sqlite3.connect(p)
    c.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = ? WHERE rowid = "
              "(SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)", ("k" * 5000,))
    c.commit()
    c.close()
    db = tmp_path / "t.db"
    assert run("ingest", "--db", db, p).exit_code == 0
    c = sqlite3.connect(db)
    assert c.execute("SELECT count(*) FROM launch_name WHERE name = ?", ("k" * 5000,)).fetchone() == (1,)
    c.close()
    assert column_path


def test_column_path_refuses_a_huge_range_name(tmp_path, column_path):
    p = _export(tmp_path, "rname.nsys.sqlite")
    c = sqlite3.connect(p)
    c.execute("UPDATE NVTX_EVENTS SET text = ? WHERE rowid = (SELECT min(rowid) FROM NVTX_EVENTS "
              "WHERE eventType = 59)", ("x" * (2 << 20),))
    c.commit()
    c.close()
    _refused(tmp_path, p, "over profkit's limit of 1,048,576 for one name")
    assert column_path


@pytest.mark.parametrize("how", ["utf16", "wal", "string_ids_not_rowid"])
def test_exports_the_column_path_cannot_attach_take_the_row_path(tmp_path, column_path, how):
    """Found by the fuzzer: the store ATTACHes a column-path export, which SQLite refuses for a
    UTF-16 file ('attached databases must use the same text encoding'); a WAL-mode export would
    get -wal/-shm files beside it; StringIds ids that are not its rowid may repeat. All load
    through the row path instead, the export unchanged and nothing left beside it."""
    p = tmp_path / "x.nsys.sqlite"
    if how == "utf16":
        src = sqlite3.connect(KNOWN_NSYS)
        c = sqlite3.connect(p)
        c.execute("PRAGMA encoding = 'UTF-16le'")
        for name, sql in src.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall():
            c.execute(sql)
            rows = src.execute(f'SELECT * FROM "{name}"').fetchall()
            if rows:
                c.executemany(f'INSERT INTO "{name}" VALUES ({", ".join("?" * len(rows[0]))})', rows)
        c.commit()
        c.close()
        src.close()
    else:
        shutil.copy(KNOWN_NSYS, p)
        c = sqlite3.connect(p)
        if how == "wal":
            c.execute("PRAGMA journal_mode = WAL")
        else:
            c.executescript("CREATE TABLE s2 (id INTEGER, value TEXT); INSERT INTO s2 SELECT id, value FROM StringIds;"
                            "DROP TABLE StringIds; ALTER TABLE s2 RENAME TO StringIds;")
        c.close()
    (tmp_path / "db").mkdir()
    before, digest = sorted(os.listdir(tmp_path)), hashlib.sha256(p.read_bytes()).hexdigest()
    r = run("ingest", "--db", tmp_path / "db" / "t.db", p)
    assert r.exit_code == 0 and "166 kernels" in r.output, r.output
    assert not column_path  # the row path read it
    assert sorted(os.listdir(tmp_path)) == before and hashlib.sha256(p.read_bytes()).hexdigest() == digest


@pytest.mark.parametrize("new_db", [True, False], ids=["new database", "database with reports"])
def test_column_path_refuses_a_file_replaced_while_it_loads(tmp_path, column_path, monkeypatch, new_db):
    """An exporter re-run or a sync tool replaces the export between the parse and the store's
    copy of its kernel rows (the column path ATTACHes the file again): the load would mix both
    files under the first one's hash. It is refused in one line, nothing written."""
    from profkit.store import write

    slow = PROFILES / "ddp-2gpu-slow"
    p = tmp_path / "ddp.nsys.sqlite"
    p.write_bytes(lzma.decompress((slow / "ddp-2gpu-slow.rank0.nsys.sqlite.xz").read_bytes()))
    other = tmp_path / "other.sqlite"  # the exporter's next run: other durations, the same names
    shutil.copy(p, other)
    c = sqlite3.connect(other)
    c.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = end + 1000")
    c.commit()
    c.close()
    db = tmp_path / "r.db"
    if not new_db:
        assert run("ingest", "--db", db, KNOWN_CUPTI, "--run", "before").exit_code == 0
    before = dump(db) if not new_db else None
    real = write.add_report

    def replaced_meanwhile(*a, **k):
        os.replace(other, p)
        return real(*a, **k)

    monkeypatch.setattr(write, "add_report", replaced_meanwhile)
    r = run("ingest", "--db", db, p)
    assert column_path
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "changed while it was loading" in r.output, r.output
    assert (not db.exists()) if new_db else dump(db) == before


# --- impossible values: refused at ingest, one rule in every parser -----------------------------

def _csv_with(tmp_path, metric, row, value):
    """pages.raw.csv (a real ncu raw page) with one value replaced."""
    import csv

    rows = list(csv.reader((DATA / "ncu-pages" / "pages.raw.csv").open(newline="")))
    rows[2 + row][rows[0].index(metric)] = value
    p = tmp_path / "impossible.raw.csv"
    with p.open("w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)
    return p


@pytest.mark.parametrize("metric,value,words", [
    ("gpu__time_duration.sum", "-31.616", "gpu__time_duration.sum is negative (-31.616 us)"),
    ("gpu__time_duration.sum", "1e400", "gpu__time_duration.sum is not a finite number (1e400 us)"),
    ("dram__bytes_read.sum", "-0.008960", "dram__bytes_read.sum is negative (-0.008960 Mbyte)"),
])
def test_ncu_csv_impossible_values_are_refused(tmp_path, metric, value, words):
    p = _csv_with(tmp_path, metric, 5, value)
    _refused(tmp_path, p, words)
    assert "launch ID 5:" in run("ingest", "--db", tmp_path / "x.db", p).output


@pytest.mark.parametrize("columns", [False, True], ids=["row path", "column path"])
def test_nsys_kernel_ending_before_it_starts_is_refused(tmp_path, monkeypatch, columns):
    from profkit.parsers import nsys_sqlite

    if columns:
        monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", 0)
    p = _export(tmp_path, "backwards.nsys.sqlite",
                "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = start - 5 WHERE rowid = 3")
    _refused(tmp_path, p, "CUPTI_ACTIVITY_KIND_KERNEL: 1 kernel ends before it starts")


def test_cupti_kernel_ending_before_it_starts_is_refused(tmp_path):
    lines = KNOWN_CUPTI.read_text().splitlines(keepends=True)
    i = next(n for n, line in enumerate(lines) if '"type": "kernel"' in line)
    k = json.loads(lines[i])
    k["end"] = k["start"] - 5
    lines[i] = json.dumps(k) + "\n"
    p = tmp_path / "backwards.cupti.jsonl"
    p.write_text("".join(lines))
    _refused(tmp_path, p, f"line {i + 1}: kernel record: it ends before it starts")


@pytest.mark.parametrize("columns", [False, True], ids=["row path", "column path"])
def test_a_blob_kernel_name_is_stored_as_text(tmp_path, monkeypatch, columns):
    """A kernel name nsys would write as TEXT held as a BLOB: both paths store the same text,
    so classify, ranks and export read a name, not bytes."""
    from profkit.parsers import nsys_sqlite

    if columns:
        monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", 0)
    p = _export(tmp_path, "blob.nsys.sqlite",
                "UPDATE StringIds SET value = CAST(value AS BLOB) WHERE id ="
                " (SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = 3)",
                "UPDATE StringIds SET value = CAST(value AS BLOB) WHERE id ="
                " (SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = 3)")
    db = tmp_path / "b.db"
    assert run("ingest", "--db", db, p).exit_code == 0
    c = sqlite3.connect(db)
    assert c.execute("SELECT count(*) FROM kernels WHERE typeof(kernel_name) != 'text'"
                     " OR typeof(short_name) != 'text'").fetchone() == (0,)
    assert c.execute("SELECT count(*) FROM kernels").fetchone() == (166,)
    assert run("export", "--db", db, "--parquet", tmp_path / "k.parquet").exit_code == 0


# --- two launch calls sharing a kernel's correlation id: refused by every parser ---------------

def test_nsys_launch_calls_sharing_a_correlation_id_are_refused(tmp_path):
    _refused(tmp_path, _export(tmp_path, "dup.nsys.sqlite", *_dup_calls()), "several launch calls share")


def test_cupti_launch_calls_sharing_a_correlation_id_are_refused(tmp_path):
    lines = KNOWN_CUPTI.read_text().splitlines(keepends=True)
    kernel = json.loads(next(line for line in lines if '"type": "kernel"' in line))
    i = next(n for n, line in enumerate(lines)
             if '"type": "runtime"' in line and json.loads(line).get("correlation_id") == kernel["correlation_id"])
    other = json.loads(lines[i])
    other["start"] += 10_000
    other["end"] += 10_000
    p = tmp_path / "dup.cupti.jsonl"
    p.write_text("".join(lines[:i + 1] + [json.dumps(other) + "\n"] + lines[i + 1:]))
    _refused(tmp_path, p, f"line {i + 2}: runtime record: a second launch call with correlation id "
                          f"{kernel['correlation_id']}")


def test_kineto_launch_calls_sharing_a_correlation_id_are_refused(tmp_path):
    import gzip

    d = json.load(gzip.open(DATA / "kineto-h100" / "tf.kineto.json.gz"))
    ev = d["traceEvents"]
    i = next(n for n, e in enumerate(ev) if e.get("name") == "cudaLaunchKernel")
    ev.insert(i + 1, {**ev[i], "ts": ev[i]["ts"] + 100})
    p = tmp_path / "dup.json"
    p.write_text(json.dumps(d))
    _refused(tmp_path, p, f"a second launch call with correlation id {ev[i]['args']['correlation']}")
