"""Numerics policy of the kernel lab, stated in one place: element sizes, tolerances, the one
error check every operator, GEMM, test and benchmark uses, and the device probes they share.

Every Triton kernel here accumulates in fp32 whatever the input dtype; the float64 reference is
computed from the *same* (already rounded) inputs, so what is left is the rounding of the
output plus fp32 accumulation error. Two policies, one check (``measure`` / ``check``):

``rel_l2`` (memory-bound operators)
    rel = ||out - ref|| / ||ref|| against a per-dtype tolerance: a few units of the output
    format's unit roundoff (fp32 2^-24 ~ 6e-8, fp16 2^-11 ~ 4.9e-4, bf16 2^-8 ~ 3.9e-3), with
    room for fp32 reductions over ~20k elements (``TOL``); gradients go through one more
    rounded intermediate (``GRAD_TOL``); baselines we do not own (eager, torch.compile, Liger)
    get ``BASELINE_TOL`` (CPU torch.softmax over a 128k row is off by ~1e-5 in fp32).
``gemm`` (the GEMM family)
    rel_fro = ||out - ref||_F / ||ref||_F (the same number as rel) and additionally
    max_rel = max|out - ref| / rms(ref), an elementwise bound (``GEMM_TOL``). Output rounding
    alone gives rel_fro ~ 2^-9 / sqrt(3) ~ 1e-3 for bf16 and ~1.3e-4 for fp16; fp32
    accumulation over K <= 20k adds far less. fp8: the reference is the dequantized fp8
    operands in float64, so only the fp32 accumulation and the bf16 output rounding remain.

A NaN or Inf anywhere in the output (a poisoned element the kernel never wrote) fails both.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass

ESIZE = {"fp8": 1, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}

# relative L2 error allowed for forward outputs
TOL = {"fp32": 1e-5, "bf16": 1e-2, "fp16": 2e-3}
# gradients go through one more rounded intermediate (dy in the input dtype)
GRAD_TOL = {"fp32": 1e-5, "bf16": 2e-2, "fp16": 4e-3}
# baselines we do not own (torch eager / torch.compile / liger)
BASELINE_TOL = {"fp32": 1e-4, "bf16": 1e-2, "fp16": 2e-3}
# the GEMM family: rel_fro is the lab's TOL where it states one; max_rel the elementwise bound
GEMM_TOL: dict[str, dict[str, float]] = {
    "bf16": {"rel_fro": TOL["bf16"], "max_rel": 5e-2},
    "fp16": {"rel_fro": TOL["fp16"], "max_rel": 1e-2},
    "fp32": {"rel_fro": TOL["fp32"], "max_rel": 1e-3},
    "fp8": {"rel_fro": 1e-2, "max_rel": 5e-2},  # fp8 inputs, bf16 output
}
POLICIES = ("rel_l2", "gemm")


def dtype_name(dt) -> str:
    import torch

    return {
        torch.float16: "fp16",
        torch.bfloat16: "bf16",
        torch.float32: "fp32",
        torch.float64: "fp64",
        torch.float8_e4m3fn: "fp8",
    }[dt]


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


def max_rel_err(out, ref) -> float:
    """max|out - ref| / rms(ref) in float64; inf if out has NaN/Inf."""
    import torch

    o, r = out.detach().double(), ref.detach().double()
    if not torch.isfinite(o).all():
        return float("inf")
    rms = r.norm().item() / math.sqrt(max(r.numel(), 1))
    mx = (o - r).abs().max().item() if o.numel() else 0.0
    return mx / rms if rms > 0 else mx


def tolerance(dtype: str, grad: bool = False, baseline: bool = False) -> float:
    return (GRAD_TOL if grad else BASELINE_TOL if baseline else TOL)[dtype]


@dataclass(frozen=True)
class Result:
    """One check: ``ok`` and the numbers it was decided on (``max_rel`` for the gemm policy)."""

    ok: bool
    rel_err: float
    tol: float
    dtype: str
    policy: str = "rel_l2"
    max_rel: float | None = None
    tol_max_rel: float | None = None
    what: str = "out"

    def record(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def __str__(self) -> str:
        s = f"{self.what}: relative error {self.rel_err:.3e} (tol {self.tol:.0e}, {self.dtype}, {self.policy})"
        if self.max_rel is not None:
            s += f", max|err|/rms {self.max_rel:.3e} (tol {self.tol_max_rel:.0e})"
        return s


def measure(
    out, ref, dtype: str, what: str = "out", policy: str = "rel_l2", grad: bool = False, baseline: bool = False
) -> Result:
    """The check's numbers and verdict, without raising (a shape mismatch is a failed check).
    out/ref may be tuples (several outputs): the worst of each number counts."""
    if policy not in POLICIES:
        raise ValueError(f"numerics policy {policy!r}; known: {', '.join(POLICIES)}")
    outs = out if isinstance(out, (tuple, list)) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    if len(outs) != len(refs) or any(tuple(o.shape) != tuple(r.shape) for o, r in zip(outs, refs)):
        shapes = [tuple(o.shape) for o in outs], [tuple(r.shape) for r in refs]
        tol = GEMM_TOL[dtype]["rel_fro"] if policy == "gemm" else tolerance(dtype, grad, baseline)
        return Result(False, float("nan"), tol, dtype, policy, what=f"{what} (shapes {shapes[0]} vs {shapes[1]})")
    e = max(rel_err(o, r) for o, r in zip(outs, refs))
    if policy == "gemm":
        t = GEMM_TOL[dtype]
        mx = max(max_rel_err(o, r) for o, r in zip(outs, refs))
        return Result(
            bool(e <= t["rel_fro"] and mx <= t["max_rel"]), e, t["rel_fro"], dtype, policy, mx, t["max_rel"], what
        )
    tol = tolerance(dtype, grad, baseline)
    return Result(bool(e <= tol), e, tol, dtype, policy, what=what)


def check(
    out, ref, dtype: str, what: str = "out", policy: str = "rel_l2", grad: bool = False, baseline: bool = False
) -> Result:
    """``measure``, raising AssertionError (with the numbers) when the check fails."""
    r = measure(out, ref, dtype, what, policy, grad, baseline)
    if not r.ok:
        raise AssertionError(str(r))
    return r


def poison(t):
    """Fill a preallocated output with NaN so a kernel that skips elements is caught."""
    t.fill_(float("nan"))
    return t


# --- device probes and small shared helpers --------------------------------------------------


def interpreting() -> bool:
    """True under TRITON_INTERPRET=1 (the CPU tests)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


_SMS: dict[str, int] = {}


def num_sms(device) -> int:
    """Multiprocessors of `device`; 4 under the interpreter or on the CPU (a few programs keep
    the multi-program paths, partial sums and persistent loops, exercised)."""
    import torch

    n = _SMS.get(device)
    if n is None:
        key = str(device)
        if interpreting() or not torch.cuda.is_available() or not key.startswith("cuda"):
            n = 4
        else:
            n = torch.cuda.get_device_properties(device).multi_processor_count
        _SMS[device] = n
    return n


def pdl_supported() -> bool:
    """Programmatic dependent launch: Triton with launch_pdl and gdc_*, a Hopper or newer GPU,
    not the interpreter."""
    import torch

    try:
        from triton.backends.nvidia.compiler import CUDAOptions
        from triton.language.extra.cuda import gdc_wait  # noqa: F401 - Triton >= 3.4

        ok = "launch_pdl" in CUDAOptions.__dataclass_fields__
    except Exception:  # noqa: BLE001
        return False
    return ok and not interpreting() and torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


_PDL_OK: dict = {}


def pdl_ok(device) -> bool:
    """pdl_supported() for a launch on `device` (a CUDA device: its name or torch.device), probed
    once per device."""
    ok = _PDL_OK.get(device)
    if ok is None:
        ok = _PDL_OK[device] = str(device).startswith("cuda") and pdl_supported()
    return ok


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


def warps_for(elems: int) -> int:
    """num_warps for a tile of `elems` elements held in registers (~8-16 per thread)."""
    if elems >= 16384:
        return 16
    if elems >= 4096:
        return 8
    if elems >= 1024:
        return 4
    return 2 if elems >= 256 else 1
