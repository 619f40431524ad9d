"""NCCL collectives on real reports: the two-H200 DDP capture (nsys, no message sizes in its
NVTX payloads), HolisticTraceAnalysis's sampled ranks (Kineto, record_param_comms without
element counts, world size 128) and its ns-resolution trace (record_param_comms with
`In msg nelems`, `dtype`, `Group size`)."""
import json

import pytest
from click.testing import CliRunner
from profdata import PROFILES, ROOT

from profkit.analyses import collectives as co
from profkit.analyses import ranks as rk
from profkit.cli import cli
from profkit.store.ingest import ingest
from profkit.store.profiles import report_files
from profkit.store.store import Store

SLOW = PROFILES / "ddp-2gpu-slow"
HTA = ROOT / "tests" / "data" / "kineto-hta"
NCCL_DATA = HTA / "nccl_parser_config" / "nccl_data.json.gz"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("coll") / "c.db")
    ingest(path, report_files(SLOW), run=SLOW.name)
    ingest(path, sorted((HTA / "trace_filter").iterdir()), run="hta")
    ingest(path, [NCCL_DATA], run="nccl_data")
    return path


@pytest.mark.parametrize("name, want", [
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", ("AllReduce", "RING", "LL", "Sum", "bf16")),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", ("SendRecv", "RING", "SIMPLE", "Sum", "int8_t")),
    ("ncclDevKernel_Broadcast_RING_LL", ("Broadcast", "RING", "LL", None, None)),
    ("ncclDevKernel_ReduceScatter_Sum_f32_NVLS_TREE_SIMPLE", ("ReduceScatter", "NVLS_TREE", "SIMPLE", "Sum", "f32")),
    ("ncclDevKernel_AllGather_RING_LL128(ncclDevKernelArgsStorage<4096ul>)",
     ("AllGather", "RING", "LL128", None, None)),
    ("void at::native::foo<float>(float*)", (None, None, None, None, None)),
])
def test_kernel_names(name, want):
    p = co.parse_name(name)
    assert (p["collective"], p["algorithm"], p["protocol"], p["reduction"], p["dtype"]) == want


def test_bus_factors_are_nccl_tests():
    assert co.bus_factor("AllReduce", 8) == 2 * 7 / 8
    assert co.bus_factor("AllGather", 4) == co.bus_factor("ReduceScatter", 4) == 3 / 4
    assert co.bus_factor("Broadcast", 8) == 1.0 and co.bus_factor("Nope", 8) is None


def test_torch_sizes_from_record_param_comms():
    events, world = co.torch_sizes(HTA / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    assert world == 1
    first = events[0]
    assert first == {"collective": "Broadcast", "bytes": 212480, "group_size": 1, "dtype": "Float",
                     "from": "record_param_comms"}
    assert sum(1 for e in events if e["collective"] == "AllReduce") == 25
    allreduce = next(e for e in events if e["collective"] == "AllReduce")
    assert allreduce["bytes"] == 2049000 * 4
    old, world = co.torch_sizes(HTA / "trace_filter" / "sampled_rank-0.json.gz")
    assert world == 128 and len(old) == 8 and all(e["bytes"] is None for e in old)


def test_ddp_collectives_and_waits(db):
    with Store(db, readonly=True) as s:
        r = co.analyse(s, SLOW.name)
        ranks = rk.analyse(s, SLOW.name)
    kinds = {(x["collective"], x["dtype"]): x["kernels"] for x in r.summary}
    assert kinds == {("AllReduce", "bf16"): 58, ("Broadcast", None): 8, ("AllGather", None): 2, ("AllReduce", "f32"): 6}
    assert all(k["bytes"] is None and k["busbw_gbps"] is None for k in r.kernels)
    assert any("message sizes unknown" in n for n in r.notes)
    # the slow rank 1 arrives last at every collective of every step: it never waits
    w = {(x["rank"], x["step"]): x["wait_ns"] for x in r.waits}
    assert all(w[(1, s)] == 0 for s in ranks.steps)
    # rank 0's arrival skew agrees with its extra NCCL time (profkit ranks) to 1 %
    for x in ranks.per_rank_step:
        if x.rank == 0:
            assert w[(0, x.step)] == pytest.approx(x.wait_ns, rel=0.01)


def test_hta_sampled_ranks_use_the_world_size(db):
    with Store(db, readonly=True) as s:
        r = co.analyse(s, "hta")
    assert {k["collective"] for k in r.kernels} == {"SendRecv"}
    assert {k["group_size"] for k in r.kernels} == {128}
    assert any("without element counts" in n for n in r.notes)


def test_link_peak_rates_busbw(db, monkeypatch):
    sizes = [{"collective": "SendRecv", "bytes": 1 << 20, "group_size": 128, "dtype": "Float"}] * 100
    monkeypatch.setattr(co, "torch_sizes", lambda path: (sizes, 128))
    with Store(db, readonly=True) as s:
        gpu = s.conn.execute("SELECT gpu_name FROM runs WHERE run = 'hta'").fetchone()[0]
        peak = {"gpu": gpu, "ceiling": "nvlink", "kind": "memory", "value": 450e9, "label": "NVLink", "how": "test"}
        r = co.analyse(s, "hta", [peak])
    k = r.kernels[0]
    assert k["algbw_gbps"] == pytest.approx((1 << 20) / (k["duration_ns"] * 1e-9) / 1e9)
    assert k["busbw_gbps"] == pytest.approx(k["algbw_gbps"])  # send/recv: factor 1
    assert k["busbw_pct_of_peak"] == pytest.approx(100 * k["busbw_gbps"] * 1e9 / 450e9)


def test_cli_collectives(db):
    res = CliRunner().invoke(cli, ["collectives", "--db", db, "--run", SLOW.name, "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["ranks"] == [0, 1] and len(d["kernels"]) == 74
    res = CliRunner().invoke(cli, ["collectives", "--db", db, "--run", SLOW.name])
    assert res.exit_code == 0 and "AllReduce" in res.output and "waiting for the last rank" in res.output


def test_sizes_from_the_nccl_kernels_own_args(db):
    """HTA's A100 trace: each NCCL kernel event carries its collective's arguments; every
    kernel's size and busbw follow from its own event, matched in order."""
    import gzip

    events = json.load(gzip.open(NCCL_DATA))["traceEvents"]
    mine = sorted((e for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl")),
                  key=lambda e: e["ts"])
    with Store(db, readonly=True) as s:
        r = co.analyse(s, "nccl_data")
    assert len(r.kernels) == len(mine) == 21
    width = {"Float": 4, "Byte": 1, "Char": 1, "Long": 8, "Int": 4}
    for k, e in zip(r.kernels, mine):
        a = e["args"]
        assert k["bytes"] == max(a["In msg nelems"], a["Out msg nelems"]) * width[a["dtype"]]
        assert k["size_from"] == "kernel args" and k["group_size"] == a["Group size"] == 2
        assert k["duration_ns"] == pytest.approx(e["dur"] * 1e3, abs=1)
        # all-reduce over 2 ranks: bus factor 2 (n - 1) / n = 1
        assert k["busbw_gbps"] == pytest.approx(k["bytes"] / (k["duration_ns"] * 1e-9) / 1e9)
    assert {(x["collective"], x["kernels"]) for x in r.summary} == {("AllReduce", 15), ("Broadcast", 6)}
    assert r.kernels[2]["bytes"] == 2049000 * 4  # the first all-reduce: 2,049,000 floats
