"""Causal self-attention forward + backward through torch's scaled_dot_product_attention, the
backend chosen with torch.nn.attention.sdpa_kernel: the SDPA backend switch of the calibration
pairs (benchmarks/results/programs.md). GPT-2-small's attention at training shape by default:
B 8, H 12, S 512, D 64, bf16.

    python3 calib_sdpa.py [--backend math|cudnn|flash|efficient|default] [--steps 30]
                          [--nvtx-steps] [--device cpu]

--nvtx-steps marks each timed step (forward + backward) with an NVTX range 'step N'.
"""
import argparse
import contextlib
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"math": SDPBackend.MATH, "cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", choices=[*BACKENDS, "default"], default="default")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--nvtx-steps", action="store_true")
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    dev = a.device
    torch.manual_seed(0)
    dtype = torch.bfloat16
    shape = (a.batch, a.heads, a.seq, a.head_dim)
    q, k, v = (torch.randn(shape, device=dev, dtype=dtype, requires_grad=True) for _ in range(3))
    dout = torch.randn(shape, device=dev, dtype=dtype)
    ctx = sdpa_kernel(BACKENDS[a.backend]) if a.backend != "default" else contextlib.nullcontext()
    nvtx = a.nvtx_steps and dev == "cuda"
    with ctx:
        for step in range(-a.warmup, a.steps):
            if step == 0:
                if dev == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
            with torch.cuda.nvtx.range(f"step {step}") if nvtx and step >= 0 else contextlib.nullcontext():
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                out.backward(dout)
                q.grad = k.grad = v.grad = None
    if dev == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(f"sdpa {a.backend} B{a.batch} H{a.heads} S{a.seq} D{a.head_dim} causal bf16 fwd+bwd: "
          f"{dt / a.steps * 1e3:.3f} ms a step over {a.steps} steps")


if __name__ == "__main__":
    main()
