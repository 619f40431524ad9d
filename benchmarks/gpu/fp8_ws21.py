#!/usr/bin/env python3
"""Round 21 (issue 21 item 3): the CUDA fp8 GEMM's epilogue through shared memory and TMA stores.

Why: clock64 stamps of each consumer warpgroup (fp8_trace21.py, r21/h100d) put its k loops at
98.5-99.7 % of the tensor pipe's rate at qwen7b-down-m1024, and 4-6 K cycles a tile in the
epilogue, whose stores from registers write half of each 32-byte sector; both consumers store
together, so the pipe idles for it. "tma": each consumer writes its 64 rows into shared memory in
two halves of the columns and one thread stores each half by TMA (cuBLAS's epilogue; the 16 KB
left beside 7 stages hold one half per consumer). (r21/h100f also ran "tma_overlap", the epilogue
run once the next tile's first four k tiles' MMAs were issued: no faster, code not kept.) Round
17's script measures (edges and the float64 check first, then round-robin beside gluon_ws, v3 and _scaled_mm).

    python3 benchmarks/gpu/fp8_ws21.py [--rounds 3] [--out DIR] [--shapes a,b] [--configs=0,2]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import fp8_ws17  # noqa: E402

CONFIGS = [  # (bn, stages, chunk, stagger, GROUP_M, cluster along M, along N, steered, kflip, epilogue)
    (112, 7, 16, True, 2, 1, 1, False, False, "registers"),    # registered cuda_ws112_g2: the before
    (112, 7, 16, True, 2, 1, 1, False, False, "tma"),          # the one change
    (112, 7, 16, True, 8, 1, 1, False, False, "tma"),          # GROUP_M 8 (B about once from DRAM)
    (112, 7, 16, True, 8, 1, 1, False, True, "tma"),           # and kflip: fewer DRAM bytes still
    (112, 7, 16, True, 2, 1, 1, False, True, "tma"),
]

if __name__ == "__main__":
    fp8_ws17.main("fp8_ws21", CONFIGS)
