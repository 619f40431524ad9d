#!/usr/bin/env python3
"""Round 10: SM clock and board power while each launch runs back to back (why the helped
launch's two grids, each ~105-107 us alone on an H100, take ~131 us together).

Each launch is replayed from a CUDA graph of 20 calls for ~3 s while nvidia-smi samples the SM
clock, power draw and the active clock-event (throttle) reasons every 50 ms; the first 0.5 s of
samples are dropped. Prints and writes fp8_helped_clocks.json (rows stamped).

    python3 benchmarks/gpu/fp8_helped_clocks.py [--out DIR] [--shapes a,b]   # other shapes: v3 and
                                                                     # _scaled_mm, both scale modes
"""
import json
import os
import subprocess
import sys
import time

import torch

from profkit.kernels import fp8_gemm as F

sys.path.insert(0, os.path.dirname(__file__))
from fp8_helped import helped  # noqa: E402

QUERY = "clocks.sm,power.draw,clocks_event_reasons.active"


def sample(fn, seconds=3.0):
    g = torch.cuda.CUDAGraph()
    fn()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        for _ in range(20):
            fn()
    p = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", "-lms", "50"],
                         stdout=subprocess.PIPE, text=True)
    t0 = time.time()
    n = 0
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ev0.record()
    while time.time() - t0 < seconds:
        g.replay()
        n += 20
        if n % 400 == 0:
            torch.cuda.synchronize()
    ev1.record()
    torch.cuda.synchronize()
    p.terminate()
    out = p.communicate()[0].strip().splitlines()
    rows = [r.split(", ") for r in out]
    keep = rows[len(rows) // 6:]  # drop the first ~0.5 s
    clk = [float(r[0]) for r in keep if r[0].replace(".", "").isdigit()]
    pw = [float(r[1]) for r in keep if r[1].replace(".", "").isdigit()]
    reasons = sorted({r[2] for r in keep if len(r) > 2})
    return dict(calls=n, us_per_call=ev0.elapsed_time(ev1) * 1e3 / n, sm_mhz_mean=sum(clk) / max(1, len(clk)),
                sm_mhz_min=min(clk or [0]), power_w_mean=sum(pw) / max(1, len(pw)), reasons=reasons, samples=len(keep))


def main():
    from profkit.kernels import get
    from profkit.kernels.timing import header, stamp

    out_dir = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else "."
    shapes = (sys.argv[sys.argv.index("--shapes") + 1].split(",") if "--shapes" in sys.argv
              else ["qwen7b-down-m1024"])
    hdr = header("cuda")
    w = get("fp8_gemm")
    rows = []
    for shape in shapes:
        state = w.setup(w.shapes[shape], "fp8", "cuda")
        aq, bq, sa, sb = state["tensor"]
        o = torch.empty((aq.shape[0], bq.shape[0]), dtype=torch.bfloat16, device="cuda")
        names = ["triton_promote_tensor", "scaled_mm_tensor"] + (["triton_promote", "scaled_mm"]
                                                                  if shape != "qwen7b-down-m1024" else [])
        fns = {v: (lambda v: lambda: w.variants[v](state))(v) for v in names}
        if shape == "qwen7b-down-m1024":
            fns.update({
                "helped_h135": lambda: helped(aq, bq, sa, sb, o, {"main_k_tiles": 135}),
                "helped_h128": lambda: helped(aq, bq, sa, sb, o, {"main_k_tiles": 128}),
                "head_only_h128": lambda: helped(aq, bq, sa, sb, o, {"main_k_tiles": 128, "_drop": "helper"}),
                "helpers_only_h128": lambda: helped(aq, bq, sa, sb, o, {"main_k_tiles": 128, "_drop": "head"})})
        for name, fn in fns.items():
            r = dict(variant=name, shape=shape, **sample(fn), **stamp(hdr))
            rows.append(r)
            print(f"{shape:20} {name:24} {r['us_per_call']:7.1f} us/call  SM {r['sm_mhz_mean']:6.0f} MHz "
                  f"(min {r['sm_mhz_min']:.0f})  {r['power_w_mean']:5.0f} W  reasons {r['reasons']}", flush=True)
        del state
        torch.cuda.empty_cache()
    os.makedirs(out_dir, exist_ok=True)
    tag = "" if shapes == ["qwen7b-down-m1024"] else "_shapes"
    with open(os.path.join(out_dir, f"fp8_helped_clocks{tag}.json"), "w") as f:
        json.dump(dict(header=hdr, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
