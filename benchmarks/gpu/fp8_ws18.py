#!/usr/bin/env python3
"""Round 18 (issue 21 item 3): the fp8 GEMM's clusters along N, A shared by multicast.

Why: round 17's CUDA C++ kernel (kernels/cuda/fp8_gemm.cu) pairs CTAs along M and multicasts B;
its consumers wait on the stages' `full` barriers (the stages arrive late) and the tensor pipe
runs 72-81 % busy against cuBLAS's 87-88 %. cuBLAS's kernel on qwen7b-down-m1024
(nvjet_sm90_qqtst_112x128_128x7_2x1) runs its 2x1 cluster along its own m, which is our N: it
shares A, the operand every CTA of a wave reads (1024 rows against B's 3584), among the pair.
The one change: cluster_n=2 (the pair along N, A multicast), beside round 17's pair along M and
a 2 x 2 cluster sharing both. Round 17's script measures (fp8_ws17.launch, .name, .kernel_attrs):
float64 check at fp8_launch.EDGES, round-robin do_bench, GPU time by graph replay.

    python3 benchmarks/gpu/fp8_ws18.py [--rounds 5] [--out DIR] [--shapes a,b] [--configs=0,2]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import fp8_ws17  # noqa: E402

CONFIGS = [  # (bn, stages, chunk k tiles, stagger, GROUP_M, cluster along M, cluster along N)
    (112, 7, 16, True, 8, 2, 1),  # round 17's registered build: the pair along M, B shared
    (112, 7, 16, True, 8, 1, 2),  # the pair along N, A shared (cuBLAS's)
    (112, 7, 16, True, 8, 2, 2),  # both
    (112, 6, 16, True, 8, 1, 2),
    (128, 7, 16, True, 8, 1, 2),  # the control tile
    # r18/h100a: along N 0.94x of along M (A read 1.08x as much from L2), 2 x 2 fits 120 SMs. And
    # the L2 reads of the kernels without clusters (gluon_ws, cuBLAS's A) are half what their
    # tiles load: the tile order decides which CTAs read one tile together. So the order:
    (112, 7, 16, True, 1, 2, 1),  # along M, the tile's column fastest (GROUP_M 1)
    (112, 7, 16, True, 1, 1, 2),
    (112, 7, 16, True, 1, 1, 1),
    (112, 7, 16, True, 8, 1, 1),  # no cluster, round 17's order
    (112, 7, 16, True, 2, 1, 2),
    (112, 7, 16, True, 4, 2, 1),
    # r18/h100b: no order brought the L2 reads near gluon_ws's (ncu, L2 left warm: gluon_ws 18 M
    # sectors, this kernel 23-32 M; cuBLAS 17.5 M). One difference left in how the loads are
    # asked for: Triton's tensor maps promote L2 fills to 128 bytes, this kernel's to 256.
    # r18/h100c ran four configs with an l2_promotion parameter (128 bytes or none; commit
    # 304a919, rows in r18/h100c/fp8_ws18.json): neither the L2 reads nor the time changed, and
    # the parameter was taken out again (the --configs= indices in r18's calls count those four).
    # r18/h100c: the promotion changes nothing (L2 reads, time). Under ncu with the L2 flushed the
    # kernel without clusters took 113 us (round 17, r17/probe2); with the L2 as a replay leaves it
    # 141-145 us, with its L2 reads as if no request were ever shared. The ring's depth lets the
    # CTAs drift apart: fewer stages
    (112, 4, 16, True, 8, 1, 1),
    (112, 5, 16, True, 8, 1, 1),
    (112, 4, 16, True, 8, 2, 1),
    (112, 5, 16, True, 8, 2, 1),
    # r18/h100d: no change with the depth. r18/h100e-g (ncu's L2 request coalescer counters): the
    # kernels read the same sectors, but the coalescer merged 46 % of gluon_ws's (identical reads of
    # SMs of one GPC, arriving together) and 12 % of this kernel's. The cause: launched with a
    # cluster attribute, even 1 x 1, consecutive CTAs land on different GPCs (r18/h100g
    # placement.txt); plainly launched, the 8-16 consecutive CTAs share one, and a GROUP_M 8
    # order gives them one column of B. Without the attribute (the kernel's CL 1 launch now):
    # 140 -> 113 us under ncu. The order for 16 CTAs a GPC: 4 x 4 tiles share A and B four ways
    (112, 7, 16, True, 4, 1, 1),
    (112, 7, 16, True, 2, 1, 1),
    (112, 6, 16, True, 4, 1, 1),
    (112, 7, 16, True, 16, 1, 1),
]

if __name__ == "__main__":
    fp8_ws17.main("fp8_ws18", CONFIGS)
