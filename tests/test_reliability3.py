"""Issue 51 (reliability round 3): each break found by the third attack, reproduced and kept fixed."""
from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest
from click.testing import CliRunner

from profkit.cli import cli


def kineto_trace(path, calls, kernels_per_call, kernel_us, range_name="op", kernel="k_fused"):
    """A minimal Kineto trace: CALLS instances of the user annotation RANGE_NAME, each launching
    KERNELS_PER_CALL kernels of KERNEL_US microseconds one after another."""
    ev, corr, t = [], 100, 1000.0
    for _ in range(calls):
        start = t
        for _ in range(kernels_per_call):
            corr += 1
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": t + 1, "dur": 2, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": t + 5,
                       "dur": kernel_us, "args": {"correlation": corr, "stream": 7, "device": 0,
                                                  "grid": [64, 1, 1], "block": [128, 1, 1],
                                                  "registers per thread": 32}})
            t += kernel_us + 10
        ev.append({"ph": "X", "cat": "user_annotation", "name": range_name, "pid": 1, "tid": 1,
                   "ts": start, "dur": t - start})
        t += 50
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3",
                                                     "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
           "traceEvents": ev}
    path.write_text(json.dumps(doc))
    return path


def _ingest(db, path, run):
    r = CliRunner().invoke(cli, ["ingest", "--db", str(db), "--run", run, str(path)])
    assert r.exit_code == 0, r.output


# --- item 2: a call is one instance of its range -----------------------------------------------

def test_compare_calls_are_range_instances_when_the_other_side_fuses(tmp_path):
    """Before: each call launches the same kernel twice (2 x 10 us); after fuses them (15 us).
    Splitting by the repeating pattern of names made 10 calls of 10 us on the before side and
    printed 0.67x rejected; the calls are the 5 instances of the range: 20 -> 15 us, 1.33x."""
    db = tmp_path / "p.db"
    _ingest(db, kineto_trace(tmp_path / "before.json", 5, 2, 10.0, kernel="k_add"), "before")
    _ingest(db, kineto_trace(tmp_path / "after.json", 5, 1, 15.0, kernel="k_add"), "after")
    r = CliRunner().invoke(cli, ["compare", "--db", str(db), "before", "after", "--json"])
    assert r.exit_code == 0, r.output
    row = json.loads(r.output)[0] if r.output.lstrip().startswith("[") else json.loads(r.output)
    row = row[0] if isinstance(row, list) else row
    assert row["before_detail"]["calls"] == 5 and row["before_detail"]["kernels_per_call"] == 2
    assert row["before_us"] == pytest.approx(20.0) and row["after_us"] == pytest.approx(15.0)
    assert row["speedup"] == pytest.approx(4 / 3) and row["verdict"] != "rejected"


# --- items 3 and 4: no secret reaches the database, whatever its shape or way in -----------------

TOKEN = "hf_" + "Q7" * 17
SECRETS = {  # name -> (the secret text, how it reaches a command line or environment)
    "env": ("wandbAAA111", ["env", "WANDB_API_KEY=wandbAAA111", "python", "train.py"]),
    "docker": ("dockersecretBBB", ["docker", "run", "-e", "HF_TOKEN=dockersecretBBB", "img"]),
    "bash -c": ("bashsecretCCC", ["bash", "-c", "HF_TOKEN=bashsecretCCC python train.py"]),
    "--hftoken": ("oneWordDDD", ["python", "t.py", "--hftoken", "oneWordDDD"]),
    "--wandb-key": ("wandbKeyEEE", ["python", "t.py", "--wandb-key", "wandbKeyEEE"]),
    "-pPASSWORD": ("mysqlPwFFF", ["mysql", "-u", "root", "-pmysqlPwFFF"]),
    "url": ("urlPassGGG", ["git", "clone", "https://user:urlPassGGG@example.com/r.git"]),
    "header": ("bearerHHH", ["curl", "-H", "Authorization: Bearer bearerHHH", "https://x"]),
    "github_pat": ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", ["x", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"]),
    "glpat": ("glpat-abcdefghij0123456789", ["x", "glpat-abcdefghij0123456789"]),
    "AIza": ("AIzaSyA1234567890abcdefghijklmnopqrstuv", ["x", "AIzaSyA1234567890abcdefghijklmnopqrstuv"]),
    "hf option": (TOKEN, ["python", "t.py", "--hf-token", TOKEN, "--api-key", TOKEN]),
}


def _dump(db) -> str:
    import sqlite3
    with sqlite3.connect(db) as c:
        return "\n".join(c.iterdump())


@pytest.mark.parametrize("shape", sorted(SECRETS))
def test_no_secret_shape_reaches_the_run_meta(shape):
    """Each shape is redacted by structure or by token shape, whole and inside one shell line."""
    from profkit.core.environment import redact_args, scrub_meta
    secret, argv = SECRETS[shape]
    assert secret not in json.dumps(redact_args(argv))
    assert secret not in json.dumps(redact_args([" ".join(argv)]))  # nsys's COMMAND: one whole line
    assert secret not in json.dumps(scrub_meta({"command": argv, "note": " ".join(argv)}))
    assert "train.py" in json.dumps(redact_args(["python", "train.py", "--max-new-tokens", "32"]))
    assert redact_args(["--max-new-tokens", "32", "--passes", "3", "--tokenizer", "t5"]) == \
        ["--max-new-tokens", "32", "--passes", "3", "--tokenizer", "t5"]


def test_cupti_trace_argv_is_redacted_at_ingest(tmp_path):
    """`capture --tracer cupti` wrote the traced argv into its trace and ingest stored it."""
    from profdata import DATA
    src = DATA / "rmsnorm-cupti" / "rmsnorm-cupti.cupti.jsonl"
    lines = src.read_text().splitlines()
    head = json.loads(lines[0])
    head["argv"] += ["--hf-token", TOKEN, "--api-key", "apiKeyZZZ9"]
    f = tmp_path / "t.cupti.jsonl"
    f.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    db = tmp_path / "c.db"
    _ingest(db, f, "c")
    dump = _dump(db)
    assert TOKEN not in dump and "apiKeyZZZ9" not in dump and "llama8b-t4096" in dump


def test_a_hand_written_capture_json_is_redacted(tmp_path):
    """capture.json (hand-written or older) was merged into the run's meta as is."""
    import shutil

    from profdata import DATA
    d = tmp_path / "cap"
    shutil.copytree(DATA / "rmsnorm-cupti", d)
    meta = json.loads((d / "capture.json").read_text())
    meta["command"] += ["--hf-token", TOKEN, "bash", "-c", "HF_TOKEN=bashsecretCCC python x.py"]
    meta["env"] = {"HF_TOKEN": "envSecretKKK", "CUDA_VERSION": "https://u:verPassLLL@h/x",
                   "PYTORCH_CUDA_ALLOC_CONF": TOKEN}
    meta["notes"] = {"deep": ["Authorization: Bearer bearerHHH"]}
    (d / "capture.json").write_text(json.dumps(meta))
    db = tmp_path / "c.db"
    r = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(d)])
    assert r.exit_code == 0, r.output
    dump = _dump(db)
    for s in (TOKEN, "bashsecretCCC", "envSecretKKK", "verPassLLL", "bearerHHH"):
        assert s not in dump, s
    assert "llama8b-t4096" in dump


def test_every_nsys_capture_row_is_redacted(copy, tmp_path):
    """The COMMAND row as one shell line, kept variables' values, entries without '=',
    WORKING_DIR and other META_DATA_CAPTURE rows."""
    import sqlite3

    from profdata import KNOWN_NSYS
    f = copy(KNOWN_NSYS, "secrets.sqlite")
    with sqlite3.connect(f) as c:
        c.executemany("INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?, ?)", [
            ("PROCESS_0:COMMAND", "bash -c 'HF_TOKEN=bashsecretCCC python train.py --wandb-key wandbKeyEEE'"),
            ("PROCESS_0:ENVIRONMENT_VARIABLE", 'CUDA_VERSION="https://u:verPassLLL@h/x"'),
            ("PROCESS_0:ENVIRONMENT_VARIABLE", f'PYTORCH_CUDA_ALLOC_CONF="{TOKEN}"'),
            ("PROCESS_0:ENVIRONMENT_VARIABLE", "noEqualsSecretMMM"),
            ("PROCESS_0:WORKING_DIR", "/home/u/https://u:dirPassNNN@h"),
            ("LAUNCH_ARGS", "--env WANDB_API_KEY=wandbAAA111 -pmysqlPwFFF"),
        ])
    db = tmp_path / "s.db"
    _ingest(db, f, "s")
    dump = _dump(db)
    for s in ("bashsecretCCC", "wandbKeyEEE", "verPassLLL", TOKEN, "noEqualsSecretMMM", "dirPassNNN",
              "wandbAAA111", "mysqlPwFFF"):
        assert s not in dump, s
    assert "train.py" in dump


# --- item 9: an output never replaces a database, a report or the input --------------------------

@pytest.fixture(scope="module")
def profiles_copy(tmp_path_factory):
    from profdata import PROFILES

    from profkit.store.profiles import load_profiles
    db = tmp_path_factory.mktemp("out") / "profkit.db"
    load_profiles(PROFILES, str(db))
    return db


@pytest.mark.parametrize("victim", ["db", "report", "json"])
@pytest.mark.parametrize("command", ["roofline", "advise", "ranks", "analyse"])
def test_an_output_path_that_is_a_database_or_report_is_refused(profiles_copy, tmp_path, command, victim):
    import shutil

    from profdata import KNOWN_NSYS
    db = tmp_path / "profkit.db"
    shutil.copy(profiles_copy, db)
    target = {"db": db, "report": tmp_path / "report.nsys.sqlite", "json": tmp_path / "capture.json"}[victim]
    if victim == "report":
        shutil.copy(KNOWN_NSYS, target)
    elif victim == "json":
        target.write_text('{"command": ["python"]}')
    before = target.read_bytes()
    run = "rmsnorm-eager-vs-triton-h200"
    args = {"roofline": ["roofline", "--db", str(db), "--run", run, "-o", str(target)],
            "advise": ["advise", "--db", str(db), "--run", run, "--html", str(target)],
            "ranks": ["ranks", "--db", str(db), "--run", "ddp-2gpu-slow", "--html", str(target)],
            "analyse": ["analyse", "--db", str(db), "--html", str(target), str(tmp_path / "more")]}[command]
    (tmp_path / "more").mkdir()
    r = CliRunner().invoke(cli, args)
    assert target.read_bytes() == before
    assert r.exit_code != 0 and "not an HTML page" in r.output, r.output
    assert "Traceback" not in r.output


def test_an_html_output_may_replace_an_html_page(profiles_copy, tmp_path):
    out = tmp_path / "r.html"
    out.write_text("<!DOCTYPE html>\n<html></html>")
    r = CliRunner().invoke(cli, ["roofline", "--db", str(profiles_copy), "--run", "rmsnorm-eager-vs-triton-h200",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert out.stat().st_size > 1000


# --- item 12: every read command stops on Ctrl-C and SIGTERM ------------------------------------

def _forever_view(db, view):
    """Redefine VIEW (kernels, runs), or a table as such a view (launch_name), to take forever:
    a shared database someone edited."""
    import sqlite3
    with sqlite3.connect(db) as c:
        kind, sql = c.execute("SELECT type, sql FROM sqlite_master WHERE name = ?", (view,)).fetchone()
        if kind == "table":
            c.execute(f"ALTER TABLE {view} RENAME TO {view}_orig")
        else:
            c.execute(f"DROP VIEW {view}")
            c.execute(sql.replace(f"CREATE VIEW {view} AS", f"CREATE VIEW {view}_orig AS", 1))
        c.execute(f"CREATE VIEW {view} AS SELECT o.* FROM {view}_orig o, (WITH RECURSIVE r(x) AS "
                  f"(SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT max(x) FROM r)")


def _default_sigint():
    """In the child: Ctrl-C's default, which Python turns into KeyboardInterrupt (a test run
    from a background job inherits SIGINT ignored, and Python then leaves it ignored)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command, stuck", [("kernels", "launch_name"), ("ranks", "launch_name")])
def test_a_read_command_stuck_in_sqlite_stops_on_a_signal(tmp_path, command, stuck, sig):
    import signal
    import subprocess
    import sys
    import time
    db = tmp_path / "p.db"
    _ingest(db, kineto_trace(tmp_path / "t.json", 3, 1, 10.0), "t")
    _forever_view(db, stuck)  # (kernels and ranks read their launches as columns, the names through sqlite3)
    args = [sys.executable, "-m", "profkit.cli", command, "--db", str(db), "--run", "t"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    time.sleep(3)
    assert p.poll() is None, p.communicate()
    t0 = time.monotonic()
    p.send_signal(getattr(signal, sig))
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"profkit {command} ignored {sig}")
    assert time.monotonic() - t0 < 5
    assert p.returncode == 128 + getattr(signal, sig), (p.returncode, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_column_read_stuck_in_the_adbc_driver_stops_on_a_signal(tmp_path, sig):
    """The ADBC driver runs a statement in C without signal checks: the columns are read on a
    thread of their own, so a signal still unwinds the command at once."""
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    pytest.importorskip("adbc_driver_sqlite")
    db = tmp_path / "c.db"
    sqlite3.connect(db).close()
    forever = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT max(x) FROM r"
    code = (
        "import signal, sys\n"
        "from profkit.core import dbfile\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))\n"
        f"print('reading', flush=True)\ndbfile.read_columns({str(db)!r}, {forever!r}, 1, strict=True)\n"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint
    )
    assert p.stdout.readline() == "reading\n"
    time.sleep(1.5)
    assert p.poll() is None, p.communicate()
    t0 = time.monotonic()
    p.send_signal(getattr(signal, sig))
    try:
        _, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"a column read ignored {sig}")
    assert time.monotonic() - t0 < 5
    assert p.returncode == (143 if sig == "SIGTERM" else -signal.SIGINT), err  # (an uncaught Ctrl-C: killed by it)
    assert sig == "SIGTERM" or "KeyboardInterrupt" in err


def test_a_stopped_column_read_ends_at_its_next_batch(tmp_path):
    """A read under way on its thread (read_columns' `later`) that its caller no longer wants
    ends at its next batch on cancel(): stop() then returns at once, and the caller may write
    the file (20 M rows would take seconds more)."""
    import sqlite3
    import time

    pytest.importorskip("adbc_driver_sqlite")
    from profkit.core import dbfile

    db = tmp_path / "s.db"
    sqlite3.connect(db).close()
    many = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r LIMIT 20000000) SELECT x FROM r"
    read = dbfile.read_columns(db, many, 1, strict=True, later=True)
    time.sleep(0.3)
    assert not read.done()
    t0 = time.monotonic()
    read.cancel()
    read._thread.join(5)  # (not stop(): a read that ignored cancel() would hold the test for its whole run)
    assert read.done() and time.monotonic() - t0 < 1.0
    with pytest.raises(dbfile.ColumnsError, match="stopped"):
        read.result()
    read.stop()  # (done: at once)


def test_a_column_read_waits_for_a_writers_lock_as_sqlite3_does(tmp_path):
    """The ADBC driver sets no busy timeout: a read started while a writer holds the file's lock
    (or while another reader opens its write-ahead log) would fail at once with "database is
    locked". It waits, as profkit's sqlite3 connections do, and reads what was committed (the
    writer another process: locks within one process are not seen by another copy of SQLite)."""
    import sqlite3
    import subprocess
    import sys
    import time

    pytest.importorskip("adbc_driver_sqlite")
    from profkit.core import dbfile

    db = tmp_path / "w.db"
    c = sqlite3.connect(db, isolation_level=None)
    c.execute("CREATE TABLE t (x INTEGER)")
    c.execute("INSERT INTO t VALUES (1)")
    c.close()
    writer = (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
        "c.execute('BEGIN EXCLUSIVE'); c.execute('INSERT INTO t VALUES (2)')\n"
        "print('locked', flush=True); time.sleep(1.5); c.execute('COMMIT')\n"
    )
    p = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "locked\n"
    read = dbfile.read_columns(db, "SELECT x FROM t ORDER BY x", 1, strict=True, later=True)
    time.sleep(0.5)
    assert not read.done()  # (waiting on the lock)
    assert read.result()[0][0].tolist() == [1, 2]
    assert p.wait(10) == 0


# --- item 17: kernels of 0 ns ----------------------------------------------------------------------

@pytest.mark.parametrize("zero_side", ["before", "after", "both"])
def test_compare_against_kernels_of_zero_ns(tmp_path, zero_side):
    db = tmp_path / "p.db"
    _ingest(db, kineto_trace(tmp_path / "b.json", 5, 1, 0.0 if zero_side in ("before", "both") else 10.0), "before")
    _ingest(db, kineto_trace(tmp_path / "a.json", 5, 1, 0.0 if zero_side in ("after", "both") else 10.0,
                             kernel="k_after"), "after")
    for extra in ([], ["--json"]):
        r = CliRunner().invoke(cli, ["compare", "--db", str(db), "before", "after", *extra])
        assert "Traceback" not in r.output and not isinstance(r.exception, ZeroDivisionError), r.output
        assert r.exit_code in (0, 1, 2), r.output
        if r.exit_code:
            assert len(r.output.strip().splitlines()) == 1, r.output


# --- item 16: integers beyond 64 bits ---------------------------------------------------------------

HUGE = "9" * 25


def _one_line_no_traceback(r):
    assert r.exit_code != 0, r.output
    assert not (r.exception and not isinstance(r.exception, SystemExit)), repr(r.exception)
    assert "Traceback" not in r.output


def test_a_rank_beyond_64_bits_in_a_file_name(tmp_path):
    f = kineto_trace(tmp_path / f"job.rank{HUGE}.json", 2, 1, 10.0)
    r = CliRunner().invoke(cli, ["ingest", "--db", str(tmp_path / "p.db"), str(f)])
    _one_line_no_traceback(r)
    assert "rank" in r.output and len(r.output.strip().splitlines()) <= 2, r.output


def test_a_rank_option_beyond_64_bits(tmp_path):
    f = kineto_trace(tmp_path / "t.json", 2, 1, 10.0)
    r = CliRunner().invoke(cli, ["ingest", "--db", str(tmp_path / "p.db"), "--rank", HUGE, str(f)])
    _one_line_no_traceback(r)


def test_a_recorded_rank_beyond_64_bits(copy, tmp_path):
    import sqlite3

    from profdata import KNOWN_NSYS
    f = copy(KNOWN_NSYS, "r.nsys.sqlite")
    with sqlite3.connect(f) as c:
        c.executemany("INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?, ?)",
                      [("PROCESS_0:ENVIRONMENT_VARIABLE", f'RANK="{HUGE}"'),
                       ("PROCESS_0:ENVIRONMENT_VARIABLE", 'WORLD_SIZE="2"')])
    r = CliRunner().invoke(cli, ["ingest", "--db", str(tmp_path / "p.db"), str(f)])
    assert "Traceback" not in r.output and not (r.exception and not isinstance(r.exception, SystemExit)), \
        repr(r.exception)


def test_an_ncu_grid_size_beyond_64_bits(tmp_path):
    from profdata import DATA
    src = (DATA / "field-h100" / "ws_nonvtx.details.csv").read_text()
    f = tmp_path / "g.details.csv"
    f.write_text(src.replace('"(', f'"({HUGE}', 1) if '"(' in src else src)
    assert HUGE in f.read_text()
    r = CliRunner().invoke(cli, ["ingest", "--db", str(tmp_path / "p.db"), str(f)])
    assert "Traceback" not in r.output and not (r.exception and not isinstance(r.exception, SystemExit)), \
        repr(r.exception)


def test_kernels_top_beyond_64_bits(tmp_path):
    db = tmp_path / "p.db"
    _ingest(db, kineto_trace(tmp_path / "t.json", 2, 1, 10.0), "t")
    r = CliRunner().invoke(cli, ["kernels", "--db", str(db), "--run", "t", "--top", HUGE])
    assert not (r.exception and not isinstance(r.exception, SystemExit)), repr(r.exception)
    assert "Traceback" not in r.output


# --- item 18: capture.json and peaks JSON of an unexpected shape ------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("doc", [{"sampling": "all"}, {"correctness": "yes"}, {"command": "python x.py"},
                                 {"env": ["A=1"]}, "deep"], ids=["sampling", "correctness", "command", "env", "deep"])
def test_a_capture_json_of_an_unexpected_shape_is_one_line(tmp_path, doc):
    d = tmp_path / "cap"
    d.mkdir()
    kineto_trace(d / "t.json", 3, 1, 10.0)
    (d / "capture.json").write_text(('{"x": %s}' % DEEP) if doc == "deep" else json.dumps(doc))
    db = tmp_path / "p.db"
    r = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(d)])
    assert not (r.exception and not isinstance(r.exception, SystemExit)), repr(r.exception)
    assert r.exit_code != 0 and "capture.json" in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_a_stored_correctness_of_an_unexpected_shape_does_not_break_compare(tmp_path):
    import sqlite3
    db = tmp_path / "p.db"
    _ingest(db, kineto_trace(tmp_path / "b.json", 3, 1, 20.0), "before")
    _ingest(db, kineto_trace(tmp_path / "a.json", 3, 1, 10.0, kernel="k2"), "after")
    with sqlite3.connect(db) as c:  # a database written before capture.json's shape was checked
        c.execute("""UPDATE run SET meta = json_set(meta, '$.correctness', 'yes') WHERE run = 'after'""")
    r = CliRunner().invoke(cli, ["compare", "--db", str(db), "before", "after"])
    assert not (r.exception and not isinstance(r.exception, SystemExit)), repr(r.exception)


def test_a_peaks_file_nested_deep_is_one_line(tmp_path):
    p = tmp_path / "peaks.json"
    p.write_text('{"peaks": %s}' % DEEP)
    db = tmp_path / "p.db"
    _ingest(db, kineto_trace(tmp_path / "t.json", 3, 1, 10.0), "t")
    r = CliRunner().invoke(cli, ["advise", "--db", str(db), "--run", "t", "--peaks", str(p)])
    assert not (r.exception and not isinstance(r.exception, SystemExit)), repr(r.exception)
    assert r.exit_code != 0 and "peaks.json" in r.output and len(r.output.strip().splitlines()) == 1, r.output


# --- item 19: bench on the core install ----------------------------------------------------------------

@pytest.mark.parametrize("missing", ["torch", "triton"])
def test_bench_without_torch_is_one_line(tmp_path, monkeypatch, missing):
    import sys
    monkeypatch.setitem(sys.modules, missing, None)  # import fails as on the core install
    r = CliRunner().invoke(cli, ["bench", "rmsnorm", "--db", str(tmp_path / "p.db")])
    assert not (r.exception and not isinstance(r.exception, SystemExit)), repr(r.exception)
    assert r.exit_code != 0 and "pip install" in r.output and len(r.output.strip().splitlines()) == 1, r.output


# --- item 20: --db a device or a FIFO ---------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["device", "fifo"])
@pytest.mark.parametrize("command", ["ingest", "kernels"])
def test_db_that_is_a_device_or_fifo_is_refused(tmp_path, kind, command):
    import os
    import subprocess
    import sys
    if kind == "device":
        db = "/dev/null"
    else:
        db = str(tmp_path / "fifo")
        os.mkfifo(db)
    f = kineto_trace(tmp_path / "t.json", 2, 1, 10.0)
    args = ["ingest", "--db", db, str(f)] if command == "ingest" else ["kernels", "--db", db]
    try:
        p = subprocess.run([sys.executable, "-m", "profkit.cli", *args], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"--db {kind} blocked")
    assert p.returncode != 0, p.stdout + p.stderr
    assert "not a regular file" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not os.path.exists(db + "-journal")


# --- item 21: disk full mid-ingest --------------------------------------------------------------------------

@pytest.mark.parametrize("bulk", [False, True], ids=["row path", "column path"])
def test_disk_full_mid_ingest_names_the_cause(tmp_path, monkeypatch, bulk):
    """SQLITE_FULL (here: max_page_count, the error a full disk gives) in the middle of a load:
    the line names it, and the database is left as it was."""
    import sqlite3

    from profdata import PROFILES
    from profkit.parsers import nsys_sqlite

    from profkit.store import store as store_module
    monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", 0 if bulk else 10**18)
    db = tmp_path / "p.db"
    _ingest(db, kineto_trace(tmp_path / "t.json", 2, 1, 10.0), "t")
    with sqlite3.connect(db) as c:
        pages = c.execute("PRAGMA page_count").fetchone()[0]
    real = store_module.open_writer

    def small_disk(path):
        conn = real(path)
        conn.execute(f"PRAGMA max_page_count = {pages}")
        return conn
    monkeypatch.setattr(store_module, "open_writer", small_disk)
    e2e = tmp_path / "e2e-decode.nsys.sqlite"
    e2e.write_bytes(lzma.decompress((PROFILES / "e2e-decode" / "e2e-decode.nsys.sqlite.xz").read_bytes()))
    r = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(e2e)])
    assert r.exit_code != 0, r.output
    assert "full" in r.output and "cannot rollback" not in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
    monkeypatch.setattr(store_module, "open_writer", real)
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM run").fetchone()[0] == 1
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# --- item 22: sql --json repeated names, sql --csv formulas --------------------------------------------------

def test_sql_json_keeps_every_value_of_repeated_names(tmp_path):
    db = tmp_path / "p.db"
    _ingest(db, kineto_trace(tmp_path / "t.json", 2, 1, 10.0), "t")
    r = CliRunner().invoke(cli, ["sql", "--db", str(db), "--json", 'SELECT 1 AS a, 2 AS a, 3 AS "a:2", 4 AS "a:3"'])
    assert r.exit_code == 0, r.output
    row = json.loads(r.output)[0]
    assert sorted(row.values()) == [1, 2, 3, 4] and row["a"] == 1 and row["a:2"] == 3, row


def test_sql_csv_writes_no_live_formula(tmp_path):
    import csv
    import io
    db = tmp_path / "p.db"
    _ingest(db, kineto_trace(tmp_path / "t.json", 2, 1, 10.0), "t")
    q = "SELECT '=HYPERLINK(\"http://x\")' AS \"=cmd\", '+1' AS b, '-2+3' AS c, '@SUM(A1)' AS d, -5 AS n, 'ok' AS e"
    r = CliRunner().invoke(cli, ["sql", "--db", str(db), "--csv", q])
    assert r.exit_code == 0, r.output
    rows = list(csv.reader(io.StringIO(r.output)))
    def number(cell):
        try:
            return float(cell) is not None
        except ValueError:
            return False
    for cell in rows[0] + rows[1]:
        assert not (cell[:1] in ("=", "+", "-", "@") and not number(cell)), cell
    assert rows[0][0] == "'=cmd" and rows[1][0] == "'=HYPERLINK(\"http://x\")"
    assert rows[1][4] == "-5" and rows[1][5] == "ok"


# --- item 23: a refused file leaves the database byte-identical -------------------------------------------------

@pytest.mark.parametrize("bad", ["not json", "no kernels", "refused by guard"])
def test_a_refused_file_leaves_the_database_byte_identical(tmp_path, bad):
    db = tmp_path / "p.db"
    _ingest(db, kineto_trace(tmp_path / "t.json", 2, 1, 10.0), "t")
    before = db.read_bytes()
    f = tmp_path / "bad.json"
    if bad == "not json":
        f.write_text('{"traceEvents": [')
    elif bad == "no kernels":
        f.write_text(json.dumps({"schemaVersion": 1, "traceEvents": [
            {"ph": "X", "cat": "user_annotation", "name": "x", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]}))
    else:  # a second timeline of the same tool into a run that has one
        kineto_trace(f, 3, 1, 11.0, kernel="other")
    r = CliRunner().invoke(cli, ["ingest", "--db", str(db), "--run", "t", str(f)])
    assert r.exit_code != 0, r.output
    assert db.read_bytes() == before


# --- item 24: the right cause in one-line refusals ---------------------------------------------------------------

@pytest.mark.parametrize("which", ["report", "db"])
def test_a_path_beyond_sqlites_limit_is_named_as_such(tmp_path, which):
    import shutil

    from profdata import KNOWN_NSYS
    deep = tmp_path.joinpath(*["d" * 200] * 4)
    deep.mkdir(parents=True)
    report = shutil.copy(KNOWN_NSYS, (deep if which == "report" else tmp_path) / "a.nsys.sqlite")
    db = (deep if which == "db" else tmp_path) / "p.db"
    r = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(report)])
    assert r.exit_code != 0, r.output
    assert "truncated" not in r.output and "longer than SQLite" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1


def _known_copy(copy, name):
    from profdata import KNOWN_NSYS
    return copy(KNOWN_NSYS, name)


def test_a_without_rowid_kernel_table_is_named_as_such(copy, tmp_path):
    import sqlite3
    f = _known_copy(copy, "w.nsys.sqlite")
    with sqlite3.connect(f) as c:
        cols = [r[1] for r in c.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
        c.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO k_old")
        c.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL ({', '.join(cols)}, PRIMARY KEY (start, correlationId)) "
                  "WITHOUT ROWID")
        c.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM k_old")
        c.execute("DROP TABLE k_old")
    r = CliRunner().invoke(cli, ["ingest", "--db", str(tmp_path / "p.db"), str(f)])
    assert r.exit_code != 0 and "WITHOUT ROWID" in r.output and "rowid)" not in r.output, r.output
    assert "truncated" not in r.output and len(r.output.strip().splitlines()) == 1


def test_a_name_that_is_not_utf8_loads_escaped_on_the_row_path(copy, tmp_path):
    import sqlite3
    f = _known_copy(copy, "u.nsys.sqlite")
    with sqlite3.connect(f) as c:
        sid = c.execute("SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
        c.execute("UPDATE StringIds SET value = CAST(X'ff6b65726e656cfe' AS TEXT) WHERE id = ?", (sid,))
    db = tmp_path / "p.db"
    _ingest(db, f, "u")
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM kernels WHERE kernel_name = ?", ("\\xffkernel\\xfe",)).fetchone()[0] >= 1


# --- item 28: a folder of folders loads what loads ---------------------------------------------------------------

def test_a_folder_of_folders_loads_what_loads(tmp_path):
    import sqlite3
    top = tmp_path / "profiles"
    for name in ("a-good", "b-bad", "c-good", "d-bad"):
        (top / name).mkdir(parents=True)
    kineto_trace(top / "a-good" / "t.json", 2, 1, 10.0)
    kineto_trace(top / "c-good" / "t.json", 2, 1, 12.0, kernel="k3")
    from profdata import KNOWN_NSYS
    whole = KNOWN_NSYS.read_bytes()
    (top / "b-bad" / "r.nsys.sqlite").write_bytes(whole[:len(whole) // 2])  # cut short: detected, refused
    (top / "d-bad" / "r.nsys.sqlite").write_bytes(whole[:len(whole) // 3])
    db = tmp_path / "p.db"
    r = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(top)])
    assert r.exit_code != 0, r.stdout
    with sqlite3.connect(db) as c:
        assert sorted(x for (x,) in c.execute("SELECT run FROM run")) == ["a-good", "c-good"]
    err = r.stderr.strip().splitlines()
    assert sum("b-bad" in x for x in err) == 1 and sum("d-bad" in x for x in err) == 1, r.stderr
    assert "Traceback" not in r.stderr


# --- item 29: ingest --gpu on a loaded file corrects the run ----------------------------------------------------

def test_ingest_gpu_corrects_a_loaded_run(tmp_path):
    import sqlite3

    from profdata import DATA
    f = DATA / "field-h100" / "ws_nonvtx.details.csv"  # a details page names no GPU
    db = tmp_path / "p.db"
    _ingest(db, f, "d")
    r = CliRunner().invoke(cli, ["ingest", "--db", str(db), "--run", "d", "--gpu", "H100 SXM", str(f)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["ingest", "--db", str(db), "--run", "d", "--gpu", "NVIDIA H100 80GB HBM3", str(f)])
    assert r.exit_code == 0, r.output
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT gpu_name, json_extract(meta, '$.gpu_name') FROM run WHERE run = 'd'").fetchone() == \
            ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3")
    assert "not used" not in r.output and "GPU NVIDIA H100 80GB HBM3" in r.output, r.output


def test_ingest_gpu_does_not_override_a_gpu_the_reports_name(tmp_path):
    import sqlite3
    db = tmp_path / "p.db"
    f = kineto_trace(tmp_path / "t.json", 2, 1, 10.0)  # names NVIDIA H100 80GB HBM3
    _ingest(db, f, "t")
    r = CliRunner().invoke(cli, ["ingest", "--db", str(db), "--run", "t", "--gpu", "A100", str(f)])
    assert "not used" in r.output, r.output
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT gpu_name FROM run").fetchone()[0] == "NVIDIA H100 80GB HBM3"


# --- item 30: common file names do not clash as run names -------------------------------------------------------

def test_common_file_names_get_their_folder_in_the_run_name(tmp_path):
    import shutil
    import sqlite3

    from profdata import KNOWN_NSYS, PROFILES
    (tmp_path / "exp-a").mkdir()
    (tmp_path / "exp-b").mkdir()
    a = shutil.copy(KNOWN_NSYS, tmp_path / "exp-a" / "report1.sqlite")
    b = tmp_path / "exp-b" / "report1.sqlite"
    b.write_bytes(lzma.decompress((PROFILES / "e2e-decode" / "e2e-decode.nsys.sqlite.xz").read_bytes()))
    db = tmp_path / "p.db"
    out = ""
    for f in (a, b):  # one after the other, as a user loads two experiments
        r = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(f)])
        assert r.exit_code == 0, r.output
        out += r.output
    assert "run exp-a-report1" in out and "run exp-b-report1" in out, out
    with sqlite3.connect(db) as c:
        assert sorted(x for (x,) in c.execute("SELECT run FROM run")) == ["exp-a-report1", "exp-b-report1"]


# --- item 31: table output ----------------------------------------------------------------------------------------

def test_sql_table_shows_a_rounded_value_whole(tmp_path):
    db = tmp_path / "p.db"
    _ingest(db, kineto_trace(tmp_path / "t.json", 2, 1, 10.0), "t")
    r = CliRunner().invoke(cli, ["sql", "--db", str(db), "SELECT round(1168080.46, 1) AS v"])
    assert r.exit_code == 0, r.output
    assert "1168080.5" in r.output and "e+06" not in r.output, r.output



def test_a_run_name_longer_than_its_column_keeps_the_columns(tmp_path):
    """analyse's one line a run: a run name longer than the first column went on with the
    figures pushed right; it now has a line of its own, whole, and its figures stay under the
    column heads."""
    top = tmp_path / "profiles"
    long_name = "exp-2026-12-05-llama3-8b-bf16-fsdp-8xh100-seq4096-rmsnorm-fused"
    (top / long_name).mkdir(parents=True)
    (top / "short").mkdir()
    kineto_trace(top / long_name / "t.json", 3, 1, 10.0)
    kineto_trace(top / "short" / "t.json", 3, 1, 12.0)
    r = CliRunner().invoke(cli, ["analyse", str(top), "--db", str(tmp_path / "p.db"), "--html",
                                 str(tmp_path / "r.html")])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    head = next(x for x in lines if x.startswith("run (then what to fix first)"))
    col = head.index("launches") + len("launches")  # the launches figure ends under its head
    i = lines.index(long_name)
    short = next(x for x in lines if x.startswith("short "))
    assert lines[i + 1].startswith(" " * 40) and lines[i + 1][:col].rstrip().endswith("3"), lines[i:i + 2]
    assert short[:col].rstrip().endswith("3") and len(short[:col].rstrip()) == len(lines[i + 1][:col].rstrip())


def test_a_roofline_with_no_point_says_why_and_fails(tmp_path):
    """A details page of counters without DRAM/L2/L1 ceilings' clocks and without FLOPs (real
    H100 capture): every launch lacks what a point needs. The roofline wrote an empty page and
    exited 0; now one line says why, the exit is non-zero and nothing is written."""
    from profdata import FIELD_H100
    db = tmp_path / "p.db"
    _ingest(db, FIELD_H100 / "ws_rules.details.csv", "rules")
    out = tmp_path / "r.html"
    r = CliRunner().invoke(cli, ["roofline", "--db", str(db), "--run", "rules", "-o", str(out)])
    assert r.exit_code == 2, r.output
    assert "no point to draw, nothing written" in r.output and "no counted FLOPs" in r.output
    assert r.output.strip().count("\n") == 0 and not out.exists()


# --- item 15: ranks of one job on different GPU models -------------------------------------------------------------

def test_ranks_on_different_gpu_models_are_each_labelled_on_their_own(tmp_path):
    """Rank 0 a real H100 trace, rank 1 a real trace of another GPU model (public Kineto
    traces: an A100 that the GPU table does not know by name, a V100 that it does). The run took
    rank 0's GPU and labelled rank 1's launches with H100 peaks, naming no other GPU. Now the
    ingest says so in a note, and each launch is labelled on the GPU its own report names."""
    import sqlite3

    from profdata import DATA
    h100 = DATA / "kineto-h100" / "tf.kineto.json.gz"
    for other, table_row in (("triton_example/triton_example.json.gz", None),
                             ("ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", "V100")):
        db = tmp_path / f"{table_row}.db"
        assert CliRunner().invoke(cli, ["ingest", "--db", str(db), "--run", "job", "--rank", "0", str(h100)]).exit_code == 0
        r = CliRunner().invoke(cli, ["ingest", "--db", str(db), "--run", "job", "--rank", "1",
                                     str(DATA / "kineto-hta" / other)])
        assert r.exit_code == 0, r.output
        assert "note: rank 1 ran on " in r.output and "the run's other reports on NVIDIA H100 80GB HBM3" in r.output
        r = CliRunner().invoke(cli, ["classify", "--db", str(db), "--run", "job"])
        assert r.exit_code == 0, r.output
        with sqlite3.connect(db) as c:
            per_rank = dict(c.execute(
                "SELECT k.rank, group_concat(DISTINCT coalesce(json_extract(l.evidence, '$.gpu.candidates[0].gpu'), '-'))"
                " FROM classifications l JOIN kernels k USING (kernel_id) GROUP BY k.rank"))
            text = c.execute("SELECT group_concat(l.evidence || l.reason) FROM classifications l JOIN kernels k"
                             " USING (kernel_id) WHERE k.rank = 1").fetchone()[0]
        assert per_rank[0] == "NVIDIA H100 80GB HBM3", per_rank
        assert "H100" not in text  # no H100 peak in any label of rank 1
        if table_row:
            assert table_row in per_rank[1], per_rank


def test_a_two_megabyte_gpu_name_loads_in_linear_time(tmp_path):
    """The fuzz campaign's hang: a CUPTI trace whose gpu_name is 2 MB of one letter. Scrubbing
    secrets from it scanned the whole run from every position for a URL scheme (quadratic: no
    end in 9 minutes); the scheme is bounded now, and the trace loads with its kernels."""
    from profkit.core import environment

    lines = (Path(__file__).parent / "data" / "rmsnorm-cupti" / "rmsnorm-cupti.cupti.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    head["gpu_name"] = "NVIDIA H100 " + "x" * 2_000_000
    f = tmp_path / "big.cupti.jsonl"
    f.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    r = CliRunner().invoke(cli, ["ingest", str(f), "--db", str(tmp_path / "d.db")])
    assert r.exit_code == 0, r.output
    assert "49 kernels" in r.output
    # the bound leaves what it guards: a URL's password is still scrubbed
    assert environment.redact_text("git clone https://u:hunter2@github.com/x") == (
        "git clone https://u:(redacted)@github.com/x"
    )
    assert "pw" not in environment.redact_text("9abc://u:pw@h")


# --- a report's metadata is bounded: one hostile value costs bounded time and space ------------

HUGE_TEXT = 24 << 20  # the campaign's hang: a 24 MB text in the export's own metadata table


def _stored_meta(db: Path) -> tuple[str, str]:
    import sqlite3

    c = sqlite3.connect(db)
    try:
        return c.execute("SELECT r.meta, f.facts FROM run r JOIN report_file f USING (run)").fetchone()
    finally:
        c.close()


@pytest.mark.parametrize("column_path", [False, True])
def test_a_huge_value_in_an_nsys_export_s_metadata_is_left_out_with_a_note(tmp_path, monkeypatch, column_path):
    """The fuzz campaign's hang: an export whose META_DATA_EXPORT holds a 24 MB text (as a
    value, and as a name) took ~16 s under load, the text copied into the run's meta at every
    step (redacted, encoded, written, read back). The kernels load; the text is stored as a note
    of its length, the rest of the export's metadata as it was."""
    import shutil
    import sqlite3

    from profkit.parsers import nsys_sqlite

    note = f"<{HUGE_TEXT:,} characters left out>"
    if column_path:
        monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", 0)
    seed = Path(__file__).parent / "data" / "rmsnorm-cupti" / "rmsnorm-nsys.nsys.sqlite"
    clean, f = tmp_path / "clean.nsys.sqlite", tmp_path / "huge.nsys.sqlite"
    shutil.copy(seed, clean)
    shutil.copy(seed, f)
    c = sqlite3.connect(f)
    c.execute("UPDATE META_DATA_EXPORT SET value = ? WHERE name = 'EXPORT_HOST'", ("h" * HUGE_TEXT,))
    c.execute("INSERT INTO META_DATA_EXPORT (name, value) VALUES (?, 'x')", ("n" * HUGE_TEXT,))
    c.commit()
    c.close()
    loaded = []
    for name, report in (("clean", clean), ("huge", f)):
        r = CliRunner().invoke(cli, ["ingest", str(report), "--db", str(tmp_path / f"{name}.db")])
        assert r.exit_code == 0, r.output
        loaded.append(_stored_meta(tmp_path / f"{name}.db"))
        k = sqlite3.connect(tmp_path / f"{name}.db")
        loaded[-1] += (k.execute("SELECT count(*) FROM launch").fetchone()[0],)
        k.close()
    (clean_meta, _, clean_kernels), (meta, facts, kernels) = loaded
    assert kernels == clean_kernels > 0  # every kernel loads
    assert len(meta) < 64_000 and len(facts) < 64_000  # bounded, not 24 MB
    export, clean_export = json.loads(meta)["nsys_export"], json.loads(clean_meta)["nsys_export"]
    assert export["EXPORT_HOST"] == note  # the note says what was left out
    assert export[note] == "x"  # (a key too)
    assert {k: v for k, v in export.items() if not k.startswith("<") and k != "EXPORT_HOST"} == {
        k: v for k, v in clean_export.items() if k != "EXPORT_HOST"
    }


def _cupti_with_huge_argv(tmp_path: Path) -> tuple[Path, int]:
    lines = (Path(__file__).parent / "data" / "rmsnorm-cupti" / "rmsnorm-cupti.cupti.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    head["argv"] = [*head["argv"], "a" * 2_000_000]
    f = tmp_path / "big.cupti.jsonl"
    f.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    return f, 2_000_000


def _kineto_with_huge_device_name(tmp_path: Path) -> tuple[Path, int]:
    import gzip

    doc = json.loads(
        gzip.decompress((Path(__file__).parent / "data" / "kineto-h100" / "tf.kineto.json.gz").read_bytes())
    )
    for p in doc["deviceProperties"]:
        p["name"] = "NVIDIA H100 " + "x" * 2_000_000
    f = tmp_path / "big.kineto.json"
    f.write_text(json.dumps(doc))
    return f, 2_000_012


def _ncu_csv_with_huge_device_name(tmp_path: Path) -> tuple[Path, int]:
    import csv
    import io

    rows = list(
        csv.reader(io.StringIO((Path(__file__).parent / "data" / "known" / "full_rmsnorm_triton.raw.csv").read_text()))
    )
    i = rows[0].index("device__attribute_display_name")
    for row in rows[2:]:
        row[i] = "NVIDIA H200 " + "x" * 100_000  # (a CSV field is read up to 128 K)
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    f = tmp_path / "big.raw.csv"
    f.write_text(out.getvalue())
    return f, 100_012


def _capture_json_with_a_huge_field(tmp_path: Path) -> tuple[Path, int]:
    import shutil

    src = Path(__file__).parent / "data" / "rmsnorm-cupti"
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(src / "rmsnorm-cupti.cupti.jsonl", folder)
    meta = json.loads((src / "capture.json").read_text())
    meta["notes"] = "n" * 2_000_000
    (folder / "capture.json").write_text(json.dumps(meta))
    return folder, 2_000_000


@pytest.mark.parametrize(
    "make",
    [
        _cupti_with_huge_argv,
        _kineto_with_huge_device_name,
        _ncu_csv_with_huge_device_name,
        _capture_json_with_a_huge_field,
    ],
)
def test_every_way_metadata_enters_is_bounded_by_one_rule(tmp_path, make):
    """A CUPTI trace's argv, a Kineto trace's deviceProperties, an ncu page's device name, a
    capture.json merged into the run: a text over the bound in any loads with its note in its place."""
    from profkit.core.rows import MAX_META_TEXT, left_out

    path, n = make(tmp_path)
    r = CliRunner().invoke(cli, ["ingest", str(path), "--db", str(tmp_path / "d.db")])
    assert r.exit_code == 0, r.output
    meta, facts = _stored_meta(tmp_path / "d.db")
    assert len(meta) < MAX_META_TEXT and len(facts) < MAX_META_TEXT
    assert left_out(n) in meta


def test_bounded_meta_keeps_real_metadata_and_bounds_the_whole(tmp_path):
    """Real metadata (an nsys export's, with its capture settings) comes back equal; a value
    over the bound becomes its note; past the total, the rest of an object is one note."""
    from profkit.parsers import nsys_sqlite

    from profkit.core.rows import MAX_META, MAX_META_TEXT, bounded_meta, left_out

    facts = nsys_sqlite.parse(Path(__file__).parent / "data" / "rmsnorm-cupti" / "rmsnorm-nsys.nsys.sqlite").facts
    assert facts["nsys_capture"] and facts["nsys_export"]
    assert bounded_meta(facts) == facts
    assert bounded_meta({"a": "x" * (MAX_META_TEXT + 1), "b": b"y" * (MAX_META_TEXT + 1), "c": ["z"] * 3}) == {
        "a": left_out(MAX_META_TEXT + 1),
        "b": left_out(MAX_META_TEXT + 1, "bytes"),
        "c": ["z"] * 3,
    }
    many = {f"k{i}": "v" * 60_000 for i in range(40)}  # 2.4 M characters, each under the bound
    out = bounded_meta(many)
    assert len(json.dumps(out)) < MAX_META + 70_000
    assert out["k0"] == many["k0"] and out["k39"] == left_out(60_000)
    wide = bounded_meta({f"k{i}": i for i in range(200_000)})  # ~14 characters each: the rest is one note
    assert len(wide) < 100_000 and wide["<left out>"].endswith("keys left out>")
    deep: list = []
    for _ in range(200):
        deep = [deep]
    assert "left out" in json.dumps(bounded_meta(deep))
