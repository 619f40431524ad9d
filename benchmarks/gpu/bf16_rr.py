#!/usr/bin/env python3
"""Round 7 (issue 21 item 3): bf16 persistent TMA against cuBLAS at every registered M >= 1024 shape.

Round 2 measured these cells once (one do_bench median a row, the autotuner's first-call pick):
92-93 % of cuBLAS in three cells (H100 llama8b-qkv-m4096, H200 qwen7b-down-m1024 and
qwen7b-gateup-m8192), 99-109 % elsewhere. Here, per shape:
- float64 check of the registered variant first (the workload's own check);
- every launch configuration of the persistent kernel timed alone by CUDA-graph replay (GPU time),
  launched directly, so the autotuner's pick can be read against the rest;
- round-robin over R rounds (the lab's do_bench timer, L2 flushed): the registered variant, the
  fastest configuration launched directly, and cuBLAS; median of the R; graph replay of each;
- the names of the kernels cuBLAS ran (torch.profiler), and torch._scaled_mm's in both scale modes
  at the fp8 shapes still short of it, so the peers' schedules can be named.

    python3 benchmarks/gpu/bf16_rr.py [--rounds 7] [--out DIR] [--shapes a,b]   # -> DIR/bf16_rr.json
"""
import json
import os
import sys

import torch
import triton

from profkit.kernels import get
from profkit.kernels import matmul as Mm
from profkit.kernels.timing import stamp

sys.path.insert(0, os.path.dirname(__file__))
from fp8_launch import device_cli, round_robin  # noqa: E402

# (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, GROUP_M): the registered configurations and their neighbours
EXTRA = [(128, 256, 64, 8, 3, 4), (128, 256, 64, 8, 3, 16), (256, 128, 64, 8, 4, 8), (128, 256, 128, 8, 2, 8),
         (128, 128, 64, 8, 5, 8), (128, 128, 128, 8, 4, 8), (256, 128, 64, 8, 3, 16)]


def configs():
    reg = [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.num_warps, c.num_stages,
            c.kwargs["GROUP_M"]) for c in Mm._tma_configs()]
    return reg + [c for c in EXTRA if c not in reg]


def direct(a, b, out, cfg):
    bm, bn, bk, w, s, g = cfg
    M, K = a.shape
    N = b.shape[1]
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    grid = (min(sms, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)

    def run():
        Mm._matmul_tma_persistent[grid](a, b, out, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=g,
                                        NUM_SMS=sms, WARP_SPECIALIZE=False, FLATTEN=True, UPCAST=False,
                                        num_warps=w, num_stages=s)
        return out
    return run


def kernel_names(fn):
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        return sorted({e.name for e in prof.events() if str(e.device_type).endswith("CUDA")})
    except Exception as e:  # noqa: BLE001 - names are a note, not the measurement
        return [f"not read: {type(e).__name__}: {str(e)[:100]}"]


def main():
    args, w, shapes, hdr, bench, gbench = device_cli("matmul", 7, lambda p: p["M"] >= 1024)
    Mm.ensure_tma_allocator()
    rows, per_shape = [], {}
    for shape, p in shapes.items():
        state = w.setup(p, "bf16", "cuda")
        a, b = state["a"], state["b"]
        r = w.check(state, "persistent_tma", w.variants["persistent_tma"](state), "bf16")
        assert r.ok, (shape, str(r))
        ref = w.variants["cublas"](state)
        out = torch.empty_like(ref)
        cand = {}
        for cfg in configs():
            run = direct(a, b, out, cfg)
            try:
                run()
                torch.cuda.synchronize()
                err = (out.float() - ref.float()).norm().item() / ref.float().norm().item()
                if err > 2e-2:  # bf16 output vs cuBLAS's: a wrong kernel, not rounding
                    raise AssertionError(f"rel err {err:.2e} against cuBLAS")
                cand[cfg] = gbench(run)
            except Exception as e:  # noqa: BLE001 - a configuration this GPU cannot take
                cand[cfg] = float("inf")
                print(f"   {shape} {cfg}: {type(e).__name__}: {str(e)[:120]}", flush=True)
        best = min(cand, key=cand.get)
        fns = {"persistent_tma": lambda: w.variants["persistent_tma"](state),
               "tma_best_direct": direct(a, b, out, best),
               "cublas": lambda: w.variants["cublas"](state)}
        torch.cuda.synchronize()
        times, med = round_robin(fns, bench, args.rounds)
        graph = {v: gbench(fn) for v, fn in fns.items()}
        picked = Mm.autotune_choices().get("matmul.persistent_tma", {})
        for v in fns:
            row = dict(shape=shape, variant=v, ms=med[v], ms_all=times[v], pct_cublas=100 * med["cublas"] / med[v],
                       graph_ms=graph[v], graph_pct_cublas=100 * graph["cublas"] / graph[v],
                       tflops=2 * p["M"] * p["N"] * p["K"] / med[v] / 1e9, **stamp(hdr))
            if v == "tma_best_direct":
                row["config"] = list(best)
            rows.append(row)
            print(f"{shape:22} {v:16} {med[v]:.4f} ms [{min(times[v]):.4f}-{max(times[v]):.4f}] "
                  f"{row['pct_cublas']:5.1f} % of cuBLAS  graph {graph[v] * 1e3:.1f} us ({row['graph_pct_cublas']:.1f} %)"
                  + (f"  {best}" if v == "tma_best_direct" else ""), flush=True)
        per_shape[shape] = dict(candidates_graph_ms={str(c): t for c, t in sorted(cand.items(), key=lambda x: x[1])},
                                cublas_kernels=kernel_names(fns["cublas"]), autotune=picked)
        print(f"   cuBLAS: {per_shape[shape]['cublas_kernels']}", flush=True)
        for c, t in list(per_shape[shape]["candidates_graph_ms"].items())[:4]:
            print(f"   {c}: {t * 1e3:.1f} us ({100 * graph['cublas'] / t:.1f} %)", flush=True)
        del state, fns, out, ref
        torch.cuda.empty_cache()
    fp8 = {}
    wf = get("fp8_gemm")
    for shape in ("qwen7b-down-m1024", "m8192-n8192-k8192"):
        st = wf.setup(wf.shapes[shape], "fp8", "cuda")
        fp8[shape] = {v: kernel_names(lambda: wf.variants[v](st)) for v in ("scaled_mm", "scaled_mm_tensor")}
        print(f"   fp8 {shape}: {fp8[shape]}", flush=True)
        del st
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bf16_rr.json"), "w") as f:
        json.dump(dict(header=hdr, rounds=args.rounds, rows=rows, shapes=per_shape, fp8_peer_kernels=fp8), f, indent=1)


if __name__ == "__main__":
    main()
