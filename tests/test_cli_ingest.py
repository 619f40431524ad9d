"""profkit ingest / sql / runs / kernels through the CLI, on the real H200 capture."""
import json
import os
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner

from profkit.cli import cli
from profdata import KNOWN_CSV_LEAN, KNOWN_CUPTI, KNOWN_NCU_LEAN, KNOWN_NSYS


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
