"""Fused RMSNorm + linear for decode: y = rmsnorm(x, w_norm) @ W^T.

x (M, K) with M = 1..64 tokens, w_norm (K,), W (N, K) (nn.Linear layout), y (M, N).

Since rstd is one scalar per row, y[m] = rstd[m] * ((x[m] * w_norm) @ W^T). The Triton kernel
walks K once: each step loads an x tile, adds its squares to the row's running sum,
multiplies it by w_norm and feeds it (in the input dtype) to tl.dot with the W tile; the
epilogue scales the fp32 accumulator by rstd = 1/sqrt(sum/K + eps). The normalized
activation never goes to HBM, and the one launch replaces three (norm, cast, GEMM).
Each column-block program recomputes the row sums of its BLOCK_M rows: K * BLOCK_M extra
reads that hit L2 (x is at most 64 x 4096 bf16 = 512 KB), against N * K bytes of W that
are the real traffic at decode sizes.

Variants: "triton" (fused) and "eager" (rmsnorm_eager, then F.linear = cuBLAS).
Reference: float64 RMSNorm then float64 matmul.
"""

from __future__ import annotations

import triton
import triton.language as tl

from profkit.model.ops.matmul import RMSNORM_LINEAR_SHAPES as SHAPES
from profkit.model.ops.matmul import rmsnorm_linear_all_shapes as all_shapes  # noqa: F401  (benchmarks/gemm.py --full)
from profkit.model.ops.matmul import rmsnorm_linear_model as model

from . import Workload, torch_dtype
from ._gemm_common import autotune_cache, cast_out, interpreting

EPS = 1e-6


@triton.jit
def _rmsnorm_linear_kernel(
    X,
    WN,
    W,
    Y,
    M,
    N,
    K,
    stride_xm,
    stride_wn,
    stride_ym,
    eps,
    UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptr = X + rm[:, None].to(tl.int64) * stride_xm + rk[None, :]
    w_ptr = W + rn[None, :].to(tl.int64) * stride_wn + rk[:, None]  # (BK, BN) tile of W^T
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    sumsq = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        kmask = rk < k_left
        x = tl.load(x_ptr, mask=(rm[:, None] < M) & kmask[None, :], other=0.0).to(tl.float32)
        sumsq += tl.sum(x * x, axis=1)
        wn = tl.load(WN + k * BLOCK_K + rk, mask=kmask, other=0.0).to(tl.float32)
        xw = x * wn[None, :]
        w = tl.load(w_ptr, mask=kmask[:, None] & (rn[None, :] < N), other=0.0)
        if UPCAST:  # interpreter only (see _gemm_common.UPCAST_NOTE)
            acc = tl.dot(cast_out(xw, X.dtype.element_ty, UPCAST).to(tl.float32), w.to(tl.float32), acc)
        else:
            acc = tl.dot(cast_out(xw, X.dtype.element_ty, UPCAST), w, acc)
        x_ptr += BLOCK_K
        w_ptr += BLOCK_K
    rstd = 1.0 / tl.sqrt(sumsq / K + eps)
    y = acc * rstd[:, None]
    y_ptr = Y + rm[:, None].to(tl.int64) * stride_ym + rn[None, :]
    tl.store(y_ptr, cast_out(y, Y.dtype.element_ty, UPCAST), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _configs():
    if interpreting():
        return [triton.Config({"BLOCK_N": 32, "BLOCK_K": 32}, num_warps=4, num_stages=1)]
    # memory-bound on W: narrow N blocks keep >= 1 program per SM at N = 4096 (BN 32 -> 128)
    return [
        triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s)
        for bn, bk, w, s in [
            (32, 256, 4, 4),
            (64, 128, 4, 4),
            (64, 256, 4, 3),
            (128, 128, 4, 3),
            (128, 64, 4, 4),
            (32, 512, 4, 3),
        ]
    ]


_fused = triton.autotune(configs=_configs(), key=["M", "N", "K"])(_rmsnorm_linear_kernel)


def rmsnorm_linear(x, w_norm, weight, eps: float = EPS, out=None):
    import torch

    if x.ndim != 2 or weight.ndim != 2 or x.shape[1] != weight.shape[1] or w_norm.shape != (x.shape[1],):
        raise ValueError(
            f"rmsnorm_linear: x {tuple(x.shape)}, w_norm {tuple(w_norm.shape)}, "
            f"weight {tuple(weight.shape)} (weight is (N, K))"
        )
    if x.stride(1) != 1:
        x = x.contiguous()
    if weight.stride(1) != 1:
        weight = weight.contiguous()
    M, K = x.shape
    N = weight.shape[0]
    if out is None:
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if out.stride(1) != 1:
        raise ValueError("rmsnorm_linear: out must have unit column stride")
    bm = min(64, max(16, triton.next_power_of_2(M)))
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_N"]), triton.cdiv(M, bm))
    _fused[grid](
        x,
        w_norm,
        weight,
        out,
        M,
        N,
        K,
        x.stride(0),
        weight.stride(0),
        out.stride(0),
        eps,
        UPCAST=interpreting(),
        BLOCK_M=bm,
    )
    return out


def rmsnorm_linear_eager(x, w_norm, weight, eps: float = EPS, out=None):
    import torch.nn.functional as F

    from .rmsnorm import rmsnorm_eager

    y = F.linear(rmsnorm_eager(x, w_norm, eps), weight)
    if out is not None:
        out.copy_(y)
        return out
    return y


def rmsnorm_linear_reference(x, w_norm, weight, eps: float = EPS):
    x64 = x.double()
    xn = x64 * (x64.pow(2).mean(-1, keepdim=True) + eps).rsqrt() * w_norm.double()
    return xn @ weight.double().T


def autotune_choices() -> dict[str, dict[str, str]]:
    return {"rmsnorm_linear.triton": autotune_cache(_fused)}


def _setup(p: dict, dtype: str, device: str):
    import torch

    dt = torch_dtype(dtype)
    x = torch.randn(p["M"], p["K"], device=device, dtype=dt)
    w_norm = (1.0 + 0.1 * torch.randn(p["K"], device=device)).to(dt)
    weight = (torch.randn(p["N"], p["K"], device=device) / p["K"] ** 0.5).to(dt)
    return {"x": x, "w_norm": w_norm, "weight": weight}


VARIANTS = {"triton": rmsnorm_linear, "eager": rmsnorm_linear_eager}


WORKLOAD = Workload(
    op="rmsnorm_linear",
    setup=_setup,
    variants={name: (lambda fn: lambda s: fn(s["x"], s["w_norm"], s["weight"]))(fn) for name, fn in VARIANTS.items()},
    shapes=SHAPES,
    model=model,
    dtypes=("bf16", "fp16"),
    default_dtype="bf16",
    description="decode RMSNorm + linear fused in one Triton GEMM (rms inside the K loop) vs eager norm + cuBLAS",
    reference=lambda s, v: rmsnorm_linear_reference(s["x"], s["w_norm"], s["weight"]),
    numerics="gemm",
    baselines=("eager",),
    quick=("llama8b-qkv-m1", "llama8b-qkv-m16", "llama8b-qkv-m64", "qwen7b-gate-m1", "qwen7b-gate-m64"),
    selftest={"t-m1-n48-k64": {"M": 1, "N": 48, "K": 64}, "t-m16-n48-k64": {"M": 16, "N": 48, "K": 64}},
    bench="gemm",
)
