"""Source Counters (the `sass` and `source_lines` views) and `profkit hotspots` on real reports:
every number is checked against the report as NVIDIA's own reader gives it, computed here
independently of the parser."""
import json
import lzma
import re
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


# ---- the lab's kernels on an H100 against ncu's own source page (tests/data/hotspots/README.md)
LAB_RUNS = ("softmax-triton-scores-r32768-n4096", "rmsnorm-cuda-llama8b-t4096", "rmsnorm_bwd-triton-llama8b-t4096",
            "softmax-triton-llama3vocab-t2048")
# ncu's CSV column suffix -> the stall reason of its metric smsp__pcsamp_warps_issue_stalled_REASON
CSV_REASON = {"barrier": "barrier", "branch_resolving": "branch_resolving", "dispatch": "dispatch_stall",
              "drain": "drain", "imc": "imc_miss", "lg": "lg_throttle", "long_sb": "long_scoreboard",
              "math": "math_pipe_throttle", "membar": "membar", "mio": "mio_throttle", "misc": "misc",
              "no_inst": "no_instructions", "not_selected": "not_selected", "selected": "selected",
              "short_sb": "short_scoreboard", "sleep": "sleeping", "sleeping": "sleeping", "tex": "tex_throttle",
              "wait": "wait"}
NOT_ISSUED = " (Not Issued)"


def _csv_counts(d: dict) -> dict:
    """One CSV row's numbers: samples, not-issued samples, executed, stall reasons (all and not issued)."""
    stalls: dict = {False: {}, True: {}}
    for k, v in d.items():
        if k.startswith("stall_") and v not in ("-", "", "0"):
            quiet = k.endswith(NOT_ISSUED)
            stalls[quiet][CSV_REASON[k[len("stall_"):].removesuffix(NOT_ISSUED)]] = int(v)
    return {"samples": int(d["# Samples"]), "all": int(d["Warp Stall Sampling (All Samples)"]),
            "not_issued": int(d["Warp Stall Sampling (Not-issued Samples)"]),
            "executed": int(d["Instructions Executed"]), "stalls": stalls[False], "stalls_not_issued": stalls[True]}


def ncu_source_page(path: Path) -> list[dict]:
    """ncu's `--page source --csv --print-source cuda,sass`: per file, {file, lines: {line: (text,
    counts)}, sass: {address: (line, instruction, counts)}}; an instruction is listed under its line in
    every file of its inline chain."""
    import csv

    files: list[dict] = []
    head: list[str] = []
    line = None
    for raw in path.read_text().splitlines():
        # a source line's text keeps its double quotes unescaped (`eviction_policy="evict_first")`):
        # a line's row is split at the Address and SASS columns it leaves empty ("-")
        m = re.match(r'^"(\d+)","(.*?)","-","-",(.*)$', raw)
        r = [m.group(1), m.group(2), "-", "-", *next(csv.reader([m.group(3)]))] if m else next(csv.reader([raw]), [])
        if not r or r[0].startswith("=="):
            continue
        if r[0] == "File Path":
            files.append({"file": r[1], "lines": {}, "sass": {}})
        elif r[0] == "Function Name":
            files[-1]["kernel"] = r[1]
        elif r[0] == "Line No":
            head = r
        else:
            d = dict(zip(head[4:], r[4:]))
            if r[0]:
                line = int(r[0])
                files[-1]["lines"][line] = (r[1], _csv_counts(d))
            elif r[2] not in ("...", "-"):
                files[-1]["sass"][int(r[2], 16)] = (line, r[3], _csv_counts(d))
    return files


def _sass_text(s: str) -> str:
    """An instruction without its branch target's label (ncu_report: BRA `(.L_x_0) 0x...; the page: BRA 0x...)."""
    return re.sub(r"`\(\.L_x_\d+\) ", "", " ".join(s.split()))


@pytest.fixture(scope="module")
def lab_dir(data_set):
    """The reports and ncu's source pages of them (packed: tests/data/hotspots/hotspots.tar.xz)."""
    return data_set("hotspots")


@pytest.fixture(scope="module")
def lab(tmp_path_factory, lab_dir):
    db = str(tmp_path_factory.mktemp("lab") / "lab.db")
    for run in LAB_RUNS:
        ingest(db, [lab_dir / f"{run}.ncu-rep.xz"], run=run)
    yield db


def _rows(db, run):
    with Store(db, readonly=True) as s:
        return s.query("SELECT s.*, r.stalls_not_issued FROM sass s JOIN sass_row r ON r.launch_id = s.kernel_id "
                       "AND r.pc = s.pc WHERE s.run = ? ORDER BY s.pc", (run,))


@pytest.mark.parametrize("run", LAB_RUNS)
def test_every_instruction_is_ncus_source_page(lab, lab_dir, run):
    """Each SASS instruction ncu's source page lists is one row with its samples, not-issued samples,
    executed count, stall reasons and text; and each row's line is one ncu lists it under."""
    page = ncu_source_page(lab_dir / f"{run}.source.csv")
    listed: dict = defaultdict(list)
    for f in page:
        for addr, (line, ins, counts) in f["sass"].items():
            listed[addr].append(((f["file"], line), ins, counts))
    rows = {r["address"]: r for r in _rows(lab, run)}
    assert set(rows) == set(listed)
    for addr, where in listed.items():
        r, (_, ins, c) = rows[addr], where[0]
        assert (r["samples"], r["samples_not_issued"], r["inst_executed"]) == (c["samples"], c["not_issued"],
                                                                               c["executed"]), hex(addr)
        assert c["all"] == c["samples"] and json.loads(r["stalls"]) == c["stalls"], hex(addr)
        assert json.loads(r["stalls_not_issued"]) == c["stalls_not_issued"], hex(addr)
        assert _sass_text(r["instruction"]) == _sass_text(ins)
        assert (r["file"], r["line"]) in [w[0] for w in where]
    # the kernel's totals: ncu's, each instruction once
    assert sum(r["samples"] for r in rows.values()) == sum(w[0][2]["samples"] for w in listed.values())
    assert sum(r["inst_executed"] for r in rows.values()) == sum(w[0][2]["executed"] for w in listed.values())


# lines whose numbers are ncu's exactly / all ncu lists. ncu's page counts an inlined instruction at every
# line of its inline chain (a CUDA header's line, the helper's line calling it, the kernel's line calling
# that), so the RMSNorm's 37 lines there sum to 4,120 samples of the kernel's 2,278. profkit charges each
# instruction once, to the line ncu_report's source_info names (one ncu lists it under): its lines sum to
# the kernel's, and equal ncu's wherever ncu's line holds the same instructions and no line it calls.
EXACT_LINES = {"softmax-triton-scores-r32768-n4096": (12, 12), "rmsnorm-cuda-llama8b-t4096": (27, 37),
               "rmsnorm_bwd-triton-llama8b-t4096": (43, 43), "softmax-triton-llama3vocab-t2048": (40, 40)}


@pytest.mark.parametrize("run", LAB_RUNS)
def test_lines_are_ncus_where_ncu_counts_each_instruction_once(lab, lab_dir, run):
    page = ncu_source_page(lab_dir / f"{run}.source.csv")
    with Store(lab, readonly=True) as s:
        ours = {(r["kernel_id"], r["file"], r["line"]): r
                for r in s.query("SELECT * FROM source_lines WHERE run = ?", (run,))}
        at = defaultdict(set)
        kernel_at = {}
        for r in s.query("SELECT address, kernel_id, file, line FROM sass WHERE run = ?", (run,)):
            at[(r["kernel_id"], r["file"], r["line"])].add(r["address"])
            kernel_at[r["address"]] = r["kernel_id"]
    exact = 0
    for f in page:
        # a report of two kernels lists each one's files: the kernel is the one its instructions are
        kernel = {kernel_at[a] for a in f["sass"] if a in kernel_at}
        assert len(kernel) == 1
        for line, (text, c) in f["lines"].items():
            key = (*kernel, f["file"], line)
            mine = {a for a, (ln, _, _) in f["sass"].items() if ln == line}
            # the line's text, as the report embeds it (ncu's CSV drops a line's indent, and its quotes' escapes)
            assert key not in ours or ours[key]["text"].strip().replace('"', "") == text.replace('"', "")
            listed = sum(f["sass"][a][2]["samples"] for a in mine)
            # ncu's line holds the instructions ours does and no line it calls in its own file
            if at.get(key) != mine or listed != c["samples"]:
                continue
            r = ours[key]
            assert (r["samples"], r["samples_not_issued"], r["inst_executed"]) == (c["samples"], c["not_issued"],
                                                                                   c["executed"]), key
            assert json.loads(r["stalls"]) == c["stalls"], key
            exact += 1
    assert (exact, sum(len(f["lines"]) for f in page)) == EXACT_LINES[run]
    # ours sum to the kernel's samples: each instruction once
    assert sum(r["samples"] for r in ours.values()) == sum(r["samples"] for r in _rows(lab, run))


def test_softmax_hotspot_is_its_load(lab, lab_dir):
    """The register-held softmax (DRAM-bound, `dram` by its SpeedOfLight) waits on its row's load:
    the top line is the tl.load at kernels/softmax.py:59, long_scoreboard, with ncu's numbers; the
    lines are the kernel's Python lines and Triton's own (tl.max and tl.sum inlined from
    triton/language/standard.py), in ncu's order."""
    from profkit.analyses import hotspots

    run = LAB_RUNS[0]
    page = ncu_source_page(lab_dir / f"{run}.source.csv")
    ncu = sorted(((c["samples"], f["file"], line) for f in page for line, (_, c) in f["lines"].items()), reverse=True)
    with Store(lab, readonly=True) as s:
        h = hotspots.report(s, run, None, top=12)
    assert [(ln.samples, ln.file, ln.line) for ln in h.lines] == ncu
    top = h.top
    assert top.file.endswith("/profkit/kernels/softmax.py") and top.line == 59 and top.samples == 12022
    assert "tl.load(X + rows[:, None] * sx" in top.text
    assert max(top.stalls, key=top.stalls.get) == "long_scoreboard"
    assert top.reading.startswith("long scoreboard on the global load at softmax.py:59: waiting on DRAM or L2")
    assert {short for short in (ln.file.rsplit("/", 1)[-1] for ln in h.lines)} == {"softmax.py", "standard.py"}
    assert h.samples == 21320 and h.inst_executed == 82313216


def test_rmsnorm_hotspot_waits_on_its_loads(lab, lab_dir):
    """The CUDA C++ RMSNorm (DRAM-bound) waits on its loads of x: the top line is the bf16 -> float
    conversion inlined from cuda_bf16.hpp, long_scoreboard, waiting for the LDG of pk::unpack
    (kernels/cuda/common.cuh:74); its lines are the kernel's files and the CUDA headers'."""
    from profkit.analyses import hotspots

    run = LAB_RUNS[1]
    page = {f["file"].rsplit("/", 1)[-1]: f for f in ncu_source_page(lab_dir / f"{run}.source.csv")}
    with Store(lab, readonly=True) as s:
        h = hotspots.report(s, run, None, top=5)
    top = h.top
    assert (top.file.rsplit("/", 1)[-1], top.line) == ("cuda_bf16.hpp", 636)
    assert top.samples == page["cuda_bf16.hpp"]["lines"][636][1]["samples"] == 845
    assert top.stalls == {"long_scoreboard": 845}
    assert top.reading.startswith("long scoreboard at cuda_bf16.hpp:636 (IMAD.U32 waits for the global load at "
                                  "common.cuh:74): waiting on DRAM or L2")
    assert {ln.file.rsplit("/", 1)[-1] for ln in h.all_lines} == set(page)
    assert any(ln.file.endswith("/kernels/cuda/rmsnorm.cu") and "pk::unpack(xr[j], xf[i]);" in (ln.text or "")
               for ln in h.all_lines)
    assert h.samples == 2278 and h.inst_executed == 7999488


def _ncu_lines(lab_dir, run: str, kernel: str) -> list[tuple[int, str, int]]:
    """(samples, file name, line) of one kernel's lines on ncu's source page, most samples first."""
    page = [f for f in ncu_source_page(lab_dir / f"{run}.source.csv") if f.get("kernel") == kernel]
    return sorted(((c["samples"], f["file"].rsplit("/", 1)[-1], line) for f in page
                   for line, (_, c) in f["lines"].items()), reverse=True)


def test_rmsnorm_backward_waits_on_dram_where_the_lab_found_it(lab, lab_dir):
    """The lab labels the Triton RMSNorm backward `dram` (profiles/rmsnorm-bwd-persistent-vs-compile-h100:
    DRAM-bound at llama8b-t4096, H100). Its hotspot says the same from the other side: the top line
    is the fp32 conversion of x (rmsnorm.py:87), 96 % long scoreboard on the global load of the next
    step's x (the prefetch at rmsnorm.py:142); then the row reduction's barrier. Numbers are ncu's."""
    from profkit.analyses import hotspots

    run = LAB_RUNS[2]
    with Store(lab, readonly=True) as s:
        h = hotspots.report(s, run, "_rmsnorm_bwd", top=6)
    ncu = _ncu_lines(lab_dir, run, "_rmsnorm_bwd")
    assert [(ln.samples, ln.file.rsplit("/", 1)[-1], ln.line) for ln in h.lines] == ncu[:6]
    top = h.top
    assert (top.file.rsplit("/", 1)[-1], top.line, top.samples) == ("rmsnorm.py", 87, 1195)
    assert "x = x.to(tl.float32)" in top.text
    assert max(top.stalls, key=top.stalls.get) == "long_scoreboard" and top.stalls["long_scoreboard"] == 1142
    assert top.reading.startswith("long scoreboard at rmsnorm.py:87 (SHF.L.U32 waits for the global load at "
                                  "rmsnorm.py:142): waiting on DRAM or L2")
    second = h.lines[1]
    assert (second.file.rsplit("/", 1)[-1], second.line) == ("standard.py", 293)
    assert max(second.stalls, key=second.stalls.get) == "barrier"


def test_long_row_softmax_waits_for_its_row(lab, lab_dir):
    """The row-group softmax over 128,256 columns (llama3vocab-t2048) holds its chunk in registers,
    which caps the programs an SM holds (the lab: kernels/softmax.py, ledger 2026-11-24 'registers
    capped'), so a program's waits are not hidden: its top lines are the cross-warp reduce of the
    chunk's (max, sum) (softmax.py:219, barrier) and the wait on the chunk's load from DRAM
    (softmax.py:240 waits for the load at softmax.py:326, long scoreboard): 52 % of its samples.
    Numbers are ncu's."""
    from profkit.analyses import hotspots

    run = LAB_RUNS[3]
    with Store(lab, readonly=True) as s:
        h = hotspots.report(s, run, None, top=6)
    ncu = _ncu_lines(lab_dir, run, "_softmax_rowgroup")
    assert [(ln.samples, ln.file.rsplit("/", 1)[-1], ln.line) for ln in h.lines] == ncu[:6]
    first, second = h.lines[0], h.lines[1]
    assert (first.line, first.samples) == (219, 13850) and "tl.reduce((mt, st), 0, _combine_partials)" in first.text
    assert max(first.stalls, key=first.stalls.get) == "barrier"
    assert (second.line, second.samples) == (240, 9554)
    assert max(second.stalls, key=second.stalls.get) == "long_scoreboard"
    assert "waits for the global load at softmax.py:326" in second.reading
    assert (first.samples + second.samples) / h.samples > 0.5
