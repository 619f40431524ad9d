#!/usr/bin/env python3
"""Round 4 (issue 21 item 3): v3 launched directly (`triton_promote`) against v3 through the autotuner
(`triton_promote_tuned`, round 3's launcher) and _scaled_mm; host time per call at every shape.
Copied from fp8_promote_rr.py (issue 21 item 4): v1 `triton` / `triton_tensor`,
v3 `triton_promote` / `triton_promote_tensor` and both torch._scaled_mm modes, each registered
variant as the lab runs it (launcher included), timed R times in turn (triton.testing.do_bench
median each, L2 flushed) and reported as the median of the R, so clock drift hits all alike
(the method of benchmarks/gpu/fp8_promotion/bench_fp8.py --rounds). Also the launcher's host
time per call (back-to-back calls, no sync) at the decode shape.

    python3 benchmarks/gpu/fp8_promote_rr.py [--rounds 7] [--out DIR]   # -> DIR/fp8_promote_rr4.json

Runs against kernels/fp8_gemm.py of commit 0356793 on branch fp8c (the stream-K kernel and the
triton_promote_tuned variants were measured, did not win, and were taken out again: gemm.md, round 4).
"""
import argparse
import datetime
import json
import os
import subprocess
import time

import torch
import triton
from triton.testing import do_bench

from profkit.kernels import get

VARIANTS = ("triton_promote", "triton_promote_tensor", "triton_promote_tuned", "triton_promote_tuned_tensor", "scaled_mm", "scaled_mm_tensor")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    w = get("fp8_gemm")
    drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    hdr = dict(gpu=torch.cuda.get_device_name(), driver=drv, torch=torch.__version__, triton=triton.__version__,
               date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), rounds=args.rounds)
    print(json.dumps(hdr), flush=True)
    rows = []
    for shape, p in w.shapes.items():
        state = w.setup(p, "fp8", "cuda")
        fns = {v: (lambda v: lambda: w.variants[v](state))(v) for v in VARIANTS}
        for v, fn in fns.items():  # compile, autotune, check
            r = w.check(state, v, fn(), "fp8")
            assert r.ok, (shape, v, str(r))
        torch.cuda.synchronize()
        times = {v: [] for v in fns}
        for _ in range(args.rounds):
            for v, fn in fns.items():
                times[v].append(float(do_bench(fn, warmup=10, rep=60, return_mode="median")))
        med = {v: sorted(t)[len(t) // 2] for v, t in times.items()}
        host = {}
        if True:  # host time of the launcher alone (GPU work queues behind it)
            for v, fn in fns.items():
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(50):
                    fn()
                host[v] = (time.perf_counter() - t0) / 50 * 1e6
                torch.cuda.synchronize()
        for v in VARIANTS:
            peer = w.peers.get(v, v)
            row = dict(shape=shape, variant=v, ms=med[v], ms_all=times[v], peer=peer,
                       pct_peer=100 * med[peer] / med[v], tflops=2 * p["M"] * p["N"] * p["K"] / med[v] / 1e9)
            if host:
                row["host_us_per_call"] = host[v]
            rows.append(row)
            print(f"{shape:20} {v:22} {med[v]:.4f} ms [{min(times[v]):.4f}-{max(times[v]):.4f}] "
                  f"{row['pct_peer']:5.1f} % of {peer}" + (f"  host {host[v]:.0f} us/call" if host else ""), flush=True)
        del state
        torch.cuda.empty_cache()
    os.makedirs(args.out, exist_ok=True)
    from profkit.kernels.fp8_gemm import autotune_choices
    tuned = autotune_choices()
    print(json.dumps(tuned.get("fp8_gemm.promote")), flush=True)
    with open(os.path.join(args.out, "fp8_promote_rr4.json"), "w") as f:
        json.dump(dict(header=hdr, rows=rows, autotune=tuned), f, indent=1)


if __name__ == "__main__":
    main()
