"""The regression gate's lab kernel (issue 54): the lab's Triton RMSNorm forward
(profkit.kernels.rmsnorm._rmsnorm_fwd, its default launch for the hidden size) called in a loop,
each call inside its own NVTX range 'rmsnorm_fwd', with an optional planted regression:
--plant P makes every launch normalise P % more rows than the baseline (the same kernel, more
work in one launch), so a memory-bound launch takes about P % longer.

    python3 gate_rmsnorm.py [--plant none|3|10] [--calls 30] [--rows 16384] [--hidden 4096]

Under nsys each call is one range of the timeline: `profkit gate` compares them per range.
"""
import argparse

import torch
import triton
from profkit.kernels.rmsnorm import _rmsnorm_fwd, fwd_config


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--plant", choices=["none", "3", "10"], default="none")
    p.add_argument("--calls", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rows", type=int, default=16384)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    dev = a.device
    extra = 0 if a.plant == "none" else int(a.plant)
    m, n = a.rows, a.hidden
    rows = m + (m * extra + 99) // 100
    torch.manual_seed(0)
    x = torch.randn(m + (m * 10 + 99) // 100, n, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, device=dev, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    bm, bn, nw = fwd_config(n)

    def call():
        _rmsnorm_fwd[(triton.cdiv(rows, bm),)](x, w, y, y, x.stride(0), y.stride(0), rows, n, 1e-6, 0.0,
                                               BLOCK_M=bm, BLOCK_N=bn, STORE_RSTD=False, num_warps=nw)

    for _ in range(a.warmup):
        call()
    xf = x[:rows].double()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
    err = ((y[:rows].double() - ref).norm() / ref.norm()).item()
    assert err < 1e-2, f"rmsnorm forward off: rel. error {err:.2e}"
    cuda = dev == "cuda"
    if cuda:
        torch.cuda.synchronize()
    for _ in range(a.calls):
        if cuda:
            torch.cuda.nvtx.range_push("rmsnorm_fwd")
        call()
        if cuda:
            torch.cuda.nvtx.range_pop()
    if cuda:
        torch.cuda.synchronize()
    print(f"rmsnorm_fwd [{m}, {n}] bf16, plant {a.plant}: {rows} rows a launch (BLOCK_M {bm}, BLOCK_N {bn}, "
          f"{nw} warps), {a.calls} calls, rel. error {err:.1e}")


if __name__ == "__main__":
    main()
