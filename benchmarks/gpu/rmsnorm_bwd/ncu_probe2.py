#!/usr/bin/env python3
"""Run under ncu: the add floor, v2 (2, 1, 8) and the v3 pick of best2.json at one shape, 3 calls each."""
import json
import sys

import torch

from profkit.kernels import rmsnorm as K

best = json.load(open(sys.argv[1]))
shape = sys.argv[2]
M, N = map(int, shape.split("x"))
x = torch.randn(M, N, dtype=torch.bfloat16, device="cuda")
dy = torch.randn_like(x)
dx = torch.empty_like(x)
w = 1 + 0.1 * torch.randn(N, dtype=torch.bfloat16, device="cuda")
rstd = torch.empty(M, dtype=torch.float32, device="cuda")
K.rmsnorm_fwd(x, w, rstd=rstd)
b = best[shape]
cfg, hint, fuse, P = tuple(b[:5]), int(b[5][4:]), b[6] == "fused", int(b[7][1:])
for _ in range(3):
    torch.add(x, dy, out=dx)
for _ in range(3):
    K.rmsnorm_bwd(dy, x, w, rstd, config=(2, 1, 8))
for _ in range(3):
    K.rmsnorm_bwd_v3(dy, x, w, rstd, config=cfg, red=(32, 256, 4), store_hint=hint, fuse_dw=fuse, programs=P)
torch.cuda.synchronize()
