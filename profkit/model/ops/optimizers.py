"""Optimizer steps over a model's parameters, fused (_fused_adam_, _fused_adamw_, _fused_sgd_:
one kernel family over every tensor) or foreach (_foreach_* elementwise ops over tensor lists).

Per parameter element: Adam/AdamW read param, grad, exp_avg, exp_avg_sq (4 reads) and write
param, exp_avg, exp_avg_sq (3 writes), ~12 FLOPs (two moment updates 3+4, bias corrections,
sqrt, divide, the update; AdamW's decay 2 more); SGD reads param and grad (and the momentum
buffer) and writes param (and the buffer), 2 FLOPs (4 with momentum).
"""

from __future__ import annotations


def adam(numel: int, e: int, state_e: int | None = None, decoupled: bool = False) -> dict:
    s = state_e or e
    return {"flops": (14 if decoupled else 12) * numel, "bytes": numel * (2 * e + 2 * s) + numel * (e + 2 * s)}


def sgd(numel: int, e: int, momentum: bool) -> dict:
    if momentum:
        return {"flops": 4 * numel, "bytes": numel * e * 5}
    return {"flops": 2 * numel, "bytes": numel * e * 3}


def foreach(list_bytes: list[int], out_bytes: int, numel: int, flops_per: int) -> dict:
    """A _foreach_ op: every tensor of every list read, the first list (in place) or a new list
    written."""
    return {"flops": flops_per * numel, "bytes": sum(list_bytes) + out_bytes}
