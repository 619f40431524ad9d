"""Numerics policy of the kernel lab, stated in one place.

Every Triton kernel here accumulates in fp32 whatever the input dtype; the float64
reference is computed from the *same* (already rounded) inputs, so what is left is the
rounding of the output plus fp32 accumulation error. The check is the relative L2 error

    rel = ||out - ref|| / ||ref||

against a per-dtype tolerance. The tolerances are a few units of the output format's
unit roundoff (fp32 2^-24 ~ 6e-8, fp16 2^-11 ~ 4.9e-4, bf16 2^-8 ~ 3.9e-3), with room for
fp32 reductions over ~20k elements and, for gradients, one more rounded intermediate.
"""
from __future__ import annotations

# relative L2 error allowed for forward outputs
TOL = {"fp32": 1e-5, "bf16": 1e-2, "fp16": 2e-3}
# gradients go through one more rounded intermediate (dy in the input dtype)
GRAD_TOL = {"fp32": 1e-5, "bf16": 2e-2, "fp16": 4e-3}
# baselines we do not own (torch eager / torch.compile / liger): CPU torch.softmax over a
# 128k row is off by ~1e-5 in fp32, so fp32 baselines get 1e-4; low precision as TOL
BASELINE_TOL = {"fp32": 1e-4, "bf16": 1e-2, "fp16": 2e-3}

ESIZE = {"fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}


def dtype_name(dt) -> str:
    import torch

    return {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32",
            torch.float64: "fp64"}[dt]


def rel_err(out, ref) -> float:
    """||out - ref|| / ||ref|| in float64; NaN/Inf anywhere in out gives inf."""
    import torch

    o, r = out.detach().double(), ref.detach().double()
    if o.shape != r.shape:
        raise AssertionError(f"shape {tuple(o.shape)} != reference {tuple(r.shape)}")
    if not torch.isfinite(o).all():
        return float("inf")
    den = r.norm().item()
    num = (o - r).norm().item()
    return num / den if den > 0 else num


def tolerance(dtype: str, grad: bool = False, baseline: bool = False) -> float:
    return (GRAD_TOL if grad else BASELINE_TOL if baseline else TOL)[dtype]


def check(out, ref, dtype: str, what: str = "out", grad: bool = False, baseline: bool = False) -> float:
    """Assert rel_err(out, ref) <= tolerance(dtype, grad, baseline); returns the error."""
    tol = tolerance(dtype, grad, baseline)
    e = rel_err(out, ref)
    if not e <= tol:
        raise AssertionError(f"{what}: relative error {e:.3e} > {tol:.0e} ({dtype})")
    return e


def poison(t):
    """Fill a preallocated output with NaN so a kernel that skips elements is caught."""
    t.fill_(float("nan"))
    return t


# --- small shared helpers for the operator modules (kept here to avoid another module) ---

_COMPILED: dict = {}


def compiled(key: str, fn):
    """torch.compile(fn) created on first use (import stays cheap); mode=None, static shapes."""
    c = _COMPILED.get(key)
    if c is None:
        import torch

        c = _COMPILED[key] = torch.compile(fn, dynamic=False)
    return c


def has_module(name: str) -> bool:
    """True if `name` can be imported, without importing it."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def num_sms(device) -> int:
    import torch

    if getattr(device, "type", str(device)) == "cuda" or str(device).startswith("cuda"):
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # interpreter: a few programs keep the partial-sum path exercised


def warps_for(elems: int) -> int:
    """num_warps for a tile of `elems` elements held in registers (~8-16 per thread)."""
    if elems >= 16384:
        return 16
    if elems >= 4096:
        return 8
    if elems >= 1024:
        return 4
    return 2 if elems >= 256 else 1
