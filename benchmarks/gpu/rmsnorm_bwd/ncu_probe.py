#!/usr/bin/env python3
"""Run under ncu: the v2 and v3 picks of best.json at one shape, 3 calls each (kernel names tell them
apart: _rmsnorm_bwd_fused / _rmsnorm_bwd_v3, then _dw_reduce).
    ncu ... python3 ncu_probe.py best.json 4096x4096"""
import json
import sys

import torch

from profkit.kernels import rmsnorm as K

best = json.load(open(sys.argv[1]))
shape = sys.argv[2]
M, N = map(int, shape.split("x"))
x = torch.randn(M, N, dtype=torch.bfloat16, device="cuda")
dy = torch.randn_like(x)
w = 1 + 0.1 * torch.randn(N, dtype=torch.bfloat16, device="cuda")
rstd = torch.empty(M, dtype=torch.float32, device="cuda")
K.rmsnorm_fwd(x, w, rstd=rstd)
for _ in range(3):
    K.rmsnorm_bwd(dy, x, w, rstd, config=tuple(best[f"v2_{shape}"]))
for _ in range(3):
    K.rmsnorm_bwd_v3(dy, x, w, rstd, config=tuple(best[shape]))
torch.cuda.synchronize()
