"""`profkit ingest DIR` (issue 15 item 8): a capture folder is one run (its reports, one per
role and rank, capture.json as run metadata); a folder of mixed files loads what profkit
reads and names what it skipped; a bad chosen file or capture.json loads nothing."""
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from profdata import FIELD_H100, FIELD_REPORTS, KNOWN_NSYS_REP, PROFILES
from test_cli_ingest import dump

from profkit.cli import cli

CAPTURE = PROFILES / "cuda-vs-triton-h200"  # a folder `profkit capture` wrote on the H200


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def sql(db, q):
    r = run("sql", "--db", db, "--json", q)
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


@pytest.fixture
def capture_folder(tmp_path):
    return shutil.copytree(CAPTURE, tmp_path / "my capture")


def test_capture_folder_is_one_run_with_its_metadata(db, capture_folder):
    r = run("ingest", "--db", db, capture_folder)
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    # an .ncu-rep's load says what its framing cannot see (docs/reliability.md)
    assert lines[2].startswith("  note: .ncu-rep records no launch count"), r.output
    del lines[2]
    assert lines[0].endswith("cuda-vs-triton-h200.nsys.sqlite: nsys-sqlite -> run my capture: 45 kernels, 18 NVTX "
                             "ranges, 0 counters")
    assert "cuda-vs-triton-h200.ncu-rep.xz: ncu-rep -> run my capture:" in lines[1]
    assert lines[2].endswith("capture.json: run metadata of run my capture") and len(lines) == 3
    meta = json.loads(sql(db, "SELECT meta FROM runs")[0]["meta"])
    assert "['llama8b-t4096']" in meta["command"][-1] and meta["torch_version"] == "2.11.0+cu130"
    # the same as `profkit analyse` loads it (the main job), file for file
    assert [x["n"] for x in sql(db, "SELECT count(*) AS n FROM report_file")] == [2]
    again = run("ingest", "--db", db, capture_folder)
    assert again.exit_code == 0 and again.output.count("already loaded") == 2


def test_report_beside_its_export_is_skipped_with_the_reason(db, capture_folder):
    shutil.copy(KNOWN_NSYS_REP, capture_folder / "cuda-vs-triton-h200.nsys-rep")  # capture keeps both
    r = run("ingest", "--db", db, capture_folder)
    assert r.exit_code == 0, r.output
    assert r.output.strip().splitlines()[-1] == (
        f"{capture_folder}: skipped cuda-vs-triton-h200.nsys-rep (one timeline report per process: "
        "cuda-vs-triton-h200.nsys.sqlite is taken)")


def test_mixed_folder_loads_what_it_reads_and_names_the_rest(db, tmp_path):
    d = tmp_path / "downloads"
    d.mkdir()
    for name in ("ws.nsys.sqlite", "ws_nonvtx.raw.csv", "README.md", "versions.txt"):
        shutil.copy(FIELD_H100 / name, d / name)
    (d / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    (d / "old").mkdir()
    r = run("ingest", "--db", db, d)
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    assert "ws.nsys.sqlite: nsys-sqlite -> run downloads: 52 kernels, 15 NVTX ranges, 0 counters" in lines[0]
    assert "ws_nonvtx.raw.csv: ncu-csv -> run downloads: 40 kernels, 0 NVTX ranges, 13760 counters" in lines[1]
    assert lines[2].startswith("  note: a CSV page records no row count"), r.output  # what a CSV cannot prove
    del lines[2]
    assert lines[2] == (f"{d}: skipped README.md (unrecognised format); old (a folder); plot.png (unrecognised format); "
                        "versions.txt (unrecognised format)")
    assert len(lines) == 3


def test_a_bad_chosen_file_loads_nothing_of_the_folder(db, tmp_path):
    d = tmp_path / "nokernels"
    d.mkdir()
    shutil.copy(FIELD_H100 / "memcpy_only.nsys.sqlite", d)
    shutil.copy(FIELD_H100 / "ws_nonvtx.raw.csv", d)  # a good file: it must not land either
    assert run("ingest", "--db", db, FIELD_H100 / "ws.nsys.sqlite", "--run", "before").exit_code == 0
    before = dump(db)
    r = run("ingest", "--db", db, d)
    assert r.exit_code == 2
    assert r.output.strip() == (f"profkit: {d / 'memcpy_only.nsys.sqlite'}: no kernels (no CUPTI_ACTIVITY_KIND_KERNEL "
                                "table): the CUDA trace was on and holds 8 CUDA API calls and 1 memory copy or set but "
                                "no kernel launch: no kernel ran while nsys traced")
    assert dump(db) == before


@pytest.mark.parametrize("content,why", [("{not json", "not JSON"), ("[1, 2]", "not a JSON object")])
def test_a_bad_capture_json_loads_nothing(db, capture_folder, content, why):
    (capture_folder / "capture.json").write_text(content)
    r = run("ingest", "--db", db, capture_folder)
    assert r.exit_code == 2 and r.output.startswith(f"profkit: {capture_folder / 'capture.json'}: {why}")
    assert len(r.output.strip().splitlines()) == 1
    assert not Path(db).exists()  # refused before the database was opened


def test_capture_json_named_with_its_reports(db):
    files = sorted(p for p in CAPTURE.iterdir() if p.name != "CAPTURE.txt")  # profkit ingest run/*
    r = run("ingest", "--db", db, *files)
    assert r.exit_code == 0, r.output
    meta = json.loads(sql(db, "SELECT meta FROM runs WHERE run = 'cuda-vs-triton-h200'")[0]["meta"])
    assert meta["captured_at"] == "2026-11-22T02:21:05Z"


def test_capture_json_alone(db):
    r = run("ingest", "--db", db, CAPTURE / "capture.json")
    assert r.exit_code == 2 and r.output.strip() == (
        f"profkit: {CAPTURE / 'capture.json'}: run metadata, not a report, and run 'cuda-vs-triton-h200' is not "
        "loaded: ingest it with its reports (or their folder)")
    assert not Path(db).exists()
    # once the run is loaded, its capture.json alone adds the metadata
    assert run("ingest", "--db", db, CAPTURE / "cuda-vs-triton-h200.nsys.sqlite").exit_code == 0
    r = run("ingest", "--db", db, CAPTURE / "capture.json")
    assert r.exit_code == 0 and r.output.strip() == f"{CAPTURE / 'capture.json'}: run metadata of run cuda-vs-triton-h200"
    assert json.loads(sql(db, "SELECT meta FROM runs")[0]["meta"])["captured_at"] == "2026-11-22T02:21:05Z"


def test_folder_of_capture_folders_and_empty_folder(db, tmp_path):
    root = tmp_path / "profiles"
    root.mkdir()
    shutil.copytree(CAPTURE, root / "a")
    shutil.copytree(PROFILES / "ddp-2gpu-slow", root / "b")
    r = run("ingest", "--db", db, root)
    assert r.exit_code == 0, r.output
    got = sql(db, "SELECT run, rank, count(*) AS files FROM report_file GROUP BY 1, 2 ORDER BY 1, 2")
    assert got == [{"run": "a", "rank": None, "files": 2}, {"run": "b", "rank": 0, "files": 1},
                   {"run": "b", "rank": 1, "files": 1}]
    r = run("ingest", "--db", db, root, "--run", "x")
    assert r.exit_code == 2 and "--run names one run, but" in r.output and "holds 2 (one per sub-folder)" in r.output
    (tmp_path / "empty").mkdir()
    r = run("ingest", "--db", db, tmp_path / "empty")
    assert r.exit_code == 2 and r.output.strip() == f"profkit: {tmp_path / 'empty'}: no report file profkit reads (it is empty)"


def test_public_capture_folder_with_its_qdrep(db):
    """kmeans holds report2.qdrep and its export report2.sqlite: the export is taken (no nsys needed)."""
    if not (FIELD_REPORTS / "kmeans").is_dir():
        pytest.skip(f"{FIELD_REPORTS} absent")
    r = run("ingest", "--db", db, FIELD_REPORTS / "kmeans")
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    assert lines[0].endswith("report2.sqlite: nsys-sqlite -> run kmeans: 51 kernels, 0 NVTX ranges, 0 counters")
    assert lines[1].endswith("kmeans: skipped report2.qdrep (one timeline report per process: report2.sqlite is taken)")
    assert sql(db, "SELECT gpu_name FROM runs") == [{"gpu_name": "NVIDIA GeForce RTX 3080"}]


def test_capture_folder_of_a_sampled_capture_links_as_capture_did(tmp_path):
    """A command capture (ncu sampled one launch per configuration, capture.json says how):
    `profkit ingest FOLDER` links the sampled launches as capture and analyse do."""
    from test_capture_sampling import capture

    assert capture(tmp_path, "--run", "ws").exit_code == 0
    db = str(tmp_path / "again.db")
    r = run("ingest", "--db", db, tmp_path / "p" / "ws")
    assert r.exit_code == 0, r.output
    assert sql(db, "SELECT count(sampled_from) AS n FROM kernels WHERE run = 'ws'") == [{"n": 32}]
    assert sql(db, "SELECT count(*) AS n FROM launch WHERE source = 'ncu' AND timeline_id IS NOT NULL") == [{"n": 12}]
