"""Run a registered workload by name, each (variant, shape) inside the NVTX path op/variant/shape.

    python -m profkit.kernels.run rmsnorm --variant eager --variant triton --shape llama8b-4k

Warm-up calls (compilation, autotuning, cuBLAS handles) run before the range opens, so a
profile filtered on the range holds only steady-state launches.
"""
from __future__ import annotations

import argparse
import sys

from . import get, range_name


def run(op: str, variants: list[str] | None = None, shapes: list[str] | None = None,
        dtype: str | None = None, iters: int = 3, warmup: int = 2, device: str = "cuda") -> list[str]:
    import torch

    w = get(op)
    dtype = dtype or w.default_dtype
    ran: list[str] = []
    for shape in shapes or list(w.shapes):
        if shape not in w.shapes:
            raise KeyError(f"{op}: no shape {shape!r}; known: {', '.join(w.shapes)}")
        state = w.setup(w.shapes[shape], dtype, device)
        for variant in variants or list(w.variants):
            if variant not in w.variants:
                raise KeyError(f"{op}: no variant {variant!r}; known: {', '.join(w.variants)}")
            fn = w.variants[variant]
            for _ in range(warmup):
                fn(state)
            if device == "cuda":
                torch.cuda.synchronize()
            name = range_name(op, variant, shape)
            # nested push/pop ranges op > variant > shape: the NVTX path reads op/variant/shape,
            # and ncu's --nvtx-include "op/variant/shape/" (which reads '/' as nesting) matches it
            for part in name.split("/"):
                torch.cuda.nvtx.range_push(part)
            for _ in range(iters):
                fn(state)
            for _ in range(3):
                torch.cuda.nvtx.range_pop()
            if device == "cuda":
                torch.cuda.synchronize()
            ran.append(name)
        del state
    return ran


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m profkit.kernels.run")
    p.add_argument("op")
    p.add_argument("--variant", action="append")
    p.add_argument("--shape", action="append")
    p.add_argument("--dtype")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2)
    a, rest = p.parse_known_args(argv)
    w = get(a.op)
    if getattr(w, "main", None) is not None:
        return w.main(rest) or 0
    for name in run(a.op, a.variant, a.shape, a.dtype, a.iters, a.warmup):
        print(name, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
