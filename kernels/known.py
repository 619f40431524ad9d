"""Known answers: one kernel per bottleneck, each in its own NVTX range, for the shipped
dataset, the parser tests and the classifier tests.

    known/rmsnorm_eager        large RMSNorm, PyTorch eager       -> dram
    known/rmsnorm_triton       large RMSNorm, Triton              -> dram
    known/gemm_cublas/bf16_4096 cuBLAS bf16 GEMM 4096^3           -> tensor_core
    known/tiny_launches        100 x 1-block add on 256 elements  -> launch_overhead
    known/occupancy_limited    copy kernel asking 200 KB of shared memory per 64-thread
                               block: one block (2 warps) per SM  -> occupancy

The tiny launches sit in a push/pop range of the domain "profkit", and a start/end range
"gemm_window" (domain "profkit") spans the GEMM case, so every kind of NVTX range the
parsers handle appears in one capture. Warm-up runs before "known" opens.
"""

from __future__ import annotations

import argparse
import contextlib

from . import Workload

_OCC_SRC = r"""
extern "C" __global__ void occupancy_limited_copy(const float* __restrict__ x, float* __restrict__ y, long long n) {
    extern __shared__ float pad[];              // asked for, never used: it only caps residency
    if (threadIdx.x == 0 && n < 0) pad[0] = 0.f; // keeps the allocation from being elided
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        y[i] = x[i] * 2.0f;
}
"""
OCC_SMEM_BYTES = 200 * 1024
OCC_THREADS = 64


def _occupancy_kernel():
    import cupy  # on the GPU host; NVRTC compiles in well under a second

    k = cupy.RawKernel(_OCC_SRC, "occupancy_limited_copy")
    k.max_dynamic_shared_size_bytes = OCC_SMEM_BYTES
    return k


def _nvtx():
    try:
        import nvtx  # NVIDIA's package: domains and start/end ranges

        return nvtx
    except ImportError:
        return None


@contextlib.contextmanager
def _range(name: str, domain: str | None = None):
    import torch

    nv = _nvtx()
    if domain and nv is not None:
        nv.push_range(message=name, domain=domain)
        try:
            yield
        finally:
            nv.pop_range(domain=domain)
    else:
        torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            torch.cuda.nvtx.range_pop()


def main(argv: list[str] | None = None) -> int:
    import cupy
    import torch

    from .rmsnorm import rmsnorm, rmsnorm_eager

    p = argparse.ArgumentParser(prog="known")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--tiny", type=int, default=100)
    a = p.parse_args(argv or [])

    torch.manual_seed(0)
    x = torch.randn(16384, 4096, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(4096, dtype=torch.bfloat16, device="cuda")
    A = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda")
    B = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda")
    small = torch.zeros(256, dtype=torch.float32, device="cuda")
    src = torch.randn(64 * 1024 * 1024, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    occ = _occupancy_kernel()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)

    def occupancy_limited():
        with stream:
            occ(
                (sms * 4,),
                (OCC_THREADS,),
                (src.data_ptr(), dst.data_ptr(), cupy.int64(src.numel())),
                shared_mem=OCC_SMEM_BYTES,
            )

    cases = {
        "rmsnorm_eager": lambda: rmsnorm_eager(x, w),
        "rmsnorm_triton": lambda: rmsnorm(x, w),
        "gemm_cublas": lambda: A @ B,
        "occupancy_limited": occupancy_limited,
    }
    for fn in cases.values():  # warm-up: compile, autotune, cuBLAS handle, NVRTC
        fn()
    small.add_(1.0)
    torch.cuda.synchronize()

    nv = _nvtx()
    with _range("known"):
        for name in ("rmsnorm_eager", "rmsnorm_triton"):
            with _range(name):
                for _ in range(a.iters):
                    cases[name]()
        window = nv.start_range(message="gemm_window", domain="profkit") if nv else None
        with _range("gemm_cublas"):
            with _range("bf16_4096"):
                for _ in range(a.iters):
                    cases["gemm_cublas"]()
        torch.cuda.synchronize()
        if nv:
            nv.end_range(window)
        with _range("tiny_launches"):
            with _range("burst", domain="profkit"):
                for _ in range(a.tiny):
                    small.add_(1.0)
        with _range("occupancy_limited"):
            for _ in range(a.iters):
                occupancy_limited()
        torch.cuda.synchronize()
    assert torch.allclose(dst, src * 2), "occupancy_limited_copy wrote wrong values"
    return 0


WORKLOAD = Workload(
    op="known",
    setup=lambda p, d, dev: None,
    variants={"default": lambda s: None},
    shapes={"default": {}},
    description="one kernel per bottleneck label (dram, tensor_core, launch_overhead, occupancy)",
    requires={"default": "cupy"},
    main=main,
)

if __name__ == "__main__":
    raise SystemExit(main())
