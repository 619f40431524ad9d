"""Fused residual add + RMSNorm, as at every pre-norm decoder block boundary:

    residual = x + residual          (kept, in the model dtype)
    normed   = rmsnorm(residual) * w (Gemma: * (1 + w))

Unfused that is 3 reads + 1 write (add) + 1 read + 1 write (norm); fused it is 2 reads and
2 writes. The sum is formed in fp32 and normalised from fp32 (vLLM's fused_add_rms_norm
normalises the same fp32 sum); the stored residual is that sum rounded to the dtype.
Launch: rmsnorm.row_config (at a few rows, decode, num_warps of the one-row launch timed by
CUDA-graph replay).
"""

from __future__ import annotations

import triton
import triton.language as tl

from profkit.model.ops.norms import ADD_RMSNORM_SHAPES
from profkit.model.ops.norms import add_rmsnorm_model as model

from . import Workload, torch_dtype
from ._launch import Plans, cdiv, fast, next_pow2
from ._numerics import compiled, has_module
from .rmsnorm import rmsnorm_reference, row_config, row_key
from .timing import pick_check


@triton.jit
def _load_w(W, cols, cmask, offset, EVICT: tl.constexpr):
    if EVICT:
        return tl.load(W + cols, mask=cmask, other=0.0, eviction_policy="evict_last").to(tl.float32) + offset
    return tl.load(W + cols, mask=cmask, other=0.0).to(tl.float32) + offset


@triton.jit
def _add_rmsnorm_fwd(
    X,
    R,
    W,
    Y,
    RO,
    stride_x,
    stride_r,
    stride_y,
    stride_ro,
    M,
    N,
    eps,
    offset,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    EVICT: tl.constexpr = True,
):
    """EVICT: x and r read evict-first, w evict-last (L2 hints; a tuned choice, rmsnorm.row_config)."""
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    cmask = cols < N
    mask = (rows < M)[:, None] & cmask[None, :]
    if EVICT:
        x = tl.load(
            X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0, eviction_policy="evict_first"
        ).to(tl.float32)
        r = tl.load(
            R + rows[:, None] * stride_r + cols[None, :], mask=mask, other=0.0, eviction_policy="evict_first"
        ).to(tl.float32)
    else:
        x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        r = tl.load(R + rows[:, None] * stride_r + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    # w issued with x and r, not after the reduction: at one row (decode) its load was a memory
    # round trip of its own on the critical path (H100: 1.88 us against Liger's 1.74)
    w = _load_w(W, cols, cmask, offset, EVICT)
    s = x + r
    tl.store(RO + rows[:, None] * stride_ro + cols[None, :], s.to(RO.dtype.element_ty), mask=mask)
    rstd = 1.0 / tl.sqrt(tl.sum(s * s, axis=1) / N + eps)
    y = s * rstd[:, None] * w[None, :]
    tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


_PLANS = Plans()  # add_rmsnorm's launches by their inputs' key (kernels/_launch.py)


def add_rmsnorm(
    x,
    residual,
    w,
    eps: float = 1e-6,
    gemma: bool = False,
    out=None,
    residual_out=None,
    evict: bool | None = None,
    config=None,
):
    """Returns (normed, new_residual). out / residual_out: optional preallocated outputs;
    residual_out=residual updates the residual in place (each element is read before it is
    written by the same program). config: (BLOCK_M, num_warps, EVICT), else picked per shape;
    evict: force the L2 hints on or off instead of tuning them. A call like an earlier one (same
    shapes, strides, dtypes, flags; no outputs or config given) takes that call's launch plan."""
    import torch

    plannable = out is None and residual_out is None and config is None
    if plannable:
        pkey = (
            x.shape,
            x.stride(),
            residual.shape,
            residual.stride(),
            x.dtype,
            residual.dtype,
            x.device,
            eps,
            gemma,
            evict,
        )
        plan = _PLANS.get(pkey)
        if plan is not None:
            y = torch.empty(pkey[0], dtype=pkey[4], device=pkey[6])
            ro = torch.empty(pkey[0], dtype=pkey[5], device=pkey[6])
            plan.launch((x, residual, w, y, ro))
            return y, ro
    N = x.shape[-1]
    assert residual.shape == x.shape
    x2 = x.reshape(-1, N)
    r2 = residual.reshape(-1, N)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    if r2.stride(-1) != 1:
        r2 = r2.contiguous()
    M = x2.shape[0]
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device) if out is None else out
    ro = torch.empty(x.shape, dtype=residual.dtype, device=x.device) if residual_out is None else residual_out
    y2, ro2 = y.view(M, N), ro.view(M, N)
    BLOCK_N = next_pow2(N)

    def parts(cfg):
        """(grid, the parameters after the tensors, the options) of launch `cfg`."""
        bm, nw, ev = cfg
        return (
            (cdiv(M, bm),),
            (
                x2.stride(0),
                r2.stride(0),
                y2.stride(0),
                ro2.stride(0),
                M,
                N,
                eps,
                1.0 if gemma else 0.0,
                bm,
                BLOCK_N,
                ev,
            ),
            (("num_warps", nw),),
        )

    def launch(cfg):
        grid, rest, opts = parts(cfg)
        fast(_add_rmsnorm_fwd)[grid](x2, r2, w, y2, ro2, *rest, **dict(opts))

    # tuning launches write ro from x + r: never time them in place (they would add r twice)
    in_place = ro2.data_ptr() == r2.data_ptr()
    ev = (True, False) if evict is None else (evict,)
    if config is not None:
        cfg = tuple(config)
    else:
        cfg = (
            row_config("add_rmsnorm", M, N, x.dtype, x.device, launch, evict=ev)
            if not in_place
            else row_config("add_rmsnorm", M, N, x.dtype, "cpu", launch, evict=ev)
        )
    launch(cfg)
    # a plan where x's and the residual's rows are themselves (no copies) and the pick stands
    check = pick_check(row_key("add_rmsnorm", M, N, x.dtype, x.device, ev), x.device) if plannable else None
    if check and x2.data_ptr() == x.data_ptr() and r2.data_ptr() == residual.data_ptr():
        _PLANS.put(pkey, fast(_add_rmsnorm_fwd).plan(*parts(cfg)), check)
    return y, ro


def add_rmsnorm_eager(x, residual, w, eps: float = 1e-6, gemma: bool = False):
    """As HF decoder layers write it: residual add in the model dtype, then LlamaRMSNorm."""
    import torch

    residual = residual + x
    dtype = residual.dtype
    xf = residual.to(torch.float32)
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if gemma:
        return (xf * (1.0 + w.float())).type_as(residual), residual
    return w * xf.to(dtype), residual


def add_rmsnorm_reference(x, residual, w, eps: float = 1e-6, gemma: bool = False):
    s = x.double() + residual.double()
    return rmsnorm_reference(s, w, eps, gemma), s


def _setup(p: dict, dtype: str, device: str):
    import torch

    dt = torch_dtype(dtype)
    x = torch.randn(p["tokens"], p["hidden"], dtype=dt, device=device)
    r = torch.randn(p["tokens"], p["hidden"], dtype=dt, device=device)
    w = 1 + 0.1 * torch.randn(p["hidden"], dtype=dt, device=device)
    return {"x": x, "r": r, "w": w}


def _liger(x, r, w, eps=1e-6):
    # liger_kernel >= 0.6 ships a fused add+RMSNorm; older versions raise ImportError here
    from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction

    return LigerFusedAddRMSNormFunction.apply(x, r, w, eps, 0.0, "llama", False)


_VARIANTS = {
    "eager": lambda s: add_rmsnorm_eager(s["x"], s["r"], s["w"]),
    "compile": lambda s: compiled("add_rmsnorm", add_rmsnorm_eager)(s["x"], s["r"], s["w"]),
    "triton": lambda s: add_rmsnorm(s["x"], s["r"], s["w"]),
}
if has_module("liger_kernel"):
    _VARIANTS["liger"] = lambda s: _liger(s["x"], s["r"], s["w"])

WORKLOAD = Workload(
    op="add_rmsnorm",
    setup=_setup,
    variants=_VARIANTS,
    shapes=ADD_RMSNORM_SHAPES,
    model=model,
    dtypes=("bf16", "fp16", "fp32"),
    description="Fused residual add + RMSNorm -> (normed, new residual)",
    requires={"liger": "liger_kernel"},
    reference=lambda s, v: add_rmsnorm_reference(s["x"], s["r"], s["w"]),
    quick=("llama8b-t4096", "llama8b-t32768"),
    selftest={"t-3x200": {"tokens": 3, "hidden": 200}},
    bench="kernels",
)
