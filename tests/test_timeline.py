"""profkit.timeline on real nsys exports: busy / idle per NVTX range, operator shares.

Expected values read once from the committed captures and cross-checked here with plain
SQL over the loaded rows (containment of the launching call in the range, union of the
kernel intervals computed apart from the library).
"""
import json

import pytest
from click.testing import CliRunner

from profdata import KNOWN_NSYS
from profkit import timeline
from profkit.cli import cli
from profkit.ingest import ingest
from profkit.store import Store


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("tl") / "k.db")
    ingest(db, [KNOWN_NSYS], run="known")
    s = Store(db)
    yield s
    s.close()


def _row(rows, path):
    return next(r for r in rows if r["path"] == path)


def test_union_length():
    assert timeline.union_length([]) == 0
    assert timeline.union_length([(0, 10), (5, 15), (20, 30), (30, 31), (2, 3)]) == 26
    assert timeline.union_length([(5, 6), (0, 100)]) == 100


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
        ks = known.query("""
            SELECT l.start_ns s, l.end_ns e FROM launch l JOIN nvtx_range n
              ON n.run = l.run AND n.file_id = l.file_id AND n.pid = l.pid AND n.tid = l.tid
             AND l.api_start_ns BETWEEN n.start_ns AND n.end_ns
            WHERE l.run = 'known' AND n.path = ? AND n.kind = 'push_pop' AND l.timeline_id IS NULL
            ORDER BY l.start_ns""", (path,))
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
    assert [o["operator"] for o in ops] == ["occupancy_limited", "rmsnorm_eager", "bf16_4096", "rmsnorm_triton", "burst"]
    assert sum(o["share_pct"] for o in ops) == pytest.approx(100.0)
    assert ops[1]["kernels"] == 24 and ops[1]["top_kernel"] == "elementwise_kernel"
    assert ops[0]["share_pct"] == pytest.approx(47.48, abs=0.01)


def test_cli(known):
    res = CliRunner().invoke(cli, ["timeline", "--db", known.path, "--range", "known/tiny_launches",
                                   "--ops", "known/tiny_launches", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["run"] == "known"
    assert [r["path"] for r in d["ranges"]] == ["known/tiny_launches", "known/tiny_launches/burst"]
    assert d["operators"]["known/tiny_launches"][0]["operator"] == "burst"
    res = CliRunner().invoke(cli, ["timeline", "--db", known.path, "--ops", "no/such/range"])
    assert res.exit_code == 2 and "no kernels under the NVTX path 'no/such/range'" in res.output
    res = CliRunner().invoke(cli, ["timeline", "--db", known.path, "--run", "nope"])
    assert res.exit_code == 5
