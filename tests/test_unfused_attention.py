"""Attention in pieces (SDPA's math backend) is found on a real H100 capture, and nothing else is
taken for it: the same program on cuDNN's fused backend, a ResNet training step
(tests/data/program-pairs, H100 80GB HBM3, torch 2.11, 2026-12-05)."""
import json

import pytest

from profkit.analyses import advise as adv
from profkit.analyses import unfused_attention as ua
from profkit.store.ingest import ingest
from profkit.store.store import Store


@pytest.fixture
def pairs(data_set):
    return data_set("program-pairs")


def _blocks(pairs, run: str, tmp_path):
    db = str(tmp_path / f"{run}.db")
    ingest(db, sorted((pairs / run).glob("*.nsys.sqlite.xz")) + [pairs / run / "capture.json"], run=run)
    s = Store(db)
    ks = adv._read(s, run, None)

    def grid_z(pos):
        ids = ks.kid[pos].tolist()
        got = dict(
            s.conn.execute(
                "SELECT id, grid_z FROM launch_row WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),)
            )
        )
        return [got.get(i) or 1 for i in ids]

    return s, ua.find(ks.names, ks.kname, ks.family, ks.families, ks.stream, ks.dur, grid_z)


def test_the_math_backend_is_found_pass_by_pass(pairs, tmp_path):
    _, blocks = _blocks(pairs, "pair-sdpa-before-math", tmp_path)
    fwd = [b for b in blocks if b.pass_ == "fwd"]
    bwd = [b for b in blocks if b.pass_ == "bwd"]
    # 30 timed steps and 5 warm-up steps, one forward and one backward each
    assert len(fwd) == len(bwd) == 35
    # B 8 x H 12 heads in the batched GEMMs; S 512 from the warp softmax's template
    assert {(b.batch, b.seq) for b in blocks} == {(96, 512)}
    # forward: the upcasts of q, k, v, the scale and the causal mask (ten launches), then Q K^T, the
    # mask, softmax and P V (nine); backward: the output's downcast and the gradient's upcast, four
    # GEMMs around the softmax's backward, the gradients' scaling and downcasts (14): every one of
    # a step's 33 launches
    assert {len(b.ix) for b in fwd} == {19} and {len(b.ix) for b in bwd} == {14}


def test_the_switch_is_priced_from_the_measured_ratios(pairs, tmp_path):
    """The math backend's forward runs 27.8x and its backward 8.7x the fastest fused backend's
    time at S 512 (the sweep on the H100, profkit/model/attainable_measured.json): the pieces'
    1.29 ms a step become ~0.1 ms."""
    _, blocks = _blocks(pairs, "pair-sdpa-before-math", tmp_path)
    sw = ua.predict(blocks)
    assert sw is not None and sw.backend == "cudnn"
    per_step_before, per_step_after = sw.pieces_ns / 35, sw.fused_ns / 35
    assert per_step_before == pytest.approx(1.29e6, rel=0.02)
    assert 80e3 < per_step_after < 120e3
    assert "fwd math 27.8x the time of cudnn at S 512" in sw.how and "bwd math 8.7x" in sw.how


@pytest.mark.parametrize("run", ["pair-sdpa-after-cudnn", "pair-sync-after-end"])
def test_fused_attention_and_convnets_hold_none(pairs, run, tmp_path):
    _, blocks = _blocks(pairs, run, tmp_path)
    assert blocks == []


def test_seq_bound_reads_the_warp_softmax_template():
    name = "void <unnamed>::softmax_warp_forward<float, float, float, (int)9, (bool)0, (bool)0>(T2 *, const T1 *)"
    assert ua.seq_bound(name) == 512
    assert ua.seq_bound("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, float>") is None
