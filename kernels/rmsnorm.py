"""RMSNorm: y = x / sqrt(mean(x^2) + eps) * w  (Gemma: * (1 + w)).

Memory-bound: one read of x, one write of y, w read once per program (cached in L2).
"""
from __future__ import annotations

import triton
import triton.language as tl

from . import Workload, torch_dtype


@triton.jit
def _rmsnorm_fwd(X, W, Y, RSTD, stride_x, stride_y, N, eps, offset,
                 BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: rows * stride can pass 2^31
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    # square in fp32: fp16 inputs of a few hundred overflow when squared in fp16
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * rstd * (w + offset)
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)
    tl.store(RSTD + row, rstd)


def rmsnorm(x, w, eps: float = 1e-6, gemma: bool = False):
    import torch

    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    M, N = x2.shape
    y = torch.empty_like(x2)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    BLOCK = triton.next_power_of_2(N)
    num_warps = min(max(BLOCK // 256, 1), 16)
    _rmsnorm_fwd[(M,)](x2, w, y, rstd, x2.stride(0), y.stride(0), N, eps, 1.0 if gemma else 0.0,
                       BLOCK=BLOCK, num_warps=num_warps)
    return y.reshape(shape)


def rmsnorm_eager(x, w, eps: float = 1e-6, gemma: bool = False):
    """As models write it (Llama's LlamaRMSNorm)."""
    import torch

    dtype = x.dtype
    xf = x.to(torch.float32)
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf.to(dtype) * ((1 + w) if gemma else w)).to(dtype)


def rmsnorm_reference(x, w, eps: float = 1e-6, gemma: bool = False):
    x64, w64 = x.double(), w.double()
    y = x64 * (x64.pow(2).mean(-1, keepdim=True) + eps).rsqrt()
    return y * ((1 + w64) if gemma else w64)


def model(p: dict, dtype: str) -> dict:
    esize = {"fp16": 2, "bf16": 2, "fp32": 4}[dtype]
    m, n = p["tokens"], p["hidden"]
    return {"bytes": 2 * m * n * esize + n * esize, "flops": 4 * m * n}


def _setup(p: dict, dtype: str, device: str):
    import torch

    dt = torch_dtype(dtype)
    x = torch.randn(p["tokens"], p["hidden"], dtype=dt, device=device)
    w = torch.randn(p["hidden"], dtype=dt, device=device)
    return {"x": x, "w": w}


WORKLOAD = Workload(
    op="rmsnorm",
    setup=_setup,
    variants={
        "eager": lambda s: rmsnorm_eager(s["x"], s["w"]),
        "triton": lambda s: rmsnorm(s["x"], s["w"]),
    },
    shapes={
        "llama8b-t4096": {"tokens": 4096, "hidden": 4096},
        "qwen7b-t4096": {"tokens": 4096, "hidden": 3584},
        "llama8b-t32768": {"tokens": 32768, "hidden": 4096},
    },
    model=model,
    dtypes=("bf16", "fp16", "fp32"),
    description="RMSNorm forward (Llama / Qwen hidden sizes)",
)
