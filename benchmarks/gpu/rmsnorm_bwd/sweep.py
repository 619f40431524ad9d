#!/usr/bin/env python3
"""RMSNorm backward round 3 (issue 21 item 2): every launch configuration of the v3 kernel beside
v2 (the shipped kernel's tuned pick) and torch.compile of the backward written out (compile_direct),
timed by CUDA-graph replay in one process, inputs rotated past the L2 as benchmarks/kernels.py does.

    python3 sweep.py OUT_DIR [--shapes 4096x4096,4096x3584,32768x4096] [--quick]

Writes OUT_DIR/sweep_<gpu>.json (every timing, stamped with GPU, driver, torch, triton, date) and
OUT_DIR/best.json (the fastest v3 configuration per shape, read by ncu_probe.py)."""
import itertools
import json
import os
import sys
import time

import torch
from triton.testing import do_bench_cudagraph

from profkit.kernels import rmsnorm as K
from profkit.kernels._numerics import compiled
from profkit.kernels.timing import copy_bandwidth, header, n_copies, rotating, stamp, timer

out = sys.argv[1]
args = dict(a.split("=", 1) for a in sys.argv[2:] if "=" in a)
quick = "--quick" in sys.argv
shapes = [tuple(map(int, s.split("x"))) for s in args.get("--shapes", "4096x4096,4096x3584,32768x4096").split(",")]
os.makedirs(out, exist_ok=True)
info = header("cuda")
st = stamp(info)
copy = copy_bandwidth("cuda", timer("cuda"))
print(info.get("gpu"), "copy GB/s", round(copy["gbps"]), flush=True)
T0 = time.time()


def gt(fn, rep=40):
    fn()
    torch.cuda.synchronize()
    return float(do_bench_cudagraph(fn, rep=rep, return_mode="median"))


def make_states(M, N):
    s = []
    x = torch.randn(M, N, dtype=torch.bfloat16, device="cuda")
    for i in range(n_copies({"x": x, "dy": x}, "cuda")):
        x = torch.randn(M, N, dtype=torch.bfloat16, device="cuda") if i else x
        w = 1 + 0.1 * torch.randn(N, dtype=torch.bfloat16, device="cuda")
        dy = torch.randn(M, N, dtype=torch.bfloat16, device="cuda")
        rstd = torch.empty(M, dtype=torch.float32, device="cuda")
        K.rmsnorm_fwd(x, w, rstd=rstd)
        s.append({"x": x, "w": w, "dy": dy, "rstd": rstd})
    return s


def ref(s):
    x, w, dy = s["x"].double(), s["w"].double(), s["dy"].double()
    r = (x.pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt()
    xh, wdy = x * r, dy * w
    return (wdy - xh * (xh * wdy).mean(-1, keepdim=True)) * r, (dy * xh).sum(0)


def err(got, want):
    return max(((g.double() - t).abs().max() / t.abs().max()).item() for g, t in zip(got, want))


rows = []
best = {}


def record(shape, variant, cfg, ms, M, N, e=None, **kw):
    b = 3 * M * N * 2 + 4 * M + 2 * N * 2
    r = {**st, "shape": f"{M}x{N}", "variant": variant, "config": cfg, "graph_ms": ms,
         "graph_gbps": b / ms / 1e6, "graph_pct_copy": 100 * b / ms / 1e6 / copy["gbps"], "rel_err": e, **kw}
    rows.append(r)
    print(f"{M}x{N} {variant:10} {str(cfg):28} {ms * 1e3:8.1f} us {r['graph_pct_copy']:5.1f} % copy"
          + (f" err {e:.1e}" if e is not None else "") + (f" {kw}" if kw else ""), flush=True)
    return r


combos = [(1, 4), (1, 8), (1, 16), (2, 4), (2, 8), (2, 16), (4, 8), (4, 16)]
pipes = [(1, 0), (2, 0), (3, 0), (4, 0), (1, 1)]
per_sms = [1, 2, 4, 8]
for si, (M, N) in enumerate(shapes):
    states = make_states(M, N)
    want = ref(states[0])
    # the peer: torch.compile of the backward written out
    comp = compiled("rmsnorm_bwd_direct", K.rmsnorm_bwd_eager)
    e = err(comp(states[0]["dy"], states[0]["x"], states[0]["w"]), want)
    c_ms = gt(rotating(lambda s: comp(s["dy"], s["x"], s["w"]), states))
    record((M, N), "compile", None, c_ms, M, N, e)
    # v2: the shipped kernel, each of its candidates (its tuner's choice is among them)
    v2 = {}
    for cfg in K.bwd_candidates(N):
        try:
            e = err(K.rmsnorm_bwd(states[0]["dy"], states[0]["x"], states[0]["w"], states[0]["rstd"], config=cfg), want)
            v2[cfg] = record((M, N), "v2", cfg, gt(rotating(lambda s: K.rmsnorm_bwd(s["dy"], s["x"], s["w"], s["rstd"], config=cfg), states)), M, N, e)["graph_ms"]
        except Exception as ex:  # noqa: BLE001
            print("v2", cfg, "failed", repr(ex)[:120])
    # v3 sweep (the first shape: all; later shapes: the 12 fastest of the first)
    if si == 0 or not best:
        cfgs = [(ps, bm, nw, stg, pf) for (bm, nw), (stg, pf) in itertools.product(combos, pipes) for ps in per_sms]
        if quick:
            cfgs = cfgs[::3]
    else:
        first = [r for r in rows if r["shape"] == "x".join(map(str, shapes[0])) and r["variant"] == "v3"]
        cfgs = [tuple(r["config"]) for r in sorted(first, key=lambda r: r["graph_ms"])[:12]]
    t3 = {}
    checked = set()
    for cfg in cfgs:
        try:
            e = None
            if cfg[1:] not in checked:  # one check per compiled kernel
                e = err(K.rmsnorm_bwd_v3(states[0]["dy"], states[0]["x"], states[0]["w"], states[0]["rstd"], config=cfg), want)
                checked.add(cfg[1:])
            t3[cfg] = record((M, N), "v3", list(cfg), gt(rotating(lambda s: K.rmsnorm_bwd_v3(s["dy"], s["x"], s["w"], s["rstd"], config=cfg), states)), M, N, e)["graph_ms"]
        except Exception as ex:  # noqa: BLE001
            print("v3", cfg, "failed", repr(ex)[:160], flush=True)
    if t3:
        b = min(t3, key=t3.get)
        best[f"{M}x{N}"] = list(b)
        best[f"v2_{M}x{N}"] = list(min(v2, key=v2.get))
        # the dw stage-2 cost: stage 1 alone, and stage-2 shapes
        s1 = gt(rotating(lambda s: K.rmsnorm_bwd_v3(s["dy"], s["x"], s["w"], s["rstd"], config=b, stage1_only=True), states))
        record((M, N), "v3_stage1", list(b), s1, M, N)
        for red in [(256, 32, 4), (64, 64, 4), (32, 128, 4), (32, 256, 4), (16, 256, 4), (64, 128, 8)]:
            try:
                record((M, N), "v3_red", list(b) + list(red), gt(rotating(lambda s: K.rmsnorm_bwd_v3(s["dy"], s["x"], s["w"], s["rstd"], config=b, red=red), states)), M, N)
            except Exception as ex:  # noqa: BLE001
                print("red", red, "failed", repr(ex)[:120])
        print(f"== {M}x{N}: compile {c_ms * 1e3:.1f} us, v2 best {min(v2.values()) * 1e3:.1f} us, v3 best {b} {t3[b] * 1e3:.1f} us "
              f"= {c_ms / t3[b]:.2f}x compile; stage1 {s1 * 1e3:.1f} us; {time.time() - T0:.0f} s", flush=True)
    del states
    torch.cuda.empty_cache()
    gpu = (info.get("gpu") or "gpu").replace(" ", "_")
    json.dump({"info": info, "copy": copy, "rows": rows, "best": best}, open(os.path.join(out, f"sweep_{gpu}.json"), "w"), indent=1, default=str)
    json.dump(best, open(os.path.join(out, "best.json"), "w"))
