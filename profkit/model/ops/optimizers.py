"""Optimizer steps over a model's parameters, fused (_fused_adam_, _fused_adamw_, _fused_sgd_:
one kernel family over every tensor) or foreach (_foreach_* elementwise ops over tensor lists).

Per parameter element: Adam/AdamW read param, grad, exp_avg, exp_avg_sq (4 reads; max_exp_avg_sq
a 5th with amsgrad) and write param, exp_avg, exp_avg_sq (3 writes; 4 with amsgrad), ~12 FLOPs
(two moment updates 3+4, bias corrections, sqrt, divide, the update; AdamW's decay 2 more); SGD
reads param and grad (and the momentum buffer) and writes param (and the buffer), 2 FLOPs (4 with
momentum).

torch.profiler writes a tensor list of more than 30 tensors as `[]` (TENSOR_LIST_DISPLAY_LENGTH_
LIMIT, torch/csrc/profiler/util.h): a model's parameter list has no sizes in the trace. Its
kernels say them: ATen's multi_tensor_apply (MultiTensorApply.cuh) gives each block one chunk of
kChunkSize = 65,536 elements of one tensor, so a launch's grid is its chunk count, and the
kernel's template arguments name the functor, its scalar type and the lists it reads and writes
(`multi_tensor`). That count is an upper bound on the elements (a tensor's last chunk is
partial; a 0-d tensor fills a chunk of its own); the step's gradients, one per parameter
(autograd's AccumulateGrad records each one's size), give them exactly where their chunks are
the launches' blocks, one for one (`by_gradients`).
"""

from __future__ import annotations

import re

from .dtypes import size

CHUNK = 65536  # kChunkSize of ATen's MultiTensorApply.cuh: the elements one block handles

_FUNCTOR = re.compile(r"(\w+Functor)<([^<>]*)>")


def adam(numel: int, e: int, state_e: int | None = None, decoupled: bool = False, amsgrad: bool = False) -> dict:
    s = state_e or e
    states = 3 if amsgrad else 2  # exp_avg, exp_avg_sq (and max_exp_avg_sq)
    return {
        "flops": (14 if decoupled else 12) * numel,
        "bytes": numel * (2 * e + states * s) + numel * (e + states * s),
    }


def sgd(numel: int, e: int, momentum: bool) -> dict:
    if momentum:
        return {"flops": 4 * numel, "bytes": numel * e * 5}
    return {"flops": 2 * numel, "bytes": numel * e * 3}


def foreach(list_bytes: list[int], out_bytes: int, numel: int, flops_per: int) -> dict:
    """A _foreach_ op: every tensor of every list read, the first list (in place) or a new list
    written."""
    return {"flops": flops_per * numel, "bytes": sum(list_bytes) + out_bytes}


def multi_tensor(kernels: list[tuple[str, int]]) -> dict | None:
    """What an operator's multi_tensor_apply launches touch, from (kernel name, blocks) pairs:
    {"numel": elements per list, "esize", "dtype" (the C++ scalar type), "reads": lists read, "writes": lists written,
    "launches", "functor"}; None where a launch is not one whose names say that.

    numel is the launches' blocks x CHUNK, an upper bound: each tensor's last chunk is partial.
    The functor's template arguments give the lists: ForeachFunctors.cuh's <T, depth,
    r_args_depth, res_arg_index> read r_args_depth lists and write the one at res_arg_index;
    the fused optimizers' Fused*MathFunctor<T, depth, ...> read all depth lists and write all
    but the gradients (param and its states); LpNorm/LpMax read one list and write per-tensor
    scalars."""
    mine = [(n, b) for n, b in kernels if "multi_tensor_apply_kernel" in n]
    if not mine:
        return None
    found = _FUNCTOR.search(mine[0][0])
    if found is None:
        return None
    functor, args = found.group(1), [a.strip() for a in found.group(2).split(",")]
    esize = size(args[0]) if args else None
    ints = [int(a) for a in args if re.fullmatch(r"\d+", a)]
    if esize is None:
        return None
    if functor.startswith("Fused") and ints:
        reads, writes = ints[0], ints[0] - 1
    elif functor.startswith(("LpNorm", "LpMax")):
        reads, writes = 1, 0
    elif len(ints) >= 3:
        reads, writes = ints[-2], 1
    else:
        return None
    blocks = sum(b for _, b in mine)
    return {
        "numel": blocks * CHUNK,
        "esize": esize,
        "dtype": args[0],
        "reads": reads,
        "writes": writes,
        "blocks": blocks,
        "launches": len(mine),
        "functor": functor,
    }


def by_gradients(blocks: int, grads: list[int]) -> int | None:
    """The elements of each list where `grads`, the step's gradients' element counts, are the
    tensors the launches' `blocks` cover (their chunks add up to it); None where they are not."""
    if not grads or sum(-(-n // CHUNK) for n in grads) != blocks:
        return None
    return sum(grads)
