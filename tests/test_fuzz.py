"""A fixed sample of the fuzzer (tests/fuzzing; 600 cases, derandomized): every parser and
every mutation, through the real ingest, with no crash, hang or partial write.

The full run (10,000+ cases) is `python benchmarks/fuzz.py`; its numbers are in
benchmarks/RESULTS.md.
"""
import shutil

import fuzzing
import pytest

from profkit import parsers


@pytest.fixture(scope="module")
def fuzz():
    return fuzzing


def test_fuzz_sample_no_crash_hang_or_partial_write(fuzz):
    s = fuzz.fuzz(600, derandomize=True, workers=2, timeout=60)
    assert s["cases"] >= 500
    assert (s["crashes"], s["hangs"], s["partial_writes"]) == (0, 0, 0), s["examples"]
    assert (s["multiline_errors"], s["temp_files_left"]) == (0, 0), s["examples"]
    # every format and every mutation of it ran; files were both loaded and rejected
    assert set(s["by_format"]) == set(fuzz.FORMATS)
    assert set(parsers.formats()) <= set(s["by_format"])  # every parser the registry knows is fuzzed
    assert {k.split("/")[1] for k in s["by_mutation"]} >= set(fuzz.BYTE_MUTATIONS + fuzz.SQLITE_MUTATIONS
                                                               + fuzz.CSV_MUTATIONS + fuzz.JSONL_MUTATIONS)
    assert s["outcomes"]["loaded"] > 20 and s["outcomes"]["rejected"] > 100
    if shutil.which("nsys") is None:  # .nsys-rep and .qdrep need nsys: without it, each case is one ToolMissing line
        # (or 'skipped': a wrong_format case that became bytes the database already holds loads nothing)
        for fmt in ("nsys-rep", "nsys-qdrep"):
            assert set(s["by_format"][fmt]) <= {"rejected", "skipped"} and s["by_format"][fmt]["rejected"], fmt


def test_fuzz_replays_a_case_in_process(fuzz, tmp_path):
    """A case from the summary replays alone (how a crash found by the full run is debugged)."""
    (tmp_path / "tmp").mkdir()
    template = fuzz.make_template(tmp_path)
    case = {"id": 0, "format": "ncu-rep", "mutation": "insert", "into_existing_run": False,
            "seed": "profiles/matmul-llama8b-qkv-m4096/matmul-llama8b-qkv-m4096.ncu-rep.xz!raw",
            "p": {"frac": 0.08354430481230592, "data": "7b565ca4f6dbb301b55d79"}}
    r = fuzz.run_case(case, tmp_path, template, fuzz.snapshot(template))
    # found by the fuzzer: NVIDIA's reader (ncu-report 2025.3) aborts its process on this file
    # (a protobuf CHECK); profkit reads it in a child process, so this is one line of error
    assert r["outcome"] == "rejected" and "partial" not in r, r
