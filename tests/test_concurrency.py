"""Several processes ingest different real reports into one new database at once; a reader
polls through `profkit sql`'s read-only connection meanwhile.

All ingests must land (no "database is locked"), and every snapshot the reader sees must hold
whole runs only: each file's launch/range/counter rows match its report_file counts, no
orphan rows, no run without its files.
"""
import json
import re
import sqlite3
import subprocess
import sys
import time

from dbcheck import PROBLEMS, WHOLE_RUNS, whole_runs
from profdata import FIELD_H100, KNOWN_CUPTI, KNOWN_NSYS, PROFILES

# one writer per shipped run with both an nsys export and an ncu report, and one with a CUPTI trace
RUNS = ("known", "rmsnorm-eager-vs-triton-h200", "cuda-vs-triton-h200", "cuda-vector-ops", "hf-llama-decode")
WRITERS = [[PROFILES / r / f"{r}.nsys.sqlite", PROFILES / r / f"{r}.ncu-rep.xz"] for r in RUNS] + [[KNOWN_CUPTI]]

READER = r"""
import json, sqlite3, sys, time
from pathlib import Path
from profkit.store.readonly import open_readonly
db, stop, query = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
problems = sys.argv[4].split(",")
polls, bad, errors, seen, last = 0, [], [], set(), None
while True:
    done = stop.exists()  # one last poll after the writers finish
    try:
        conn = open_readonly(db)
        try:
            cur = conn.execute(query)
            state = dict(zip([d[0] for d in cur.description], cur.fetchone()))
        finally:
            conn.close()
        polls += 1
        seen.add((state["runs"], state["files"]))
        if any(state[k] for k in problems):
            bad.append(state)
        if last and (state["files"] < last["files"] or state["launches"] < last["launches"]):
            bad.append({"went_back": [last, state]})
        last = state
    except Exception as e:  # before the first writer created the schema there is nothing to read
        if last is not None or not any(w in str(e) for w in ("no such database", "no such table", "empty database")):
            errors.append(f"{type(e).__name__}: {e}")
    if done:
        break
    time.sleep(0.005)
print(json.dumps({"polls": polls, "bad": bad[:5], "errors": errors[:5], "seen": sorted(seen), "last": last}))
"""


def test_parallel_ingests_all_land_and_readers_see_whole_runs(tmp_path):
    assert len(WRITERS) >= 3
    db, stop = tmp_path / "shared.db", tmp_path / "stop"
    reader = subprocess.Popen([sys.executable, "-c", READER, str(db), str(stop), WHOLE_RUNS, ",".join(PROBLEMS)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # all writers start on a fresh database: they race on creating it and on every write
    go = time.time() + 2.0
    start = f"import time, sys; time.sleep(max(0, {go} - time.time())); from profkit.cli import cli; cli()"
    writers = [subprocess.Popen([sys.executable, "-c", start, "ingest", "--db", str(db), *map(str, files),
                                 "--run", f"w{i}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for i, files in enumerate(WRITERS)]
    outs = [w.communicate(timeout=300) for w in writers]
    stop.touch()
    seen = json.loads(reader.communicate(timeout=120)[0])

    for w, (out, err) in zip(writers, outs):
        assert w.returncode == 0, err
        assert "locked" not in out + err and "Traceback" not in err
    # every writer's files landed, with the counts it printed
    printed = {}
    for i, (out, _) in enumerate(outs):
        for m in re.finditer(r"-> run (w\d+): (\d+) kernels, (\d+) NVTX ranges, (\d+) counters", out):
            printed.setdefault(m[1], []).append(tuple(map(int, m.groups()[1:])))
        assert len(printed[f"w{i}"]) == len(WRITERS[i])
    c = sqlite3.connect(db)
    got = {}
    for run, k, n, m in c.execute("SELECT run, kernels, ranges, counters FROM report_file ORDER BY id"):
        got.setdefault(run, []).append((k, n, m))
    assert {r: sorted(v) for r, v in got.items()} == {r: sorted(v) for r, v in printed.items()}
    state = whole_runs(c)
    assert {k: state[k] for k in PROBLEMS} == dict.fromkeys(PROBLEMS, 0)
    assert state["runs"] == len(WRITERS) and state["files"] == sum(map(len, WRITERS))
    c.close()

    # the reader polled throughout, never failed, and never saw a partial run
    assert seen["errors"] == [] and seen["bad"] == [], seen
    print(f"reader: {seen['polls']} polls, (runs, files) seen: {seen['seen']}")
    assert seen["polls"] >= 2 and seen["last"]["files"] == state["files"]
    # and it read while the writers wrote: it saw states between the empty and the full database
    assert any(0 < files < state["files"] for _, files in seen["seen"]), seen["seen"]


def test_the_same_file_from_several_processes_lands_once(tmp_path):
    db = tmp_path / "same.db"
    files = WRITERS[3]
    go = time.time() + 1.5
    start = f"import time; time.sleep(max(0, {go} - time.time())); from profkit.cli import cli; cli()"
    procs = [subprocess.Popen([sys.executable, "-c", start, "ingest", "--db", str(db), *map(str, files)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    text = "".join(o for o, _ in outs)
    # each file loaded by exactly one process; the others found it loaded (before or inside
    # their write transaction: the content hash is checked again there)
    assert text.count("nsys-sqlite -> run") == 1 and text.count("ncu-rep -> run") == 1, text
    assert text.count("already loaded") == 4, text
    c = sqlite3.connect(db)
    state = whole_runs(c)
    c.close()
    assert state["files"] == 2 and state["runs"] == 1 and {k: state[k] for k in PROBLEMS} == dict.fromkeys(PROBLEMS, 0)


def test_two_ingests_started_together_on_a_database_at_rest(tmp_path):
    """Two processes, started together, each loading a different timeline into a database at
    rest (rollback journal), several times over:
    - into two runs: both land (2-10 % of such starts refused one of them before connect()
      retried the switch to WAL: the next test);
    - into one run: one lands, the other is refused in one line (by the check before parsing or
      by the one inside its write transaction); the run holds one timeline, never both."""
    files = [FIELD_H100 / "ws.nsys.sqlite", KNOWN_NSYS]
    for trial in range(6):
        db = tmp_path / f"t{trial}.db"
        assert subprocess.run([sys.executable, "-m", "profkit", "ingest", "--db", str(db), str(KNOWN_CUPTI), "--run",
                               "warm"], capture_output=True).returncode == 0
        same = trial % 2 == 1
        runs = ["report", "report"] if same else ["r0", "r1"]
        procs = [subprocess.Popen([sys.executable, "-m", "profkit", "ingest", "--db", str(db), str(f), "--run", r],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for f, r in zip(files, runs)]
        outs = [(p.wait(timeout=120), *p.communicate()) for p in procs]
        assert all("locked" not in o + e and "Traceback" not in e for _, o, e in outs), outs
        got = sqlite3.connect(db).execute("SELECT run, format FROM report_file WHERE run != 'warm'").fetchall()
        if same:
            assert sorted(rc for rc, *_ in outs) == [0, 2], outs
            (err,) = [e for rc, _, e in outs if rc == 2]
            assert len(err.strip().splitlines()) == 1 and "already holds a timeline report" in err
            assert got == [("report", "nsys-sqlite")]
        else:
            assert [rc for rc, *_ in outs] == [0, 0], outs
            assert sorted(got) == [("r0", "nsys-sqlite"), ("r1", "nsys-sqlite")]


def test_connect_waits_for_a_writer_holding_the_rollback_journal(tmp_path):
    """A database at rest is in rollback-journal mode; a writer there inside BEGIN IMMEDIATE makes
    SQLite refuse another connection's switch to WAL at once, busy timeout or not ("database is
    locked" in 0.0 s). profkit's connect() waits it out: here the writer commits after 0.5 s."""
    import threading

    from profkit.store.connection import connect

    db = tmp_path / "rest.db"
    a = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    a.execute("CREATE TABLE t(x)")
    assert a.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
    a.execute("BEGIN IMMEDIATE")
    a.execute("INSERT INTO t VALUES (1)")
    done = threading.Timer(0.5, lambda: a.execute("COMMIT"))
    t0 = time.monotonic()
    done.start()
    try:
        conn = connect(db)
    finally:
        done.join()
    waited = time.monotonic() - t0
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal" and waited >= 0.4
    assert conn.execute("SELECT x FROM t").fetchall() == [(1,)]
    conn.close()
    a.close()
