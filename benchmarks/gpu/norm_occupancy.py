#!/usr/bin/env python3
"""Round 5 (issue 21 item 1): why Liger's RMSNorm and add+RMSNorm forwards are 3-4 % ahead of the
lab's at the copy ceiling on an H200, and which launch configuration closes it.

profkit's profile of the pair (round5.sh ties h200: same DRAM bytes, lab 32-36 warps per SM
resident against Liger's 48: more registers per thread) says occupancy; this script times every
lab launch configuration (BLOCK_M rows per program, num_warps) beside the registered (tuned) launch
and Liger, round-robin, by do_bench (L2 flushed) and CUDA-graph replay (GPU time), with each
configuration's registers per thread; and a copy of the lab kernel without eviction hints
(`nohint`), the one other difference to Liger's kernel.

    python3 benchmarks/gpu/norm_occupancy.py [--rounds 5] [--out DIR]   # -> DIR/norm_occupancy.json
"""
import argparse
import json
import os

import torch
import triton
import triton.language as tl

from profkit.kernels import add_rmsnorm as A
from profkit.kernels import rmsnorm as R
from profkit.kernels.timing import graph_timer, header, stamp, timer

SHAPES = {"llama8b-t32768": (32768, 4096), "qwen7b-t32768": (32768, 3584), "llama8b-t4096": (4096, 4096),
          "qwen7b-t4096": (4096, 3584)}
CONFIGS = [(1, 4), (1, 8), (1, 16), (2, 4), (2, 8), (2, 16), (4, 8), (4, 16)]


@triton.jit
def _rmsnorm_nohint(X, W, Y, stride_x, stride_y, M, N, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / N + eps)
    w = tl.load(W + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(Y + rows[:, None] * stride_y + cols[None, :], (x * rstd[:, None] * w[None, :]).to(Y.dtype.element_ty),
             mask=mask)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    hdr = header("cuda")
    print(json.dumps(stamp(hdr)), flush=True)
    bench, gbench = timer("cuda", warmup_ms=10, rep_ms=50), graph_timer(rep_ms=50)
    rows, regs = [], {}
    for shape, (M, N) in SHAPES.items():
        x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
        r = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
        w = 1 + 0.1 * torch.randn(N, device="cuda", dtype=torch.bfloat16)
        y, ro = torch.empty_like(x), torch.empty_like(x)
        BN = triton.next_power_of_2(N)
        fns = {"rmsnorm/registered": lambda: R.rmsnorm_fwd(x, w, out=y),
               "rmsnorm/liger": lambda: R._liger(x, w),
               "add_rmsnorm/registered": lambda: A.add_rmsnorm(x, r, w, out=y, residual_out=ro),
               "add_rmsnorm/liger": lambda: A._liger(x, r, w)}
        for bm, nw in CONFIGS:
            g = (triton.cdiv(M, bm),)
            fns[f"rmsnorm/{bm}x{nw}"] = (lambda g, bm, nw: lambda: R._rmsnorm_fwd[g](
                x, w, y, x, x.stride(0), y.stride(0), M, N, 1e-6, 0.0, BLOCK_M=bm, BLOCK_N=BN, STORE_RSTD=False,
                num_warps=nw))(g, bm, nw)
            fns[f"add_rmsnorm/{bm}x{nw}"] = (lambda g, bm, nw: lambda: A._add_rmsnorm_fwd[g](
                x, r, w, y, ro, x.stride(0), r.stride(0), y.stride(0), ro.stride(0), M, N, 1e-6, 0.0, BLOCK_M=bm,
                BLOCK_N=BN, num_warps=nw))(g, bm, nw)
        for bm, nw in ((1, 8), (2, 8), (4, 16)):
            g = (triton.cdiv(M, bm),)
            fns[f"rmsnorm/nohint-{bm}x{nw}"] = (lambda g, bm, nw: lambda: _rmsnorm_nohint[g](
                x, w, y, x.stride(0), y.stride(0), M, N, 1e-6, BLOCK_M=bm, BLOCK_N=BN, num_warps=nw))(g, bm, nw)
        for name, fn in fns.items():  # compile, and the registers of each lab launch
            k = fn()
            if hasattr(k, "n_regs"):
                regs[f"{shape}:{name}"] = (k.n_regs, getattr(k, "n_spills", None))
        ref = R.rmsnorm_reference(x, w, 1e-6)
        R._rmsnorm_fwd[(triton.cdiv(M, 1),)](x, w, y, x, x.stride(0), y.stride(0), M, N, 1e-6, 0.0, BLOCK_M=1,
                                             BLOCK_N=BN, STORE_RSTD=False, num_warps=8)
        _rmsnorm_nohint[(M,)](x, w, ro, x.stride(0), ro.stride(0), M, N, 1e-6, BLOCK_M=1, BLOCK_N=BN, num_warps=8)
        assert torch.equal(y, ro), "nohint copy differs from the lab kernel"
        assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-2
        torch.cuda.synchronize()
        t = {n: [] for n in fns}
        for _ in range(args.rounds):
            for n, fn in fns.items():
                t[n].append(bench(fn))
        gt = {n: gbench(fn) for n, fn in fns.items()}
        for n in fns:
            op = n.split("/")[0]
            ms = sorted(t[n])[len(t[n]) // 2]
            nbytes = (2 if op == "rmsnorm" else 4) * M * N * 2
            row = dict(shape=shape, op=op, variant=n.split("/", 1)[1], ms=ms, ms_all=t[n], graph_ms=gt[n],
                       gbps=nbytes / ms / 1e6, graph_gbps=nbytes / gt[n] / 1e6,
                       regs=regs.get(f"{shape}:{n}"), **stamp(hdr))
            rows.append(row)
            print(f"{shape:15} {n:28} {ms * 1e3:7.1f} us {row['gbps']:6.0f} GB/s | graph {gt[n] * 1e3:7.1f} us "
                  f"{row['graph_gbps']:6.0f} GB/s  regs {row['regs']}", flush=True)
        del x, r, y, ro
        torch.cuda.empty_cache()
    from profkit.kernels.timing import tuned_choices
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "norm_occupancy.json"), "w") as f:
        json.dump(dict(header=hdr, rounds=args.rounds, rows=rows, tuned=tuned_choices()), f, indent=1, default=str)


if __name__ == "__main__":
    main()
