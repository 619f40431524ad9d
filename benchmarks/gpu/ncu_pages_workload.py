"""A small program whose ncu report is exported to every CSV page (benchmarks/gpu/ncu_pages.sh).

Short kernel names (Triton kernels and one cuBLAS GEMM, no PyTorch elementwise kernels) keep the
details page, which repeats the kernel name on every row, small enough to commit. One kernel per
label profkit gives: a DRAM stream, a compute-bound FMA loop, one-block kernels (launch
overhead), a register-hungry kernel (occupancy), a bf16 GEMM (tensor core). NVTX: a start/end
range around everything, push/pop ranges per step and per part. It prints lines of its own, as
programs do, before ncu's CSV when ncu writes to stdout.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

N = 1 << 25  # 32 Mi fp32: 128 MiB per array, far beyond L2


@triton.jit
def fill(X, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(X + offs, ((offs % 97) * scale).to(X.dtype.element_ty), mask=m)


@triton.jit
def stream(X, Y, Z, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(Z + offs, 2.0 * tl.load(X + offs, mask=m) + tl.load(Y + offs, mask=m), mask=m)


@triton.jit
def fma_loop(X, Z, n, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(X + offs, mask=m)
    b = a * 0.5 + 1.0
    for _ in range(ITERS):
        a = a * b + 0.25
        b = b * a + 0.125
    tl.store(Z + offs, a + b, mask=m)


@triton.jit
def tiny(X, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(X + offs, tl.load(X + offs) + 1.0)


@triton.jit
def wide_rows(X, Z, n_rows, COLS: tl.constexpr):
    # a whole 8192-wide row per program: many registers per thread, few warps resident
    row = tl.program_id(0)
    cols = tl.arange(0, COLS)
    x = tl.load(X + row * COLS + cols)
    z = x / (tl.sum(x * x, axis=0) + 1.0)
    tl.store(Z + row * COLS + cols, z)


def main():
    print("ncu pages workload: starting")
    dev = "cuda"
    x = torch.empty(N, device=dev)
    y = torch.empty(N, device=dev)
    z = torch.empty(N, device=dev)
    a = torch.empty(4096 * 4096, device=dev, dtype=torch.bfloat16)
    b = torch.empty(4096 * 4096, device=dev, dtype=torch.bfloat16)
    grid = (triton.cdiv(N, 1024),)
    session = torch.cuda.nvtx.range_start("session")  # process-wide start/end range
    for name, t, s in (("x", x, 0.01), ("y", y, 0.02)):
        torch.cuda.nvtx.range_push(f"init/{name}")
        fill[grid](t, N, s, BLOCK=1024)
        torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("init/ab")
    fill[(triton.cdiv(a.numel(), 1024),)](a, a.numel(), 0.001, BLOCK=1024)
    fill[(triton.cdiv(b.numel(), 1024),)](b, b.numel(), 0.002, BLOCK=1024)
    torch.cuda.nvtx.range_pop()
    for step in range(2):
        torch.cuda.nvtx.range_push(f"step {step}")
        torch.cuda.nvtx.range_push("stream")
        stream[grid](x, y, z, N, BLOCK=1024)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("compute")
        fma_loop[(triton.cdiv(1 << 22, 256),)](x, z, 1 << 22, ITERS=512, BLOCK=256)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("tiny")
        tiny[(1,)](z, BLOCK=128)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("wide_rows")
        wide_rows[(N // 8192,)](x, z, N // 8192, COLS=8192)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("gemm")
        c = a.view(4096, 4096) @ b.view(4096, 4096)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_end(session)
    print(f"ncu pages workload: done ({float(c[0, 0]):.3f})")


if __name__ == "__main__":
    main()
