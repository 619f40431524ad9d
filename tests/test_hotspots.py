"""Source Counters (the `sass` and `source_lines` views) and `profkit hotspots` on real reports:
every number is checked against the report as NVIDIA's own reader gives it, computed here
independently of the parser."""
import json
import lzma
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from profdata import FIELD_REPORTS, PROFILES, ROOT

from profkit.store.ingest import ingest
from profkit.store.store import Store

ncu_report = pytest.importorskip("ncu_report", reason="reading .ncu-rep needs ncu_report (pip install ncu-report)")

# a public CUDA C++ vector add (GTX 1660 SUPER, ncu 2024.1.1, full set with SourceCounters, no
# -lineinfo): read in place, never copied in (../shared/field-reports/SOURCES.md)
VEC_ADD = FIELD_REPORTS / "lakshya" / "vec_add.ncu-rep"
# the lab's Triton kernels captured with --import-source yes --section SourceCounters (README there)


def _open(path: Path, tmp: Path):
    """ncu_report's context of a report (.xz unpacked into tmp)."""
    if path.name.endswith(".xz"):
        out = tmp / path.name[:-3]
        with lzma.open(path) as f, open(out, "wb") as g:
            shutil.copyfileobj(f, g)
        path = out
    return ncu_report.load_report(str(path))


def _ncu_per_pc(action, name):
    m = action.metric_by_name(name)
    ids = m.correlation_ids()
    return {ids.as_uint64(i): m.as_uint64(i) for i in range(m.num_instances())}


def ncu_lines(action) -> dict:
    """ncu's own per-line totals of one launch: {(file, line): [inst_executed, samples, {reason: n}]},
    (None, pc) for an instruction without line info."""
    executed = _ncu_per_pc(action, "inst_executed")
    samples = _ncu_per_pc(action, "smsp__pcsamp_sample_count")
    reasons = {n[len("smsp__pcsamp_warps_issue_stalled_"):]: _ncu_per_pc(action, n) for n in action.metric_names()
               if n.startswith("smsp__pcsamp_warps_issue_stalled_") and not n.endswith("_not_issued")}
    out: dict = defaultdict(lambda: [0, 0, defaultdict(int)])
    base = min(set(executed) | set(samples))
    for pc in set(executed) | set(samples):
        info = action.source_info(pc)
        key = (info.file_name(), info.line()) if info is not None and info.line() else (None, pc - base)
        out[key][0] += executed.get(pc, 0)
        out[key][1] += samples.get(pc, 0)
        for r, v in reasons.items():
            if v.get(pc):
                out[key][2][r] += v[pc]
    return out


def executed_pcs(action) -> list[int]:
    return sorted(_ncu_per_pc(action, "inst_executed"))


def _actions(ctx):
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            yield rng.action_by_idx(ai)


@pytest.fixture(scope="module")
def vec(tmp_path_factory):
    if not VEC_ADD.exists():
        pytest.skip(f"{VEC_ADD} absent (public reports live in ../shared/field-reports beside the clone)")
    db = str(tmp_path_factory.mktemp("hot") / "vec.db")
    ingest(db, [VEC_ADD], run="vec")
    yield db


def test_sass_rows_are_ncus_per_instruction_counters(vec, tmp_path):
    (action,) = _actions(_open(VEC_ADD, tmp_path))
    executed = _ncu_per_pc(action, "inst_executed")
    samples = _ncu_per_pc(action, "smsp__pcsamp_sample_count")
    long_sb = _ncu_per_pc(action, "smsp__pcsamp_warps_issue_stalled_long_scoreboard")
    with Store(vec, readonly=True) as s:
        rows = s.query("SELECT pc, address, instruction, inst_executed, samples, stalls FROM sass WHERE run = 'vec'")
    assert {r["address"] for r in rows} == set(executed) | set(samples)
    for r in rows:
        a = r["address"]
        assert r["inst_executed"] == executed.get(a, 0) and r["samples"] == samples.get(a, 0)
        assert json.loads(r["stalls"]).get("long_scoreboard", 0) == long_sb.get(a, 0)
        assert r["instruction"] == " ".join(action.sass_by_pc(a).split())
    # the sums are ncu's kernel-level values of the same metrics
    assert sum(r["inst_executed"] for r in rows) == action.metric_by_name("inst_executed").as_uint64()
    assert sum(r["samples"] for r in rows) == action.metric_by_name("smsp__pcsamp_sample_count").as_uint64()


def test_hotspots_rank_the_instructions_without_line_info(vec, tmp_path):
    from profkit.analyses import hotspots

    (action,) = _actions(_open(VEC_ADD, tmp_path))
    ncu = ncu_lines(action)
    with Store(vec, readonly=True) as s:
        h = hotspots.report(s, "vec", "vec_add", top=3)
    assert h.by == "instruction" and "-lineinfo" in " ".join(h.notes)
    want = sorted(ncu.items(), key=lambda kv: -kv[1][1])[:3]
    assert [(ln.instructions[0]["pc"], ln.samples) for ln in h.lines] == [(k[1], v[1]) for k, v in want]
    top = h.top
    stall, n = max(want[0][1][2].items(), key=lambda kv: kv[1])
    assert stall == "long_scoreboard" and top.stalls["long_scoreboard"] == n
    # the FADD adds the two loaded values: it waits for the nearer of the two loads
    (load,) = [pc for pc in executed_pcs(action) if action.sass_by_pc(pc).split()[0].startswith("LDG")][-1:]
    assert top.reading.startswith(f"long scoreboard at PC {top.instructions[0]['pc']:#x} (FADD waits for the global "
                                  f"load at PC {load - min(executed_pcs(action)):#x}): waiting on DRAM or L2")
    assert h.samples == action.metric_by_name("smsp__pcsamp_sample_count").as_uint64()


def test_label_evidence_names_the_stall(vec):
    from profkit.analyses.classify import label_rows

    with Store(vec, readonly=True) as s:
        (row,) = label_rows(s, "vec")
    hot = json.loads(row["evidence"])["hotspot"]
    assert hot["stall"] == "long_scoreboard" and hot["samples"] == 948 and row["label"] == "dram"


def test_cli_json_html_and_no_source_counters(vec, tmp_path):
    page = tmp_path / "h.html"
    r = subprocess.run([sys.executable, "-m", "profkit", "hotspots", "--db", vec, "--json", "--top", "2",
                        "--html", str(page)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["lines"][0]["instructions"][0]["instruction"].startswith("FADD") and len(got["lines"]) == 2
    text = page.read_text()
    assert "FADD R9, R4, R3" in text and "<script" not in text and "long_scoreboard" in text
    db = str(tmp_path / "plain.db")
    ingest(db, [PROFILES / "cuda-vector-ops" / "cuda-vector-ops.ncu-rep.xz"], run="plain")
    with Store(db, readonly=True) as s:  # a report without the section loads as before: no rows
        assert s.query("SELECT count(*) AS n FROM sass")[0]["n"] == 0
        assert s.query("SELECT count(*) AS n FROM kernels")[0]["n"] > 0
    r = subprocess.run([sys.executable, "-m", "profkit", "hotspots", "--db", db], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no Source Counters" in r.stderr


def test_mcp_tool_answers_hotspots(vec):
    from profkit.outputs.mcp_server import Tools

    got = Tools(vec).hotspots("vec", None, 1)
    assert got["kernel"].startswith("vec_add") and got["lines"][0]["stalls"]["long_scoreboard"] == 813
