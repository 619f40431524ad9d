#!/usr/bin/env python3
"""Round 20 (issue 21 item 3): the fp8 GEMM's k order flipped on every other tile of a CTA.

Why: round 19's profiles (profiles/fp8_gemm-qwen7b-down-m1024-r18-h100i, ncu lean) show the
unclustered CUDA kernel in GROUP_M 2 order reading 160 MB a call from DRAM against cuBLAS's 111
and gluon_ws's 109 (the operands: A 19 MB, B 68 MB). B does not fit in the H100's 50 MB L2, and
with 256 tiles on 132 CTAs each wave reads all of B: the first wave's tiles end at K's end, the
second's start again at k = 0, whose tiles the L2 has long evicted. kflip=True runs a CTA's odd
tiles from K's end down, so the second wave starts on what the first read last (a different
summation order; the edges' float64 checks bound it). Beside it: GROUP_M 8 (one column of
B shared by a column's 8 tiles at once, as gluon_ws: B read from DRAM about once) with and
without the flip. Round 17's script measures (fp8_ws17.launch, .name, .kernel_attrs).

    python3 benchmarks/gpu/fp8_ws20.py [--rounds 3] [--out DIR] [--shapes a,b] [--configs=0,2]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import fp8_ws17  # noqa: E402

CONFIGS = [  # (bn, stages, chunk, stagger, GROUP_M, cluster along M, cluster along N, steered, kflip)
    (112, 7, 16, True, 2, 1, 1, False, False),  # registered cuda_ws112_g2: the before
    (112, 7, 16, True, 2, 1, 1, False, True),   # the one change
    (112, 7, 16, True, 8, 1, 1, False, False),  # GROUP_M 8: B about once from DRAM already
    (112, 7, 16, True, 8, 1, 1, False, True),
    (112, 7, 16, True, 4, 1, 1, False, True),   # a GPC's 16 CTAs on 4 x 4 tiles (the most sharing), flipped
    (112, 7, 16, True, 8, 2, 1, False, True),   # round 17's clustered build, flipped
]

if __name__ == "__main__":
    fp8_ws17.main("fp8_ws20", CONFIGS)
