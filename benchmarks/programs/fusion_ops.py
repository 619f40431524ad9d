"""Small blocks of ordinary model code, each eager (one kernel per PyTorch operator) and the same
Python function under torch.compile (Inductor fuses the pointwise work): the fusion floor's
checks (issue 52) and the torch.compile calibration pair (benchmarks/results/programs.md).

  rmsnorm        Hugging Face's LlamaRMSNorm at [8192, 4096] bf16 (8 kernels a call eager)
  gelu_epilogue  a linear without bias, then + bias and GELU: [8192, 1024] x [1024, 4096] bf16
  add_layernorm  a residual add, then LayerNorm: [16384, 1024] bf16
  mlp_block      a transformer MLP block: LayerNorm, linear + GELU, linear, residual [8192, 1024]

    python3 fusion_ops.py [--ops rmsnorm,gelu_epilogue,add_layernorm] [--variants eager,compiled]
                          [--calls 20] [--step-ranges] [--device cpu] [--scale 1]

Each timed call runs inside its own NVTX range named OP.VARIANT (e.g. rmsnorm.eager), or, with
--step-ranges, 'step N' (one op and variant a run: a calibration pair's two sides). Warm-up calls
(compilation) run first, outside any range. --scale divides the row counts (CPU dry runs).
A block that returns the residual stream too (add_layernorm) has it read after the range, by
the next block's residual add, as a transformer layer does: the sum leaves the range.
"""
import argparse
import contextlib
import time

import torch
import torch.nn.functional as F


def rmsnorm(x, w, eps=1e-6):
    # transformers' LlamaRMSNorm.forward, as written there
    dtype = x.dtype
    h = x.to(torch.float32)
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + eps)
    return w * h.to(dtype)


def gelu_epilogue(x, w, b):
    h = x @ w.t()
    return F.gelu(h + b)


def add_layernorm(x, r, w, b):
    h = x + r
    return F.layer_norm(h, (h.shape[-1],), w, b), h


def mlp_block(x, lw, lb, w1, b1, w2, b2):
    h = F.layer_norm(x, (x.shape[-1],), lw, lb)
    h = F.gelu(h @ w1.t() + b1)
    return x + h @ w2.t() + b2


def inputs(op, dev, scale):
    r = lambda *s: torch.randn(*s, device=dev, dtype=torch.bfloat16)
    if op == "rmsnorm":
        return rmsnorm, (r(8192 // scale, 4096), r(4096))
    if op == "gelu_epilogue":
        return gelu_epilogue, (r(8192 // scale, 1024), r(4096, 1024) * 0.03, r(4096))
    if op == "add_layernorm":
        return add_layernorm, (r(16384 // scale, 1024), r(16384 // scale, 1024), r(1024), r(1024))
    if op == "mlp_block":
        return mlp_block, (r(8192 // scale, 1024), r(1024), r(1024), r(4096, 1024) * 0.03, r(4096),
                           r(1024, 4096) * 0.015, r(1024))
    raise SystemExit(f"unknown op {op!r}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ops", default="rmsnorm,gelu_epilogue,add_layernorm")
    p.add_argument("--variants", default="eager,compiled")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--step-ranges", action="store_true")
    p.add_argument("--scale", type=int, default=1)
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    dev = a.device
    cuda = dev == "cuda"
    torch.manual_seed(0)
    rows = []
    with torch.no_grad():
        for op in a.ops.split(","):
            fn, args = inputs(op, dev, a.scale)
            ref = None
            for variant in a.variants.split(","):
                f = torch.compile(fn) if variant == "compiled" else fn
                for _ in range(a.warmup):
                    out = f(*args)
                first = out[0] if isinstance(out, tuple) else out
                if ref is None:
                    ref = first.float()
                err = ((first.float() - ref).norm() / ref.norm()).item()
                if cuda:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                for i in range(a.calls):
                    name = f"step {i}" if a.step_ranges else f"{op}.{variant}"
                    with torch.cuda.nvtx.range(name) if cuda else contextlib.nullcontext():
                        out = f(*args)
                    if isinstance(out, tuple):
                        out = out[1] + out[0]
                if cuda:
                    torch.cuda.synchronize()
                rows.append((op, variant, (time.perf_counter() - t0) / a.calls * 1e6, err))
    for op, variant, us, err in rows:
        print(f"{op:14s} {variant:9s} {us:9.1f} us a call (host clock), rel. diff to eager {err:.1e}")


if __name__ == "__main__":
    main()
