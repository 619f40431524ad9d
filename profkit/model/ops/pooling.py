"""Pooling (max and average, 1-3 spatial dims, with indices; adaptive average): a window slid
over the trailing spatial dims of [N, C, *spatial].

Output size per dim (PyTorch's pooling_output_shape): (L + 2p - d(k - 1) - 1) / s + 1, rounded
down (up with ceil_mode, less a window that would start in the padding).
Bytes: forward: the input read once (overlapping windows share their rows on chip), the output
written, and the int64 argmax per output for max pooling with indices; backward: the output's
gradient (and the indices) read, the input's gradient written whole (a zeroed scatter target).
FLOPs: one compare or add per window element per output (what the kernels do; ncu counts no
FMNMX among its FLOP counters, so max pooling shows ~0 there).
"""

from __future__ import annotations

from math import prod


def out_len(n: int, k: int, s: int, p: int, d: int = 1, ceil: bool = False) -> int:
    span = n + 2 * p - d * (k - 1) - 1
    o = (-(-span // s) if ceil else span // s) + 1
    if ceil and (o - 1) * s >= n + p:
        o -= 1
    return max(o, 0)


def forward(shape: tuple, k: list, s: list, p: list, d: list, esize: int, indices: bool, ceil: bool = False) -> dict:
    dims = len(k)
    lead, spatial = shape[:-dims], shape[-dims:]
    outs = [out_len(n, k[i], s[i], p[i], d[i], ceil) for i, n in enumerate(spatial)]
    n_in, n_out = prod(shape), prod(lead) * prod(outs)
    return {
        "flops": n_out * prod(k),
        "bytes": n_in * esize + n_out * esize + (n_out * 8 if indices else 0),
        "out": (*lead, *outs),
    }


def backward(n_in: int, n_out: int, window: int, esize: int, indices: bool) -> dict:
    return {"flops": n_out * window, "bytes": n_out * esize + (n_out * 8 if indices else 0) + n_in * esize}
