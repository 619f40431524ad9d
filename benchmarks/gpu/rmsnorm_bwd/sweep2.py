#!/usr/bin/env python3
"""RMSNorm backward round 3, second sweep (issue 21 item 2): the floor (an elementwise add reading
two tensors and writing one: the backward's exact traffic, 2 reads + 1 write of M x N bf16), and
v3 configurations (more pipeline stages, balanced grids, dx store hints, dw reduced in the same
kernel behind a grid barrier) beside compile_direct, all by CUDA-graph replay, inputs rotated.

    python3 sweep2.py OUT_DIR [--shapes=4096x4096,...]"""
import itertools
import json
import os
import sys
import time

import torch
import triton
from triton.testing import do_bench_cudagraph

from profkit.kernels import rmsnorm as K
from profkit.kernels._numerics import compiled
from profkit.kernels.timing import copy_bandwidth, header, n_copies, rotating, stamp, timer

out = sys.argv[1]
args = dict(a.split("=", 1) for a in sys.argv[2:] if "=" in a)
shapes = [tuple(map(int, s.split("x"))) for s in args.get("--shapes", "4096x4096,4096x3584,32768x4096").split(",")]
os.makedirs(out, exist_ok=True)
info = header("cuda")
st = stamp(info)
copy = copy_bandwidth("cuda", timer("cuda"))
sms = info.get("sms") or torch.cuda.get_device_properties(0).multi_processor_count
print(info.get("gpu"), "copy GB/s", round(copy["gbps"]), flush=True)
T0 = time.time()
gpu = (info.get("gpu") or "gpu").replace(" ", "_")


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
        s.append({"x": x, "w": w, "dy": dy, "rstd": rstd, "dx": torch.empty_like(x)})
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


def record(M, N, variant, cfg, ms, e=None, **kw):
    b = 3 * M * N * 2 + 4 * M + 2 * N * 2
    r = {**st, "shape": f"{M}x{N}", "variant": variant, "config": cfg, "graph_ms": ms,
         "graph_gbps": b / ms / 1e6, "graph_pct_copy": 100 * b / ms / 1e6 / copy["gbps"], "rel_err": e, **kw}
    rows.append(r)
    print(f"{M}x{N} {variant:10} {str(cfg):44} {ms * 1e3:8.1f} us {r['graph_pct_copy']:5.1f} % copy"
          + (f" err {e:.1e}" if e is not None else ""), flush=True)
    return r


RED = (32, 256, 4)
stage_cfgs = ([(1, 1, nw, stg, 0) for nw in (4, 8, 16) for stg in (3, 4, 5, 6, 8)]
              + [(1, 2, nw, stg, 0) for nw in (8, 16) for stg in (2, 3, 4)]
              + [(1, 2, 16, 1, 1), (1, 1, 8, 1, 1), (1, 2, 8, 1, 1)])
for M, N in shapes:
    states = make_states(M, N)
    want = ref(states[0])
    s0 = states[0]
    # the floor: the same bytes (read two M x N bf16 tensors, write one) by torch's elementwise add
    floor = gt(rotating(lambda s: torch.add(s["x"], s["dy"], out=s["dx"]), states))
    record(M, N, "floor_add", None, floor)
    comp = compiled("rmsnorm_bwd_direct", K.rmsnorm_bwd_eager)
    e = err(comp(s0["dy"], s0["x"], s0["w"]), want)
    c_ms = gt(rotating(lambda s: comp(s["dy"], s["x"], s["w"]), states))
    record(M, N, "compile", None, c_ms, e)
    v2cfg = (2, 1, 8) if N > 2048 else K.bwd_candidates(N)[0]
    record(M, N, "v2", v2cfg, gt(rotating(lambda s: K.rmsnorm_bwd(s["dy"], s["x"], s["w"], s["rstd"], config=v2cfg), states)))
    n_steps_1 = M
    bal = triton.cdiv(n_steps_1, triton.cdiv(n_steps_1, sms))  # a grid whose programs take equal row counts
    t = {}
    for cfg in stage_cfgs:
        try:
            e = err(K.rmsnorm_bwd_v3(s0["dy"], s0["x"], s0["w"], s0["rstd"], config=cfg, red=RED), want)
            t[cfg] = record(M, N, "v3", list(cfg), gt(rotating(lambda s: K.rmsnorm_bwd_v3(s["dy"], s["x"], s["w"], s["rstd"], config=cfg, red=RED), states)), e)["graph_ms"]
        except Exception as ex:  # noqa: BLE001
            print("v3", cfg, "failed", repr(ex)[:160], flush=True)
    top = sorted(t, key=t.get)[:4]
    t2 = {}
    for cfg in top:
        for hint, fuse, P in itertools.product((0, 1, 2), (False, True), (None, bal)):
            kw = dict(config=cfg, red=RED, store_hint=hint, fuse_dw=fuse, programs=P)
            tag = list(cfg) + [f"hint{hint}", "fused" if fuse else "2k", f"P{P or sms}"]
            try:
                e = err(K.rmsnorm_bwd_v3(s0["dy"], s0["x"], s0["w"], s0["rstd"], **kw), want)
                t2[tuple(tag)] = record(M, N, "v3x", tag, gt(rotating(lambda s: K.rmsnorm_bwd_v3(s["dy"], s["x"], s["w"], s["rstd"], **kw), states)), e)["graph_ms"]
            except Exception as ex:  # noqa: BLE001
                print("v3x", tag, "failed", repr(ex)[:160], flush=True)
    b = min(t2, key=t2.get)
    best[f"{M}x{N}"] = list(b)
    print(f"== {M}x{N}: floor {floor * 1e3:.1f} us (= {c_ms / floor:.2f}x compile), compile {c_ms * 1e3:.1f} us, "
          f"v3 best {b} {t2[b] * 1e3:.1f} us = {c_ms / t2[b]:.2f}x compile, {100 * floor / t2[b]:.0f} % of the floor; "
          f"{time.time() - T0:.0f} s", flush=True)
    del states
    torch.cuda.empty_cache()
    json.dump({"info": info, "copy": copy, "rows": rows, "best": best}, open(os.path.join(out, f"sweep2_{gpu}.json"), "w"), indent=1, default=str)
    json.dump(best, open(os.path.join(out, "best2.json"), "w"))
