"""Read commands never write (issue 17, item 5): they open the database read-only, never create
one, refuse a file that is not a profkit database in one line, and leave no -wal/-shm files;
they work in a folder the user can read but not write. Writers (ingest, classify, advise) never
turn someone else's SQLite file into a profkit database.

The unwritable folder: tests run as root, who writes anywhere, so those commands run under
setpriv without CAP_DAC_OVERRIDE (root then obeys the permission bits).
"""
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner
from profdata import KNOWN_CUPTI, KNOWN_NSYS, PROFILES

from profkit.cli import cli

READ = [["runs"], ["kernels"], ["timeline"], ["classify"], ["advise"], ["ranks"], ["compare", "a", "b"],
        ["roofline", "-o", "{tmp}/r.html"], ["export", "--parquet", "{tmp}/pq"], ["sql", "SELECT 1"]]


def run(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in r.output, r.output
    return r


def _md5(p):
    return hashlib.md5(open(p, "rb").read()).hexdigest()


def _beside(p):
    return sorted(x.name for x in p.parent.iterdir() if x.name != p.name and x.name.startswith(p.name))


def _args(cmd, tmp_path):
    return [a.format(tmp=tmp_path) for a in cmd]


@pytest.mark.parametrize("cmd", READ, ids=lambda c: c[0])
def test_a_report_is_never_turned_into_a_database(cmd, tmp_path):
    """The issue: `profkit runs --db some.nsys.sqlite` added tables, turned WAL on, changed bytes."""
    export = tmp_path / "some.nsys.sqlite"
    shutil.copy(KNOWN_NSYS, export)
    before = _md5(export)
    r = run(*_args(cmd, tmp_path), "--db", export)
    assert r.exit_code != 0 and r.output.count("\n") == 1, r.output
    assert r.output == (f"profkit: {export} is a report (Nsight Systems SQLite export), not a profkit database: "
                        f"load it with profkit ingest {export}\n")
    assert _md5(export) == before and _beside(export) == []


@pytest.mark.parametrize("cmd", READ, ids=lambda c: c[0])
def test_a_missing_database_is_one_line_and_not_created(cmd, tmp_path):
    db = tmp_path / "missing.db"
    r = run(*_args(cmd, tmp_path), "--db", db)
    assert r.exit_code != 0 and r.output.startswith(f"profkit: {db}: no such database") and r.output.count("\n") == 1
    assert not db.exists() and _beside(db) == []


def test_other_files_are_named_not_opened(tmp_path):
    ncu = tmp_path / "x.ncu-rep.xz"
    shutil.copy(PROFILES / "known" / "known.ncu-rep.xz", ncu)
    assert "is a report (Nsight Compute report .ncu-rep[.xz])" in run("runs", "--db", ncu).output
    other = tmp_path / "other.sqlite"
    c = sqlite3.connect(other)
    c.execute("CREATE TABLE notes (a)")
    c.commit()
    c.close()
    before = _md5(other)
    for cmd in (["runs"], ["sql", "SELECT 1"], ["classify"], ["ingest", KNOWN_CUPTI]):
        r = run(*cmd, "--db", other)
        assert r.exit_code != 0 and "an SQLite database, but not a profkit one" in r.output, (cmd, r.output)
    assert _md5(other) == before and _beside(other) == []
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    assert "is not a profkit database (not an SQLite file)" in run("runs", "--db", text).output
    assert text.read_text() == "hello\n"


def test_ingest_into_a_report_is_refused(tmp_path):
    export = tmp_path / "some.nsys.sqlite"
    shutil.copy(KNOWN_NSYS, export)
    before = _md5(export)
    r = run("ingest", "--db", export, KNOWN_CUPTI)
    assert r.exit_code != 0 and "not a profkit database" in r.output
    assert _md5(export) == before and _beside(export) == []


@pytest.fixture
def loaded(tmp_path):
    db = tmp_path / "p.db"
    assert run("ingest", "--db", db, *sorted((PROFILES / RMS).glob(f"{RMS}.*"))).exit_code == 0
    return db


RMS = "rmsnorm-eager-vs-triton-h200"


def _kernels(db) -> str:
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    n = c.execute("SELECT count(*) FROM kernels").fetchone()[0]
    c.close()
    return f"n\n{n}\n"


def test_read_commands_change_no_byte_and_leave_no_sidecar_files(loaded, tmp_path):
    """After ingest the database is one file (a rollback journal at rest): readers open it
    mode=ro and create nothing (the issue: sql left -wal and -shm behind)."""
    assert _beside(loaded) == []
    before = _md5(loaded)
    for cmd in (["runs"], ["kernels"], ["timeline"], ["ranks"], ["compare", f"{RMS}:eager", f"{RMS}:triton"],
                ["roofline", "-o", tmp_path / "r.html"], ["export", "--parquet", tmp_path / "pq"],
                ["sql", "SELECT count(*) FROM kernels"], ["sql", "--json", "SELECT * FROM runs"]):
        r = run(*cmd, "--db", loaded)
        assert r.exit_code == 0, (cmd, r.output)
        assert _md5(loaded) == before and _beside(loaded) == [], cmd


def test_a_database_left_in_wal_mode_is_settled_once(loaded):
    """A database an older profkit left in WAL mode: the first read command (where it may
    write) settles it to a rollback journal, so no reader leaves files behind again."""
    c = sqlite3.connect(loaded)
    c.execute("PRAGMA journal_mode = WAL")
    c.close()
    assert open(loaded, "rb").read(20)[18:20] == b"\x02\x02"
    assert run("sql", "--db", loaded, "SELECT 1").exit_code == 0
    assert open(loaded, "rb").read(20)[18:20] == b"\x01\x01" and _beside(loaded) == []


# --- a folder the user can read but not write ----------------------------------------------------------

def _as_user(args, **kw):
    """Run profkit as someone bound by file permissions (root without CAP_DAC_OVERRIDE)."""
    cmd = [sys.executable, "-m", "profkit.cli", *map(str, args)]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if not setpriv:
            pytest.skip("root and no setpriv: cannot drop the right to write anywhere")
        drop = "-dac_override,-dac_read_search"
        cmd = [setpriv, "--bounding-set", drop, "--inh-caps", drop, *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


@pytest.fixture
def locked(tmp_path, loaded):
    folder = tmp_path / "readonly"
    folder.mkdir()
    db = folder / "p.db"
    shutil.copy(loaded, db)
    folder.chmod(0o555)
    yield db
    folder.chmod(0o755)


def test_sql_and_summaries_work_in_a_folder_without_write_access(locked):
    want = _kernels(locked)
    """The issue: sql failed there with 'attempt to write a readonly database'."""
    assert _as_user(["sql", "--db", locked, "SELECT 1"]).returncode == 0  # (the fixture check: can read)
    probe = _as_user(["ingest", "--db", locked.parent / "new.db", KNOWN_CUPTI])
    assert probe.returncode != 0 and not (locked.parent / "new.db").exists()  # really cannot write there
    for cmd in (["sql", "--csv", "SELECT count(*) AS n FROM kernels"], ["runs"], ["kernels"], ["timeline"]):
        r = _as_user([*cmd, "--db", locked])
        assert r.returncode == 0 and "Traceback" not in r.stderr, (cmd, r.stderr)
    assert _as_user(["sql", "--csv", "SELECT count(*) AS n FROM kernels", "--db", locked]).stdout == want
    assert sorted(p.name for p in locked.parent.iterdir()) == ["p.db"]


def test_wal_database_in_a_folder_without_write_access(locked):
    """Left in WAL mode by an older profkit, no -wal beside it: nobody can be writing it
    (a writer would need to create the -wal there), so it is read as immutable, no -shm needed."""
    want = _kernels(locked)
    locked.parent.chmod(0o755)
    c = sqlite3.connect(locked)
    c.execute("PRAGMA journal_mode = WAL")
    c.close()
    locked.parent.chmod(0o555)
    r = _as_user(["sql", "--csv", "SELECT count(*) AS n FROM kernels", "--db", locked])
    assert r.returncode == 0 and r.stdout == want, r.stderr
    assert sorted(p.name for p in locked.parent.iterdir()) == ["p.db"]


def test_unreadable_files_are_one_line(tmp_path, loaded):
    """The issue: a chmod 000 file got click's three-line usage error."""
    secret = tmp_path / "secret.nsys.sqlite"
    shutil.copy(KNOWN_NSYS, secret)
    secret.chmod(0)
    db = tmp_path / "x.db"
    for args in (["ingest", "--db", db, secret], ["analyse", "--db", db, "--peaks", secret, PROFILES],
                 ["roofline", "--db", loaded, "--peaks", secret, "-o", tmp_path / "r.html"]):
        r = _as_user(args)
        lines = r.stderr.strip().splitlines()
        assert r.returncode != 0 and len(lines) == 1 and lines[0].startswith("profkit: "), (args, r.stderr)
        assert "Permission denied" in lines[0]
    profiles = tmp_path / "profiles" / "run1"
    profiles.mkdir(parents=True)
    shutil.copy(KNOWN_NSYS, profiles / "run1.nsys.sqlite")
    (profiles / "run1.nsys.sqlite").chmod(0)
    r = _as_user(["analyse", "--db", tmp_path / "a.db", "--html", tmp_path / "a.html", profiles.parent])
    assert r.returncode != 0 and r.stderr.strip().count("\n") == 0 and "cannot read it" in r.stderr, r.stderr
    loaded.chmod(0)
    r = _as_user(["runs", "--db", loaded])
    assert r.returncode != 0 and r.stderr.strip().count("\n") == 0 and "cannot read it" in r.stderr, r.stderr


def test_an_ingest_waits_for_a_running_query(loaded):
    """At rest the database is in rollback-journal mode; an ingest that starts while a query is
    inside a statement waits for it to end (then switches to WAL), it does not fail."""
    q = subprocess.Popen([sys.executable, "-m", "profkit.cli", "sql", "--db", str(loaded), "--timeout", "6",
                          "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import time

    time.sleep(3)  # the query is running
    assert q.poll() is None
    r = subprocess.run([sys.executable, "-m", "profkit.cli", "ingest", "--db", str(loaded), str(KNOWN_CUPTI)],
                       capture_output=True, text=True, timeout=300)
    q.communicate(timeout=60)
    assert q.returncode == 6 and r.returncode == 0 and "166 kernels" in r.stdout, (r.stdout, r.stderr)
    assert _beside(loaded) == []
