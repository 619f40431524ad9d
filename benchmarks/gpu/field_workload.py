"""A small ordinary PyTorch program for the field-format captures (benchmarks/gpu/field_capture.sh).

It launches what users' programs launch: eager elementwise kernels (RMSNorm written out), a
cuBLAS GEMM, a Triton kernel (driver-API launch), memcpy H2D/D2H and a memset, in 3 steps.
Ranges: `--ranges nvtx` (torch.cuda.nvtx), `record_function`, `both` (the same names through
both, so an nsys capture and a torch.profiler capture can be compared per range), or `none`.
One range name holds '/' the way TensorRT layer names do. `--kineto FILE` runs the program
under torch.profiler and exports its chrome trace (FILE may end in .gz).
"""
from __future__ import annotations

import argparse
import contextlib

import torch
import triton
import triton.language as tl


@triton.jit
def _add(X, Y, Z, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(Z + offs, tl.load(X + offs, mask=m) + tl.load(Y + offs, mask=m), mask=m)


def triton_add(x, y):
    z = torch.empty_like(x)
    n = x.numel()
    _add[(triton.cdiv(n, 1024),)](x, y, z, n, BLOCK=1024)
    return z


def rmsnorm_eager(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def make_range(kind):
    @contextlib.contextmanager
    def rng(name):
        if kind in ("nvtx", "both"):
            torch.cuda.nvtx.range_push(name)
        cm = torch.profiler.record_function(name) if kind in ("record_function", "both") else contextlib.nullcontext()
        with cm:
            yield
        if kind in ("nvtx", "both"):
            torch.cuda.nvtx.range_pop()
    return rng


def step(rng, x, w, a, b):
    with rng("norm"):
        y = rmsnorm_eager(x, w)
    with rng("matmul"):
        c = a @ b
    with rng("/layer1/Conv + /relu/Relu"):  # a TensorRT-style name holding '/'
        z = triton_add(y, y)
    with rng("copy"):
        host = c[:64].float().cpu()  # D2H
        back = host.to("cuda", non_blocking=False)  # H2D
        zeros = torch.zeros(1 << 16, device="cuda")  # memset or fill kernel
    return z, back, zeros


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranges", choices=["nvtx", "record_function", "both", "none"], default="both")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--kineto", default=None)
    a = p.parse_args()
    rng = make_range(a.ranges)
    torch.manual_seed(0)
    x = torch.randn(2048, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    ma = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    mb = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    step(make_range("none"), x, w, ma, mb)  # warm-up: Triton compiles, cuBLAS picks its kernel
    torch.cuda.synchronize()
    prof = None
    if a.kineto:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                  torch.profiler.ProfilerActivity.CUDA], record_shapes=True)
        prof.__enter__()
    for i in range(a.steps):
        with rng(f"step {i}"):
            step(rng, x, w, ma, mb)
    torch.cuda.synchronize()
    if prof is not None:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(a.kineto)
    print("field workload done", flush=True)


if __name__ == "__main__":
    main()
