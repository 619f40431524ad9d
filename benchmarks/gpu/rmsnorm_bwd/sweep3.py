#!/usr/bin/env python3
"""RMSNorm backward round 3, the shipped launcher (issue 21 item 2): at each registered shape, the
same-bytes floor (torch.add reading two M x N bf16 tensors and writing one), compile_direct, v2
(its tuner's pick) and every v3 candidate with and without programmatic dependent launch of the
dw reduce, by CUDA-graph replay, inputs rotated past the L2.

    python3 sweep3.py OUT_DIR [--shapes=4096x4096,4096x3584,32768x4096]"""
import json
import os
import sys
import time

import torch
from triton.testing import do_bench_cudagraph

from profkit.kernels import rmsnorm as K
from profkit.kernels._numerics import compiled
from profkit.kernels.timing import copy_bandwidth, header, n_copies, rotating, stamp, timer, tuned_choices

out = sys.argv[1]
args = dict(a.split("=", 1) for a in sys.argv[2:] if "=" in a)
shapes = [tuple(map(int, s.split("x"))) for s in args.get("--shapes", "4096x4096,4096x3584,32768x4096").split(",")]
os.makedirs(out, exist_ok=True)
info = header("cuda")
st = stamp(info)
copy = copy_bandwidth("cuda", timer("cuda"))
gpu = (info.get("gpu") or "gpu").replace(" ", "_")
print(info.get("gpu"), "copy GB/s", round(copy["gbps"]), "pdl supported", K._pdl_supported(), flush=True)
T0 = time.time()


def gt(fn, rep=60):
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


def record(M, N, variant, cfg, ms, e=None):
    b = 3 * M * N * 2 + 4 * M + 2 * N * 2
    r = {**st, "shape": f"{M}x{N}", "variant": variant, "config": cfg, "graph_ms": ms,
         "graph_gbps": b / ms / 1e6, "graph_pct_copy": 100 * b / ms / 1e6 / copy["gbps"], "rel_err": e}
    rows.append(r)
    print(f"{M}x{N} {variant:10} {cfg!s:40} {ms * 1e3:8.1f} us {r['graph_pct_copy']:5.1f} % copy"
          + (f" err {e:.1e}" if e is not None else ""), flush=True)
    return r


def bench_bwd(states, M, N, want, variant, tag, **kw):
    s0 = states[0]
    e = err(K.rmsnorm_bwd(s0["dy"], s0["x"], s0["w"], s0["rstd"], **kw), want)
    return record(M, N, variant, tag, gt(rotating(lambda s: K.rmsnorm_bwd(s["dy"], s["x"], s["w"], s["rstd"], **kw), states)), e)


for M, N in shapes:
    states = make_states(M, N)
    want = ref(states[0])
    s0 = states[0]
    floor = record(M, N, "floor_add", None, gt(rotating(lambda s: torch.add(s["x"], s["dy"], out=s["dx"]), states)))
    comp = compiled("rmsnorm_bwd_direct", K.rmsnorm_bwd_eager)
    e = err(comp(s0["dy"], s0["x"], s0["w"]), want)
    c = record(M, N, "compile", None, gt(rotating(lambda s, comp=comp: comp(s["dy"], s["x"], s["w"]), states)), e)
    K.rmsnorm_bwd_v2(s0["dy"], s0["x"], s0["w"], s0["rstd"])  # its tuner picks
    record(M, N, "v2", "tuned", gt(rotating(lambda s: K.rmsnorm_bwd_v2(s["dy"], s["x"], s["w"], s["rstd"]), states)))
    t = {}
    pdls = (False, True) if K._pdl_supported() else (False,)
    for cfg in K.bwd_candidates(N):
        for pdl in pdls:
            try:
                t[(cfg, pdl)] = bench_bwd(states, M, N, want, "v3", [*cfg, f"pdl{int(pdl)}"], config=cfg, pdl=pdl)["graph_ms"]
            except Exception as ex:  # noqa: BLE001
                print("v3", cfg, pdl, "failed", repr(ex)[:200], flush=True)
    (cfg, pdl) = min(t, key=t.get)
    for red in ((64, 256, 4), (16, 256, 4), (32, 256, 8)):
        bench_bwd(states, M, N, want, "v3_red", [*cfg, f"pdl{int(pdl)}", *red], config=cfg, pdl=pdl, red=red)
    tuned = bench_bwd(states, M, N, want, "v3_tuned", "tuned")  # what the benchmark's triton_direct gets
    print(f"== {M}x{N}: floor {floor['graph_ms'] * 1e3:.1f} us ({c['graph_ms'] / floor['graph_ms']:.2f}x compile), "
          f"compile {c['graph_ms'] * 1e3:.1f} us, v3 best {cfg} pdl={pdl} {t[(cfg, pdl)] * 1e3:.1f} us "
          f"= {c['graph_ms'] / t[(cfg, pdl)]:.2f}x compile; tuned {tuned['graph_ms'] * 1e3:.1f} us; {time.time() - T0:.0f} s",
          flush=True)
    del states
    torch.cuda.empty_cache()
    with open(os.path.join(out, f"sweep3_{gpu}.json"), "w") as f:
        json.dump({"info": info, "copy": copy, "rows": rows, "tuned": tuned_choices()},
                  f, indent=1, default=str)
