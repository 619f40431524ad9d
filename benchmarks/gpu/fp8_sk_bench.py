#!/usr/bin/env python3
"""fp8 v4 candidates (issue 21 item 3, round 4): v3 `triton_promote` beside v4
(`fp8_gemm_promote_sk`: stream-K over the last partial wave, promotion every <= 2048) in several
configs and torch._scaled_mm, per-row and per-tensor, at the registered shapes with M >= 1024.
Every candidate is checked against float64 first (the lab's gemm policy), then all are timed
round-robin R times (do_bench median each, L2 flushed; the median of the R reported).

    python3 benchmarks/gpu/fp8_sk_bench.py [--rounds 5] [--out DIR] [--shapes a,b]  # -> DIR/fp8_sk.json

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
from profkit.kernels import fp8_gemm as F

T128x256 = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=3)
T256x128 = dict(BLOCK_M=256, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=3)
T128x128 = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=4)


def v3_cfg(aq, bq, sa, sb, cfg):
    """v3's kernel (_fp8_gemm_pchunk) at one explicit config, host descriptors, no autotuner."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    M, N, K, row, sa, sb, out, _ = F._fp8_args(aq, bq, sa, sb, None)
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    progs = min(torch.cuda.get_device_properties(0).multi_processor_count, triton.cdiv(M, bm) * triton.cdiv(N, bn))
    d = [TensorDescriptor.from_tensor(aq, [bm, bk]), TensorDescriptor.from_tensor(bq, [bn, bk]),
         TensorDescriptor.from_tensor(out, [bm, bn])]
    F._SK_LAST[0] = F._fp8_gemm_pchunk[(progs,)](*d, sa, sb, M, N, K, ROW_SCALES=row, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                                 GROUP_M=cfg["GROUP_M"], CHUNK_K=F.PROMOTE_K, NUM_SMS=progs, FLATTEN=True,
                                                 UPCAST=False, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return out


def candidates(shape, mode):
    """name -> (fn(aq, bq, sa, sb) -> out)"""
    sk = lambda **kw: (lambda aq, bq, sa, sb: F.fp8_gemm_promote_sk(aq, bq, sa, sb, **kw))  # noqa: E731
    v3 = lambda cfg: (lambda aq, bq, sa, sb: v3_cfg(aq, bq, sa, sb, cfg))  # noqa: E731
    c = {"sk": sk()}
    if shape == "qwen7b-down-m1024":
        c["sk_256x128"] = sk(config=T256x128)
        c["sk_128x128"] = sk(config=T128x128)
        c["sk_c1024"] = sk(chunk_k=1024)
        c["sk_g4"] = sk(config=dict(T128x256, GROUP_M=4))
    c["v3_128x256_g8"] = v3(T128x256)
    c["v3_128x256_g16"] = v3(dict(T128x256, GROUP_M=16))
    c["v3_256x128_g8"] = v3(T256x128)
    if shape in ("m8192-n8192-k8192", "llama8b-down-m4096"):
        c["v3_128x256_g4"] = v3(dict(T128x256, GROUP_M=4))
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
            for name, f in candidates(shape, mode).items():
                fn = (lambda f: lambda: f(aq, bq, sa, sb))(f)
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
