"""SIGKILL an ingest of a large real-derived file at many moments: the database must open,
pass integrity_check, hold no partial run, and take the same file afterwards.

The large file is the real H200 export grown by replication (benchmarks/ingest.py's grow:
kernels, their launch calls and NVTX ranges copied with shifted times), ~33 k kernels and
~35 k ranges, so one ingest spends a second or two inside its write transaction. Kills come
at random delays (startup, parse, write) and, to be sure some land mid-transaction, the
moment the write-ahead log starts to grow.
"""
import importlib.util
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from dbcheck import dump, problems, whole_runs
from profdata import KNOWN_CUPTI, ROOT

REPLICAS = 200  # x 166 kernels of profiles/known


def _grow():
    spec = importlib.util.spec_from_file_location("bench_ingest", ROOT / "benchmarks" / "ingest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.grow


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "grown.nsys.sqlite"
    counts = _grow()(path, REPLICAS)
    assert counts["CUPTI_ACTIVITY_KIND_KERNEL"] == 166 * REPLICAS
    return path


def _terminal_signals():
    """In the child: SIGINT and SIGHUP at their defaults, as from a terminal. Run in the
    background (a non-interactive shell's `cmd &`, nohup) the test would hand them on ignored,
    and an ingest that ignores Ctrl-C, as it should there, tests nothing."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _ingest(db, path, quiet=False) -> subprocess.Popen:
    out = subprocess.DEVNULL if quiet else subprocess.PIPE
    return subprocess.Popen([sys.executable, "-m", "profkit.cli", "ingest", "--db", str(db), str(path), "--run", "big"],
                            stdout=out, stderr=out, text=True, preexec_fn=_terminal_signals)


def _wal(db) -> int:
    try:
        return os.path.getsize(f"{db}-wal")
    except OSError:
        return 0


def _state(db) -> tuple[str, dict]:
    """Open as a user would, check, and return (dump, whole-run state)."""
    from profkit.store.store import Store

    Store(db).close()  # profkit opens it (and finds its schema complete)
    c = sqlite3.connect(db)
    try:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert c.execute("PRAGMA foreign_key_check").fetchall() == []
        state = whole_runs(c)
    finally:
        c.close()
    assert problems(state) == {}, state
    return dump(db), state


def _kill_at(db, big, kind: str, value: float) -> float:
    """Start an ingest, SIGKILL it after `value` seconds ("delay") or once the WAL has grown by
    `value` bytes ("wal"); returns the seconds it ran."""
    wal0 = _wal(db)
    proc = _ingest(db, big, quiet=True)
    t0 = time.monotonic()
    while proc.poll() is None:
        if (kind == "delay" and time.monotonic() - t0 >= value) or (kind == "wal" and _wal(db) - wal0 >= value):
            break
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return time.monotonic() - t0


def test_sigkill_during_ingest_leaves_no_partial_run(big, db):
    from profkit.store.ingest import ingest

    ingest(db, [KNOWN_CUPTI], run="before")  # the database already holds a run
    before, state0 = _state(db)
    whole = dict(state0, files=state0["files"] + 1, runs=state0["runs"] + 1,
                 launches=state0["launches"] + 166 * REPLICAS)
    rng = random.Random(20261122)
    # the first kill finds when the write transaction starts (t_w); the delays are spread
    # around it: startup and imports, parsing, writing
    t_w = _kill_at(db, big, "wal", 64 << 10)
    # the WAL kills at fractions of the log a whole load writes (compact rows write less: schema 10),
    # below the pages its COMMIT writes at once (the last ~2 MB of page cache)
    wal = _whole_wal(db, big)
    plan = [("wal", int(0.1 * wal)), ("delay", rng.uniform(0.05, 0.5) * t_w), ("delay", rng.uniform(0.5, 1.0) * t_w),
            ("wal", int(0.3 * wal)), ("wal", int(0.5 * wal)), ("delay", rng.uniform(1.0, 1.3) * t_w)]
    outcomes = [("wal", _outcome(db, before, whole))]
    for kind, value in plan:
        _kill_at(db, big, kind, value)
        outcomes.append((kind, _outcome(db, before, whole)))
    print(f"t_w={t_w:.2f}s", outcomes)
    assert len(outcomes) == 7
    # kills inside the write transaction really happened (the WAL had grown, nothing landed)
    assert [o for o in outcomes if o[0] == "wal"] == [("wal", "nothing")] * 4, outcomes

    # a later ingest of the same file succeeds (or finds it already whole)
    proc = _ingest(db, big)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert _outcome(db, before, whole) == "whole"


def _whole_wal(db, big) -> int:
    """The most the write-ahead log grows in a whole load of `big` into a copy of `db`."""
    copy = f"{db}.copy"
    shutil.copy(db, copy)
    try:
        wal0, most = _wal(copy), 0
        proc = _ingest(copy, big, quiet=True)
        while proc.poll() is None:
            most = max(most, _wal(copy) - wal0)
            time.sleep(0.002)
        assert proc.returncode == 0 and most > 1 << 20, most
        return most
    finally:
        for f in (copy, copy + "-wal", copy + "-shm"):
            if os.path.exists(f):
                os.remove(f)


def _outcome(db, before: str, whole: dict) -> str:
    """'nothing' (database as before) or 'whole' (the file wholly loaded, nothing else): a
    kill after COMMIT is fine. Anything else fails."""
    after, state = _state(db)
    if after == before:
        return "nothing"
    assert {k: state[k] for k in whole} == whole
    return "whole"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_inside_the_write_transaction(big, db, sig):
    """A polite stop mid-write: the transaction rolls back, one line, exit 130 / 143, nothing landed."""
    from profkit.store.ingest import ingest

    ingest(db, [KNOWN_CUPTI], run="before")
    before, _ = _state(db)
    wal0 = _wal(db)
    proc = _ingest(db, big)
    while proc.poll() is None and _wal(db) - wal0 < (1 << 20):
        time.sleep(0.002)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig and "Traceback" not in err, err
    assert _state(db)[0] == before


@pytest.mark.parametrize("side", [False, True], ids=["one writer", "with the side writer"])
def test_sigkill_inside_a_bulk_load_in_rollback_journal_mode(big, db, side):
    """A column-path load switches the database to a rollback journal while no one else has it
    open (pages appended past the end are written once, not journalled). Killed inside its
    write transaction, while that journal exists (and, with the side writer, while it builds
    the last half of the launches in memory), the database opens as it was: the hot journal
    rolls the partial write back. The same file then loads whole."""
    from profkit.store.ingest import ingest

    ingest(db, [KNOWN_CUPTI], run="before")
    before, state0 = _state(db)
    # the grown file is under the column path's row threshold (and the side writer's):
    # lowered in the child, which says when it starts writing launches (opening the database
    # makes a -journal for a moment too: only one seen after that mark is the load's)
    code = ("import sys; from pathlib import Path; from profkit.parsers import nsys_sqlite; from profkit.core import rows; "
            f"nsys_sqlite.BULK_MIN_ROWS = 0; rows.SIDE_MIN_KERNELS = {0 if side else 10**18}; "
            "from profkit.store.ingest import ingest\n"
            "def tell(f, phase, done, total):\n"
            "    if phase == 'writing kernels' and not done: print('writing', flush=True)\n"
            "ingest(sys.argv[1], [Path(sys.argv[2])], run='big', on_progress=tell)")
    journal = f"{db}-journal"
    proc = subprocess.Popen([sys.executable, "-c", code, str(db), str(big)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    saw = False
    while proc.poll() is None and not saw:
        saw = os.path.exists(journal)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert saw, "no rollback journal while the launches were written: the bulk load stayed in WAL mode"
    assert os.path.exists(journal)  # hot: the kill came inside the transaction
    assert _state(db)[0] == before
    proc = subprocess.run([sys.executable, "-c", code, str(db), str(big)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-500:]
    assert _state(db)[1]["launches"] == state0["launches"] + 166 * REPLICAS
