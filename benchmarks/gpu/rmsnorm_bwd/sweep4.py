#!/usr/bin/env python3
"""RMSNorm backward round 3, fine sweep around the winners (issue 21 item 2): BLOCK_M 1-2, 4-8 warps,
2-6 pipeline stages, dx store hint, one program per SM or a balanced grid (every program the same
number of row steps), the dw reduce as a programmatic dependent; the same-bytes floor beside them.
CUDA-graph replay, inputs rotated past the L2.    python3 sweep4.py OUT_DIR"""
import itertools
import json
import os
import sys
import time

import torch
import triton
from triton.testing import do_bench_cudagraph

from profkit.kernels import rmsnorm as K
from profkit.kernels.timing import copy_bandwidth, header, n_copies, rotating, stamp, timer

out = sys.argv[1]
shapes = [(4096, 4096), (4096, 3584), (32768, 4096)]
info = header("cuda")
st = stamp(info)
copy = copy_bandwidth("cuda", timer("cuda"))
sms = torch.cuda.get_device_properties(0).multi_processor_count
gpu = (info.get("gpu") or "gpu").replace(" ", "_")
print(info.get("gpu"), "copy GB/s", round(copy["gbps"]), flush=True)
T0 = time.time()


def gt(fn, rep=60):
    fn()
    torch.cuda.synchronize()
    return float(do_bench_cudagraph(fn, rep=rep, return_mode="median"))


rows = []
cfgs = ([(1, 1, nw, s) for nw, s in [(8, 4), (8, 5), (8, 6), (4, 4), (4, 5)]]
        + [(1, 2, nw, s) for nw, s in [(8, 2), (8, 3), (8, 4), (8, 5), (4, 3), (4, 4)]])
for M, N in shapes:
    states = []
    for _ in range(n_copies({"a": torch.empty(M, N, dtype=torch.bfloat16, device="cuda"),
                             "b": torch.empty(M, N, dtype=torch.bfloat16, device="cuda")}, "cuda")):
        x = torch.randn(M, N, dtype=torch.bfloat16, device="cuda")
        w = 1 + 0.1 * torch.randn(N, dtype=torch.bfloat16, device="cuda")
        rstd = torch.empty(M, dtype=torch.float32, device="cuda")
        K.rmsnorm_fwd(x, w, rstd=rstd)
        states.append({"x": x, "w": w, "dy": torch.randn_like(x), "rstd": rstd, "dx": torch.empty_like(x)})
    b = 3 * M * N * 2 + 4 * M + 2 * N * 2

    def rec(variant, cfg, ms):
        rows.append({**st, "shape": f"{M}x{N}", "variant": variant, "config": cfg, "graph_ms": ms,
                     "graph_pct_copy": 100 * b / ms / 1e6 / copy["gbps"]})
        print(f"{M}x{N} {variant:8} {cfg!s:40} {ms * 1e3:7.1f} us {rows[-1]['graph_pct_copy']:5.1f} %", flush=True)

    rec("floor", None, gt(rotating(lambda s: torch.add(s["x"], s["dy"], out=s["dx"]), states)))
    ref = K.rmsnorm_bwd(states[0]["dy"], states[0]["x"], states[0]["w"], states[0]["rstd"], config=(1, 1, 8, 4, 0, 1))
    for (ps, bm, nw, stg), hint, bal in itertools.product(cfgs, (0, 1), (False, True)):
        cfg = (ps, bm, nw, stg, 0, hint)
        steps = triton.cdiv(M, bm)
        P = triton.cdiv(steps, triton.cdiv(steps, sms)) if bal else None
        try:
            got = K.rmsnorm_bwd(states[0]["dy"], states[0]["x"], states[0]["w"], states[0]["rstd"], config=cfg, programs=P)
            assert torch.equal(got[0], ref[0]) and torch.allclose(got[1].float(), ref[1].float(), rtol=1e-2, atol=1e-2)
            rec("v3", [*cfg, f"P{P or sms}"], gt(rotating(lambda s, cfg=cfg, P=P: K.rmsnorm_bwd(s["dy"], s["x"], s["w"], s["rstd"], config=cfg, programs=P), states)))
        except Exception as ex:  # noqa: BLE001
            print("failed", cfg, P, repr(ex)[:160], flush=True)
    K.rmsnorm_bwd(states[0]["dy"], states[0]["x"], states[0]["w"], states[0]["rstd"])  # the tuner's pick (graph-timed)
    rec("tuned", "tuned", gt(rotating(lambda s: K.rmsnorm_bwd(s["dy"], s["x"], s["w"], s["rstd"]), states)))
    best = min((r for r in rows if r["shape"] == f"{M}x{N}" and r["variant"] == "v3"), key=lambda r: r["graph_ms"])
    print(f"== {M}x{N}: best {best['config']} {best['graph_ms'] * 1e3:.1f} us; {time.time() - T0:.0f} s", flush=True)
    del states
    torch.cuda.empty_cache()
    from profkit.kernels.timing import tuned_choices
    with open(os.path.join(out, f"sweep4_{gpu}.json"), "w") as f:
        json.dump({"info": info, "copy": copy, "rows": rows, "tuned": tuned_choices()}, f, indent=1, default=str)
