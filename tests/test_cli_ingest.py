"""profkit ingest / sql / runs / kernels through the CLI, on the real H200 capture."""
import json
import os
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner
from profdata import KNOWN_CSV_LEAN, KNOWN_CUPTI, KNOWN_NCU_LEAN, KNOWN_NSYS

from profkit.cli import cli


def run(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args])
    return r


def dump(db):
    try:
        with sqlite3.connect(db) as c:
            return "\n".join(c.iterdump())
    except sqlite3.Error:
        return None


def test_ingest_prints_what_it_loaded_and_is_idempotent(db):
    r = run("ingest", "--db", db, KNOWN_NSYS, KNOWN_NCU_LEAN, "--run", "k")
    assert r.exit_code == 0, r.output
    assert "known.nsys.sqlite: nsys-sqlite -> run k: 166 kernels, 9 NVTX ranges, 0 counters" in r.output
    assert "known_lean.ncu-rep.xz: ncu-rep -> run k: 133 kernels, 0 NVTX ranges, 44688 counters" in r.output
    before = dump(db)
    r = run("ingest", "--db", db, KNOWN_NSYS, "--run", "other")
    assert r.exit_code == 0 and "already loaded" in r.output and "nothing added" in r.output
    assert dump(db) == before


def test_one_line_per_file_whatever_the_terminal_width(db):
    # a script greps "-> run R: N kernels" per file; a narrow $COLUMNS (CI sets 80) must not
    # wrap the message line (the paths of a deep checkout are long)
    # (a subprocess: the console reads $COLUMNS when profkit.cli is imported)
    r = subprocess.run([sys.executable, "-m", "profkit", "ingest", "--db", str(db), str(KNOWN_NSYS), "--run", "k"],
                       capture_output=True, text=True, env={**os.environ, "COLUMNS": "40"})
    assert r.returncode == 0, r.stderr
    line = next(l for l in r.stdout.splitlines() if "nsys-sqlite" in l)
    assert len(line) > 40 and line.endswith("-> run k: 166 kernels, 9 NVTX ranges, 0 counters"), r.stdout


def test_ncu_launches_attach_to_the_timeline(db):
    run("ingest", "--db", db, KNOWN_NSYS, KNOWN_NCU_LEAN, "--run", "k")
    r = run("sql", "--db", db, "--json",
            "SELECT nvtx_path, count(*) AS n, sum(duration_ns) AS t, count(DISTINCT source) AS s "
            "FROM kernels WHERE run = 'k' GROUP BY nvtx_path ORDER BY nvtx_path")
    rows = {x["nvtx_path"]: x for x in json.loads(r.output)}
    assert rows["known/rmsnorm_triton"] == {"nvtx_path": "known/rmsnorm_triton", "n": 3, "t": 229343, "s": 1}
    assert rows["known/tiny_launches/burst"]["n"] == 100
    r = run("sql", "--db", db, "--csv",
            "SELECT count(DISTINCT c.kernel_id) AS k FROM counters c JOIN kernels USING (kernel_id) WHERE source = 'nsys'")
    assert r.output.splitlines() == ["k", "133"]  # every profiled launch found its timeline launch


def test_sql_json_and_runs_kernels_tables(db):
    run("ingest", "--db", db, KNOWN_CSV_LEAN, "--run", "csv")
    r = run("sql", "--db", db, "--json", "SELECT value, unit FROM counters WHERE metric = 'dram__bytes.sum' "
            "AND kernel_name LIKE '%rmsnorm_fwd%' ORDER BY kernel_id LIMIT 1")
    assert json.loads(r.output) == [{"value": 247369472.0, "unit": "byte"}]
    r = run("runs", "--db", db)
    assert r.exit_code == 0 and "csv" in r.output and "NVIDIA H200" in r.output
    r = run("kernels", "--db", db, "--run", "csv", "--top", "3")
    assert r.exit_code == 0 and "occupancy_limited" in r.output


def test_default_db_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFKIT_DB", str(tmp_path / "env.db"))
    assert run("ingest", KNOWN_CUPTI).exit_code == 0
    assert (tmp_path / "env.db").exists()


def _truncated(copy, tmp_path):
    f = tmp_path / "trunc.sqlite"
    data = KNOWN_NSYS.read_bytes()
    f.write_bytes(data[: len(data) // 3])
    return f


def _other_kind(copy, tmp_path):
    f = tmp_path / "picture.png"
    f.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    return f


def _empty_csv(copy, tmp_path):
    f = tmp_path / "empty.csv"
    f.write_text("")
    return f


def _not_ncu_csv(copy, tmp_path):
    # real: nsys stats --report nvtx_kern_sum of the field workload, on the H100 (a summary, not a report)
    return copy(KNOWN_CSV_LEAN.parent.parent / "field-h100" / "ws_stats_nvtx_kern_sum.csv")


def _missing_table(copy, tmp_path):
    f = copy(KNOWN_NSYS, "nokernels.sqlite")
    with sqlite3.connect(f) as c:
        c.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    return f


def _truncated_ncu(copy, tmp_path):
    import lzma
    f = tmp_path / "cut.ncu-rep"
    data = lzma.decompress(KNOWN_NCU_LEAN.read_bytes())
    f.write_bytes(data[: len(data) // 2])
    return f


def _truncated_csv(copy, tmp_path):
    f = tmp_path / "cut.raw.csv"
    text = KNOWN_CSV_LEAN.read_text()
    f.write_text(text[: len(text) // 2])
    return f


@pytest.mark.parametrize("make,words", [
    (_truncated, "truncated"), (_other_kind, "unrecognised format"), (_empty_csv, "empty file"),
    (_not_ncu_csv, "an nsys stats summary (totals per name, not one row per launch): load the .nsys-rep"), (_missing_table, "CUPTI_ACTIVITY_KIND_KERNEL"),
    (_truncated_ncu, "truncated"), (_truncated_csv, "truncated"),
])
def test_bad_input_one_line_nonzero_database_unchanged(make, words, db, copy, tmp_path):
    assert run("ingest", "--db", db, KNOWN_CUPTI, "--run", "good").exit_code == 0
    before = dump(db)
    bad = make(copy, tmp_path)
    r = run("ingest", "--db", db, KNOWN_NSYS, bad)  # a good file first: it must not land either
    assert r.exit_code != 0
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("profkit: ") and str(bad) in lines[0] and words in lines[0], r.output
    assert "Traceback" not in r.output
    assert dump(db) == before


# --- one timeline and one counter report per run and rank, for files named one by one too -----
# Two different reports of the same file name used to load silently into one run (the run is
# named after the first file): two timelines (or two counter reports) of different programs
# mixed into one.

from profdata import FIELD_H100, FIELD_REPORTS, PROFILES  # noqa: E402


def field(*parts):
    path = FIELD_REPORTS.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} absent (public reports live in ../shared/field-reports beside the clone)")
    return path


def refused(r, *files):
    """One line on stderr naming every file, the way out (--run NAME), exit 2, no traceback."""
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("profkit: ") and "Traceback" not in r.output, r.output
    assert all(str(f) in lines[0] for f in files) and "--run NAME" in lines[0], r.output
    return lines[0]


def files_of(db):
    with sqlite3.connect(db) as c:
        return c.execute("SELECT run, rank, format, kernels FROM report_file ORDER BY id").fetchall()


def test_same_stem_exports_of_two_programs_are_refused_in_one_call(db):
    """Two public nsys exports both named report2.sqlite (a V100 run, an RTX 3080 run)."""
    beast, kmeans = field("beast", "report2.sqlite"), field("kmeans", "report2.sqlite")
    line = refused(run("ingest", "--db", db, beast, kmeans), beast, kmeans)
    assert "two timeline reports for run 'beast-report2' (one per process)" in line
    assert not os.path.exists(db)  # refused before the database was created
    # into a database that holds a run: nothing of either lands
    assert run("ingest", "--db", db, KNOWN_CUPTI, "--run", "before").exit_code == 0
    before = dump(db)
    refused(run("ingest", "--db", db, beast, kmeans), beast, kmeans)
    assert dump(db) == before
    # named, each is a run of its own
    assert run("ingest", "--db", db, beast, "--run", "beast").exit_code == 0
    assert run("ingest", "--db", db, kmeans, "--run", "kmeans").exit_code == 0
    assert files_of(db)[1:] == [("beast", None, "nsys-sqlite", 2419), ("kmeans", None, "nsys-sqlite", 51)]


def test_another_file_into_a_run_that_holds_its_role_is_refused(db):
    """report2.sqlite of one program loaded; report2.sqlite of another would join its run."""
    beast, kmeans = field("beast", "report2.sqlite"), field("kmeans", "report2.sqlite")
    # (named --run report2: a file name tools give every file alone now takes its folder's too)
    assert run("ingest", "--db", db, beast, "--run", "report2").exit_code == 0
    before = dump(db)
    line = refused(run("ingest", "--db", db, kmeans, "--run", "report2"), beast, kmeans)
    assert "run 'report2' already holds a timeline report (one per process)" in line and "is another file" in line
    assert dump(db) == before
    # the same bytes again are still a repeat, whatever the run: nothing added, no refusal
    r = run("ingest", "--db", db, beast)
    assert r.exit_code == 0 and "already loaded" in r.output and dump(db) == before
    assert run("ingest", "--db", db, kmeans, "--run", "kmeans").exit_code == 0
    assert files_of(db) == [("report2", None, "nsys-sqlite", 2419), ("kmeans", None, "nsys-sqlite", 51)]


def test_two_counter_reports_for_one_run_are_refused(db):
    """Two public .ncu-rep of different programs named together: both would go to run vec_add."""
    vec_add, drv = field("lakshya", "vec_add.ncu-rep"), field("nvidia_training", "CuVectorAddDrv.ncu-rep")
    line = refused(run("ingest", "--db", db, vec_add, drv), vec_add, drv)
    assert "two counters reports for run 'vec_add' (one per process)" in line
    assert not os.path.exists(db)
    assert run("ingest", "--db", db, vec_add).exit_code == 0
    before = dump(db)
    refused(run("ingest", "--db", db, drv, "--run", "vec_add"), vec_add, drv)
    assert dump(db) == before


def test_same_stem_timelines_refused_with_our_own_captures(db, tmp_path):
    """The same without ../shared: two of our H100/H200 exports, each saved as exp.sqlite (a
    name of the user's: report.sqlite, a tool's default, would take its folder's name too)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = tmp_path / "a" / "exp.sqlite", tmp_path / "b" / "exp.sqlite"
    a.write_bytes((FIELD_H100 / "ws.nsys.sqlite").read_bytes())
    b.write_bytes(KNOWN_NSYS.read_bytes())
    refused(run("ingest", "--db", db, a, b), a, b)
    assert not os.path.exists(db)
    refused(run("ingest", "--db", db, a, b, "--rank", "0"), a, b)  # one rank named for both: still two
    assert run("ingest", "--db", db, a).exit_code == 0
    before = dump(db)
    refused(run("ingest", "--db", db, b), a, b)
    refused(run("ingest", "--db", db, b, "--run", "exp"), a, b)  # --run names the run, it does not append
    assert dump(db) == before
    # the same file twice, or a copy of it, is one report (the copy is skipped as a repeat)
    c = tmp_path / "c.sqlite"
    c.write_bytes(a.read_bytes())
    r = run("ingest", "--db", db, a, a, c)
    assert r.exit_code == 0 and r.output.count("already loaded") == 3 and dump(db) == before
    # the file loaded before, rewritten since (another capture saved over it): not a repeat either
    a.write_bytes(b.read_bytes())
    line = refused(run("ingest", "--db", db, a), a)
    assert f"already holds a timeline report (one per process), {a}, loaded earlier: {a} has changed since" in line
    assert dump(db) == before
    a.write_bytes(c.read_bytes())
    fresh = str(db) + ".2"  # (into a new database the repeats are found as they are written)
    r = run("ingest", "--db", fresh, a, a, c)
    assert r.exit_code == 0 and r.output.count("already loaded") == 2, r.output
    assert files_of(fresh) == [("exp", None, "nsys-sqlite", 52)]


def test_timeline_and_counters_of_one_stem_join_one_run(db):
    """The nsys export and the ncu report of one capture (cuda-vs-triton-h200.*): one run,
    named together or one after the other; ranks of one job keep a timeline each."""
    folder = PROFILES / "cuda-vs-triton-h200"
    nsys, ncu = folder / "cuda-vs-triton-h200.nsys.sqlite", folder / "cuda-vs-triton-h200.ncu-rep.xz"
    r = run("ingest", "--db", db, nsys, ncu)
    assert r.exit_code == 0, r.output
    assert [f[:3] for f in files_of(db)] == [("cuda-vs-triton-h200", None, "nsys-sqlite"),
                                              ("cuda-vs-triton-h200", None, "ncu-rep")]
    other = str(db) + ".2"
    assert run("ingest", "--db", other, nsys).exit_code == 0
    assert run("ingest", "--db", other, ncu).exit_code == 0
    assert files_of(other) == files_of(db)
    ddp = PROFILES / "ddp-2gpu"
    ranks = str(db) + ".3"
    assert run("ingest", "--db", ranks, ddp / "ddp-2gpu.rank0.nsys.sqlite.xz", ddp / "ddp-2gpu.rank0.ncu-rep.xz").exit_code == 0
    r = run("ingest", "--db", ranks, ddp / "ddp-2gpu.rank1.nsys.sqlite.xz")
    assert r.exit_code == 0, r.output
    assert [f[:3] for f in files_of(ranks)] == [("ddp-2gpu", 0, "nsys-sqlite"), ("ddp-2gpu", 0, "ncu-rep"),
                                                 ("ddp-2gpu", 1, "nsys-sqlite")]


def test_a_report_landing_between_the_check_and_the_write_is_refused_in_the_write(db, tmp_path, monkeypatch):
    """Two processes loading two timelines into one run at once: each checks the database before
    parsing, both find the run free, both would write. The check runs again inside each file's
    write transaction (one writer at a time), so the second is refused there, one line, its
    rows rolled back. Here another profkit process loads its timeline while this one parses its
    own: after the first check, before the write."""
    from profkit.store import ingest as I

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = tmp_path / "a" / "exp.sqlite", tmp_path / "b" / "exp.sqlite"
    a.write_bytes((FIELD_H100 / "ws.nsys.sqlite").read_bytes())
    b.write_bytes(KNOWN_NSYS.read_bytes())
    assert run("ingest", "--db", db, KNOWN_CUPTI, "--run", "warm").exit_code == 0  # (an existing database)
    real_parse = I._parse

    def parse_while_another_loads(parser, path, on_progress):
        other = subprocess.run([sys.executable, "-m", "profkit", "ingest", "--db", str(db), str(a)],
                               capture_output=True, text=True)
        assert other.returncode == 0, other.stderr
        return real_parse(parser, path, on_progress)

    monkeypatch.setattr(I, "_parse", parse_while_another_loads)
    r = run("ingest", "--db", db, b)
    monkeypatch.setattr(I, "_parse", real_parse)
    line = refused(r, b)
    assert f"already holds a timeline report (one per process), {a}, loaded earlier: {b} is another file" in line
    assert [f[:3] for f in files_of(db)] == [("warm", None, "cupti-trace"), ("exp", None, "nsys-sqlite")]
    before = dump(db)
    assert run("ingest", "--db", db, b).exit_code == 2 and dump(db) == before  # (the first check, now)
    # the legitimate join still writes: counters into a run that holds a timeline
    ncu = PROFILES / "cuda-vs-triton-h200" / "cuda-vs-triton-h200.ncu-rep.xz"
    assert run("ingest", "--db", db, ncu, "--run", "exp").exit_code == 0
    assert [f[:3] for f in files_of(db)][1:] == [("exp", None, "nsys-sqlite"), ("exp", None, "ncu-rep")]


def test_nsys_stats_gpu_trace_loads_as_a_timeline(tmp_path):
    """`nsys stats --report cuda_gpu_trace --format csv` as nsys prints it to stdout (a blank
    line, its `Processing` line, the table): was refused as "not an Nsight Compute CSV", loads
    now as a timeline without launch calls or ranges. The table is the real field export's,
    reproduced in nsys's columns (tests/nsys_stats_layout.py: no nsys on this machine)."""
    from nsys_stats_layout import write_gpu_trace
    f = write_gpu_trace(FIELD_H100 / "ws.nsys.sqlite", tmp_path / "ws_cuda_gpu_trace.csv", stdout=True)
    r = run("ingest", "--db", tmp_path / "t.db", f)
    assert r.exit_code == 0, r.output
    assert "nsys-stats-trace -> run ws_cuda_gpu_trace: 52 kernels, 0 NVTX ranges" in r.output
