"""Scratch files (issue 17, item 4): a decompressed .ncu-rep.xz lives in a private folder under
$TMPDIR/profkit-<uid>/, never beside a report or a database, and goes on every exit: normal,
error, Ctrl-C, SIGTERM; a kill -9 leaves it, and the next profkit command removes it (the
issue's kill left up to 1.8 GB in /tmp/profkit-ncu-*).
"""
import os
import signal
import subprocess
import sys
import time

import pytest
from profdata import DATA

from profkit.core import tempfiles

WS = DATA / "field-h100" / "ws_nonvtx.ncu-rep.xz"  # unpacks to 53 MB


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def _terminal_signals():
    # the child starts with SIGINT and SIGHUP at their defaults, as from a terminal: run in the
    # background (`cmd &` ignores SIGINT, nohup SIGHUP, which profkit respects) those cases
    # would test nothing
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _ingest(tmp_path, *extra, env=None):
    return subprocess.Popen([sys.executable, "-m", "profkit.cli", "ingest", "--db", str(tmp_path / "t.db"), *extra],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_terminal_signals)


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """TMPDIR of this test: profkit's scratch root is scratch/profkit-<uid>."""
    d = tmp_path / "tmpdir"
    d.mkdir()
    monkeypatch.setenv("TMPDIR", str(d))
    monkeypatch.setattr("tempfile.tempdir", None)
    return d


def _wait_for_unpacking(root, proc, timeout=120):
    """Until the child is writing the unpacked report in its scratch folder."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout and proc.poll() is None:
        reports = list(root.glob("profkit-*/ncu-*/report.ncu-rep"))
        if reports and reports[0].stat().st_size > 1 << 20:
            return reports[0].parent
        time.sleep(0.005)
    raise AssertionError(f"no unpacking seen (exit {proc.poll()})")


def test_kill_9_leftovers_are_removed_by_the_next_command(scratch, tmp_path):
    proc = _ingest(tmp_path, WS, env=dict(os.environ))
    folder = _wait_for_unpacking(scratch, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert folder.exists()  # what kill -9 leaves
    r = subprocess.run([sys.executable, "-m", "profkit.cli", "runs", "--db", str(tmp_path / "none.db")],
                       capture_output=True, text=True, env=dict(os.environ))
    assert r.returncode == 1 and "no such database" in r.stderr
    assert not folder.exists() and _files(scratch / f"profkit-{os.getuid()}") == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_remove_the_scratch_folder(sig, scratch, tmp_path):
    proc = _ingest(tmp_path, WS, env=dict(os.environ))
    folder = _wait_for_unpacking(scratch, proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "Traceback" not in err, err
    assert not folder.exists() and _files(scratch / f"profkit-{os.getuid()}") == []
    assert not (tmp_path / "t.db").exists()  # nothing was written: the file never loaded


def test_normal_and_failed_ingests_leave_nothing(scratch, tmp_path):
    cut = tmp_path / "cut.ncu-rep.xz"
    cut.write_bytes(WS.read_bytes()[:-100])
    for f in (WS, cut):
        proc = _ingest(tmp_path, f, env=dict(os.environ))
        proc.communicate(timeout=300)
    assert _files(scratch / f"profkit-{os.getuid()}") == []


def test_a_live_process_keeps_its_folder(scratch):
    """Another profkit's folder in use is never taken: the lock says it is alive."""
    with tempfiles.workdir("ncu") as mine:
        child = subprocess.run([sys.executable, "-c", "from profkit.core import tempfiles; print(tempfiles.clean_stale())"],
                               capture_output=True, text=True, env=dict(os.environ))
        assert child.stdout.strip() == "[]" and mine.exists()
    assert not mine.exists()


def test_a_folder_being_made_is_never_taken(scratch, monkeypatch):
    """Another profkit cleaning up at the moment this one locks its new folder (parallel ingests
    start together) must not take the folder: its lock file becomes visible only once locked.
    Before, the lock file was created and then locked, and a clean_stale in that window found it
    unlocked and removed the folder (CI: FileNotFoundError in a parallel ingest)."""
    real = tempfiles.fcntl.flock
    raced = []

    def flock(fd, op):
        if op == tempfiles.fcntl.LOCK_EX and not raced:  # the creator, about to lock its new folder
            raced.append(tempfiles.clean_stale())  # what another process would see right now
        return real(fd, op)

    monkeypatch.setattr(tempfiles.fcntl, "flock", flock)
    with tempfiles.workdir("ncu") as mine:
        assert raced == [[]] and mine.exists() and (mine / tempfiles.LOCK).exists()
        child = subprocess.run([sys.executable, "-c", "from profkit.core import tempfiles; print(tempfiles.clean_stale())"],
                               capture_output=True, text=True, env=dict(os.environ))
        assert child.stdout.strip() == "[]" and mine.exists()  # locked, as before
    assert not mine.exists()


def test_scratch_root_of_someone_else_is_refused(scratch):
    """A shared /tmp: a profkit-<uid> folder made by another user (or a symlink) is not used."""
    from profkit.core.errors import ProfkitError

    target = scratch / "elsewhere"
    target.mkdir()
    (scratch / f"profkit-{os.getuid()}").symlink_to(target)
    with pytest.raises(ProfkitError, match="not a folder of this user"):
        with tempfiles.workdir("ncu"):
            pass


@pytest.mark.parametrize("column_path", [True, False])
def test_a_large_nsys_rep_keeps_its_export_until_the_store_has_read_it(scratch, tmp_path, monkeypatch, column_path):
    """A .nsys-rep is exported to SQLite in a scratch folder. Exports of 200,000+ rows take the
    column path, whose kernel rows the store copies from the export itself: the folder went
    before the store read it ('unable to open database' traceback, found after the rebase on the
    ingest-at-scale work). It now stays until the file is written, and goes then."""
    import shutil
    from pathlib import Path

    from profdata import KNOWN_NSYS
    from profkit.parsers import nsys_rep, nsys_sqlite

    from profkit.store.ingest import ingest

    if column_path:
        monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", 0)  # (as a report of 200,000+ rows)
    seen = []

    def export(path, out, nsys=None):  # what `nsys export` writes (no nsys here)
        seen.append(out.parent)
        return Path(shutil.copy(KNOWN_NSYS, out))

    monkeypatch.setattr(nsys_rep, "export", export)
    rep = tmp_path / "big.nsys-rep"
    rep.write_bytes(b"(exported by the fake nsys)")
    got = ingest(str(tmp_path / "t.db"), [rep])
    assert got[0].kernels == 166 and seen and seen[0].parent == scratch / f"profkit-{os.getuid()}"
    assert _files(scratch / f"profkit-{os.getuid()}") == []
