#!/usr/bin/env python3
"""Round 17 (issue 21 item 3): the fp8 GEMM's 128 x 112 tile with cuBLAS's own instruction.

Why: round 16's Gluon 128 x 112 tile balanced the SMs on qwen7b-down-m1024, but its three narrow
wgmma chains (64 + 32 + 16) kept the tensor pipe ~68 % busy against cuBLAS's 87-90 %. The CUDA C++
kernel (kernels/cuda/fp8_gemm.cu, launcher kernels/fp8_gemm_cuda.py) issues one m64n112k32 per
k step, as cuBLAS does; bn=128 runs the same code at gluon_ws's tile (the control: the tile's
effect apart from the code's). This script times its configurations (tile, stages, chunk,
stagger, GROUP_M) beside gluon_ws, v3 and _scaled_mm.

Float64 check of every launch first (fp8_launch.EDGES, then fp8_launch.checked_launches), then
round-robin do_bench, GPU time by graph replay (fp8_launch.config_sweep).

    python3 benchmarks/gpu/fp8_ws17.py [--rounds 5] [--out DIR] [--shapes a,b] [--configs=0,2]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from profkit.kernels import fp8_gemm_cuda as C  # noqa: E402

CONFIGS = [  # (bn, stages, chunk k tiles, stagger, GROUP_M, cluster)
    (112, 6, 16, True, 8, 2),
    (112, 7, 16, True, 8, 2),
    (112, 7, 16, True, 8, 1),
    (128, 6, 16, True, 8, 2),
    (128, 6, 16, True, 8, 1),
    (112, 7, 16, True, 4, 2),
]  # r17/h100a ran the first build (a division per k tile, scales reloaded per element): 0.72-0.80x of
# v3; r17/h100c the cluster with a cluster-scope release on each remote arrival (2x slower);
# r17/h100d one MMA group in flight (the kept build); r17/h100e two in flight (no faster)


def launch(a, b, sa, sb, out, bn, stages, chunk, stagger, group_m, cluster, cluster_n=1, steer=False, kflip=False,
           epilogue="registers", *, nprog):
    return C.fp8_gemm_cuda(a, b, sa, sb, out, programs=nprog, bn=bn, stages=stages, chunk=chunk, stagger=stagger,
                           group_m=group_m, cluster=cluster, cluster_n=cluster_n, steer=steer, kflip=kflip,
                           epilogue=epilogue)


def name(c):
    """cuda<bn>_s<stages>_c<chunk>_<st|ns>_g<GROUP_M>_x<cluster along M>[x<along N>][_p] (round 18's
    configs carry the cluster's N too, round 19's whether the order is steered by GPC: _p, round 20's
    whether odd tiles run k downwards: _r, round 21's epilogue through TMA: _e)."""
    return (f"cuda{c[0]}_s{c[1]}_c{c[2]}_{'st' if c[3] else 'ns'}_g{c[4]}_x{c[5]}" + (f"x{c[6]}" if len(c) > 6 else "")
            + ("_p" if len(c) > 7 and c[7] else "") + ("_r" if len(c) > 8 and c[8] else "")
            + ("_e" if len(c) > 9 and c[9] == "tma" else ""))


def kernel_attrs():
    """Registers and shared memory of the built kernels (cudaFuncGetAttributes through torch's
    cuda bindings is not at hand: the cubin's resource usage from the build's ptxas -v instead)."""
    import subprocess

    from profkit.kernels import _cuda_build

    arch = _cuda_build.arch_for("fp8_gemm", _cuda_build.target_arch())
    r = subprocess.run([_cuda_build.find_nvcc(), *_cuda_build.BASE_FLAGS, *_cuda_build.arch_flags(arch), "-c",
                        "-Xptxas", "-v", "-o", "/dev/null", str(_cuda_build.source("fp8_gemm"))],
                       capture_output=True, text=True)
    return [ln.strip() for ln in r.stderr.splitlines() if "registers" in ln or "spill" in ln or "C75" in ln]


def main(tag="fp8_ws17", configs=CONFIGS):
    from fp8_launch import config_sweep

    config_sweep(tag, configs, lambda a, b, sa, sb, out, c, sms: launch(a, b, sa, sb, out, *c, nprog=sms), name,
                 kernel_attrs)


if __name__ == "__main__":
    main()
