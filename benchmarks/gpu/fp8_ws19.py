#!/usr/bin/env python3
"""Round 19 (issue 21 item 3): the fp8 GEMM's clusters numbered by the GPC they land on.

Why: round 18 (benchmarks/results/gemm.md) found the L2 request coalescer, which merges identical
reads of one GPC's SMs arriving together, merging 46 % of gluon_ws's reads and 12 % of the
clustered CUDA kernel's: a launch with a cluster attribute puts consecutive clusters on different
GPCs, so the grouped tile order gave one GPC's clusters unrelated tiles. Launched plainly (no
cluster) the kernel got the merges back but lost the multicast; cuBLAS has both (17 M sectors
read against our 22-23 M) and is 6-8 % ahead. The one change: steer=True, the clusters take
their places in the tile order GPC by GPC (kernels/cuda/fp8_gemm.cu, steer()), with the pair
along M (B multicast) or along N (A multicast), at the GROUP_M that gives one GPC's 8 clusters a
compact block of tiles. Round 17's script measures (fp8_ws17.launch, .name, .kernel_attrs).

    python3 benchmarks/gpu/fp8_ws19.py [--rounds 3] [--out DIR] [--shapes a,b] [--configs=0,2]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import fp8_ws17  # noqa: E402

CONFIGS = [  # (bn, stages, chunk, stagger, GROUP_M, cluster along M, cluster along N, steered)
    (112, 7, 16, True, 2, 1, 1, False),  # round 18's registered cuda_ws112_g2: the before
    (112, 7, 16, True, 2, 1, 1, True),   # the same, steered (plainly launched CTAs already fill GPCs in order)
    (112, 7, 16, True, 1, 2, 1, True),   # pair along M, B multicast; a GPC's 8 clusters: 1 x 8 cluster tiles
    (112, 7, 16, True, 2, 2, 1, True),   # 2 x 4 (512 x 448 of C a GPC)
    (112, 7, 16, True, 4, 2, 1, True),   # 4 x 2
    (112, 7, 16, True, 2, 1, 2, True),   # pair along N, A multicast (cuBLAS's direction): 2 x 4 = 256 x 896
    (112, 7, 16, True, 4, 1, 2, True),   # 4 x 2 = 512 x 448
    (112, 7, 16, True, 8, 2, 1, False),  # round 17's registered build (clustered, launch order): the other before
]

if __name__ == "__main__":
    fp8_ws17.main("fp8_ws19", CONFIGS)
