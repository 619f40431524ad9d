"""A fixed sample of the fuzzer (tests/fuzzing; 600 cases, derandomized): every parser and
every mutation, through the real ingest, with no crash, hang, partial write, silent partial
load (a cut copy loaded short without its parser's caveat), changed input or file left beside it,
load of a file replaced mid-load as anything but one file whole, or secret in the database.

The full run (20,000+ cases) is `python benchmarks/fuzz.py`; its numbers are in
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
    assert (s["silent_partial_loads"], s["inputs_changed"], s["sidecar_files"]) == (0, 0, 0), s["examples"]
    assert (s["multiline_errors"], s["temp_files_left"]) == (0, 0), s["examples"]
    assert (s["mixed_loads"], s["secret_leaks"]) == (0, 0), s["examples"]
    assert s["secret_cases"] >= 3 and sum(s["replaced_mid_load"].values()) >= 10, s["replaced_mid_load"]
    # every format and every mutation of it ran; files were both loaded and rejected
    assert set(s["by_format"]) == set(fuzz.FORMATS)
    assert set(parsers.formats()) <= set(s["by_format"])  # every parser the registry knows is fuzzed
    assert {k.split("/")[1] for k in s["by_mutation"]} >= set(fuzz.BYTE_MUTATIONS + fuzz.SQLITE_MUTATIONS
                                                               + fuzz.CSV_MUTATIONS + fuzz.JSONL_MUTATIONS
                                                               + fuzz.JSON_MUTATIONS)
    assert all(f"{f}/truncate_boundary" in s["by_mutation"] for f in fuzz.FORMATS)  # framing cuts of every format
    # every parser in the registry gets every mutation that applies to it
    from fuzzing.cases import mutations_of
    missing = [f"{f}/{m}" for f in fuzz.FORMATS for m in mutations_of(f) if f"{f}/{m}" not in s["by_mutation"]]
    assert not missing, missing
    assert s["column_path"] > 20  # nsys exports through the column path (ingest at scale) as well as the row path
    assert s["outcomes"]["loaded"] > 20 and s["outcomes"]["rejected"] > 100
    if shutil.which("nsys") is None:  # .nsys-rep and .qdrep need nsys: without it, each case is one ToolMissing line
        # (or 'skipped': a wrong_format case that became bytes the database already holds loads nothing)
        for fmt in ("nsys-rep", "nsys-qdrep"):
            assert set(s["by_format"][fmt]) <= {"rejected", "skipped"} and s["by_format"][fmt]["rejected"], fmt


@pytest.mark.parametrize("case,why", [
    ({"format": "ncu-rep", "mutation": "truncate_boundary", "p": {"frac": 0.5},
      "seed": "profiles/known/known.ncu-rep.xz!raw"}, "a whole block less"),
    ({"format": "cupti-trace", "mutation": "truncate_boundary", "p": {"frac": 0.5},
      "seed": "tests/data/known/known.cupti.jsonl!head:1200"}, "a version 1 trace cut at a line end"),
])
def test_cuts_a_format_cannot_see_carry_its_caveat(fuzz, tmp_path, case, why):
    """The invariant's other side: a cut no framing can see loads short, and says so."""
    (tmp_path / "tmp").mkdir()
    template = fuzz.make_template(tmp_path)
    r = fuzz.run_case(dict(case, id=0, into_existing_run=False), tmp_path, template, fuzz.snapshot(template))
    assert r["outcome"] == "loaded" and r["caveat"] and "silent_partial" not in r, (why, r)


def test_the_fuzzer_sees_a_silent_partial_load(fuzz, tmp_path, monkeypatch):
    """A parser that loses its caveat is caught (the invariant can fail)."""
    from profkit.parsers import cupti_trace

    monkeypatch.setattr(cupti_trace, "V1_CAVEAT", None)
    (tmp_path / "tmp").mkdir()
    template = fuzz.make_template(tmp_path)
    case = {"id": 0, "format": "cupti-trace", "mutation": "truncate_boundary", "p": {"frac": 0.5},
            "seed": "tests/data/known/known.cupti.jsonl!head:1200", "into_existing_run": False}
    r = fuzz.run_case(case, tmp_path, template, fuzz.snapshot(template))
    assert r["outcome"] == "loaded" and r["silent_partial"]["loaded"][0] < r["silent_partial"]["whole"][0], r


def test_fuzz_replays_a_case_in_process(fuzz, tmp_path):
    """A case from the summary replays alone (how a crash found by the full run is debugged)."""
    (tmp_path / "tmp").mkdir()
    template = fuzz.make_template(tmp_path)
    case = {"id": 0, "format": "ncu-rep", "mutation": "insert", "into_existing_run": False,
            "seed": "tests/data/known/rmsnorm-llama8b-t32768.ncu-rep.xz!raw",
            "p": {"frac": 0.08354430481230592, "data": "7b565ca4f6dbb301b55d79"}}
    r = fuzz.run_case(case, tmp_path, template, fuzz.snapshot(template))
    # found by the fuzzer: NVIDIA's reader (ncu-report 2025.3) aborts its process on this file
    # (a protobuf CHECK); profkit reads it in a child process, so this is one line of error
    assert r["outcome"] == "rejected" and "partial" not in r, r


def test_the_fuzzer_sees_a_secret_that_was_not_redacted(fuzz, tmp_path, monkeypatch):
    """The secret check can fail: with redaction off, the planted token is found in the run's meta."""
    from profkit.core import environment

    monkeypatch.setattr(environment, "scrub_meta", lambda m, _depth=0: m)
    (tmp_path / "tmp").mkdir()
    template = fuzz.make_template(tmp_path)
    case = {"id": 0, "format": "cupti-trace", "mutation": "secret", "into_existing_run": False,
            "seed": "tests/data/rmsnorm-cupti/rmsnorm-cupti.cupti.jsonl", "p": {"shape": 0, "place": "argv", "rng": 3}}
    r = fuzz.run_case(case, tmp_path, template, fuzz.snapshot(template))
    assert r["outcome"] == "loaded" and r["secret_leak"] == "table run", r
    monkeypatch.undo()
    r = fuzz.run_case(dict(case, id=1), tmp_path, template, fuzz.snapshot(template))
    assert r["outcome"] == "loaded" and "secret_leak" not in r, r


def test_a_file_replaced_mid_load_is_refused_at_every_stage(fuzz, tmp_path):
    """A real export replaced after detection, after parsing and as the store writes it (the
    column path, which reads the file again): refused each time, the database as it was."""
    (tmp_path / "tmp").mkdir()
    template = fuzz.make_template(tmp_path)
    for i, stage in enumerate(("after_detect", "after_parse", "at_write")):
        case = {"id": i, "format": "nsys-sqlite", "mutation": "replaced_mid_load", "into_existing_run": False,
                "column_path": True, "seed": "tests/data/rmsnorm-cupti/rmsnorm-nsys.nsys.sqlite",
                "p": {"stage": stage, "how": "rename", "by": "profiles/known/known.nsys.sqlite", "rng": 1}}
        r = fuzz.run_case(case, tmp_path, template, fuzz.snapshot(template))
        assert r["replaced"] and r["outcome"] == "rejected" and "partial" not in r, (stage, r)
        assert "changed while it was loading" in r["error"], r


def test_an_nvprof_report_with_a_name_that_is_not_utf8_is_one_line(fuzz, tmp_path):
    """Found by the issue-51 campaign: 11 bit flips in the first 4 KB of an nvprof report made a
    table name in its schema invalid UTF-8; reading the table list raised UnicodeDecodeError."""
    (tmp_path / "tmp").mkdir()
    template = fuzz.make_template(tmp_path)
    case = {"id": 0, "format": "nvprof", "mutation": "bitflip", "into_existing_run": True,
            "seed": "tests/data/known/known.cupti.jsonl!nvvp", "p": {"rng": 11, "zone": "head", "n": 11}}
    r = fuzz.run_case(case, tmp_path, template, fuzz.snapshot(template))
    assert r["outcome"] == "rejected" and "not UTF-8" in r["error"] and "partial" not in r, r
