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
