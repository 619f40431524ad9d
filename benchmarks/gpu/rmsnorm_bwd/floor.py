#!/usr/bin/env python3
"""RMSNorm backward, round 10 (issue 21 item 2): how fast can ANY kernel move the backward's bytes
at 4096 tokens? Round 3's floor was one kernel, torch.add(x, dy, out=dx) (two M x N bf16 reads,
one write); here it is the fastest of that and a sweep of Triton add kernels (one block per
program, blocks of 1-16K elements, 4-16 warps; and persistent grids of 1-4 programs per SM with
the loads pipelined), each by CUDA-graph replay over inputs rotated past the L2, beside
compile_direct and the shipped v3 (triton_direct's launch) in the same process. The 2x target
is compile_direct / 2: if the fastest same-bytes kernel is slower than that, no RMSNorm backward
moving at least those bytes can reach it.

    python3 floor.py OUT_DIR [--shapes=4096x4096,4096x3584]"""
import json
import os
import sys

import torch
import triton
import triton.language as tl
from triton.testing import do_bench_cudagraph

from profkit.kernels import rmsnorm as K
from profkit.kernels._numerics import compiled, num_sms
from profkit.kernels.timing import copy_bandwidth, header, n_copies, rotating, stamp, timer


@triton.jit
def _add(X, Y, Z, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(Z + offs, tl.load(X + offs, mask=m) + tl.load(Y + offs, mask=m), mask=m)


@triton.jit
def _add_persistent(X, Y, Z, n, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    nb = tl.cdiv(n, BLOCK)
    for b in tl.range(tl.program_id(0), nb, tl.num_programs(0), num_stages=STAGES):
        offs = b * BLOCK + tl.arange(0, BLOCK)  # int32: the shapes here are < 2**31 elements
        m = offs < n
        tl.store(Z + offs, tl.load(X + offs, mask=m) + tl.load(Y + offs, mask=m), mask=m)


def gt(fn, rep=60):
    fn()
    torch.cuda.synchronize()
    return float(do_bench_cudagraph(fn, rep=rep, return_mode="median"))


def main():
    out = sys.argv[1]
    args = dict(a.split("=", 1) for a in sys.argv[2:] if "=" in a)
    shapes = [tuple(map(int, s.split("x"))) for s in args.get("--shapes", "4096x4096,4096x3584").split(",")]
    os.makedirs(out, exist_ok=True)
    info = header("cuda")
    st = stamp(info)
    copy = copy_bandwidth("cuda", timer("cuda"))
    print(json.dumps(st), "copy GB/s", round(copy["gbps"]), flush=True)
    sms = num_sms("cuda")
    rows = []
    for M, N in shapes:
        n = M * N
        x0 = torch.randn(M, N, dtype=torch.bfloat16, device="cuda")
        states = []
        for i in range(n_copies({"x": x0, "dy": x0}, "cuda")):
            x = torch.randn(M, N, dtype=torch.bfloat16, device="cuda") if i else x0
            w = 1 + 0.1 * torch.randn(N, dtype=torch.bfloat16, device="cuda")
            rstd = torch.empty(M, dtype=torch.float32, device="cuda")
            K.rmsnorm_fwd(x, w, rstd=rstd)
            states.append({"x": x, "w": w, "dy": torch.randn_like(x), "rstd": rstd, "dx": torch.empty_like(x)})
        b = 3 * n * 2
        t = {}

        def rec(name, ms, kind):
            t[name] = ms
            rows.append({**st, "shape": f"{M}x{N}", "variant": name, "kind": kind, "graph_ms": ms,
                         "graph_pct_copy": 100 * b / ms / 1e6 / copy["gbps"], "copies": len(states)})
            print(f"{M}x{N} {name:28} {ms * 1e3:7.2f} us {100 * b / ms / 1e6 / copy['gbps']:5.1f} % copy", flush=True)

        rec("torch_add", gt(rotating(lambda s: torch.add(s["x"], s["dy"], out=s["dx"]), states)), "floor")
        for blk in (1024, 2048, 4096, 8192, 16384):
            for nw in (4, 8, 16):
                if blk // (32 * nw) < 8:
                    continue  # fewer than 8 elements a thread: not a candidate
                launch = (lambda blk, nw: lambda s: _add[(triton.cdiv(n, blk),)](s["x"], s["dy"], s["dx"], n,
                                                                                BLOCK=blk, num_warps=nw))(blk, nw)
                rec(f"triton_add_b{blk}_w{nw}", gt(rotating(launch, states)), "floor")
        for per in (1, 2, 4):
            for blk, nw in ((4096, 8), (8192, 8), (8192, 16)):
                for stg in (2, 3, 4):
                    launch = (lambda per, blk, nw, stg: lambda s: _add_persistent[(per * sms,)](
                        s["x"], s["dy"], s["dx"], n, BLOCK=blk, STAGES=stg, num_warps=nw))(per, blk, nw, stg)
                    try:
                        rec(f"persistent_p{per}_b{blk}_w{nw}_s{stg}", gt(rotating(launch, states)), "floor")
                    except Exception as e:  # noqa: BLE001 - out of shared memory is a row
                        print(f"persistent p{per} b{blk} w{nw} s{stg}: {type(e).__name__}", flush=True)
        s0 = states[0]
        _add[(triton.cdiv(n, 4096),)](s0["x"], s0["dy"], s0["dx"], n, BLOCK=4096, num_warps=8)
        torch.testing.assert_close(s0["dx"], torch.add(s0["x"], s0["dy"]))  # the sweep's kernel adds
        comp = compiled("rmsnorm_bwd_direct", K.rmsnorm_bwd_eager)
        rec("compile_direct", gt(rotating(lambda s: comp(s["dy"], s["x"], s["w"]), states)), "peer")
        K.rmsnorm_bwd(s0["dy"], s0["x"], s0["w"], s0["rstd"])  # its tuner picks, as triton_direct
        rec("v3", gt(rotating(lambda s: K.rmsnorm_bwd(s["dy"], s["x"], s["w"], s["rstd"]), states)), "lab")
        floors = {k: v for k, v in t.items() if k.startswith(("torch_add", "triton_add", "persistent"))}
        best = min(floors, key=floors.get)
        target = t["compile_direct"] / 2
        print(f"== {M}x{N}: fastest same-bytes kernel {best} {floors[best] * 1e3:.2f} us; 2x compile_direct needs "
              f"{target * 1e3:.2f} us ({'reachable' if floors[best] <= target else 'out of reach'} for a kernel "
              f"moving these bytes); v3 {t['v3'] * 1e3:.2f} us = {t['compile_direct'] / t['v3']:.2f}x", flush=True)
        del states
        torch.cuda.empty_cache()
    with open(os.path.join(out, "rmsnorm_bwd_floor.json"), "w") as f:
        json.dump({"info": info, "copy": copy, "rows": rows}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
