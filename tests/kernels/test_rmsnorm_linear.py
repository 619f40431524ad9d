"""CPU tests of the fused RMSNorm + linear (decode) under TRITON_INTERPRET=1.

Reference: float64 RMSNorm (eps 1e-6) then float64 x @ W^T, from the same rounded inputs.
Tolerances: kernels/_numerics.GEMM_TOL (rel_fro = lab policy _numerics.TOL: bf16 1e-2, fp16 2e-3; max |err|
/ rms bf16 5e-2, fp16 1e-2). The fused kernel rounds x * w_norm to the input dtype once
(before rstd is applied in fp32), eager rounds twice (after rstd, after * w): both must
pass the same check.
"""
import os

os.environ["TRITON_INTERPRET"] = "1"  # tests/kernels/conftest.py does it too

import pytest  # noqa: E402
import torch  # noqa: E402
from profkit.kernels import rmsnorm_linear as R  # noqa: E402
from profkit.kernels._numerics import measure  # noqa: E402


def check(out, ref, dtype):
    r = measure(out, ref, dtype, policy="gemm")
    return r.ok, r

DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
SHAPES = [(1, 48, 64), (5, 17, 40), (16, 48, 64), (33, 40, 72), (64, 32, 96), (70, 24, 40)]


def _inputs(M, N, K, dtype, x_scale=1.0):
    x = (torch.randn(M, K, dtype=torch.float64) * x_scale).to(DT[dtype])
    wn = (1 + 0.2 * torch.randn(K, dtype=torch.float64)).to(DT[dtype])
    w = (torch.randn(N, K, dtype=torch.float64) / K ** 0.5).to(DT[dtype])
    return x, wn, w


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("variant", ["triton", "eager"])
def test_rmsnorm_linear_vs_float64(variant, shape, dtype):
    M, N, K = shape
    x, wn, w = _inputs(M, N, K, dtype)
    out = torch.full((M, N), float("nan"), dtype=DT[dtype])
    res = R.VARIANTS[variant](x, wn, w, out=out)
    assert res.data_ptr() == out.data_ptr()
    ok, info = check(out, R.rmsnorm_linear_reference(x, wn, w), dtype)
    assert ok, info


def test_large_activations_fp16():
    """Rows of magnitude ~300: sum of squares must be taken in fp32 (fp16 would overflow)."""
    x, wn, w = _inputs(4, 32, 128, "fp16", x_scale=300.0)
    out = R.rmsnorm_linear(x, wn, w, out=torch.full((4, 32), float("nan"), dtype=torch.float16))
    ok, info = check(out, R.rmsnorm_linear_reference(x, wn, w), "fp16")
    assert ok, info


def test_known_wrong_references_fail():
    x, wn, w = _inputs(16, 48, 64, "bf16")
    out = R.rmsnorm_linear(x, wn, w)
    assert check(out, R.rmsnorm_linear_reference(x, wn, w), "bf16")[0]
    no_norm_weight = R.rmsnorm_linear_reference(x, torch.ones_like(wn), w)
    assert not check(out, no_norm_weight, "bf16")[0], "dropping w_norm must fail"
    no_norm = x.double() @ w.double().T
    assert not check(out, no_norm, "bf16")[0], "skipping the normalization must fail"


def test_known_wrong_kernel_fails():
    """A fused launch with the wrong K for the mean (rms over K-8 columns) must fail."""
    M, N, K = 8, 32, 64
    x, wn, w = _inputs(M, N, K, "bf16")
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    R._fused[(N // 32, 1)](x, wn, w, out, M, N, K - 8, x.stride(0), w.stride(0), out.stride(0), R.EPS,
                           UPCAST=True, BLOCK_M=16)
    assert not check(out, R.rmsnorm_linear_reference(x, wn, w), "bf16")[0]


def test_workload_registration():
    w = R.WORKLOAD
    assert w.op == "rmsnorm_linear" and set(w.variants) == {"triton", "eager"}
    for name, p in w.shapes.items():
        assert "/" not in name and 1 <= p["M"] <= 64 and p["K"] in (3584, 4096) and p["N"] <= 18944
        m = w.model(p, "bf16")
        assert m["flops"] == 2 * p["M"] * p["N"] * p["K"]
        assert m["bytes"] == 2 * (p["M"] * p["K"] + p["K"] + p["N"] * p["K"] + p["M"] * p["N"])
    state = w.setup({"M": 3, "N": 32, "K": 64}, "bf16", "cpu")
    for name, fn in w.variants.items():
        ok, info = check(fn(state), R.WORKLOAD.reference(state, "triton"), "bf16")
        assert ok, (name, info)
