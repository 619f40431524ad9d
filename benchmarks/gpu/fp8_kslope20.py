#!/usr/bin/env python3
"""Round 20 (issue 21 item 3): what a tile costs besides its k loop, for the CUDA kernel, gluon_ws
and cuBLAS (torch._scaled_mm), per-tensor.

Why: at 8192^3 the CUDA kernel is 0.76-0.80x of _scaled_mm (round 19, r20/h100a) while its k loop
is the one that runs 0.93x at qwen7b-down-m1024, where a tile's k loop is 2.3x longer. What a tile
costs apart from its k loop (the epilogue: scales, bf16 conversion, stores from registers, and
the ring's refill at the next tile's start, during which the tensor pipe idles) would explain it.
Each contender is timed by CUDA-graph replay at one (M, N) and several K (every output checked
against _scaled_mm first); a least-squares line T = a + b K per contender gives a (the fixed part)
and b (the k loop). Tiles per CTA are the same at every K, so a / (tiles a CTA) is what one tile
costs besides its k tiles.

    python3 benchmarks/gpu/fp8_kslope20.py [--out DIR]   -> DIR/fp8_kslope20.json
"""
import argparse
import json
import os
from statistics import linear_regression

import torch

from profkit.kernels import fp8_gemm_cuda as C
from profkit.kernels import fp8_gemm_ws as W
from profkit.kernels import get
from profkit.kernels.fp8_gemm import scaled_mm
from profkit.kernels.timing import graph_timer, header, stamp

CASES = {  # (M, N): the K values
    (1024, 3584): (2048, 4096, 8192, 12288, 18944),
    (8192, 8192): (1024, 2048, 4096, 8192),
}


def contenders(aq, bq, sa, sb):
    return {
        "cuda112_g2": lambda out: C.fp8_gemm_cuda(aq, bq, sa, sb, out, cluster=1, group_m=2),
        "cuda112_g8_x2": lambda out: C.fp8_gemm_cuda(aq, bq, sa, sb, out),  # round 17's clustered build
        "cuda128_g8": lambda out: C.fp8_gemm_cuda(aq, bq, sa, sb, out, bn=128, cluster=1, group_m=8),
        "gluon_ws": lambda out: W.fp8_gemm_ws(aq, bq, sa, sb, out),
        "scaled_mm": lambda out: scaled_mm(aq, bq, sa, sb, out=out),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    hdr = header("cuda")
    print(json.dumps(stamp(hdr)), flush=True)
    w, gbench = get("fp8_gemm"), graph_timer(rep_ms=60)
    rows = []
    for (m, n), ks in CASES.items():
        times = {}
        for k in ks:
            aq, bq, sa, sb = w.setup({"M": m, "N": n, "K": k}, "fp8", "cuda")["tensor"]
            ref = scaled_mm(aq, bq, sa, sb).float()
            for name, fn in contenders(aq, bq, sa, sb).items():
                out = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
                fn(out)
                err = ((out.float() - ref).norm() / ref.norm()).item()
                if err > 1e-2:
                    print(f"{m}x{n}x{k} {name}: relative difference {err:.2e} from _scaled_mm: not timed", flush=True)
                    continue
                us = gbench(lambda: fn(out)) * 1e3
                times.setdefault(name, {})[k] = us
                rows.append({**stamp(hdr), "M": m, "N": n, "K": k, "variant": name, "graph_us": us, "rel_diff": err})
                print(f"{m}x{n}x{k:<6} {name:14} {us:9.1f} us", flush=True)
        for name, t in times.items():
            b, a = linear_regression(list(t), list(t.values()))
            kmax = max(t)
            print(f"fit {m}x{n} {name:14} T = {a:7.1f} us + {b * 1024:6.2f} us per 1024 of K; fixed part "
                  f"{100 * a / t[kmax]:4.1f} % at K = {kmax}", flush=True)
            rows.append({**stamp(hdr), "M": m, "N": n, "variant": name, "fit_fixed_us": a, "fit_us_per_1024k": b * 1024})
    with open(os.path.join(args.out, "fp8_kslope20.json"), "w") as f:
        json.dump({"header": hdr, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
