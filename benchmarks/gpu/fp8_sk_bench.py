#!/usr/bin/env python3
"""fp8 v4 candidates (issue 21 item 3, round 4): v3 `triton_promote` beside v4
(`fp8_gemm_promote_sk`: stream-K over the last partial wave, promotion every <= 2048) in several
configs and torch._scaled_mm, per-row and per-tensor, at the registered shapes with M >= 1024.
Every candidate is checked against float64 first (the lab's gemm policy), then all are timed
round-robin R times (do_bench median each, L2 flushed; the median of the R reported).

    python3 benchmarks/gpu/fp8_sk_bench.py [--rounds 5] [--out DIR] [--shapes a,b]  # -> DIR/fp8_sk.json
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
from profkit.kernels import fp8_gemm as F

T128x256 = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=3)
T256x128 = dict(BLOCK_M=256, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=3)
T128x128 = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=4)


def candidates(shape, mode):
    c = {"sk0": dict(sk_mode=0), "sk1": dict(sk_mode=1), "sk2": dict(sk_mode=2)}
    if mode == "row":
        c["sk1_late"] = dict(sk_mode=1, scale_late=True)
    if shape in ("qwen7b-down-m1024", "m8192-n8192-k8192"):
        c["sk1_256x128"] = dict(sk_mode=1, config=T256x128)
        c["sk1_128x128"] = dict(sk_mode=1, config=T128x128)
    if shape == "qwen7b-down-m1024":
        c["sk1_c1024"] = dict(sk_mode=1, chunk_k=1024)  # finer stream-K items (every <= 1024)
    return c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--shapes", default="")
    ap.add_argument("--budget", type=float, default=480)
    args = ap.parse_args()
    t0 = time.time()
    w = get("fp8_gemm")
    drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    hdr = dict(gpu=torch.cuda.get_device_name(), driver=drv, torch=torch.__version__, triton=triton.__version__,
               date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), rounds=args.rounds,
               sms=torch.cuda.get_device_properties(0).multi_processor_count)
    print(json.dumps(hdr), flush=True)
    rows = []
    shapes = [s for s in w.shapes if w.shapes[s]["M"] >= 1024 and (not args.shapes or s in args.shapes.split(","))]
    for shape in shapes:
        if time.time() - t0 > args.budget:
            print("budget: stop before", shape, flush=True)
            break
        p = w.shapes[shape]
        state = w.setup(p, "fp8", "cuda")
        for mode, v3, base in (("row", "triton_promote", "scaled_mm"), ("tensor", "triton_promote_tensor", "scaled_mm_tensor")):
            aq, bq, sa, sb = state[mode]
            ref = w.reference(state, v3)
            from profkit.kernels._numerics import measure
            fns = {"scaled_mm": lambda: w.variants[base](state), "v3": lambda: w.variants[v3](state)}
            info = {}
            for name, kw in candidates(shape, mode).items():
                fn = (lambda kw: lambda: F.fp8_gemm_promote_sk(aq, bq, sa, sb, **kw))(kw)
                try:
                    for _ in range(2):  # twice: the counters must come back to zero
                        out = fn()
                    torch.cuda.synchronize()
                    r = measure(out.double(), ref, "fp8", policy="gemm")
                    k = F._SK_LAST[0]
                    info[name] = dict(ok=bool(r.ok), rel_fro=float(r.rel_err), max_rel=float(r.max_rel),
                                      regs=getattr(k, "n_regs", None), spills=getattr(k, "n_spills", None))
                    if r.ok:
                        fns[name] = fn
                except Exception as e:  # noqa: BLE001
                    info[name] = dict(error=f"{type(e).__name__}: {str(e)[:300]}")
                print(shape, mode, name, json.dumps(info[name]), flush=True)
            for name in ("scaled_mm", "v3"):
                r = measure(fns[name]().double(), ref, "fp8", policy="gemm")
                info[name] = dict(ok=bool(r.ok), rel_fro=float(r.rel_err), max_rel=float(r.max_rel))
            del ref
            torch.cuda.synchronize()
            times = {n: [] for n in fns}
            for _ in range(args.rounds):
                for n, fn in fns.items():
                    times[n].append(float(do_bench(fn, warmup=10, rep=60, return_mode="median")))
            med = {n: sorted(t)[len(t) // 2] for n, t in times.items()}
            for n in info:
                row = dict(shape=shape, mode=mode, variant=n, **info[n])
                if n in med:
                    row.update(ms=med[n], ms_all=times[n], pct_scaled_mm=100 * med["scaled_mm"] / med[n],
                               tflops=2 * p["M"] * p["N"] * p["K"] / med[n] / 1e9)
                rows.append(row)
                print(f"{shape:20} {mode:6} {n:12} " + (f"{med[n]:.4f} ms {row['pct_scaled_mm']:6.1f} %" if n in med else "-")
                      + f" max_rel {info[n].get('max_rel', 0):.1e}", flush=True)
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, "fp8_sk.json"), "w") as f:
                json.dump(dict(header=hdr, rows=rows), f, indent=1)
        del state
        torch.cuda.empty_cache()
    print("wall", round(time.time() - t0), flush=True)


if __name__ == "__main__":
    main()
