"""Normalisations: RMSNorm (the lab's forward, backward and residual-add variant), and aten
layer, RMS, group and batch norm, forward and backward.

Forward bytes: x read, y written, the affine weight (and bias) read; the saved statistics (mean,
rstd: fp32 per normalised group) written where the op returns them. FLOPs per element: RMSNorm
4 (square, sum, scale by rstd, scale by w); LayerNorm 5 (mean, subtract, square-sum, scale, w)
+ 1 for the bias; counts of the shape, not of the instructions a kernel issues.
Backward: dy and x read (and the saved stats), dx written, dw/db written once per feature.
"""

from __future__ import annotations

from .dtypes import ESIZE


def rmsnorm_model(p: dict, dtype: str) -> dict:
    e = ESIZE[dtype]
    m, n = p["tokens"], p["hidden"]
    return {"bytes": 2 * m * n * e + n * e, "flops": 4 * m * n}


def rmsnorm_bwd_model(p: dict, dtype: str) -> dict:
    """Backward: read dy, x, rstd; write dx; w read, dw written (partials stay in L2)."""
    e = ESIZE[dtype]
    m, n = p["tokens"], p["hidden"]
    return {"bytes": 3 * m * n * e + 4 * m + 2 * n * e, "flops": 8 * m * n}


def add_rmsnorm_model(p: dict, dtype: str) -> dict:
    """x + residual -> (RMSNorm(sum), sum): x and residual read, both outputs written, w read;
    the add is one FLOP per element on top of RMSNorm's four."""
    e = ESIZE[dtype]
    m, n = p["tokens"], p["hidden"]
    return {"bytes": 4 * m * n * e + n * e, "flops": 5 * m * n}


RMSNORM_SHAPES = {
    "llama8b-t1": {"tokens": 1, "hidden": 4096},
    "llama8b-t4096": {"tokens": 4096, "hidden": 4096},
    "qwen7b-t4096": {"tokens": 4096, "hidden": 3584},
    "llama8b-t32768": {"tokens": 32768, "hidden": 4096},
    "qwen7b-t32768": {"tokens": 32768, "hidden": 3584},
}
RMSNORM_BWD_SHAPES = ("llama8b-t4096", "qwen7b-t4096", "llama8b-t32768")

ADD_RMSNORM_SHAPES = {
    "llama8b-t1": {"tokens": 1, "hidden": 4096},
    "llama8b-t4096": {"tokens": 4096, "hidden": 4096},
    "qwen7b-t4096": {"tokens": 4096, "hidden": 3584},
    "llama8b-t32768": {"tokens": 32768, "hidden": 4096},
}


# --- aten ------------------------------------------------------------------------------------


def norm_forward(
    numel: int,
    features: int,
    groups: int,
    e: int,
    *,
    flops_per: int,
    affine: bool = True,
    bias: bool = True,
    stats: bool = True,
) -> dict:
    """numel elements normalised over `groups` groups, `features` affine parameters of e bytes."""
    b = 2 * numel * e + (features * e * (2 if bias else 1) if affine else 0) + (8 * groups if stats else 0)
    return {"bytes": b, "flops": flops_per * numel + (numel if affine and bias else 0)}


def norm_backward(numel: int, features: int, groups: int, e: int, *, flops_per: int, affine: bool = True) -> dict:
    """dy and x read, dx written, the saved mean/rstd read; dw (and db) reduced and written."""
    b = 3 * numel * e + 8 * groups + (3 * features * e if affine else 0)
    return {"bytes": b, "flops": flops_per * numel}


def layer_norm_backward_kernels(
    numel: int, features: int, groups: int, e: int, grad_input: bool = True, grad_weight: bool = True
) -> dict:
    """The bytes of PyTorch's CUDA layer-norm backward (aten/src/ATen/native/cuda/
    layer_norm_kernel.cu, LayerNormBackwardKernelImplInternal): two kernels, each reading dy and x
    and the saved mean/rstd (fp32 per group). layer_norm_grad_input_kernel also reads the weight
    and writes dx; GammaBetaBackwardCUDAKernel writes dw and db. The minimum (`norm_backward`)
    reads dy and x once; H100 ncu counts 2 x (dy + x) over the two (GPT-2 [8, 512, 768] fp32)."""
    stats = 8 * groups
    reads = (2 * numel * e + stats) * (int(grad_input) + int(grad_weight)) + (features * e if grad_input else 0)
    writes = (numel * e if grad_input else 0) + (2 * features * e if grad_weight else 0)
    return {"reads": reads, "writes": writes}
