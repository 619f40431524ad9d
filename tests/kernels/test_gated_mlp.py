"""CPU tests of the fused gated MLP under TRITON_INTERPRET=1 against float64.

Inputs fresh random (conftest seeds), outputs NaN-poisoned; the relative L2 error of
kernels/_numerics.py (the workload's policy). Known-wrong variants (silu on the up projection,
a missing sigmoid, a K tile dropped) must fail the same check.
"""
import os

os.environ["TRITON_INTERPRET"] = "1"  # tests/kernels/conftest.py does it too

import pytest  # noqa: E402
import torch  # noqa: E402
from profkit.kernels import gated_mlp as G  # noqa: E402
from profkit.kernels._numerics import measure  # noqa: E402

DT = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _operands(M, N, K, dtype="bf16"):
    x = torch.randn(M, K, dtype=torch.float64).to(DT[dtype])
    w_gu = (torch.randn(2 * N, K, dtype=torch.float64) / K ** 0.5).to(DT[dtype])
    return x, w_gu, w_gu[:N], w_gu[N:]


def _ok(out, ref, dtype="bf16"):
    r = measure(out, ref, dtype)  # the workload's policy: relative L2
    return r.ok, r


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("shape", [(1, 40, 64), (16, 64, 96), (20, 33, 72), (70, 48, 40)],
                         ids=lambda s: "x".join(map(str, s)))
def test_fused_vs_float64(shape, dtype):
    M, N, K = shape
    x, w_gu, wg, wu = _operands(M, N, K, dtype)
    out = torch.full((M, N), float("nan"), dtype=DT[dtype])
    y = G.gated_mlp(x, wg, wu, out=out)
    assert y.data_ptr() == out.data_ptr()
    ok, r = _ok(out, G.gated_mlp_reference(x, wg, wu), dtype)
    assert ok, r


def test_baselines_match_the_reference():
    x, w_gu, wg, wu = _operands(5, 48, 64)
    ref = G.gated_mlp_reference(x, wg, wu)
    for y in (G.gated_mlp_eager(x, wg, wu), G.gated_mlp_cublas_swiglu(x, w_gu)):
        ok, r = _ok(y, ref)
        assert ok, r


def test_known_wrong_variants_fail():
    x, w_gu, wg, wu = _operands(16, 64, 96)
    ref = G.gated_mlp_reference(x, wg, wu)
    assert _ok(G.gated_mlp(x, wg, wu), ref)[0]
    assert not _ok(G.gated_mlp(x, wu, wg), ref)[0], "silu on the up projection must fail"
    x64 = x.double()
    assert not _ok((x64 @ wg.double().T) * (x64 @ wu.double().T), ref)[0], "no sigmoid must fail"
    short = G.gated_mlp(x[:, :64].contiguous(), wg[:, :64].contiguous(), wu[:, :64].contiguous())
    assert not _ok(short, ref)[0], "a dropped K tile must fail"


def test_bad_shapes_raise():
    x, w_gu, wg, wu = _operands(4, 16, 32)
    with pytest.raises(ValueError, match="gated_mlp"):
        G.gated_mlp(x, wg[:, :16], wu)


def test_workload():
    w = G.WORKLOAD
    assert {"triton", "cublas_swiglu", "eager", "compile"} <= set(w.variants)
    assert w.peers["triton"] == "cublas_swiglu" and "triton" not in w.baselines
    for name, p in w.shapes.items():
        m = w.model(p, "bf16")
        assert m["bytes"] == 2 * (p["M"] * p["K"] + 2 * p["N"] * p["K"] + p["M"] * p["N"])
        assert m["flops"] >= 4 * p["M"] * p["N"] * p["K"]
    assert any(p["M"] <= 64 for p in w.shapes.values()) and any(p["M"] >= 1024 for p in w.shapes.values())
    s = w.setup({"M": 3, "N": 40, "K": 64}, "bf16", "cpu")
    for v in ("triton", "cublas_swiglu", "eager"):
        assert w.check(s, v, w.variants[v](s)).ok, v
