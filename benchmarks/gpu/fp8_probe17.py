#!/usr/bin/env python3
"""Round 17 probe: one launch of each contender at one shape, for ncu (--set full) to compare the
CUDA C++ kernel (kernels/cuda/fp8_gemm.cu) with gluon_ws, under the same operands. Each launch is
checked against float64 first; NVTX ranges name the contenders.

    ncu ... python3 benchmarks/gpu/fp8_probe17.py SHAPE MODE NAME[,NAME...]
    python3 benchmarks/gpu/fp8_probe17.py SHAPE MODE NAME[,NAME...] --clocks

--clocks (no ncu): why a kernel's time under ncu (one launch, idle GPU) and in a graph replay
(back to back) differ: each contender timed by CUDA events once after 0.3 s idle (5 times), then
in 300 back-to-back launches (each timed, the median of the last 200), with nvidia-smi sampling
the SM clock and power draw every 20 ms during the back-to-back block.
    NAME: gluon_ws | scaled_mm | cuda<bn>_s<stages>_x<cluster along M>[x<along N>][_g<GROUP_M>][_p]
          (e.g. cuda112_s7_x2, round 18's cuda112_s7_x1x2_g1; _p: round 19's GPC-steered order;
          _r: round 20's k order flipped on every other tile; _l<0|128|256>: the TMA L2 promotion;
          _d1 / _d2: round 20's diagnostics, k tiles 0-1 only / no loads: their checks fail by design;
          _c<k tiles a promotion>, _ns: no stagger between the consumer warpgroups;
          _e: round 21's epilogue through shared memory and TMA stores)
PROBE_REPS=n launches each contender n times inside its range (default 1).
"""
import os
import re
import subprocess
import sys
import time

import torch

from profkit.kernels import fp8_gemm_cuda as C
from profkit.kernels import fp8_gemm_ws as W
from profkit.kernels import get
from profkit.kernels.fp8_gemm import scaled_mm


def clocks(name, fn, out):
    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    iso = []
    for _ in range(5):
        torch.cuda.synchronize()
        time.sleep(0.3)
        a, b = ev(), ev()
        a.record()
        fn(out)
        b.record()
        b.synchronize()
        iso.append(a.elapsed_time(b) * 1e3)
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                            "-lms", "20"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.2)
    pairs = [(ev(), ev()) for _ in range(300)]
    torch.cuda.synchronize()
    for a, b in pairs:
        a.record()
        fn(out)
        b.record()
    torch.cuda.synchronize()
    smi.terminate()
    samples = [ln.split(",") for ln in smi.communicate()[0].splitlines() if ln.count(",") == 1]
    b2b = sorted(a.elapsed_time(b) * 1e3 for a, b in pairs[100:])
    mhz = sorted(float(x[0]) for x in samples[-10:]) or [0]
    watts = sorted(float(x[1]) for x in samples[-10:]) or [0]
    print(f"{name:16} isolated {' '.join(f'{t:.1f}' for t in iso)} us | back-to-back median {b2b[len(b2b) // 2]:.1f} us "
          f"[{b2b[0]:.1f}-{b2b[-1]:.1f}] | last samples: SM {mhz[len(mhz) // 2]:.0f} MHz, {watts[len(watts) // 2]:.0f} W",
          flush=True)


def main():
    shape, mode, names = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    w = get("fp8_gemm")
    state = w.setup(w.shapes[shape], "fp8", "cuda")
    aq, bq, sa, sb = state[mode]
    ref_variant = "scaled_mm" if mode == "row" else "scaled_mm_tensor"
    for name in names:
        if name == "scaled_mm":
            fn = lambda out: scaled_mm(aq, bq, sa, sb, out=out)  # noqa: E731
        elif name == "gluon_ws":
            fn = lambda out: W.fp8_gemm_ws(aq, bq, sa, sb, out)  # noqa: E731
        else:
            m = re.fullmatch(r"cuda(\d+)_s(\d+)_x(\d+)(?:x(\d+))?(?:_g(\d+))?(_p)?(_r)?(?:_l(\d+))?(?:_d(\d))?(?:_c(\d+))?(_ns)?(_e)?", name)
            bn, st, cl, cn, g = (int(x) if x else d for x, d in zip(m.groups(), (0, 0, 0, 1, C.DEFAULT["group_m"])))
            fn = (lambda kw: lambda out: C.fp8_gemm_cuda(aq, bq, sa, sb, out, **kw))(
                dict(bn=bn, stages=st, cluster=cl, cluster_n=cn, group_m=g, steer=bool(m[6]), kflip=bool(m[7]),
                     l2_promotion=int(m[8] or 256), diagnostic=int(m[9] or 0), chunk=int(m[10] or C.DEFAULT["chunk"]),
                     stagger=not m[11], epilogue="tma" if m[12] else "registers"))
        out = torch.empty((aq.shape[0], bq.shape[0]), dtype=torch.bfloat16, device="cuda")
        fn(out)
        r = w.check(state, ref_variant, out, "fp8")
        print(name, r, flush=True)
        if "--clocks" in sys.argv:
            # _scaled_mm timed without the copy into `out` that the check needed
            clocks(name, (lambda out: scaled_mm(aq, bq, sa, sb)) if name == "scaled_mm" else fn, out)
            continue
        torch.cuda.nvtx.range_push(name)
        for _ in range(int(os.environ.get("PROBE_REPS", "1"))):  # with ncu --cache-control none: the last
            fn(out)  # launch finds the L2 as a graph replay leaves it
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
