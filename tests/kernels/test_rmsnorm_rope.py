import pytest
import torch
from _kernel_helpers import check, nan_like, randn
from profkit.kernels import rmsnorm_rope as K
from profkit.kernels.rope import full_cos_sin, rope_cache


@pytest.mark.parametrize("geom", [(4, 2, 16, 16), (5, 1, 24, 8)], ids=["full", "partial"])
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
@pytest.mark.parametrize("gemma", [False, True])
def test_rmsnorm_rope(dtype, geom, interleaved, gemma):
    hq, hk, d, rd = geom
    T = 5
    q, k = randn(T, hq, d, dtype=dtype, scale=500.0), randn(T, hk, d, dtype=dtype)
    qw = randn(d, dtype=dtype, scale=0.1) + (0 if gemma else 1)
    kw = randn(d, dtype=dtype, scale=0.1) + (0 if gemma else 1)
    cos, sin = rope_cache(128, rd)
    pos = torch.randint(0, 128, (T,))
    qo, ko = K.rmsnorm_rope(q, k, qw, kw, cos, sin, pos, 1e-6, rd, interleaved, gemma,
                            q_out=nan_like(q), k_out=nan_like(k))
    qr, kr = K.rmsnorm_rope_reference(q, k, qw, kw, cos, sin, pos, 1e-6, rd, interleaved, gemma)
    check(qo, qr, dtype, "q")
    check(ko, kr, dtype, "k")
    cf, sf = full_cos_sin(cos, sin, pos, interleaved, q.dtype)
    qe, ke = K.rmsnorm_rope_eager(q, k, qw, kw, cf, sf, 1e-6, interleaved, gemma)
    check(qe, qr, dtype, "eager q")
    check(ke, kr, dtype, "eager k")


@pytest.mark.parametrize("config", [(1, 1), (2, 2), (4, 2), (0, 2)], ids=["h1", "h2", "h4", "tokenprog"])
@pytest.mark.parametrize("geom", [(5, 5, 16, 16), (6, 1, 24, 8)], ids=["full", "partial"])
def test_rmsnorm_rope_head_split_launches(config, geom):
    """Every launch the tuner may pick (BLOCK_H q or k heads per program; 0: one program per token),
    head counts that leave the last group of q and of k part-empty, against float64."""
    hq, hk, d, rd = geom
    T = 3
    q, k = randn(T, hq, d, dtype="fp32", scale=50.0), randn(T, hk, d, dtype="fp32")
    qw, kw = randn(d, dtype="fp32", scale=0.1) + 1, randn(d, dtype="fp32", scale=0.1) + 1
    cos, sin = rope_cache(64, rd)
    pos = torch.randint(0, 64, (T,))
    qo, ko = K.rmsnorm_rope(q, k, qw, kw, cos, sin, pos, 1e-6, rd, q_out=nan_like(q), k_out=nan_like(k),
                            config=config)
    qr, kr = K.rmsnorm_rope_reference(q, k, qw, kw, cos, sin, pos, 1e-6, rd)
    check(qo, qr, "fp32", "q")
    check(ko, kr, "fp32", "k")


def _qk(T=3, hq=4, hk=2, d=16):
    q, k = randn(T, hq, d, dtype="fp32", scale=50.0), randn(T, hk, d, dtype="fp32")
    qw, kw = randn(d, dtype="fp32", scale=0.1) + 1, randn(d, dtype="fp32", scale=0.1) + 1
    cos, sin = rope_cache(64, d)
    return q, k, qw, kw, cos, sin, torch.randint(0, 64, (T,))


def test_rmsnorm_rope_launch_plans(monkeypatch):
    """A call like an earlier one takes that call's launch plan; any input the plan's
    key does not hold (outputs or config given, an input made contiguous) or a changed tuned pick
    takes the full path."""
    from profkit.kernels import _launch as L
    from profkit.kernels import timing

    monkeypatch.setattr(K, "_PLANS", L.Plans())
    used = []
    real = L.Plan.launch
    monkeypatch.setattr(L.Plan, "launch", lambda self, ts: used.append(self) or real(self, ts))
    q, k, qw, kw, cos, sin, pos = args = _qk()
    first = K.rmsnorm_rope(*args)
    assert len(K._PLANS.d) == 1 and used == []
    second = K.rmsnorm_rope(*args)
    assert len(used) == 1 and all(torch.equal(a, b) for a, b in zip(first, second))
    qr, kr = K.rmsnorm_rope_reference(*args)
    check(second[0], qr, "fp32", "q")
    check(second[1], kr, "fp32", "k")
    q2, k2, *_ = _qk()  # new values, same key: the plan, and the new values' result
    out = K.rmsnorm_rope(q2, k2, qw, kw, cos, sin, pos)
    assert len(used) == 2
    check(out[0], K.rmsnorm_rope_reference(q2, k2, qw, kw, cos, sin, pos)[0], "fp32", "q")
    K.rmsnorm_rope(*_qk(T=5))  # another token count: another plan
    assert len(used) == 2 and len(K._PLANS.d) == 2
    K.rmsnorm_rope(*args, q_out=nan_like(q), k_out=nan_like(k))
    K.rmsnorm_rope(*args, config=(1, 1))
    assert len(used) == 2 and len(K._PLANS.d) == 2
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)  # head_dim not unit-stride: copied, no plan
    K.rmsnorm_rope(qt, k, qw, kw, cos, sin, pos)
    assert len(used) == 2 and len(K._PLANS.d) == 2
    # a tuned pick recorded after the plan was made: the plan no longer stands
    tkey = ("rmsnorm_rope", 4, 4, 2, 16, 16, False, False, q.dtype, q.device)
    monkeypatch.setitem(timing._TUNED, tkey, {"config": (0, 2), "ms": {}})
    third = K.rmsnorm_rope(*args)
    assert len(used) == 2
    plan = K._PLANS.get(next(key for key in K._PLANS.d if key[0] == q.shape))
    assert plan.kernel.fn is K._rmsnorm_rope_fwd and plan.grid == (3,)
    assert all(torch.equal(a, b) for a, b in zip(first, third))
    K.rmsnorm_rope(*args)
    assert len(used) == 3 and used[-1] is plan
    # a pick handed over later (load_tuned) for a plan made without one: the plan stands down
    monkeypatch.setattr(K, "_PLANS", L.Plans())
    k5 = _qk(T=5)
    K.rmsnorm_rope(*k5)
    K.rmsnorm_rope(*k5)
    assert len(used) == 4 and used[-1].kernel.fn is K._rmsnorm_rope_fwd  # CPU: the default, untimed
    tkey5 = ("rmsnorm_rope", 8, 4, 2, 16, 16, False, False, q.dtype, q.device)
    monkeypatch.setitem(timing._PRESET, repr(tkey5), repr((1, 1)))
    K.rmsnorm_rope(*k5)
    assert len(used) == 4
    K.rmsnorm_rope(*k5)
    assert len(used) == 5 and used[-1].kernel.fn is K._rmsnorm_rope_heads
    monkeypatch.setattr(L, "PLANS", False)
    K.rmsnorm_rope(*args)
    assert len(used) == 5


@pytest.mark.parametrize("table", ["full", "half"])
@pytest.mark.parametrize("config", [None, (2, 1), (0, 2)], ids=["default", "heads-2", "tokenprog"])
@pytest.mark.parametrize("geom", [(4, 2, 16, 16), (5, 1, 24, 8)], ids=["full-rotary", "partial"])
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_rmsnorm_rope_gathered_tables(geom, interleaved, config, table, monkeypatch):
    """positions=None with tables gathered per token (HF's full width or the half tables
    by position), bit-equal to the position-indexed call on the same angles, every launch, the
    kernels told HAS_POS=False; a like call then takes its plan, bit-equal again."""
    from _kernel_helpers import spy
    from profkit.kernels import _launch as L

    monkeypatch.setattr(K, "_PLANS", L.Plans())
    hq, hk, d, rd = geom
    T = 3
    q, k = randn(T, hq, d, dtype="fp32", scale=50.0), randn(T, hk, d, dtype="fp32")
    qw, kw = randn(d, dtype="fp32", scale=0.1) + 1, randn(d, dtype="fp32", scale=0.1) + 1
    cos, sin = rope_cache(64, rd)
    pos = torch.tensor([63, 0, 17])
    cg, sg = full_cos_sin(cos, sin, pos, interleaved) if table == "full" else (cos[pos], sin[pos])
    want = K.rmsnorm_rope(q, k, qw, kw, cos, sin, pos, 1e-6, rd, interleaved, config=config)
    kernels = spy(monkeypatch, K, "_rmsnorm_rope_fwd", "_rmsnorm_rope_heads")
    got = K.rmsnorm_rope(q, k, qw, kw, cg, sg, None, 1e-6, rd, interleaved, config=config)
    assert [kw_["HAS_POS"] for s in kernels.values() for kw_ in s.kwargs] == [False]
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    check(got[0], K.rmsnorm_rope_reference(q, k, qw, kw, cos, sin, pos, 1e-6, rd, interleaved)[0], "fp32", "q")
    if config is None:
        again = K.rmsnorm_rope(q, k, qw, kw, cg, sg, None, 1e-6, rd, interleaved)
        planned = interleaved is False or table == "half"  # a GPT-J full table is copied: no plan
        assert sum(1 for key in K._PLANS.d if key[-1] is False) == (1 if planned else 0)  # has_pos False
        assert torch.equal(again[0], want[0]) and torch.equal(again[1], want[1])


def test_the_tuner_weighs_register_capped_one_warp_launches(monkeypatch):
    """Every one-warp head-split candidate also runs capped at REG_CAP registers (the capped
    launch computes the same result)."""
    seen = {}

    def fake_tuned(key, cands, run, device, **kw):
        seen[key] = cands
        return cands[-1]

    monkeypatch.setattr(K, "tuned", fake_tuned)
    monkeypatch.setattr(K, "tuned_cached", lambda key: None)
    monkeypatch.setattr(K, "_PLANS", __import__("profkit.kernels._launch", fromlist=["Plans"]).Plans())
    q, k, qw, kw, cos, sin, pos = args = _qk(hq=8, hk=4, d=64)  # one-warp candidates exist from head_dim 64
    capped = K.rmsnorm_rope(*args)
    (kc, cc), = seen.items()
    plain = [c for c in cc if len(c) == 2]
    extra = [c for c in cc if len(c) == 3]
    assert extra and all(c[1] == 1 and c[2] == K.REG_CAP and (c[0], 1) in plain for c in extra)
    assert len(extra) == sum(1 for c in plain[1:] if c[1] == 1)
    assert cc[-1] == extra[-1]  # the fake tuner's pick: a capped launch ran
    ref = K.rmsnorm_rope_reference(*args)
    check(capped[0], ref[0], "fp32", "q capped")
