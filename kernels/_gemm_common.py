"""Shared pieces of the GEMM family (matmul ladder, fp8 GEMM, fused RMSNorm + linear, SGEMM):
the Triton environment probes (tensor descriptors, warp specialization). The LLM projection
shapes and the bytes/FLOPs model live in profkit/model/ops/matmul.py. The error check and its tolerances are the lab's one
numerics module, kernels/_numerics.py (policy "gemm": rel_fro and max_rel, GEMM_TOL).
"""

from __future__ import annotations

from profkit.model.ops.matmul import LLM_M, LLM_PROJ, all_gemm_shapes, gemm_model, proj_shape  # noqa: F401

from ._numerics import ESIZE, interpreting, num_sms  # noqa: F401  (the family imports them from here)

# ---- environment probes -------------------------------------------------------------

UPCAST_NOTE = (
    "Triton's interpreter (3.9) multiplies bf16 tiles in tl.dot as their raw uint16 bits "
    "(interpreter.py create_dot converts only 8-bit floats), so under TRITON_INTERPRET=1 the "
    "kernels cast their tiles to fp32 before tl.dot (constexpr UPCAST). bf16 x bf16 products "
    "are exact in fp32 and the accumulator is fp32 either way, so the numerics match the GPU "
    "path; on a GPU UPCAST is False and the tiles go to the tensor cores as bf16/fp16."
)


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


def tma_supported(*tensors, names: str = "ABC") -> str | None:
    """None when these operands (row-major 2-D tensors, named A, B, C, ...) can go through
    tensor descriptors (TMA), else the reason they cannot."""
    if not has_tensor_descriptors():
        return "this Triton has no tl.make_tensor_descriptor / triton.set_allocator"
    if not interpreting():
        import torch

        t0 = tensors[0]
        if not t0.is_cuda or torch.cuda.get_device_capability(t0.device)[0] < 9:
            return "tensor descriptors (TMA) need a Hopper-or-newer GPU (compute capability >= 9.0)"
    for name, t in zip(names, tensors):
        if not t.is_contiguous():
            return f"TMA: {name} must be row-major contiguous"
        if t.data_ptr() % 16:
            return f"TMA: {name}'s base address must be 16-byte aligned"
    bad = [
        f"{name} {tuple(t.shape)} x {t.element_size()} B"
        for name, t in zip(names, tensors)
        if (t.shape[-1] * t.element_size()) % 16
    ]
    if bad:
        return "TMA: row strides must be multiples of 16 bytes (" + ", ".join(bad) + ")"
    return None


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


@triton.jit
def tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped ordering: GROUP_M consecutive tiles walk down a column of tiles before moving
    right, so a band of A (GROUP_M row-panels) is reused from L2 across many B panels."""
    num_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_in_group
    first_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((tile_id % num_in_group) % group_size_m)
    pid_n = (tile_id % num_in_group) // group_size_m
    return pid_m, pid_n
