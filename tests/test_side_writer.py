"""The bulk load's second writer (profkit/store/side_writer.py): while the store's connection writes
the first kernels of an export, a thread builds the last share into an in-memory database the
store then copies in. On a real export: the rows equal the row path's (test_compact_launch),
an interrupt or an error stops it and loads nothing, and where SQLite cannot share an
in-memory database the store writes the share itself."""
import sqlite3
import threading
import time

import pytest
from profdata import KNOWN_NSYS
from profkit.parsers import nsys_sqlite

from profkit.core import rows as rows_module
from profkit.store import side_writer
from profkit.store.ingest import ingest


@pytest.fixture
def forced(monkeypatch):
    """The column path and a side writer for the small real export."""
    monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", 0)
    monkeypatch.setattr(rows_module, "SIDE_MIN_KERNELS", 0)
    started = []
    start = side_writer.SideWriter.start.__func__
    monkeypatch.setattr(side_writer.SideWriter, "start",
                        classmethod(lambda cls, *a, **k: started.append(start(cls, *a, **k)) or started[-1]))
    return started


def _side_threads():
    return [t for t in threading.enumerate() if t.name == "profkit-side-writer"]


def test_an_interrupt_while_the_side_writer_builds_stops_it_and_loads_nothing(tmp_path, forced, monkeypatch):
    db = tmp_path / "t.db"
    interrupted = threading.Event()
    run = side_writer.SideWriter._run

    def slow(self, *a):  # still building when the caller is interrupted, for half a second unless stopped
        interrupted.wait(5)
        for _ in range(50):
            if self._stop:
                break
            time.sleep(0.01)
        run(self, *a)
    monkeypatch.setattr(side_writer.SideWriter, "_run", slow)

    def progress(path, phase, done, total):
        if phase == "writing kernels" and forced:  # the side writer has started
            interrupted.set()
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ingest(str(db), [KNOWN_NSYS], run="r", on_progress=progress)
    assert forced and forced[0] is not None, "no side writer was started"
    assert _side_threads() == []
    assert not db.exists(), "a database the interrupted ingest created was left behind"


def test_a_side_writers_error_refuses_the_file_whole(tmp_path, forced, monkeypatch):
    db = tmp_path / "t.db"
    ingest(str(db), [KNOWN_NSYS], run="first")  # a database that already holds a run
    before = sqlite3.connect(db).execute("SELECT count(*) FROM launch").fetchone()[0]
    copy = tmp_path / "other.nsys.sqlite"
    copy.write_bytes(KNOWN_NSYS.read_bytes())
    con = sqlite3.connect(copy)  # other bytes, the same export
    con.execute("CREATE TABLE profkit_test_marker (x)")
    con.commit()
    con.close()

    def broken(self, *a):
        self._error = sqlite3.OperationalError("disk I/O error")
    monkeypatch.setattr(side_writer.SideWriter, "_run", broken)
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        ingest(str(db), [copy], run="second")
    c = sqlite3.connect(db)
    assert c.execute("SELECT count(*) FROM launch").fetchone()[0] == before
    assert c.execute("SELECT run FROM report_file").fetchall() == [("first",)]
    assert _side_threads() == []


def test_without_shared_memory_databases_the_store_writes_the_share_itself(tmp_path, forced, monkeypatch):
    monkeypatch.setattr(side_writer, "_SIDE_URI", "file:/profkit-side-{}?vfs=no-such-vfs")
    ingest(str(tmp_path / "t.db"), [KNOWN_NSYS], run="r")
    assert forced == [None], "the side writer did not decline"
    monkeypatch.setattr(rows_module, "SIDE_MIN_KERNELS", 10**18)
    ingest(str(tmp_path / "plain.db"), [KNOWN_NSYS], run="r")
    q = "SELECT * FROM launch ORDER BY id"
    assert sqlite3.connect(tmp_path / "t.db").execute(q).fetchall() == \
        sqlite3.connect(tmp_path / "plain.db").execute(q).fetchall()
