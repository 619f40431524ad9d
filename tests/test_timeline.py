"""profkit.analyses.timeline on real nsys exports: busy / idle per NVTX range, operator shares.

Expected values read once from the committed captures and cross-checked here with plain
SQL over the loaded rows (containment of the launching call in the range, union of the
kernel intervals computed apart from the library).
"""

import json

import pytest
from click.testing import CliRunner
from profdata import KNOWN_NSYS, PROFILES, ROOT

from profkit.analyses import timeline
from profkit.cli import cli
from profkit.core import intervals
from profkit.store.ingest import ingest
from profkit.store.store import Store


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("tl") / "k.db")
    ingest(db, [KNOWN_NSYS], run="known")
    s = Store(db)
    yield s
    s.close()


# H200 captures of the decoder stack (benchmarks/gpu/e2e.sh): 4 Llama-3-8B-shaped layers
E2E_DECODE = PROFILES / "e2e-decode" / "e2e-decode.nsys.sqlite.xz"
DEC = "e2e/decode/{}/llama3-8b-l4-ctx448"


@pytest.fixture(scope="module")
def e2e(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("e2e") / "e2e.db")
    ingest(db, [E2E_DECODE], run="e2e-decode")
    s = Store(db)
    yield s
    s.close()


def _row(rows, path):
    return next(r for r in rows if r["path"] == path)


def test_union_length():
    assert intervals.covered([]) == 0
    assert intervals.covered([(0, 10), (5, 15), (20, 30), (30, 31), (2, 3)]) == 26
    assert intervals.covered([(5, 6), (0, 100)]) == 100


def test_tiny_launches_are_mostly_idle(known):
    """100 one-block adds of 256 floats: each runs ~1 us, the GPU waits ~8.5 us for the next."""
    r = _row(timeline.ranges(known, "known"), "known/tiny_launches/burst")
    assert (r["instances"], r["kernels"], r["launch_calls"]) == (1, 100, 100)
    assert (r["window_ns"], r["busy_ns"], r["idle_ns"]) == (949309, 94784, 854525)
    assert r["idle_pct"] == pytest.approx(90.02, abs=0.01)


def test_big_kernels_keep_the_gpu_busy(known):
    rows = timeline.ranges(known, "known")
    gemm = _row(rows, "known/gemm_cublas/bf16_4096")
    assert gemm["kernels"] == 3 and gemm["idle_pct"] == pytest.approx(1.25, abs=0.01)
    assert _row(rows, "known/occupancy_limited")["idle_pct"] < 0.1
    top = _row(rows, "known")
    assert top["kernels"] == 133 and top["busy_ns"] == top["kernel_ns"] == 6544615  # one stream: no overlap


def test_agrees_with_plain_sql(known):
    """Every range's kernels by SQL containment of the launching call, and the union by a
    sweep here: same counts and busy times as the library's bisect per instance."""
    got = {r["path"]: r for r in timeline.ranges(known, "known")}
    for path, r in got.items():
        ks = known.query(
            """
            SELECT l.start_ns s, l.end_ns e FROM launch l JOIN nvtx_range n
              ON n.run = l.run AND n.file_id = l.file_id AND n.pid = l.pid AND n.tid = l.tid
             AND l.api_start_ns BETWEEN n.start_ns AND n.end_ns
            WHERE l.run = 'known' AND n.path = ? AND n.kind = 'push_pop' AND l.timeline_id IS NULL
            ORDER BY l.start_ns""",
            (path,),
        )
        busy, end = 0, None
        for k in ks:
            if end is None or k["s"] >= end:
                busy += k["e"] - k["s"]
                end = k["e"]
            elif k["e"] > end:
                busy += k["e"] - end
                end = k["e"]
        assert (r["kernels"], r["busy_ns"]) == (len(ks), busy), path
        assert r["window_ns"] == ks[-1]["e"] - ks[0]["s"], path


def test_prefix_and_operator_shares(known):
    rows = timeline.ranges(known, "known", prefix="known/gemm_cublas")
    assert [r["path"] for r in rows] == ["known/gemm_cublas", "known/gemm_cublas/bf16_4096"]
    ops = timeline.operators(known, "known", "known")
    assert [o["operator"] for o in ops] == [
        "occupancy_limited",
        "rmsnorm_eager",
        "bf16_4096",
        "rmsnorm_triton",
        "burst",
    ]
    assert sum(o["share_pct"] for o in ops) == pytest.approx(100.0)
    assert ops[1]["kernels"] == 24 and ops[1]["top_kernel"] == "elementwise_kernel"
    assert ops[0]["share_pct"] == pytest.approx(47.48, abs=0.01)


def test_cli(known):
    res = CliRunner().invoke(
        cli,
        ["timeline", "--db", known.path, "--range", "known/tiny_launches", "--ops", "known/tiny_launches", "--json"],
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["run"] == "known"
    assert [r["path"] for r in d["ranges"]] == ["known/tiny_launches", "known/tiny_launches/burst"]
    assert d["operators"]["known/tiny_launches"][0]["operator"] == "burst"
    res = CliRunner().invoke(cli, ["timeline", "--db", known.path, "--ops", "no/such/range"])
    assert res.exit_code == 2 and "no kernels under the NVTX path 'no/such/range'" in res.output
    res = CliRunner().invoke(cli, ["timeline", "--db", known.path, "--run", "nope"])
    assert res.exit_code == 5


# --- the decoder stack: eager launches vs CUDA-graph replay ----------------------------------


def test_decode_step_launch_overhead(e2e):
    """12 traced decode steps per variant. Eager: 173 kernels, 173 launches, the GPU idle 80 %
    of the step (waiting for launches). Graph replay: the same 173 kernels from 2 launch calls
    (the position fill and cudaGraphLaunch); idle falls to 16 % (gaps between graph nodes)."""
    calls = {r["path"]: r for r in timeline.calls(timeline.ranges(e2e, "e2e-decode"))}
    assert set(calls) == {DEC.format(v) + "/step" for v in ("eager", "lab", "graph", "graph_lab")}
    eager, graph = calls[DEC.format("eager") + "/step"], calls[DEC.format("graph") + "/step"]
    lab, graph_lab = calls[DEC.format("lab") + "/step"], calls[DEC.format("graph_lab") + "/step"]
    assert (eager["instances"], eager["kernels"], eager["launch_calls"]) == (12, 2076, 2076)
    assert (graph["instances"], graph["kernels"], graph["launch_calls"]) == (12, 2076, 24)
    assert (lab["kernels"], lab["launch_calls"], graph_lab["kernels"], graph_lab["launch_calls"]) == (672, 672, 672, 24)
    assert (eager["window_ns"], eager["busy_ns"]) == (46236031, 9005118)
    assert (graph["window_ns"], graph["busy_ns"]) == (10843308, 9073541)
    assert eager["idle_pct"] == pytest.approx(80.52, abs=0.01)
    assert lab["idle_pct"] == pytest.approx(77.33, abs=0.01)
    assert graph["idle_pct"] == pytest.approx(16.32, abs=0.01)
    assert graph_lab["idle_pct"] == pytest.approx(10.21, abs=0.01)
    # replay removes the idle time, not the work: busy time per step within 1 %
    assert abs(graph["busy_ns"] - eager["busy_ns"]) / eager["busy_ns"] < 0.01
    assert eager["window_us_per_instance"] / graph["window_us_per_instance"] == pytest.approx(4.26, abs=0.01)


def test_graph_kernels_hang_under_the_replay(e2e):
    rows = e2e.query(
        """SELECT api_name, count(*) n FROM kernels WHERE run = 'e2e-decode'
                        AND nvtx_path = ? GROUP BY 1 ORDER BY 1""",
        (DEC.format("graph") + "/step",),
    )
    assert [(r["api_name"], r["n"]) for r in rows] == [("cudaGraphLaunch_v10000", 2064), ("cudaLaunchKernel_v7000", 12)]


def test_decode_operator_shares(e2e):
    """Eager: the GEMVs (weights streamed once per token) take 61 % of the kernel time, the
    HF-style norms 16 % in 960 small kernels; the lab kernels cut norms to 108 launches and 3 %."""
    eager = {o["operator"]: o for o in timeline.operators(e2e, "e2e-decode", DEC.format("eager"))}
    lab = {o["operator"]: o for o in timeline.operators(e2e, "e2e-decode", DEC.format("lab"))}
    assert list(eager)[:3] == ["gate_up", "down", "norm"]
    assert (eager["norm"]["kernels"], lab["norm"]["kernels"]) == (960, 108)
    assert eager["norm"]["share_pct"] == pytest.approx(15.89, abs=0.01)
    assert lab["norm"]["share_pct"] == pytest.approx(3.34, abs=0.01)
    assert lab["norm"]["top_kernel"] == "_add_rmsnorm_fwd" and lab["rope"]["top_kernel"] == "_rope_fwd"
    gemv = sum(eager[op]["share_pct"] for op in ("gate_up", "down", "qkv", "o_proj"))
    assert gemv == pytest.approx(61.14, abs=0.01)
    graph = timeline.operators(e2e, "e2e-decode", DEC.format("graph"))
    assert [(o["operator"], o["kernels"]) for o in graph] == [("step", 2076)]  # no operator ranges in a replay


def test_results_file_matches_the_committed_captures(e2e):
    """benchmarks/results/e2e_timeline.json was computed on the GPU host from these exports."""
    path = ROOT / "benchmarks" / "results" / "e2e_timeline.json"
    if not path.exists():
        pytest.skip("benchmarks/results/e2e_timeline.json not in this checkout")
    saved = json.loads(path.read_text())["runs"]
    for run in ("e2e-decode",):
        here = {r["path"]: r for r in timeline.calls(timeline.ranges(e2e, run))}
        there = {r["path"]: r for r in saved[run]["calls"]}
        assert set(here) == set(there)
        for p, r in here.items():
            assert (r["kernels"], r["window_ns"], r["busy_ns"]) == (
                there[p]["kernels"],
                there[p]["window_ns"],
                there[p]["busy_ns"],
            ), p


def test_ranges_read_a_stretch_at_a_time_sum_as_one_read(e2e, monkeypatch):
    """The ranges are read and summed a stretch of row ids at a time: stretches of 7 rows (each
    path's instances spread over many, a path's first instance in a later one than others') give
    the rows of one read, names and all."""
    whole = timeline.ranges(e2e, "e2e-decode")
    chunks = timeline._range_chunks
    monkeypatch.setattr(timeline, "_range_chunks", lambda store, run: chunks(store, run, chunk=7))
    assert timeline.ranges(e2e, "e2e-decode") == whole
    assert sum(r["instances"] for r in whole) > 100


def test_columns_after_a_write_are_read_on_the_writer(tmp_path, monkeypatch):
    """Once the store's connection has written, columns are not read through a second copy of
    SQLite (closing, it would remove the -wal holding those writes: a malformed database)."""
    db = str(tmp_path / "k.db")
    ingest(db, [KNOWN_NSYS], run="known")
    import profkit.store.store as store_module

    with Store(db) as s:
        sql = "SELECT id FROM launch_row WHERE run = ?"
        got = s.int_columns(sql, ("known",), 1)[0][0]  # through the file's own reader
        from profkit.analyses import advise

        s.replace_advice("known", None, advise.rows(advise.advise(s, "known")))  # as `profkit advise` does
        monkeypatch.setattr(store_module, "read_columns", lambda *a, **k: pytest.fail("read through ADBC"))
        assert (s.int_columns(sql, ("known",), 1)[0][0] == got).all()
