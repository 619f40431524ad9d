import pytest
import torch

from _kernel_helpers import check, nan_like, randn
from profkit.kernels import rope as K

# (q heads, kv heads, head_dim, rotary_dim): GQA, non-power-of-two heads, partial rotary
GEOMS = [(4, 2, 16, 16), (7, 1, 20, 8), (3, 3, 24, 12)]


@pytest.mark.parametrize("geom", GEOMS, ids=lambda g: "hq{}-hk{}-d{}-rd{}".format(*g))
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_rope(dtype, geom, interleaved):
    hq, hk, d, rd = geom
    T = 6
    q, k = randn(T, hq, d, dtype=dtype, scale=300.0), randn(T, hk, d, dtype=dtype)
    cos, sin = K.rope_cache(512, rd)
    pos = torch.randint(0, 512, (T,))
    qo, ko = K.rope(q, k, cos, sin, pos, rd, interleaved, q_out=nan_like(q), k_out=nan_like(k))
    qr, kr = K.rope_reference(q, k, cos, sin, pos, rd, interleaved)
    check(qo, qr, dtype, "q")
    check(ko, kr, dtype, "k")
    if rd < d:  # pass-through dims are copied bit-exactly
        assert torch.equal(qo[..., rd:], q[..., rd:]) and torch.equal(ko[..., rd:], k[..., rd:])
    cf, sf = K.full_cos_sin(cos, sin, pos, interleaved, q.dtype)
    qe, ke = K.rope_eager(q, k, cf, sf, interleaved)
    check(qe, qr, dtype, "eager q")
    check(ke, kr, dtype, "eager k")


def test_rope_views_of_fused_qkv_in_place():
    T, hq, hk, d = 5, 4, 2, 16
    qkv = randn(T, hq + 2 * hk, d, dtype="bf16")
    q, k = qkv[:, :hq], qkv[:, hq:hq + hk]
    cos, sin = K.rope_cache(64, d)
    pos = torch.arange(T) + 3
    qr, kr = K.rope_reference(q, k, cos, sin, pos)
    v = qkv[:, hq + hk:].clone()
    qo, ko = K.rope(q, k, cos, sin, pos, q_out=q, k_out=k)
    check(q, qr, "bf16", "q in place")
    check(k, kr, "bf16", "k in place")
    assert torch.equal(qkv[:, hq + hk:], v)  # v untouched
