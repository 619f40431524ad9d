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

from profkit.kernels import get
from profkit.kernels import rope as R

CONFIGS = tuple(tuple(int(v) for v in c.split("x")) for c in os.environ.get(
    "ROPE25_CONFIGS", "0x4,0x8,0x16,4x2,8x2,8x4,16x4,16x8").split(","))


def main():
    w = get("rope")
    names = []
    for bh, nw in CONFIGS:
        name = f"gathered_{bh}x{nw}"
        w.variants[name] = (lambda c: lambda s: R.rope(s["q"], s["k"], s["cos_full"], s["sin_full"], None,
                                                       s["rotary_dim"], s["interleaved"], config=c))((bh, nw))
        names.append(name)
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import variants_rr

    argv = sys.argv[1:]
    sys.argv = [sys.argv[0], "--op", "rope", "--variants", ",".join(["triton_gathered", *names, "compile", "liger"]),
                *argv]
    variants_rr.main()


if __name__ == "__main__":
    main()
