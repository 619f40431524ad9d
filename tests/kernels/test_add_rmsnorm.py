import pytest

from _kernel_helpers import check, nan_like, randn
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
    assert "triton_evict" in K.WORKLOAD.variants
