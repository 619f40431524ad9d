#!/usr/bin/env python3
"""Round 15 (issue 21 item 3): the fp8 GEMM warp-specialized, in Gluon.

Why: rounds 3-10 left v3 (Triton, one instruction stream) 1-7 % behind per-tensor _scaled_mm at
qwen7b-down-m1024 and 8192^3 per-row, and every "why" ended at the same place: the MMA waits
for each promotion add, and Triton 3.6 cannot warp-specialize a Hopper kernel. Gluon (Triton
3.6's explicit-layout dialect) can: the kernel is kernels/fp8_gemm_ws.py (variants gluon_ws /
gluon_ws_tensor); this script times its configurations (stages, promotion chunk, stagger,
GROUP_M) beside v3 and _scaled_mm.

Float64 check of every launch first (fp8_launch.checked_launches), then round-robin do_bench
beside v3 and both _scaled_mm modes, GPU time by graph replay, registers/spills of each kernel.

    python3 benchmarks/gpu/fp8_ws15.py [--rounds 5] [--out DIR] [--shapes a,b] [--configs 0,2]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from profkit.kernels import fp8_gemm_ws as W  # noqa: E402


def launch(a, b, sa, sb, out, stages, chunk, stagger, group_m, streamk, nprog):
    return W.fp8_gemm_ws(a, b, sa, sb, out, programs=nprog, stages=stages, chunk=chunk, stagger=stagger,
                         group_m=group_m, streamk=streamk)

CONFIGS = [  # (stages, chunk k tiles, stagger, GROUP_M, stream-K of the last partial wave)
    (5, 16, True, 8, False),
    (5, 16, False, 8, False),
    (6, 16, True, 8, False),
    (5, 8, True, 8, False),
    (5, 32, True, 8, False),
    (6, 16, True, 16, False),
    (5, 16, True, 8, True),
    (6, 16, True, 8, True),
    (5, 8, True, 8, True),
]


def dump_ir():
    res = []
    for cache in W._fp8_gemm_ws.device_caches.values():
        kernels = cache[0] if isinstance(cache, tuple) else cache
        for k in getattr(kernels, "values", lambda: [])():
            res.append(dict(n_regs=getattr(k, "n_regs", None), n_spills=getattr(k, "n_spills", None),
                            shared=getattr(k.metadata, "shared", None)))
    return res


def name(c):
    return f"ws_s{c[0]}_c{c[1]}_{'st' if c[2] else 'ns'}_g{c[3]}{'_sk' if c[4] else ''}"


def replays(a, b, sa, sb, out, c, tag, sms):
    """stream-K: the flags are reset for the next launch, in a graph too."""
    import torch

    if not c[4]:
        return
    first = out.clone()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        launch(a, b, sa, sb, out, *c, nprog=sms)
    for _ in range(3):
        out.zero_()
        launch(a, b, sa, sb, out, *c, nprog=sms)
        assert torch.equal(out, first), "eager relaunch differs"
        out.zero_()
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, first), "graph replay differs"
    print(f"{tag}: 3 relaunches + 3 graph replays bitwise equal", flush=True)


def main():
    from fp8_launch import config_sweep

    # edges: M, N not multiples of the tile, K not of 128 (TMA zero-fills, the store clips)
    config_sweep("fp8_ws15", CONFIGS, lambda a, b, sa, sb, out, c, sms: launch(a, b, sa, sb, out, *c, nprog=sms), name,
                 dump_ir, edges=((1000, 3584, 4096), (257, 200, 1040), (4096, 6144, 4096), (1024, 3584, 4096)),
                 after=replays, beside_gluon_ws=False)


if __name__ == "__main__":
    main()
