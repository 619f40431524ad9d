#!/usr/bin/env python3
"""Round 13 (issue 21 item 1): where the vocabulary softmax's time goes on the GPU, by taking parts
of the row-group kernel away (the outputs are then wrong: nothing here is checked or shipped).

    python3 benchmarks/gpu/softmax_probe13.py MODE [--out DIR]   # -> DIR/softmax_probe13_MODE.json

MODE (one per process: the kernel's helpers are replaced before its first compile):
- full:   the kernel as shipped;
- nowait: _finish combines whatever its first load of the row's slots saw (_await_partials
          replaced: no wait for the partners): the time the cross-program meeting costs;
- stream: no reductions and no slots either, each chunk written back as read (the same grid,
          loads, row walk and registers held): the kernel's data movement alone.
Each launch below is timed by CUDA-graph replay in turn with a copy of the same bytes, 5 rounds.
"""
import argparse
import json
import os

import torch
import triton
import triton.language as tl

from profkit.kernels import softmax as K
from profkit.kernels.timing import graph_timer, header, stamp


@triton.jit
def _await_none(p, row, WS, K: tl.constexpr, KP: tl.constexpr):
    return p


@triton.jit
def _publish_none(x, row, c, R, WS, KP: tl.constexpr, EXP2: tl.constexpr = 0, LOCAL: tl.constexpr = 0):
    return 0.0, x.to(tl.float32)


@triton.jit
def _finish_store(p, row, m, h, cols, mk, WS, Y, sy, K: tl.constexpr, KP: tl.constexpr, LOCAL: tl.constexpr = 0):
    tl.store(Y + row * sy + cols, h.to(Y.dtype.element_ty), mask=mk)


LAUNCHES = {"llama3vocab-t2048": [("group_lag_pf1", 4096, 4, 4), ("group_lag_loc_pf1", 4096, 4, 4),
                                  ("group_lag_loc_pf1", 8192, 2, 8)],
            "qwen7bvocab-t1024": [("group_lag_pf1", 8192, 2, 8), ("group_lag_loc_pf1", 8192, 2, 8),
                                  ("group_lag_pf1", 2048, 8, 2)]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("full", "nowait", "stream"))
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    if args.mode == "nowait":
        K._await_partials = _await_none
    elif args.mode == "stream":
        K._publish, K._finish = _publish_none, _finish_store
    hdr = header("cuda")
    gbench = graph_timer(rep_ms=60)
    w = K.WORKLOAD
    rows = []
    for shape, launches in LAUNCHES.items():
        s = w.setup(w.shapes[shape], "bf16", "cuda")
        x = s["x"]
        y, dst = torch.empty_like(x), torch.empty_like(x)
        fns = {str(cfg): (lambda cfg=cfg: K.softmax(x, out=y, config=cfg)) for cfg in launches
               if args.mode != "stream" or "_loc" not in cfg[0]}  # without reductions _loc is the same kernel
        fns["copy"] = lambda: dst.copy_(x)
        times = {v: [] for v in fns}
        for _ in range(5):
            for v, fn in fns.items():
                try:
                    times[v].append(gbench(fn))
                except Exception as e:  # noqa: BLE001 - a launch that cannot be resident is a row
                    times[v].append(f"{type(e).__name__}: {str(e)[:100]}")
        med = {v: sorted(t)[2] for v, t in times.items() if all(isinstance(a, float) for a in t)}
        row = {"mode": args.mode, "shape": shape, "graph_ms": med, "all": times,
               "pct_copy": {v: 100 * med["copy"] / m for v, m in med.items()}, **stamp(hdr)}
        rows.append(row)
        print(f"{args.mode} {shape}: " + "  ".join(f"{v} {m * 1e3:.1f} us ({row['pct_copy'][v]:.1f} %)"
                                                  for v, m in med.items()), flush=True)
        del s, x, y, dst
        torch.cuda.empty_cache()
    with open(os.path.join(args.out, f"softmax_probe13_{args.mode}.json"), "w") as f:
        json.dump({"header": hdr, "rows": rows}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
