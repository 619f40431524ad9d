#!/usr/bin/env python3
"""Round 16 (issue 21 item 3): the fp8 GEMM's 128 x 112 tile, the last per-tensor cell.

Why: round 15 left qwen7b-down-m1024 per-tensor at 0.95-0.97x of _scaled_mm on both GPUs, and
ncu put the gap in the tiling: 224 tiles of 128 x 128 are two tile-times on 132 SMs, cuBLAS's
256 tiles of 128 x 112 are 1.75 of ours. kernels/fp8_gemm_ws112.py builds the 112-wide tile
from three wgmma chains (64 + 32 + 16); this script times its configurations (stages, chunk,
stagger, GROUP_M, A in registers or shared memory) beside gluon_ws (128 x 128), v3 and
_scaled_mm.

Float64 check of every launch first (fp8_launch.EDGES, then fp8_launch.checked_launches), then
round-robin do_bench, GPU time by graph replay, registers/spills of each kernel (fp8_launch.config_sweep).

    python3 benchmarks/gpu/fp8_ws16.py [--rounds 5] [--out DIR] [--shapes a,b] [--configs=0,2]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from profkit.kernels import fp8_gemm_ws as W  # noqa: E402
from profkit.kernels import fp8_gemm_ws112 as W112  # noqa: E402

CONFIGS = [  # (stages, chunk k tiles, stagger, GROUP_M, A in registers)
    (6, 16, True, 8, False),
    (6, 16, True, 8, True),
    (5, 16, True, 8, True),
]  # r16/h100a-e ran the experiment's A modes (per k step, 1-3 steps in flight): commit 587ad36


def launch(a, b, sa, sb, out, stages, chunk, stagger, group_m, a_regs, nprog):
    return W112.fp8_gemm_ws112(a, b, sa, sb, out, programs=nprog, stages=stages, chunk=chunk, stagger=stagger,
                               group_m=group_m, a_regs=a_regs)


def name(c):
    return f"ws112_s{c[0]}_c{c[1]}_{'st' if c[2] else 'ns'}_g{c[3]}_{'rs' if c[4] else 'ss'}"


def dump_ir():
    res = []
    for fn in (W112._fp8_gemm_ws112, W._fp8_gemm_ws):
        for cache in fn.device_caches.values():
            kernels = cache[0] if isinstance(cache, tuple) else cache
            for k in getattr(kernels, "values", lambda: [])():
                res.append(dict(fn=fn.__name__, n_regs=getattr(k, "n_regs", None),
                                n_spills=getattr(k, "n_spills", None), shared=getattr(k.metadata, "shared", None)))
    return res


def main():
    from fp8_launch import config_sweep

    config_sweep("fp8_ws16", CONFIGS, lambda a, b, sa, sb, out, c, sms: launch(a, b, sa, sb, out, *c, nprog=sms), name,
                 dump_ir)


if __name__ == "__main__":
    main()
