#!/usr/bin/env python3
"""Round 25 probe (issue 21 item 1): the fused q/k RMSNorm + RoPE at 32768 tokens on the H200,
92 % of copy (the >= 93 % line). Under ncu (r25/h200g) its tuned launch, programs of 8 heads at one
warp, holds 71 registers a thread, so the register file caps an SM at 28 programs (39-40 % of the
warp slots active). Here the same launches with the registers capped (maxnreg) so that 32 fit,
timed round-robin by graph replay beside the uncapped ones and compile (variants_rr.py's loop),
each checked against float64 first.

    python3 benchmarks/gpu/rmsnorm_rope25.py --shapes qwen3-8b-t32768 [--rounds 5] --out DIR
"""
import os
import sys

from profkit.kernels import rmsnorm_rope as RR

# (BLOCK_H, num_warps, maxnreg; 0: none)
CONFIGS = tuple(tuple(int(v) for v in c.split("x")) for c in os.environ.get(
    "RR25_CONFIGS", "8x1x0,8x1x64,8x1x56,8x1x48,4x1x0,4x1x64,8x2x0,8x2x64").split(","))


def main():
    sys.path.insert(0, os.path.dirname(__file__))
    from variants_rr import run_with

    extra = {"cfg_" + "x".join(map(str, c)): (lambda c: lambda s: RR.rmsnorm_rope(
        s["q"], s["k"], s["qw"], s["kw"], s["cos"], s["sin"], s["pos"], rotary_dim=s["rotary_dim"], config=c))(c)
        for c in CONFIGS}
    run_with("rmsnorm_rope", extra, first=("triton",), last=("compile",))


if __name__ == "__main__":
    main()
