#!/usr/bin/env python3
"""Round 9 (issue 21 item 3): v3 with output tiles that are not a power of two wide.

Why: at qwen7b-down-m1024 (N = 3584 = 16 x 224) v3's 128 x 256 tiles make 112 tiles for 132
SMs (one wave, 15 % idle) and per-tensor _scaled_mm stays 4-12 % ahead. A 128 x 224 tile
(three MMA chains of 128, 64 and 32 columns, each its own TMA box) makes 128 tiles: still one
wave, but each SM's tile is 12.5 % less work, and the fp32 accumulator + promotion partial take
224 registers a thread instead of 256 (v3 spills 20-22 bytes on the promotion path).

This file holds the experiment kernel (v3's body with N split into up to three pieces) and its
measurement: float64 check first, then round-robin do_bench beside v3 and both _scaled_mm modes,
GPU time by graph replay, registers/spills of each compiled kernel.

    python3 benchmarks/gpu/fp8_ntile.py [--rounds 5] [--out DIR] [--shapes a,b]
"""
import os
import sys

import triton
import triton.language as tl

from profkit.kernels._gemm_common import cast_out, tile_coords
from profkit.kernels.fp8_gemm import promote_chunks


@triton.jit
def _piece_scale(acc, SA, SB, rm, on, M, N, BN: tl.constexpr, ROW_SCALES: tl.constexpr):
    if ROW_SCALES:
        rn = on + tl.arange(0, BN)
        sa = tl.load(SA + rm, mask=rm < M, other=0.0)
        sb = tl.load(SB + rn, mask=rn < N, other=0.0)
        return acc * sa[:, None] * sb[None, :]
    return acc * (tl.load(SA) * tl.load(SB))


@triton.jit
def _fp8_gemm_ntile(a_desc, b0_desc, b1_desc, b2_desc, c0_desc, c1_desc, c2_desc, SA, SB, M, N, K,
                    ROW_SCALES: tl.constexpr, BLOCK_M: tl.constexpr, BN0: tl.constexpr, BN1: tl.constexpr,
                    BN2: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, CHUNK_K: tl.constexpr,
                    NUM_SMS: tl.constexpr, FLATTEN: tl.constexpr, UPCAST: tl.constexpr):
    """v3 (_fp8_gemm_pchunk, SCALE_LATE) with a tile BN0 + BN1 + BN2 wide: one MMA chain per
    piece (BN1 / BN2 may be 0: no piece)."""
    start = tl.program_id(0)
    TN: tl.constexpr = BN0 + BN1 + BN2
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, TN)
    MAX_TILES: tl.constexpr = (CHUNK_K + BLOCK_K - 1) // BLOCK_K
    n_chunks, chunk = promote_chunks(tl.cdiv(K, BLOCK_K), MAX_TILES)
    my_tiles = tl.cdiv(num_pid_m * num_pid_n - start, NUM_SMS)
    acc0 = tl.zeros((BLOCK_M, BN0), dtype=tl.float32)
    if BN1 > 0:
        acc1 = tl.zeros((BLOCK_M, BN1), dtype=tl.float32)
    if BN2 > 0:
        acc2 = tl.zeros((BLOCK_M, BN2), dtype=tl.float32)
    for w in tl.range(0, my_tiles * n_chunks, flatten=FLATTEN):
        t = w // n_chunks
        c = w - t * n_chunks
        pid_m, pid_n = tile_coords(start + t * NUM_SMS, num_pid_m, num_pid_n, GROUP_M)
        om = pid_m * BLOCK_M
        on = pid_n * TN
        part0 = tl.zeros((BLOCK_M, BN0), dtype=tl.float32)
        if BN1 > 0:
            part1 = tl.zeros((BLOCK_M, BN1), dtype=tl.float32)
        if BN2 > 0:
            part2 = tl.zeros((BLOCK_M, BN2), dtype=tl.float32)
        for kk in range(chunk):
            ok = (c * chunk + kk) * BLOCK_K
            a = a_desc.load([om, ok])
            b0 = b0_desc.load([on, ok])
            part0 = tl.dot(a, b0.T, part0)
            if BN1 > 0:
                b1 = b1_desc.load([on + BN0, ok])
                part1 = tl.dot(a, b1.T, part1)
            if BN2 > 0:
                b2 = b2_desc.load([on + BN0 + BN1, ok])
                part2 = tl.dot(a, b2.T, part2)
        acc0 += part0
        if BN1 > 0:
            acc1 += part1
        if BN2 > 0:
            acc2 += part2
        last = c == n_chunks - 1
        if last:
            rm = om + tl.arange(0, BLOCK_M)
            y0 = _piece_scale(acc0, SA, SB, rm, on, M, N, BN0, ROW_SCALES)
            c0_desc.store([om, on], cast_out(y0, c0_desc.dtype, UPCAST))
            if BN1 > 0:
                y1 = _piece_scale(acc1, SA, SB, rm, on + BN0, M, N, BN1, ROW_SCALES)
                c1_desc.store([om, on + BN0], cast_out(y1, c1_desc.dtype, UPCAST))
            if BN2 > 0:
                y2 = _piece_scale(acc2, SA, SB, rm, on + BN0 + BN1, M, N, BN2, ROW_SCALES)
                c2_desc.store([om, on + BN0 + BN1], cast_out(y2, c2_desc.dtype, UPCAST))
        keep = (c != n_chunks - 1).to(tl.float32)  # as v3: no `if` that yields the accumulators
        acc0 = acc0 * keep
        if BN1 > 0:
            acc1 = acc1 * keep
        if BN2 > 0:
            acc2 = acc2 * keep


def ntile_launch(a, b, sa, sb, out, cfg, programs):
    """One launch of the experiment kernel; cfg = (BLOCK_M, (BN0, BN1, BN2), BLOCK_K, GROUP_M,
    num_warps, num_stages)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bns, bk, g, nw, ns = cfg
    M, K = a.shape
    N = b.shape[0]
    row = sa.numel() != 1
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, sum(bns))
    ad = TensorDescriptor.from_tensor(a, [bm, bk])
    bd = [TensorDescriptor.from_tensor(b, [max(n, 8), bk]) for n in bns]
    cd = [TensorDescriptor.from_tensor(out, [bm, max(n, 8)]) for n in bns]
    _fp8_gemm_ntile[(min(programs, tiles),)](
        ad, *bd, *cd, sa, sb, M, N, K, ROW_SCALES=row, BLOCK_M=bm, BN0=bns[0], BN1=bns[1], BN2=bns[2],
        BLOCK_K=bk, GROUP_M=g, CHUNK_K=2048, NUM_SMS=programs, FLATTEN=True, UPCAST=False,
        num_warps=nw, num_stages=ns)
    return out


CONFIGS = [  # (BLOCK_M, pieces, BLOCK_K, GROUP_M, warps, stages)
    (128, (256, 0, 0), 128, 8, 8, 3),  # v3's tile through this kernel (the control)
    (128, (128, 64, 32), 128, 8, 8, 3),  # 224
    (128, (128, 64, 32), 128, 16, 8, 3),
    (128, (128, 64, 0), 128, 8, 8, 3),  # 192
    (128, (128, 128, 0), 128, 8, 8, 3),  # 256 as two chains (fewer registers per chain?)
    (128, (128, 32, 0), 128, 8, 8, 4),  # 160
]


def dump_ir():
    res = []
    for cache in _fp8_gemm_ntile.device_caches.values():
        kernels = cache[0] if isinstance(cache, tuple) else cache
        for k in getattr(kernels, "values", lambda: [])():
            ir = k.asm.get("ttgir", "")
            res.append(dict(n_regs=getattr(k, "n_regs", None), n_spills=getattr(k, "n_spills", None),
                            shared=getattr(k.metadata, "shared", None), wgmma=ir.count("warp_group_dot "),
                            waits=ir.count("warp_group_dot_wait"),
                            tma_loads=ir.count("async_tma_copy_global_to_local")))
    return res


def main():
    import torch

    sys.path.insert(0, os.path.dirname(__file__))
    from fp8_launch import device_cli, sweep, write_rows

    args, w, shapes, hdr, bench, gbench = device_cli("fp8_gemm", 5, lambda p: p["M"] >= 1024)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = sweep(w, shapes, lambda aq, bq, sa, sb: {
        f"ntile_{c[1][0]}+{c[1][1]}+{c[1][2]}_g{c[3]}": (lambda c: lambda out: ntile_launch(aq, bq, sa, sb, out, c, sms))(c)
        for c in CONFIGS}, bench, gbench, args.rounds, hdr)
    write_rows(args.out, "fp8_ntile", header=hdr, rounds=args.rounds, rows=rows, ir=dump_ir(), configs=CONFIGS)


if __name__ == "__main__":
    main()
