"""Shared pieces of the GEMM family (matmul ladder, fp8 GEMM, fused RMSNorm + linear):
LLM projection shapes, the bytes/FLOPs model, the error metrics and their tolerances,
and the Triton environment probes (interpreter, tensor descriptors, warp specialization).

Error metric (one for every GEMM here): against a float64 reference ``ref``
    rel_fro = ||out - ref||_F / ||ref||_F
    max_rel = max|out - ref| / rms(ref)
Both must be finite and under the tolerance of the output dtype (``TOLERANCES``); a NaN
anywhere (a poisoned output the kernel never wrote) fails. rel_fro's tolerance is the lab's
policy in kernels/_numerics.py (TOL: the relative L2 error); max_rel is this family's
additional elementwise bound, and fp8 (not in _numerics) is set here.
"""
from __future__ import annotations

import math
import os

# Output rounding alone gives rel_fro ~ 2^-9 / sqrt(3) ~ 1e-3 for bf16 and ~1.3e-4 for fp16;
# fp32 accumulation over K <= 20k adds far less. max_rel allows elements a few times the
# RMS. fp8: the reference is the dequantized fp8 operands in float64, so only the fp32
# accumulation and the bf16 output rounding remain.
TOLERANCES: dict[str, dict[str, float]] = {
    "bf16": {"rel_fro": 1e-2, "max_rel": 5e-2},
    "fp16": {"rel_fro": 2e-3, "max_rel": 1e-2},
    "fp32": {"rel_fro": 1e-4, "max_rel": 1e-3},
    "fp8": {"rel_fro": 1e-2, "max_rel": 5e-2},  # fp8 inputs, bf16 output
}
try:  # the lab-wide policy wins where it states a tolerance
    from ._numerics import TOL as _LAB_TOL

    for _k, _v in _LAB_TOL.items():
        if _k in TOLERANCES:
            TOLERANCES[_k]["rel_fro"] = _v
except ImportError:
    pass

# (K, N) of the projections of one decoder layer, x @ W^T with W of shape (N, K)
LLM_PROJ: dict[str, tuple[int, int]] = {
    "llama8b-qkv": (4096, 6144),
    "llama8b-o": (4096, 4096),
    "llama8b-gateup": (4096, 28672),
    "llama8b-gate": (4096, 14336),
    "llama8b-down": (14336, 4096),
    "qwen7b-qkv": (3584, 4608),
    "qwen7b-o": (3584, 3584),
    "qwen7b-gateup": (3584, 37888),
    "qwen7b-gate": (3584, 18944),
    "qwen7b-down": (18944, 3584),
}
LLM_M = (1, 16, 64, 256, 1024, 4096, 8192)


def all_gemm_shapes() -> dict[str, dict]:
    """Every LLM projection x every M, plus 8192^3: the full sweep (benchmarks --full)."""
    out = {}
    for proj in ("llama8b-qkv", "llama8b-o", "llama8b-gateup", "llama8b-down",
                 "qwen7b-qkv", "qwen7b-gateup", "qwen7b-down"):
        k, n = LLM_PROJ[proj]
        for m in LLM_M:
            out[f"{proj}-m{m}"] = {"M": m, "N": n, "K": k}
    out["m8192-n8192-k8192"] = {"M": 8192, "N": 8192, "K": 8192}
    return out


ESIZE = {"fp16": 2, "bf16": 2, "fp32": 4, "fp8": 1}


def gemm_model(p: dict, dtype: str) -> dict:
    """Minimum HBM traffic of C = A @ B: read A and B once, write C once (fp8: bf16 out)."""
    m, n, k = p["M"], p["N"], p["K"]
    e = ESIZE[dtype]
    out_e = 2 if dtype == "fp8" else e
    return {"bytes": (m * k + k * n) * e + m * n * out_e, "flops": 2 * m * n * k}


def rel_errors(out, ref) -> dict[str, float]:
    """rel_fro and max_rel of ``out`` against the float64 ``ref`` (NaN if out has NaN/inf)."""
    import torch

    o = out.to(torch.float64)
    r = ref.to(torch.float64)
    d = o - r
    rn = torch.linalg.vector_norm(r).item()
    rms = rn / math.sqrt(max(r.numel(), 1))
    finite = bool(torch.isfinite(o).all().item())
    if not finite:
        return {"rel_fro": float("nan"), "max_rel": float("nan")}
    dn = torch.linalg.vector_norm(d).item()
    mx = d.abs().max().item() if d.numel() else 0.0
    return {"rel_fro": dn / rn if rn > 0 else dn, "max_rel": mx / rms if rms > 0 else mx}


def check(out, ref, dtype: str) -> tuple[bool, dict]:
    """(ok, {"rel_fro", "max_rel", "tol_rel_fro", "tol_max_rel"}). NaN fails."""
    tol = TOLERANCES[dtype]
    if tuple(out.shape) != tuple(ref.shape):
        return False, {"rel_fro": float("nan"), "max_rel": float("nan"), "shape": tuple(out.shape),
                       "ref_shape": tuple(ref.shape), **{f"tol_{k}": v for k, v in tol.items()}}
    e = rel_errors(out, ref)
    ok = all(e[k] <= tol[k] for k in tol)  # NaN <= x is False
    return ok, {**e, **{f"tol_{k}": v for k, v in tol.items()}}


def assert_close(out, ref, dtype: str, what: str = "") -> dict:
    ok, info = check(out, ref, dtype)
    if not ok:
        raise AssertionError(f"{what} {dtype}: shape {tuple(out.shape)} vs {tuple(ref.shape)}, {info}")
    return info


# ---- environment probes -------------------------------------------------------------

UPCAST_NOTE = (
    "Triton's interpreter (3.9) multiplies bf16 tiles in tl.dot as their raw uint16 bits "
    "(interpreter.py create_dot converts only 8-bit floats), so under TRITON_INTERPRET=1 the "
    "kernels cast their tiles to fp32 before tl.dot (constexpr UPCAST). bf16 x bf16 products "
    "are exact in fp32 and the accumulator is fp32 either way, so the numerics match the GPU "
    "path; on a GPU UPCAST is False and the tiles go to the tensor cores as bf16/fp16.")


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def has_tensor_descriptors() -> bool:
    import triton
    import triton.language as tl

    return hasattr(tl, "make_tensor_descriptor") and hasattr(triton, "set_allocator")


def has_warp_specialize() -> bool:
    import inspect

    import triton.language as tl

    try:
        return "warp_specialize" in inspect.signature(tl.range.__init__).parameters
    except (TypeError, ValueError):
        return False


_ALLOCATOR_SET = False


def ensure_tma_allocator() -> None:
    """tl.make_tensor_descriptor builds descriptors in a global scratch buffer that Triton
    asks the host for through triton.set_allocator."""
    global _ALLOCATOR_SET
    if _ALLOCATOR_SET:
        return
    import torch
    import triton

    dev = "cpu" if interpreting() else "cuda"

    def alloc(size: int, alignment: int, stream):
        return torch.empty(size, device=dev, dtype=torch.int8)

    triton.set_allocator(alloc)
    _ALLOCATOR_SET = True


_SMS: dict[str, int] = {}


def num_sms(device) -> int:
    import torch

    key = str(device)
    if key not in _SMS:
        if interpreting() or not torch.cuda.is_available() or str(device).startswith("cpu"):
            _SMS[key] = 4
        else:
            _SMS[key] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SMS[key]


def autotune_cache(kernel) -> dict[str, str]:
    """{key: chosen config} of a triton.autotune'd kernel (empty when it never tuned)."""
    cache = getattr(kernel, "cache", None) or {}
    return {"x".join(str(k) for k in key): str(cfg) for key, cfg in cache.items()}


# ---- device helpers -------------------------------------------------------------------
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def cast_out(x, DT: tl.constexpr, UPCAST: tl.constexpr):
    """x (fp32) -> DT. Under the interpreter (UPCAST) fp32 -> bf16 first rounds to nearest
    even by hand: Triton 3.9's interpreter truncates that conversion (round toward zero),
    which doubles the output rounding error. On a GPU this is the plain cvt.rn."""
    if UPCAST:
        if DT == tl.bfloat16:
            b = x.to(tl.uint32, bitcast=True)
            b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
            x = b.to(tl.float32, bitcast=True)
    return x.to(DT)
