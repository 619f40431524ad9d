"""Elementwise operators and activations: every input read once, every output written once
(broadcast operands at their own size), FLOPs per output element by the operator's arithmetic.

The lab's SwiGLU: silu(gate) * up, counted as 5 FLOPs per element (silu 4, the product 1).
"""

from __future__ import annotations

from .dtypes import ESIZE


def swiglu_model(p: dict, dtype: str) -> dict:
    """gate and up read, y written."""
    e = ESIZE[dtype]
    n = p["tokens"] * p["ffn"]
    return {"bytes": 3 * n * e, "flops": 5 * n}


def swiglu_bwd_model(p: dict, dtype: str) -> dict:
    """dy, gate and up read, dgate and dup written; 10 FLOPs per element (silu and its
    derivative recomputed)."""
    e = ESIZE[dtype]
    n = p["tokens"] * p["ffn"]
    return {"bytes": 5 * n * e, "flops": 10 * n}


SWIGLU_SHAPES = {
    "llama8b-t1": {"tokens": 1, "ffn": 14336},
    "llama8b-t4096": {"tokens": 4096, "ffn": 14336},
    "qwen7b-t4096": {"tokens": 4096, "ffn": 18944},
    "llama8b-t32768": {"tokens": 32768, "ffn": 14336},
}
SWIGLU_BWD_SHAPES = ("llama8b-t4096", "qwen7b-t4096")

# FLOPs per output element of aten's elementwise operators (a transcendental counts one: the
# roofline cares about the order of magnitude, and these ops are memory-bound at any count)
FLOPS_PER_ELEMENT = {
    "add": 1,
    "sub": 1,
    "mul": 1,
    "div": 1,
    "neg": 1,
    "abs": 1,
    "sqrt": 1,
    "rsqrt": 1,
    "exp": 1,
    "log": 1,
    "pow": 1,
    "reciprocal": 1,
    "sigmoid": 4,
    "tanh": 1,
    "relu": 1,
    "threshold": 1,
    "clamp": 1,
    # relu/relu_ reach the trace as clamp_min(_) with 0 (torch 2.x autograd decompositions)
    "clamp_min": 1,
    "clamp_max": 1,
    "where": 1,
    "gelu": 8,
    "silu": 4,
    "mish": 6,
    "hardswish": 4,
    "hardsigmoid": 3,
    "leaky_relu": 2,
    "elu": 3,
    "add_": 1,
    "mul_": 1,
    "div_": 1,
    "sub_": 1,
    "addcmul": 2,
    "addcdiv": 2,
    "lerp": 3,
    "masked_fill": 1,
    "fill_": 0,
    "zero_": 0,
    "dropout": 2,
    "native_dropout": 2,
    "gelu_backward": 10,
    "silu_backward": 6,
    "threshold_backward": 1,
    "sigmoid_backward": 2,
    "tanh_backward": 2,
    "native_dropout_backward": 1,
}


def elementwise(in_bytes: int, out_numel: int, out_e: int, flops_per: int) -> dict:
    return {"bytes": in_bytes + out_numel * out_e, "flops": flops_per * out_numel}
