import pytest
from _kernel_helpers import check, nan_like, plan_spy, randn, spy
from profkit.kernels import add_rmsnorm as K


@pytest.mark.parametrize("n", [96, 3584])
@pytest.mark.parametrize("gemma", [False, True])
def test_add_rmsnorm(dtype, n, gemma):
    x = randn(13, n, dtype=dtype, scale=300.0)
    r = randn(13, n, dtype=dtype, scale=300.0)
    w = randn(n, dtype=dtype, scale=0.1) + (0 if gemma else 1)
    out, rout = nan_like(x), nan_like(r)
    y, s = K.add_rmsnorm(x, r, w, 1e-6, gemma, out=out, residual_out=rout)
    assert y is out and s is rout
    yr, sr = K.add_rmsnorm_reference(x, r, w, 1e-6, gemma)
    check(y, yr, dtype, "normed")
    check(s, sr, dtype, "residual")
    ye, se = K.add_rmsnorm_eager(x, r, w, 1e-6, gemma)
    check(ye, yr, dtype, "eager normed")
    check(se, sr, dtype, "eager residual")


def test_in_place_residual():
    x, r, w = randn(5, 200, dtype="bf16"), randn(5, 200, dtype="bf16"), randn(200, dtype="bf16")
    yr, sr = K.add_rmsnorm_reference(x, r, w)
    y, s = K.add_rmsnorm(x, r, w, residual_out=r)
    assert s is r
    check(y, yr, "bf16")
    check(r, sr, "bf16")


def test_without_l2_hints():
    x = randn(13, 96, dtype="bf16", scale=300.0)
    r = randn(13, 96, dtype="bf16", scale=300.0)
    w = randn(96, dtype="bf16", scale=0.1) + 1
    yr, sr = K.add_rmsnorm_reference(x, r, w, 1e-6)
    for evict in (False, True):
        y, s = K.add_rmsnorm(x, r, w, 1e-6, out=nan_like(x), residual_out=nan_like(r), evict=evict)
        check(y, yr, "bf16", f"normed evict={evict}")
        check(s, sr, "bf16", f"residual evict={evict}")


@pytest.mark.parametrize("rows", [1, 3])
def test_decode_candidates_each(rows, monkeypatch):
    from profkit.kernels.rmsnorm import decode_candidates

    launches = spy(monkeypatch, K, "_add_rmsnorm_fwd")["_add_rmsnorm_fwd"]
    n = 4096
    x, r = randn(rows, n, dtype="bf16", scale=30.0), randn(rows, n, dtype="bf16", scale=30.0)
    w = randn(n, dtype="bf16", scale=0.1) + 1
    yr, sr = K.add_rmsnorm_reference(x, r, w)
    for bm, nw in decode_candidates(n):
        for ev in (True, False):
            y, s = K.add_rmsnorm(x, r, w, out=nan_like(x), residual_out=nan_like(r), config=(bm, nw, ev))
            check(y, yr, "bf16", f"normed {(bm, nw, ev)}")
            check(s, sr, "bf16", f"residual {(bm, nw, ev)}")
            kw = launches.kwargs[-1]
            assert (kw["BLOCK_M"], kw["num_warps"], kw["EVICT"]) == (bm, nw, ev)


def test_decode_rows_are_tuned(monkeypatch):
    from profkit.kernels import rmsnorm

    calls = []

    def fake_tuned(key, cands, run, device, **kw):
        calls.append((key, kw))
        return cands[0]

    monkeypatch.setattr(rmsnorm, "tuned", fake_tuned)
    s = K.WORKLOAD.setup({"tokens": 1, "hidden": 4096}, "bf16", "cpu")
    assert K.WORKLOAD.check(s, "triton", K.WORKLOAD.variants["triton"](s), "bf16").ok
    assert [(k[:2], kw) for k, kw in calls] == [(("add_rmsnorm", "decode"), {"graph": True})]


@pytest.mark.parametrize("rows,n", [(1, 4096), (5, 300)], ids=["decode", "rows"])
def test_one_row_and_several_against_float64(rows, n, monkeypatch):
    """A decode row and a partial block of rows, against float64, with the launch asked for."""
    launches = spy(monkeypatch, K, "_add_rmsnorm_fwd")["_add_rmsnorm_fwd"]
    x, r = randn(rows, n, dtype="bf16", scale=30.0), randn(rows, n, dtype="bf16", scale=30.0)
    w = randn(n, dtype="bf16", scale=0.1) + 1
    yr, sr = K.add_rmsnorm_reference(x, r, w)
    y, s = K.add_rmsnorm(x, r, w, out=nan_like(x), residual_out=nan_like(r), config=(1, 4, True))
    check(y, yr, "bf16", "normed")
    check(s, sr, "bf16", "residual")
    assert (launches.kwargs[-1]["BLOCK_M"], launches.kwargs[-1]["num_warps"]) == (1, 4)


def test_launch_plans(monkeypatch):
    """A call like an earlier one takes its launch plan, bit-equal to the full path, for
    both results; outputs given, an in-place residual or a copied input take the full path."""
    import torch

    used = plan_spy(monkeypatch, K, "_PLANS")
    w = randn(200, scale=0.1) + 1
    x, r = randn(2, 3, 200, scale=20.0), randn(2, 3, 200)
    first = K.add_rmsnorm(x, r, w)
    assert used == [] and len(K._PLANS.d) == 1
    second = K.add_rmsnorm(x, r, w)
    assert used == [K._add_rmsnorm_fwd] and all(torch.equal(a, b) for a, b in zip(first, second))
    x2, r2 = randn(2, 3, 200, scale=20.0), randn(2, 3, 200)
    y, ro = K.add_rmsnorm(x2, r2, w)
    yr, sr = K.add_rmsnorm_reference(x2, r2, w)
    check(y, yr, "fp32", "planned normed")
    check(ro, sr, "fp32", "planned residual")
    K.add_rmsnorm(x, r, w, evict=False)  # another launch: a plan of its own
    K.add_rmsnorm(x, r, w, out=nan_like(x))
    K.add_rmsnorm(x, r.clone(), w, residual_out=r.clone())
    K.add_rmsnorm(randn(200, 6).t().reshape(2, 3, 200), r, w)  # x not unit-stride: copied, no plan
    assert len(used) == 2 and len(K._PLANS.d) == 2
    K.add_rmsnorm(x, r, w, evict=False)
    assert used[-1] is K._add_rmsnorm_fwd and len(used) == 3
