"""NCCL collectives: the bytes each rank sends over its links for a message of `size` bytes
across n ranks, the "bus bytes" of nccl-tests (doc/PERFORMANCE.md: busBw = algBw x factor):
all_reduce 2(n-1)/n (ring: reduce-scatter then all-gather), all_gather and reduce_scatter (n-1)/n
(size is the whole gathered / reduced buffer), all_to_all (n-1)/n, broadcast and reduce 1,
send/recv 1. FLOPs: the reductions, (n-1)/n of the elements per rank for all_reduce and
reduce_scatter. The roofline of a collective is the link's bandwidth, not DRAM's.
"""

from __future__ import annotations

FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "allreduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "_allgather_base": lambda n: (n - 1) / n,
    "all_gather_into_tensor": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "_reduce_scatter_base": lambda n: (n - 1) / n,
    "reduce_scatter_tensor": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "alltoall_base": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send": lambda n: 1.0,
    "recv": lambda n: 1.0,
}
REDUCING = ("all_reduce", "allreduce", "reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor", "reduce")


def collective(kind: str, size_bytes: int, ranks: int, e: int) -> dict | None:
    f = FACTORS.get(kind)
    if f is None or ranks < 1:
        return None
    n = max(ranks, 1)
    bus = size_bytes * f(n) if n > 1 else 0.0
    flops = (size_bytes / e) * (n - 1) / n if kind in REDUCING and n > 1 else 0.0
    return {"flops": flops, "bytes": bus, "bus": True}
