#!/usr/bin/env python3
"""Round 25 probe (issue 21 item 1): RoPE with the tables gathered per token, every launch shape.

Under ncu (r25/h200a) the gathered per-token launch (8 warps, 43 registers, 5 programs an SM)
tied compile at 32768 tokens on the H200 (1.002x), whose q kernel runs 16 programs of 1,024
elements an SM. Here every launch of the gathered tables is timed round-robin by graph replay
beside compile and Liger (benchmarks/gpu/variants_rr.py's loop, inputs rotated past the L2): one
program a token at 4, 8 and 16 warps, and the head-split programs of BLOCK_H heads (which, without a
position to wait on, are compile's program size at BLOCK_H = 8).

    python3 benchmarks/gpu/rope25.py --shapes llama8b-t32768 [--rounds 5] --out DIR
"""
import os
import sys

from profkit.kernels import rope as R

CONFIGS = tuple(tuple(int(v) for v in c.split("x")) for c in os.environ.get(
    "ROPE25_CONFIGS", "0x4,0x8,0x16,4x2,8x2,8x4,16x4,16x8").split(","))


def main():
    sys.path.insert(0, os.path.dirname(__file__))
    from variants_rr import run_with

    extra = {f"gathered_{bh}x{nw}": (lambda c: lambda s: R.rope(s["q"], s["k"], s["cos_full"], s["sin_full"], None,
                                                                 s["rotary_dim"], s["interleaved"], config=c))((bh, nw))
             for bh, nw in CONFIGS}
    run_with("rope", extra, first=("triton_gathered",), last=("compile", "liger"))


if __name__ == "__main__":
    main()
