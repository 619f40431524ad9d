"""Three blocks of ordinary model code, eager (one kernel per operator) and under torch.compile
(Inductor fuses them), captured with torch.profiler's record_shapes: the fusion floor's check
(issue 52; benchmarks/results/fusion_floor.md).

  rmsnorm        LlamaRMSNorm as transformers writes it, x [8192, 4096] bf16 (8 kernels eager)
  gelu_epilogue  y = gelu(x @ w.T + b), x [8192, 1024], w [4096, 1024] bf16 (the epilogue fuses)
  add_layernorm  h = x + r; layer_norm(h), [16384, 1024] bf16 (returns both)

    python3 fusion_floor.py OUT.json.gz [--calls 20]

Each timed call runs in a record_function range OP.VARIANT; warm-up (compilation) runs first,
outside the profiler.
"""
import argparse
import gzip
import os
import shutil
import tempfile

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function


def rmsnorm(x, w, eps=1e-6):
    dtype = x.dtype
    h = x.to(torch.float32)
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + eps)
    return w * h.to(dtype)


def gelu_epilogue(x, w, b):
    return F.gelu(x @ w.t() + b)


def add_layernorm(x, r, w, b):
    h = x + r
    return F.layer_norm(h, (h.shape[-1],), w, b), h


def cases(dev):
    r = lambda *s: torch.randn(*s, device=dev, dtype=torch.bfloat16)  # noqa: E731
    return {"rmsnorm": (rmsnorm, (r(8192, 4096), r(4096))),
            "gelu_epilogue": (gelu_epilogue, (r(8192, 1024), r(4096, 1024) * 0.03, r(4096))),
            "add_layernorm": (add_layernorm, (r(16384, 1024), r(16384, 1024), r(1024), r(1024)))}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--calls", type=int, default=20)
    a = p.parse_args()
    torch.manual_seed(0)
    fns = {}
    with torch.no_grad():
        for op, (fn, args) in cases("cuda").items():
            for variant in ("eager", "compiled"):
                f = torch.compile(fn) if variant == "compiled" else fn
                for _ in range(3):
                    f(*args)
                fns[op, variant] = (f, args)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            for (op, variant), (f, args) in fns.items():
                for _ in range(a.calls):
                    with record_function(f"{op}.{variant}"):
                        f(*args)
                torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        raw = os.path.join(d, "trace.json")
        prof.export_chrome_trace(raw)
        with open(raw, "rb") as src, gzip.open(a.out, "wb") as dst:
            shutil.copyfileobj(src, dst)


if __name__ == "__main__":
    main()
