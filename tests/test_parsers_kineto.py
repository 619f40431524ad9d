"""torch.profiler (Kineto) chrome traces (parsers/kineto.py) on real traces: our own H100
captures of two workloads, each also captured under nsys (tests/data/field-h100,
tests/data/kineto-h100), and traces other people captured on A100, V100, MI250 with older
torch versions (tests/data/kineto-hta, from HolisticTraceAnalysis).

Expected values come from the traces' raw text (a plain json.load, decimal digits) and from
the nsys captures of the same workloads and NVIDIA's own `nsys stats` count, not from the parser.
"""
import csv
import gzip
import json
import lzma
import re
import sqlite3
from collections import Counter
from decimal import Decimal

import pytest
from click.testing import CliRunner
from profdata import DATA
from profkit.parsers import kineto, nsys_sqlite

from profkit import parsers
from profkit.cli import cli
from profkit.core.errors import BadInput
from profkit.core.rows import KERNEL_FIELDS

F = {f: i for i, f in enumerate(KERNEL_FIELDS)}
FIELD = DATA / "field-h100"
WS = FIELD / "ws.kineto.json"
WS2 = FIELD / "ws2.kineto.json.gz"
WS_NSYS = FIELD / "ws.nsys.sqlite"
TF = DATA / "kineto-h100" / "tf.kineto.json.gz"
TF_NSYS_XZ = DATA / "kineto-h100" / "tf.nsys.sqlite.xz"
HTA = DATA / "kineto-hta"
NS_RES = HTA / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
RANK0, RANK1 = HTA / "trace_filter" / "sampled_rank-0.json.gz", HTA / "trace_filter" / "sampled_rank-1.json.gz"


@pytest.fixture(scope="module")
def ws():
    return kineto.parse(WS)


@pytest.fixture(scope="module")
def tf_nsys(tmp_path_factory):
    db = tmp_path_factory.mktemp("tf") / "tf.nsys.sqlite"
    db.write_bytes(lzma.decompress(TF_NSYS_XZ.read_bytes()))
    return db


def raw_events(path):
    with (gzip.open(path, "rt") if str(path).endswith(".gz") else open(path)) as f:
        return json.load(f, parse_float=Decimal)["traceEvents"]


def per_path(rep, keep=None):
    """(range path, short name) -> launches; `keep`: only these range names in the path."""
    out = Counter()
    for k in rep.kernels:
        p = k[F["nvtx_path"]]
        if keep is not None and p is not None:
            p = "/".join(x for x in p.split("/") if x in keep) or None
        out[(p, k[F["short_name"]])] += 1
    return out


# --- our own H100 capture of the field workload ----------------------------------------------------

def test_kernels_ranges_and_launch_apis(ws):
    assert len(ws.kernels) == 36 == sum(e.get("cat") == "kernel" for e in raw_events(WS))
    # 30 runtime launches and 6 driver launches: cuBLAS's nvjet GEMM and the Triton kernel
    assert Counter(k[F["api_name"]] for k in ws.kernels) == {"cudaLaunchKernel": 30, "cuLaunchKernelEx": 6}
    assert Counter(k[F["short_name"]] for k in ws.kernels if k[F["api_name"]] == "cuLaunchKernelEx") == \
        {"nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT": 3, "_add": 3}
    p = per_path(ws)
    for i in range(3):
        assert p[(f"step {i}/matmul", "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT")] == 1
        assert p[(f"step {i}//layer1/Conv + /relu/Relu", "_add")] == 1  # a name holding '/' stays one range
        assert sum(n for (path, _), n in p.items() if path == f"step {i}/norm") == 8
        assert {s for (path, s) in p if path == f"step {i}/copy"} == {"unrolled_elementwise_kernel",
                                                                      "vectorized_elementwise_kernel"}
    assert p[(None, "_add")] == 0 and sum(n for (path, _), n in p.items() if path is None) == 0


def test_ranges_are_the_user_annotations_nested_per_thread(ws):
    ev = raw_events(WS)
    assert len(ws.ranges) == sum(e.get("cat") == "user_annotation" for e in ev) == 15
    assert sum(e.get("cat") == "gpu_user_annotation" for e in ev) == 12  # GPU-side copies: not ranges
    depth = Counter((r[1], r[7]) for r in ws.ranges)
    assert depth[("step 0", 0)] == 1 and depth[("norm", 1)] == 3 and depth[("copy", 1)] == 3
    assert {(r[0], r[2], r[5], r[6]) for r in ws.ranges} == {(None, "push_pop", 676, 676)}
    assert ws.facts["kineto"]["gpu_user_annotations"] == 12


def test_each_kernel_sits_in_the_ranges_that_hold_its_launch_call(ws):
    """A plain containment join over the raw trace: user annotations on the launching thread
    that hold the launch call, correlated to the kernel through runtime or driver events."""
    ev = raw_events(WS)
    us = lambda v: int(Decimal(v) * 1000)
    calls = {e["args"]["correlation"]: e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    ann = [e for e in ev if e.get("cat") == "user_annotation"]
    want = Counter()
    for k in ev:
        if k.get("cat") != "kernel":
            continue
        c = calls[k["args"]["correlation"]]
        t = us(c["ts"])
        held = sorted((us(a["ts"]), a["name"]) for a in ann if (a["pid"], a["tid"]) == (c["pid"], c["tid"])
                      and us(a["ts"]) <= t <= us(a["ts"]) + us(a["dur"]))
        names = [n for _, n in held]
        want[("/".join(names) or None, names[-1] if names else None, c["name"])] += 1
    got = Counter((k[F["nvtx_path"]], k[F["nvtx_range"]], k[F["api_name"]]) for k in ws.kernels)
    assert got == want and len(want) == 12


def test_kernel_fields_and_exact_times(ws):
    k0 = ws.kernels[0]
    assert (k0[F["grid_x"]], k0[F["grid_y"]], k0[F["grid_z"]], k0[F["block_x"]], k0[F["block_y"]]) == (16384, 1, 1, 128, 1)
    assert (k0[F["registers_per_thread"]], k0[F["stream"]], k0[F["device"]], k0[F["correlation_id"]]) == (32, 7, 0, 11)
    # Kineto's "shared memory" is static + dynamic together: neither column can hold it
    assert (k0[F["shared_mem_static"]], k0[F["shared_mem_dynamic"]]) == (None, None)
    # every time to the ns, from the decimal digits of the text (no float on the way)
    text = WS.read_text()
    digits = lambda s: int(s.replace(".", "")) * 10 ** (3 - len(s.split(".")[1]) if "." in s else 3)
    want = sorted((digits(ts), digits(ts) + digits(dur)) for ts, dur in
                  re.findall(r'"cat": "kernel".*?"ts": ([\d.]+), "dur": ([\d.]+)', text, re.S))
    assert [(k[F["start_ns"]], k[F["end_ns"]]) for k in ws.kernels] == want
    assert k0[F["start_ns"]] == 4539407908464079 and k0[F["duration_ns"]] == 27840
    assert k0[F["api_start_ns"]] == 4539407908410791 and k0[F["api_end_ns"]] == 4539407908468435


def test_times_that_a_float_cannot_hold():
    """Epoch microseconds with ns decimals (a V100 trace): float arithmetic is off by up to
    hundreds of ns there; the parser's times equal the decimal digits."""
    rep = kineto.parse(NS_RES)
    ev = [e for e in raw_events(NS_RES) if e.get("cat") == "kernel"]
    exact = sorted((int(e["ts"] * 1000), int((e["ts"] + e["dur"]) * 1000)) for e in ev)
    floats = sorted((round(float(e["ts"]) * 1000), round((float(e["ts"]) + float(e["dur"])) * 1000)) for e in ev)
    assert [(k[F["start_ns"]], k[F["end_ns"]]) for k in rep.kernels] == exact != floats


def test_memcpy_and_memset_are_not_kernels(ws):
    assert not [k for k in ws.kernels if k[F["kernel_name"]].startswith(("Memcpy", "Memset"))]
    assert ws.facts["kineto"]["memcpy"] == {"count": 6, "bytes": 6 * 262144, "duration_ns": 44417}
    tf = kineto.parse(TF)
    assert len(tf.kernels) == 909 and tf.facts["kineto"]["memset"]["count"] == 141


def test_gpu_facts(ws):
    f = ws.facts
    assert (f["gpu_name"], f["sm_count"], f["cc"], f["memory_bytes"]) == ("NVIDIA H100 80GB HBM3", 132, "9.0", 85017493504)
    assert "rank" not in f  # a single process
    assert f["kineto"]["schema_version"] == 1 and f["kineto"]["base_time_ns"] == 1790857026000000000


def test_gzip_and_plain_give_the_same_rows(tmp_path, ws):
    gz = tmp_path / "ws.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(WS.read_bytes()))
    assert parsers.detect(gz) is kineto
    again = kineto.parse(gz)
    assert (again.kernels, again.ranges) == (ws.kernels, ws.ranges)
    other = kineto.parse(WS2)  # a second capture of the workload, written gzipped by torch itself
    assert per_path(other) == per_path(ws)


def test_every_buffer_boundary(monkeypatch, ws):
    """The trace is read as a stream: with a 7-character buffer every event straddles one."""
    monkeypatch.setattr(kineto, "_CHUNK", 7)
    again = kineto.parse(WS)
    assert (again.kernels, again.ranges, again.facts) == (ws.kernels, ws.ranges, ws.facts)


def test_a_trace_behind_another_tools_keys(tmp_path, ws):
    """TraceLens's test traces (tests/traces/h100/*.json.gz in AMD-AGI/TraceLens) hold a tool's
    26 KB "metadata" object first and Kineto's own keys after traceEvents: past the first 4 KB."""
    meta = json.dumps({"profiler": {"warmups": 5}, "env": {f"VAR_{i}": "x" * 40 for i in range(600)}})
    text = WS.read_text().lstrip()
    p = tmp_path / "model__1016001.json.gz"
    p.write_bytes(gzip.compress(('{"metadata": ' + meta + ", " + text[1:]).encode()))
    assert len(meta) > 4096 and "deviceProperties" not in gzip.decompress(p.read_bytes())[:4096].decode()
    assert parsers.detect(p) is kineto
    again = kineto.parse(p)
    assert (again.kernels, again.ranges, again.facts["gpu_name"]) == (ws.kernels, ws.ranges, ws.facts["gpu_name"])


def test_a_byte_order_mark_in_front(tmp_path, ws):
    p = tmp_path / "bom.kineto.json"
    p.write_bytes(b"\xef\xbb\xbf" + WS.read_bytes())
    assert parsers.detect(p).parse(p).kernels == ws.kernels


# --- agreement with nsys -------------------------------------------------------------------------

def test_same_kernels_per_range_path_as_nsys(ws):
    """The field workload under nsys (NVTX) and under torch.profiler (record_function): the same
    kernels by short name and count under every range path. nsys also saw the set-up and
    warm-up outside any range, before torch.profiler's window opened."""
    nsys = nsys_sqlite.parse(WS_NSYS)
    k, n = per_path(ws), per_path(nsys)
    assert {key: v for key, v in n.items() if key[0] is not None} == +k
    assert sum(v for key, v in n.items() if key[0] is None) == 16 and len(nsys.kernels) == 52


def test_same_kernels_per_range_as_nsys_stats(ws):
    """NVIDIA's own count (`nsys stats --report nvtx_kern_sum`): launches under each range,
    nested ones included, against the kernels whose launch call each range holds here."""
    want = Counter()
    with open(FIELD / "ws_stats_nvtx_kern_sum.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["NVTX Range"]:
                want[row["NVTX Range"].lstrip(":")] += int(row["Kern Inst"])
    got = Counter()
    for k in ws.kernels:
        t, pid, tid = k[F["api_start_ns"]], k[F["pid"]], k[F["tid"]]
        for r in ws.ranges:
            if (r[5], r[6]) == (pid, tid) and r[3] <= t <= r[4]:
                got[r[1]] += 1
    assert got == want


def test_training_step_agrees_with_nsys(tf_nsys):
    """A transformer training step on an H100 under both tools (the same 3 steps): 909 launches
    each, by the same APIs; under every range of the program, the same kernels. Each tool also
    has ranges of its own: torch.profiler PyTorch's record_function ranges (Optimizer.step#AdamW.step,
    '## Call CompiledFxGraph ... ##'), nsys CUB's NVTX ranges (domain CCCL) around the sorts of the
    embedding's backward. Backward runs on autograd's thread, outside the main thread's ranges,
    in both."""
    k, n = kineto.parse(TF), nsys_sqlite.parse(tf_nsys)
    assert len(k.kernels) == len(n.kernels) == 909
    api = lambda rep: Counter(re.sub(r"_v\d+$", "", k[F["api_name"]]) for k in rep.kernels)
    assert api(k) == api(n) == {"cudaLaunchKernel": 693, "cuLaunchKernelEx": 204, "cudaGraphLaunch": 9,
                                "cuLaunchKernel": 3}
    common = {r[1] for r in k.ranges} & {r[1] for r in n.ranges}
    assert {"step 0", "forward", "layer3", "loss", "backward", "optimizer", "compiled", "side_stream", "graph",
            "copy"} <= common
    assert per_path(k, keep=common) == per_path(n, keep=common)
    only_k = {r[1] for r in k.ranges} - common
    only_n = {(r[0], r[1]) for r in n.ranges if r[1] not in common}
    assert "Optimizer.step#AdamW.step" in only_k and any(t.startswith("## Call CompiledFxGraph") for t in only_k)
    assert {d for d, _ in only_n} == {"CCCL"}
    assert per_path(k)[("step 1/optimizer/Optimizer.step#AdamW.step", "multi_tensor_apply_kernel")] == 32


# --- other people's traces -----------------------------------------------------------------------

@pytest.mark.parametrize("rel, kernels, apis, gpu, rank", [
    ("triton_example/triton_example.json.gz", 1, {"cuLaunchKernel": 1}, "NVIDIA A100-PG509-200", None),
    ("trace_file_list/inference_rank_1.json.gz", 4, {"cudaLaunchKernel": 4}, None, 1),  # Kernel/Runtime layout
    ("amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz", 14, {"hipLaunchKernel": 12, "hipExtModuleLaunchKernel": 2},
     "AMD Radeon Graphics", None),
    ("trace_filter/sampled_rank-0.json.gz", 1154, {"cudaLaunchKernel": 1154}, None, 0),
    ("trace_filter/sampled_rank-1.json.gz", 1104, {"cudaLaunchKernel": 1104}, None, 1),
    ("ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 4350, {"cudaLaunchKernel": 4350},
     "Tesla V100-SXM2-32GB", None),  # world_size 1: a single process
])
def test_other_peoples_traces(rel, kernels, apis, gpu, rank):
    path = HTA / rel
    assert parsers.detect(path) is kineto
    rep = kineto.parse(path)
    assert len(rep.kernels) == kernels == sum(e.get("cat") in ("kernel", "Kernel") for e in raw_events(path))
    assert Counter(k[F["api_name"]] for k in rep.kernels) == apis
    assert rep.facts.get("gpu_name") == gpu and rep.facts.get("rank") == rank


def test_ranks_and_world_size_from_distributed_info():
    r0 = kineto.parse(RANK0)
    assert (r0.facts["rank"], r0.facts["world_size"], r0.facts["distributed_backend"]) == (0, 128, "nccl")
    assert sum(k[F["short_name"]].startswith("ncclKernel") for k in r0.kernels) == 10
    assert kineto.parse(NS_RES).facts["world_size"] == 1


def test_a_cpu_only_trace_gets_one_line():
    path = HTA / "cpu_only" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    assert parsers.detect(path) is kineto  # its distributedInfo runs past the first 4 KB
    with pytest.raises(BadInput, match=r"no GPU kernel among its 30 events \(user_annotation 11, cpu_op 4, Trace 1\): "
                                       r"captured without ProfilerActivity.CUDA\?"):
        kineto.parse(path)


def test_cpu_ops_as_ranges_on_request(ws):
    ops = kineto.parse(WS, cpu_ops=True)
    n_ops = sum(e.get("cat") == "cpu_op" for e in raw_events(WS))
    assert len(ops.ranges) == 15 + n_ops and {r[0] for r in ops.ranges} == {None, "cpu_op"}
    assert [k[F["seq"]] for k in ops.kernels] == [k[F["seq"]] for k in ws.kernels]
    for a, b in zip(ops.kernels, ws.kernels):  # the op ranges nest inside the user's
        assert a[F["nvtx_path"]].startswith(b[F["nvtx_path"]])
    assert per_path(ops)[("step 0/norm/aten::to/aten::_to_copy/aten::copy_", "unrolled_elementwise_kernel")] == 1


# --- ingest ---------------------------------------------------------------------------------------

def test_ingest_through_the_cli(tmp_path, copy):
    db = str(tmp_path / "k.db")
    r = CliRunner().invoke(cli, ["ingest", "--db", db, str(WS)])
    assert r.exit_code == 0, r.output
    assert "ws.kineto.json: kineto-trace -> run ws: 36 kernels, 15 NVTX ranges, 0 counters" in r.output
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*), min(source), max(source) FROM launch").fetchone() == (36, "kineto", "kineto")
        assert c.execute("SELECT gpu_name FROM run").fetchone() == ("NVIDIA H100 80GB HBM3",)


def test_two_ranks_load_into_one_run(tmp_path, copy):
    db = str(tmp_path / "r.db")
    r = CliRunner().invoke(cli, ["ingest", "--db", db, str(copy(RANK0)), str(copy(RANK1))])
    assert r.exit_code == 0, r.output
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT run, rank, count(*) FROM launch GROUP BY run, rank").fetchall() == \
            [("sampled", 0, 1154), ("sampled", 1, 1104)]


# --- whole or refused -------------------------------------------------------------------------------

@pytest.mark.parametrize("frac", [0.0005, 0.1, 0.5, 0.9, 0.9999])
def test_a_cut_trace_is_refused_whole(tmp_path, frac):
    data = WS.read_bytes()
    cut = tmp_path / "cut.kineto.json"
    cut.write_bytes(data[:int(len(data) * frac)])
    with pytest.raises(BadInput, match="truncated"):
        parsers.detect(cut).parse(cut)
    gz = tmp_path / "cut.kineto.json.gz"
    whole = gzip.compress(data)
    gz.write_bytes(whole[:max(20, int(len(whole) * frac))])
    with pytest.raises(BadInput, match="truncated"):
        parsers.detect(gz).parse(gz)


def test_a_cut_trace_leaves_the_database_as_it_was(tmp_path):
    db = str(tmp_path / "c.db")
    ok = CliRunner().invoke(cli, ["ingest", "--db", db, str(WS2)])
    assert ok.exit_code == 0
    before = "\n".join(sqlite3.connect(db).iterdump())
    cut = tmp_path / "cut.kineto.json"
    cut.write_bytes(WS.read_bytes()[:-40])
    r = CliRunner().invoke(cli, ["ingest", "--db", db, str(cut)])
    assert r.exit_code == 2 and "truncated" in r.output and "Traceback" not in r.output
    assert "\n".join(sqlite3.connect(db).iterdump()) == before


@pytest.mark.parametrize("text", [
    b'{"name": "not a trace", "values": [1, 2, 3]}',
    b'{"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json"}',
    b'{"traceEvents": [{"name": "ParseHTML", "cat": "devtools.timeline", "ph": "X", "ts": 1, "dur": 2}]}',
    b'[{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}]',
])
def test_other_json_is_not_claimed(tmp_path, text):
    p = tmp_path / "other.json"
    p.write_bytes(text)
    with pytest.raises(BadInput, match="unrecognised format"):
        parsers.detect(p)
    gz = tmp_path / "other.json.gz"
    gz.write_bytes(gzip.compress(text))
    with pytest.raises(BadInput, match="unrecognised format"):
        parsers.detect(gz)


@pytest.mark.parametrize("old, new, why", [
    ('"ts": 4539407908464.079', '"ts": "soon"', "is not a time in microseconds"),
    ('"ts": 4539407908464.079', '"ts": NaN', "NaN is not a JSON number"),
    ('"grid": [16384, 1, 1]', '"grid": [16384, 1]', "grid is not 3 integers"),
    ('"stream": 7, "correlation": 11,', '"stream": 7, "correlation": 1.5,', "correlation 1.5 is not an integer"),
    ('"name": "step 0"', '"name": "\\ud800"', "its name is not text"),
    ('"traceEvents": [', '"traceEvents": [[],', "traceEvents[0] is not an event object"),
])
def test_a_bad_field_is_one_precise_line(tmp_path, old, new, why):
    text = WS.read_text()
    assert old in text
    p = tmp_path / "bad.kineto.json"
    p.write_text(text.replace(old, new, 1))
    with pytest.raises(BadInput, match=re.escape(why)):
        parsers.detect(p).parse(p)
