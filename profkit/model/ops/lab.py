"""The kernel lab's operators as the model knows them: name -> formula, named shapes and the
dtype a run uses when its meta names none. The lab's Workloads point at these same formulas and
shape tables (kernels/<op>.py imports them), so `advise` reads them without importing the lab."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import decoder, elementwise, matmul, norms, rope, softmax


@dataclass(frozen=True)
class LabOperator:
    model: Callable[[dict, str], dict]
    shapes: dict[str, dict]
    default_dtype: str = "bf16"


def _subset(shapes: dict[str, dict], names) -> dict[str, dict]:
    return {n: shapes[n] for n in names}


OPERATORS: dict[str, LabOperator] = {
    "matmul": LabOperator(matmul.gemm_model, matmul.MATMUL_SHAPES),
    "fp8_gemm": LabOperator(matmul.fp8_gemm_model, matmul.FP8_GEMM_SHAPES, "fp8"),
    "sgemm": LabOperator(matmul.gemm_model, matmul.SGEMM_SHAPES, "fp32"),
    "rmsnorm_linear": LabOperator(matmul.rmsnorm_linear_model, matmul.RMSNORM_LINEAR_SHAPES),
    "gated_mlp": LabOperator(matmul.gated_mlp_model, matmul.GATED_MLP_SHAPES),
    "rmsnorm": LabOperator(norms.rmsnorm_model, norms.RMSNORM_SHAPES),
    "rmsnorm_bwd": LabOperator(norms.rmsnorm_bwd_model, _subset(norms.RMSNORM_SHAPES, norms.RMSNORM_BWD_SHAPES)),
    "add_rmsnorm": LabOperator(norms.add_rmsnorm_model, norms.ADD_RMSNORM_SHAPES),
    "rope": LabOperator(rope.rope_model, rope.ROPE_SHAPES),
    "rmsnorm_rope": LabOperator(rope.rmsnorm_rope_model, rope.RMSNORM_ROPE_SHAPES),
    "softmax": LabOperator(softmax.softmax_model, softmax.SOFTMAX_SHAPES),
    "swiglu": LabOperator(elementwise.swiglu_model, elementwise.SWIGLU_SHAPES),
    "swiglu_bwd": LabOperator(
        elementwise.swiglu_bwd_model, _subset(elementwise.SWIGLU_SHAPES, elementwise.SWIGLU_BWD_SHAPES)
    ),
    "e2e/prefill": LabOperator(decoder.prefill_model, decoder.PREFILL_SHAPES),
    "e2e/decode": LabOperator(decoder.decode_model, decoder.DECODE_SHAPES),
}


def model_of(path: str, dtype: str | None) -> tuple[dict | None, str]:
    """The minimum {"bytes", "flops"} of one call of a lab range op/variant/shape (op may hold a
    '/'), and how it was found; (None, "") when the path names no lab operator and shape."""
    parts = path.split("/")
    for cut in range(len(parts) - 2, 0, -1):
        op = "/".join(parts[:cut])
        lo = OPERATORS.get(op)
        if lo and parts[-1] in lo.shapes:
            dt = dtype or lo.default_dtype
            return lo.model(lo.shapes[parts[-1]], dt), f"{op}'s model at {parts[-1]} ({dt})"
    return None, ""
