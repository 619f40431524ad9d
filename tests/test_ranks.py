"""Multi-rank runs from the real two-H200 capture (benchmarks/gpu/capture_ranks.sh):
profiles/ddp-2gpu (balanced DDP step, ncu on rank 0) and profiles/ddp-2gpu-slow (rank 1 runs
8 extra matmuls before backward). Values are exact; the communication times are cross-checked
against a plain SQL sum over the NCCL kernels each step launched."""
import json
import lzma
import shutil

import pytest
from click.testing import CliRunner

from profkit.analyses import ranks as rk
from profkit.store.profiles import load_profiles, report_files
from profkit.cli import cli
from profkit.store.ingest import ingest, rank_in_name, run_name_for
from profkit.store.store import Store
from profdata import PROFILES

BAL, SLOW = PROFILES / "ddp-2gpu", PROFILES / "ddp-2gpu-slow"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ranks") / "r.db")
    for folder in (BAL, SLOW):
        ingest(path, report_files(folder), run=folder.name)
    return path


@pytest.fixture(scope="module")
def store(db):
    s = Store(db)
    yield s
    s.close()


def test_each_rank_keeps_its_reports(store):
    assert [f.name for f in report_files(BAL)] == [
        "ddp-2gpu.rank0.nsys.sqlite.xz", "ddp-2gpu.rank0.ncu-rep.xz", "ddp-2gpu.rank1.nsys.sqlite.xz"]
    rows = store.query("SELECT run, rank, source, count(*) n, sum(short_name LIKE 'nccl%') nccl FROM kernels"
                       " WHERE run LIKE 'ddp%' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")
    assert rows == [
        {"run": "ddp-2gpu", "rank": 0, "source": "nsys", "n": 331, "nccl": 37},
        {"run": "ddp-2gpu", "rank": 1, "source": "nsys", "n": 331, "nccl": 37},
        {"run": "ddp-2gpu-slow", "rank": 0, "source": "nsys", "n": 331, "nccl": 37},
        {"run": "ddp-2gpu-slow", "rank": 1, "source": "nsys", "n": 397, "nccl": 37},  # + 8 matmuls x 8 steps + 2
    ]
    # nsys recorded RANK in each process's environment, and the names agree
    facts = store.query("SELECT path, rank, json_extract(facts, '$.rank') recorded FROM report_file"
                        " WHERE format = 'nsys-sqlite'")
    assert all(f["rank"] == f["recorded"] == rank_in_name(f["path"]) for f in facts) and len(facts) == 4


def test_ncu_on_rank_0_attaches_to_rank_0_step_1(store):
    """35 kernels of step 1 profiled on rank 0 (NCCL skipped); every one pairs with the
    timeline launch of the same step, although ncu saw NCCL's init range still open."""
    rows = store.query("""
        SELECT t.rank, t.nvtx_path, count(*) n FROM launch n JOIN launch t ON t.id = n.timeline_id
        WHERE n.run = 'ddp-2gpu' AND n.source = 'ncu' GROUP BY 1, 2 ORDER BY 2""")
    assert rows == [{"rank": 0, "nvtx_path": "step 1", "n": 19}, {"rank": 0, "nvtx_path": "step 1/backward", "n": 1},
                    {"rank": 0, "nvtx_path": "step 1/forward", "n": 11}, {"rank": 0, "nvtx_path": "step 1/optimizer", "n": 4}]
    assert store.query("SELECT count(*) n FROM kernels WHERE run = 'ddp-2gpu' AND source = 'ncu'") == [{"n": 0}]
    assert store.query("SELECT DISTINCT rank FROM counters WHERE run = 'ddp-2gpu'") == [{"rank": 0}]
    assert store.query("SELECT count(*) n FROM counters WHERE run = 'ddp-2gpu' AND kernel_name LIKE 'nccl%'") == [{"n": 0}]


def per_rank(r):
    return {p["rank"]: p for p in r.per_rank}


def test_straggler_found_in_the_slowed_run(store):
    r = rk.analyse(store, "ddp-2gpu-slow")
    assert r.ranks == [0, 1] and r.steps == [f"step {i}" for i in range(5)]
    p = per_rank(r)
    assert {k: (p[k]["kernels"], p[k]["comm_kernels"]) for k in p} == {0: (195, 20), 1: (235, 20)}
    assert (p[0]["comm_ns"], p[1]["comm_ns"]) == (23_979_243, 3_132_184)
    assert (p[0]["compute_ns"], p[1]["compute_ns"]) == (26_143_784, 37_500_302)
    assert (p[0]["wait_ns"], p[1]["wait_ns"]) == (20_847_059, 0)
    assert r.slowest_rank == 1 and p[1]["slowest_in_steps"] == 5
    assert [s["slowest_rank"] for s in r.per_step] == [1] * 5 and [s["latest_rank"] for s in r.per_step] == [1] * 5
    assert [s["wait_skew_ns"] for s in r.per_step] == [4_186_207, 4_180_509, 4_142_333, 4_151_581, 4_186_429]
    # the two nsys sessions' clocks differ by 37.85 ms; aligned on collective ends, the steps end together
    assert p[1]["clock_offset_ns"] == 37_852_399 and max(s["end_skew_ns"] for s in r.per_step) < 10_000
    assert all(2_600_000 < s["arrival_skew_ns"] < 2_700_000 for s in r.per_step)


def test_balanced_run_has_a_small_natural_skew(store):
    r = rk.analyse(store, "ddp-2gpu")
    p = per_rank(r)
    assert {k: (p[k]["kernels"], p[k]["comm_kernels"]) for k in p} == {0: (195, 20), 1: (195, 20)}
    assert (p[0]["comm_ns"], p[1]["comm_ns"]) == (3_163_450, 5_183_829)
    assert (p[0]["overlap_ns"], p[1]["overlap_ns"]) == (2_316_381, 3_878_872)
    assert (p[0]["idle_ns"], p[1]["idle_ns"]) == (917_919, 942_814)
    assert r.slowest_rank == 0 and p[1]["wait_ns"] == 2_020_379  # 0.4 ms a step, a tenth of the injected one
    assert p[1]["clock_offset_ns"] == 19_831_309


@pytest.mark.parametrize("run", ["ddp-2gpu", "ddp-2gpu-slow"])
def test_communication_time_equals_a_plain_sql_sum(store, run):
    """NCCL kernels of one rank never overlap each other, so the union is the sum of the NCCL
    kernels launched inside the `step N` ranges (start/end ranges: any thread)."""
    want = {r["rank"]: r["t"] for r in store.query(
        "SELECT rank, sum(duration_ns) t FROM kernels WHERE run = ? AND short_name LIKE 'nccl%' AND nvtx_path LIKE 'step %'"
        " GROUP BY rank", (run,))}
    r = rk.analyse(store, run)
    assert {p["rank"]: p["comm_ns"] for p in r.per_rank} == want
    for x in r.per_rank_step:  # the parts add up to the window
        assert x.compute_ns - x.overlap_ns + x.comm_ns + x.idle_ns == x.window_ns


def test_cli_json_and_html(db, tmp_path):
    html = tmp_path / "r.html"
    res = CliRunner().invoke(cli, ["ranks", "--db", db, "--run", "ddp-2gpu-slow", "--json", "--html", str(html)])
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    assert got["slowest_rank"] == 1 and len(got["per_rank_step"]) == 10 and "collectives" not in got["per_rank_step"][0]
    text = html.read_text()
    assert "NCCL exposed" in text and "slowest rank: 1" in text
    assert len(text) > 1_000_000 and 'src="https://cdn' not in text  # plotly.js inline: self-contained
    res = CliRunner().invoke(cli, ["ranks", "--db", db, "--run", "ddp-2gpu-slow"])
    assert res.exit_code == 0 and "slowest rank: 1 (the others waited for it in 5 of 5 steps)" in res.output
    res = CliRunner().invoke(cli, ["ranks", "--db", db, "--run", "ddp-2gpu", "--steps", "("])
    assert res.exit_code != 0 and "not a regular expression" in res.output and "Traceback" not in res.output


def test_rank_from_recorded_environment_name_or_option(tmp_path):
    src = SLOW / "ddp-2gpu-slow.rank1.nsys.sqlite.xz"
    plain = tmp_path / "trace.nsys.sqlite"  # no rank in the name: nsys recorded RANK=1, WORLD_SIZE=2
    plain.write_bytes(lzma.decompress(src.read_bytes()))
    db = str(tmp_path / "d.db")
    assert [(x.run, x.rank) for x in ingest(db, [plain])] == [("trace", 1)]
    res = CliRunner().invoke(cli, ["ingest", "--db", str(tmp_path / "e.db"), "--rank", "7", str(plain)])
    assert res.exit_code == 0 and "run trace rank 7" in res.output
    assert run_name_for(src) == "ddp-2gpu-slow" and rank_in_name(src) == 1
    assert rank_in_name(tmp_path / "x_rank_3.sqlite") == 3 and rank_in_name(tmp_path / "frank1.sqlite") is None


def test_single_process_run_is_one_rank(tmp_path):
    db = str(tmp_path / "k.db")
    load_profiles_known = [f for f in report_files(PROFILES / "known")]
    ingest(db, load_profiles_known, run="known")
    s = Store(db)
    try:
        assert s.query("SELECT DISTINCT rank FROM kernels") == [{"rank": None}]
        r = rk.analyse(s, "known")
    finally:
        s.close()
    assert r.ranks == [None] and r.steps == ["all"] and r.slowest_rank is None
    assert per_rank(r)[None]["comm_ns"] == 0 and per_rank(r)[None]["kernels"] == 166


def test_main_job_loads_ranked_folders(tmp_path):
    root = tmp_path / "profiles"
    root.mkdir()
    shutil.copytree(SLOW, root / SLOW.name)
    db = str(tmp_path / "m.db")
    loaded = load_profiles(root, db)
    assert [(x.run, x.rank) for x in loaded] == [("ddp-2gpu-slow", 0), ("ddp-2gpu-slow", 1)]
    s = Store(db)
    try:
        meta = json.loads(s.query("SELECT meta FROM runs")[0]["meta"])
    finally:
        s.close()
    assert meta["env"]["NCCL_NVLS_ENABLE"] == "0" and "NV18" in meta["topology"] and len(meta["gpus"]) == 2


def test_torch_profiler_steps_of_a_two_rank_trace(tmp_path):
    # HolisticTraceAnalysis's real 2-rank Kineto traces (MIT): torch.profiler marks each step
    # `ProfilerStep#N`; both ranks' steps line up by name, every kernel falls in one of them
    hta = PROFILES.parent / "tests" / "data" / "kineto-hta" / "trace_filter"
    db = tmp_path / "k.db"
    ingest(db, [hta / "sampled_rank-0.json.gz", hta / "sampled_rank-1.json.gz"], run="tf")
    with Store(db) as s:
        r = rk.analyse(s, "tf")
        launched = dict(s.conn.execute("SELECT rank, count(*) FROM kernels WHERE run = 'tf' GROUP BY rank"))
    steps = {(x.step, x.rank): x.kernels for x in r.per_rank_step}
    assert set(steps) == {(f"ProfilerStep#{n}", k) for n in (551, 552) for k in (0, 1)}
    assert {k: sum(n for (_, rank), n in steps.items() if rank == k) for k in (0, 1)} == launched
    assert not any("no NVTX range matches" in n for n in r.notes)
