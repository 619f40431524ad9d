"""Argument building, tool discovery and error paths of profkit capture, without a GPU."""
import os
import stat

import pytest
from click.testing import CliRunner

from profkit import capture as cap
from profkit.cli import cli
from profkit.errors import ToolFailed, ToolMissing


def fake_tool(tmp_path, name, script):
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + script)
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


def test_nvtx_filters_match_nested_lab_ranges():
    assert cap.nvtx_filters("rmsnorm", ["eager", "triton"], ["llama8b-t4096"]) == \
        ["rmsnorm/eager/llama8b-t4096/", "rmsnorm/triton/llama8b-t4096/"]
    assert cap.nvtx_filters("rmsnorm") == ["rmsnorm/"]
    assert cap.nvtx_filters(None, include=["a/"]) == ["a/"]


def test_ncu_and_nsys_argument_lists(tmp_path):
    cmd = cap.workload_command("rmsnorm", ["triton"], ["llama8b-t4096"], python="python3")
    assert cmd == ["python3", "-m", "profkit.kernels.run", "rmsnorm", "--variant", "triton", "--shape", "llama8b-t4096"]
    a = cap.ncu_args("ncu", tmp_path / "r", cmd, "lean", ["rmsnorm/triton/"])
    assert a[:3] == ["ncu", "--clock-control", "none"] and "--nvtx" in a and "rmsnorm/triton/" in a
    assert "gpu__time_duration.sum" in a[a.index("--metrics") + 1] and a[-len(cmd):] == cmd
    assert "--set" in cap.ncu_args("ncu", tmp_path / "r", cmd, "full")
    n = cap.nsys_args("nsys", tmp_path / "r", cmd)
    assert n[:4] == ["nsys", "profile", "-t", "cuda,nvtx"] and "--sample=none" in n and n[-len(cmd):] == cmd


def test_tool_discovery(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("NCU", raising=False)
    with pytest.raises(ToolMissing, match="ncu is not installed"):
        cap.find_tool("ncu")
    exe = fake_tool(tmp_path, "ncu", "exit 0\n")
    assert cap.find_tool("ncu") == exe
    monkeypatch.setenv("NCU", exe)
    assert cap.find_tool("ncu") == exe
    with pytest.raises(ToolMissing, match="not an executable"):
        cap.find_tool("ncu", str(tmp_path / "nope"))


@pytest.mark.parametrize("output,code,words", [
    ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n", 1, "ERR_NVGPUCTRPERM"),
    ("Traceback\nValueError: boom\n==ERROR== The application returned an error code (1).\n", 1, "the workload failed"),
    ("==WARNING== No kernels were profiled.\n", 0, "no kernel matched the NVTX filter"),
])
def test_profiler_errors_are_one_line(tmp_path, output, code, words, monkeypatch):
    ncu = fake_tool(tmp_path, "ncu", f"cat <<'X'\n{output}X\nexit {code}\n")
    r = CliRunner().invoke(cli, ["capture", "--db", str(tmp_path / "d.db"), "--out", str(tmp_path), "--no-nsys",
                                 "--ncu-path", ncu, "rmsnorm"])
    assert r.exit_code == ToolFailed.exit_code
    lines = r.output.strip().splitlines()
    assert words in lines[-1] and "Traceback (most recent" not in r.output
    assert not os.path.exists(tmp_path / "d.db")


def test_expected_launches_counts_the_filtered_kernels_on_a_real_timeline():
    """The progress bar's total: launches under the NVTX filters, counted on the nsys capture."""
    from profkit.capture import expected_launches
    from profkit.parsers import cupti_trace, nsys_sqlite
    from profdata import DATA

    t = nsys_sqlite.parse(DATA / "rmsnorm-cupti" / "rmsnorm-nsys.nsys.sqlite")
    assert expected_launches(t, ["rmsnorm/eager/llama8b-t4096/"]) == 24
    assert expected_launches(t, ["rmsnorm/"]) == 27
    assert expected_launches(t, ["rmsnorm/triton/", "rmsnorm/eager/"]) == 27
    assert expected_launches(t, []) == 49
    assert expected_launches(t, ["regex:rms.*/"]) is None
    c = cupti_trace.parse(DATA / "rmsnorm-cupti" / "rmsnorm-cupti.cupti.jsonl")
    assert expected_launches(c, ["rmsnorm/triton/"]) == 3


def test_ingest_reuses_a_report_capture_already_parsed(tmp_path, monkeypatch):
    from profkit.ingest import ingest
    from profkit.parsers import nsys_sqlite
    from profdata import DATA

    f = DATA / "rmsnorm-cupti" / "rmsnorm-nsys.nsys.sqlite"
    rep = nsys_sqlite.parse(f)
    monkeypatch.setattr(nsys_sqlite, "parse", lambda p: (_ for _ in ()).throw(AssertionError("parsed twice")))
    got = ingest(str(tmp_path / "x.db"), [f], run="r", parsed_reports={f: rep})
    assert got[0].kernels == 49
