"""Row softmax over the last dim, fp32 math, output in the input dtype.

Rows up to MAX_SINGLE elements are held whole in registers: one read, one write (the
minimum). Longer rows (vocabulary logits, 128k-152k) use the online algorithm: one pass
keeps a per-lane running max and rescaled sum (a single read gives both), a second pass
writes exp(x - max) / sum; that second read of a row just read (~256-300 KB in bf16) is
largely served from L2 when rows are spread over all SMs.
"""
from __future__ import annotations

import triton
import triton.language as tl

from . import Workload, torch_dtype
from ._numerics import ESIZE, compiled, has_module, warps_for

MAX_SINGLE = 16384
CHUNK = 4096


@triton.jit
def _softmax_single(X, Y, sx, sy, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    m = cols < N
    x = tl.load(X + row * sx + cols, mask=m, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(Y + row * sy + cols, y.to(Y.dtype.element_ty), mask=m)


@triton.jit
def _softmax_online(X, Y, sx, sy, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m_i = tl.full([BLOCK], -float("inf"), tl.float32)
    d_i = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        x = tl.load(X + row * sx + start + cols, mask=start + cols < N, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m_i, x)
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # lanes that saw only -inf
        d_i = d_i * tl.exp(m_i - m_safe) + tl.exp(x - m_safe)
        m_i = m_new
    mx = tl.max(m_i, axis=0)
    d = tl.sum(d_i * tl.exp(m_i - mx), axis=0)
    inv = 1.0 / d
    for start in range(0, N, BLOCK):
        mk = start + cols < N
        x = tl.load(X + row * sx + start + cols, mask=mk, other=-float("inf"),
                    eviction_policy="evict_first").to(tl.float32)
        tl.store(Y + row * sy + start + cols, (tl.exp(x - mx) * inv).to(Y.dtype.element_ty), mask=mk)


def softmax(x, out=None, max_single: int = MAX_SINGLE, chunk: int = CHUNK):
    """Triton softmax over the last dim; out: optional preallocated output (any float dtype)."""
    import torch

    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    R = x2.shape[0]
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device) if out is None else out
    y2 = y.view(R, N)
    if R == 0:
        return y
    BLOCK_N = triton.next_power_of_2(N)
    if BLOCK_N <= max_single:
        _softmax_single[(R,)](x2, y2, x2.stride(0), y2.stride(0), N, BLOCK_N=BLOCK_N,
                              num_warps=warps_for(BLOCK_N))
    else:
        _softmax_online[(R,)](x2, y2, x2.stride(0), y2.stride(0), N, BLOCK=chunk,
                              num_warps=warps_for(chunk))
    return y


def softmax_eager(x):
    """As HF eager attention writes it: softmax in fp32, cast back."""
    import torch

    return torch.nn.functional.softmax(x, dim=-1, dtype=torch.float32).to(x.dtype)


def softmax_reference(x):
    import torch

    return torch.softmax(x.double(), dim=-1)


def model(p: dict, dtype: str) -> dict:
    e = ESIZE[dtype]
    n = p["rows"] * p["n"]
    return {"bytes": 2 * n * e, "flops": 5 * n}


def _setup(p: dict, dtype: str, device: str):
    import torch

    x = torch.randn(p["rows"], p["n"], dtype=torch_dtype(dtype), device=device) * p.get("scale", 4.0)
    return {"x": x}




LIGER_MAX_N = 65536  # Liger 0.8.5 refuses wider rows (one block per row); seen on the H200, 2026-11-22


def _liger(s):
    n = s["x"].shape[-1]
    if n > LIGER_MAX_N:  # say so in one line rather than through Liger's traceback
        raise ValueError(f"liger softmax takes rows of at most {LIGER_MAX_N} (this shape: {n}); "
                         "use a vocab-free shape such as scores-r32768-n4096")
    from liger_kernel.ops.softmax import LigerSoftmaxFunction  # liger_kernel >= 0.6

    return LigerSoftmaxFunction.apply(s["x"])


_VARIANTS = {
    "eager": lambda s: softmax_eager(s["x"]),
    "compile": lambda s: compiled("softmax", softmax_eager)(s["x"]),
    "triton": lambda s: softmax(s["x"]),
}
if has_module("liger_kernel"):
    _VARIANTS["liger"] = _liger

WORKLOAD = Workload(
    op="softmax",
    setup=_setup,
    variants=_VARIANTS,
    shapes={
        "scores-r65536-n1024": {"rows": 65536, "n": 1024},
        "scores-r32768-n4096": {"rows": 32768, "n": 4096},
        "llama3vocab-t1": {"rows": 1, "n": 128256},
        "llama3vocab-t2048": {"rows": 2048, "n": 128256},
        "qwen7bvocab-t1024": {"rows": 1024, "n": 152064},
    },
    model=model,
    dtypes=("bf16", "fp16", "fp32"),
    description="Row softmax (attention-score rows and vocabulary-size rows)",
    requires={"liger": "liger_kernel"},
    reference=lambda s, v: softmax_reference(s["x"]),
    quick=("scores-r32768-n4096", "llama3vocab-t2048"),
    selftest={"t-2x300": {"rows": 2, "n": 300}, "t-1x20000": {"rows": 1, "n": 20000}},
    bench="kernels",
)
