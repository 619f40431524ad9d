"""A user's own operator declared the way the lab declares its workloads, so `profkit bench`
(and `profkit capture`) run it by name (docs/bench.md):

    profkit bench docs/examples/scale_workload.py:WORKLOAD --shape m4096

y = x * w (a row-broadcast scale): eager PyTorch against a Triton kernel, a float64 reference
and the bytes/FLOPs model the GB/s and % of copy come from.
"""
import torch
import triton
import triton.language as tl

from profkit.kernels import Workload


@triton.jit
def _scale(X, W, Y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    x = tl.load(X + row * N + cols, mask=m).to(tl.float32)
    w = tl.load(W + cols, mask=m).to(tl.float32)
    tl.store(Y + row * N + cols, (x * w).to(Y.dtype.element_ty), mask=m)


def setup(p: dict, dtype: str, device: str):
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    return {"x": torch.randn(p["rows"], p["cols"], device=device, dtype=dt),
            "w": torch.randn(p["cols"], device=device, dtype=dt)}


def triton_scale(s):
    x, w = s["x"], s["w"]
    y = torch.empty_like(x)
    _scale[(x.shape[0],)](x, w, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


def model(p: dict, dtype: str) -> dict:
    e = {"bf16": 2, "fp16": 2, "fp32": 4}[dtype]
    return {"bytes": 2 * p["rows"] * p["cols"] * e + p["cols"] * e, "flops": p["rows"] * p["cols"]}


WORKLOAD = Workload(
    op="scale",
    setup=setup,
    variants={"eager": lambda s: s["x"] * s["w"], "triton": triton_scale},
    shapes={"m4096": {"rows": 4096, "cols": 4096}, "m32768": {"rows": 32768, "cols": 4096}},
    model=model,
    reference=lambda s, variant: s["x"].double() * s["w"].double(),
    baselines=("eager",),
    selftest={"tiny": {"rows": 3, "cols": 100}},
    description="row-broadcast scale, a user's example",
)
