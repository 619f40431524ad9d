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


def test_rmsnorm_rope_keeps_round2_launch_as_a_variant():
    assert {"triton", "triton_tokenprog"} <= set(K.WORKLOAD.variants)
