"""Reductions (sum, mean, amax, norm, var, argmax ...): the input read once, one FLOP per input
element (var/std: 3, norm: 2), the reduced output written (small beside the input)."""

from __future__ import annotations

FLOPS_PER_ELEMENT = {
    "sum": 1,
    "mean": 1,
    "amax": 1,
    "amin": 1,
    "max": 1,
    "min": 1,
    "argmax": 1,
    "argmin": 1,
    "prod": 1,
    "any": 1,
    "all": 1,
    "norm": 2,
    "linalg_vector_norm": 2,
    "var": 3,
    "std": 3,
    "var_mean": 3,
    "std_mean": 3,
    "logsumexp": 3,
    "cumsum": 1,
    "nansum": 1,
}


def reduce(numel: int, e: int, out_numel: int, out_e: int, flops_per: int) -> dict:
    return {"flops": flops_per * numel, "bytes": numel * e + out_numel * out_e}
