#!/usr/bin/env python3
"""Round 22 probe (issue 21 item 1): RoPE at many tokens, other launches than one program a
token. torch.compile splits a Llama RoPE call into a q kernel of 131072 small programs (1,024
elements each) and a k kernel; under ncu its q kernel moves 4.23 TB/s on an H200 where the lab's
one-program-per-token launch (5,120 elements a program) moves 4.03 (r22/h200b). Timed here, by
CUDA-graph replay over inputs rotated past the L2 (the tuner's own timing, kernels/timing.tuned),
each output checked against float64 first, with compile and Liger timed for scale:
- every head-split launch (_rope_fwd_heads: programs of BLOCK_H q or k heads of one token, until
  now a candidate only below one token an SM, round 6) and every per-token launch;
- with --flat-only, the per-token launches and q and k as flat blocks of elements (rope_flat,
  compile's shape of kernel: measured slower and removed; the code is at commit 66bb7b6).

    python3 benchmarks/gpu/rope22.py --out DIR [--shapes a,b]
"""
import argparse
import json
from pathlib import Path

import torch

from profkit.kernels import get
from profkit.kernels import rope as R
from profkit.kernels import timing as T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default="llama8b-t32768,llama8b-t4096,qwen7b-t4096")
    ap.add_argument("--flat-only", action="store_true", help="the per-token launches and the flat blocks only")
    args = ap.parse_args()
    meta = T.stamp(T.header("cuda"))
    print(meta, flush=True)
    w = get("rope")
    bench = T.graph_timer(100)
    res = {}
    for shape in args.shapes.split(","):
        s = w.setup(w.shapes[shape], "bf16", "cuda")
        q, k = s["q"], s["k"]
        HQ, HK, D = q.shape[1], k.shape[1], q.shape[2]
        cands = R.head_candidates(HQ, HK, s["rotary_dim"] // 2)
        per_token = tuple((0, nw) for nw in (1, 2, 4, 8))
        flat = tuple(("flat", b, nw) for b, nw in ((512, 2), (1024, 2), (1024, 4), (2048, 4), (2048, 8), (4096, 8)))
        rows = {}

        def launch(c, qq, kk, s=s):
            if c[0] == "flat":
                if not hasattr(R, "rope_flat"):  # measured and removed: the kernel is at commit 66bb7b6
                    raise SystemExit("rope_flat was removed after round 22 (refuted); check out commit 66bb7b6 to run it")
                return R.rope_flat(qq, kk, s["cos"], s["sin"], s["pos"], block=c[1], num_warps=c[2])
            return R.rope(qq, kk, s["cos"], s["sin"], s["pos"], s["rotary_dim"], s["interleaved"], config=c)

        for cfg in tuple(dict.fromkeys((cands if not args.flat_only else ()) + per_token + flat)):
            ok = w.check(s, "triton", launch(cfg, q, k), "bf16")
            copies = T.rotated(launch, (q, k))
            rows[str(cfg)] = dict(us=bench(lambda: copies(cfg)) * 1e3, check=str(ok))
            print(f"{shape:16} {str(cfg):10} {rows[str(cfg)]['us']:8.2f} us  {ok}", flush=True)
        for v in ("compile", "liger", "triton"):
            if v in w.variants:
                fn = w.variants[v]
                fn(s)
                rows[v] = dict(us=bench(lambda: fn(s)) * 1e3)
                print(f"{shape:16} {v:10} {rows[v]['us']:8.2f} us (not rotated)", flush=True)
        res[shape] = rows
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "rope22.json").write_text(json.dumps(dict(meta=meta, rows=res), indent=1))


if __name__ == "__main__":
    main()
