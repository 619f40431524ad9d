"""Run a registered workload by name, each (variant, shape) inside the NVTX path op/variant/shape.

    python -m profkit.kernels.run rmsnorm --variant eager --variant triton --shape llama8b-4k

Warm-up calls (compilation, autotuning, cuBLAS handles) run before the range opens, so a
profile filtered on the range holds only steady-state launches.

The context a small kernel runs in can move its time as much as a change to it: SwiGLU at one token 1.25 us with the L2 half empty and 1.51 us once an earlier op had filled it,
its evict-first inputs read again (NVIDIA H100 80GB HBM3, 2026-11-25). ``--rotate N`` cycles the calls over N copies of the inputs
(as benchmarks/kernels.py times a row) and ``--l2-fill`` reads a buffer of twice the L2 before
each range opens (as an earlier op, e.g. a decode step's GEMM, leaves the L2: full of other
lines; timing.fill_l2, which the lab's tuner uses too).
"""

from __future__ import annotations

import argparse
import sys

from . import get, range_name
from .timing import fill_l2, fresh, input_sets


def reference_check(w, state, variant: str, out, dtype: str) -> dict | None:
    """Check one output against the workload's float64 reference (``Workload.reference``) under
    its numerics policy (kernels/_numerics.py); None when the workload declares no reference."""
    r = w.check(state, variant, out, dtype)
    if r is None:
        return None
    rec = {
        "ok": r.ok,
        "rel_err": float(r.rel_err),
        "tol": float(r.tol),
        "dtype": dtype,
        "reference": f"float64 {w.op} Workload.reference, kernels/_numerics.py ({r.policy})",
    }
    if r.max_rel is not None:
        rec.update(max_rel=float(r.max_rel), tol_max_rel=float(r.tol_max_rel))
    return rec


def run(
    op: str,
    variants: list[str] | None = None,
    shapes: list[str] | None = None,
    dtype: str | None = None,
    iters: int = 3,
    warmup: int = 2,
    device: str = "cuda",
    checks: dict | None = None,
    rotate: int = 1,
    l2_fill: bool = False,
) -> list[str]:
    """Run each (variant, shape) in its NVTX range; with `checks`, record each range's
    reference check there (range name -> record), computed after the range closes so the
    profile holds none of its launches. rotate: the calls cycle over this many copies of the
    inputs; l2_fill: the L2 is filled with other data just before each range opens."""
    if rotate < 1:
        raise ValueError(f"rotate {rotate}: give 1 or more input copies")
    import torch

    w = get(op)
    dtype = dtype or w.default_dtype
    ran: list[str] = []
    for shape in shapes or list(w.shapes):
        if shape not in w.shapes:
            raise KeyError(f"{op}: no shape {shape!r}; known: {', '.join(w.shapes)}")
        states = input_sets(w, w.shapes[shape], dtype, device, rotate)
        state = states[0]
        for variant in variants or list(w.variants):
            if variant not in w.variants:
                raise KeyError(f"{op}: no variant {variant!r}; known: {', '.join(w.variants)}")
            fn = w.variants[variant]
            for i in range(max(warmup, len(states) if warmup else 0)):
                fn(states[i % len(states)])
            if l2_fill:
                fill_l2(device)
            if device == "cuda":
                torch.cuda.synchronize()
            name = range_name(op, variant, shape)
            # nested push/pop ranges op > variant > shape: the NVTX path reads op/variant/shape,
            # and ncu's --nvtx-include "op/variant/shape/" (which reads '/' as nesting) matches it
            parts = name.split("/")  # op names may nest too (e2e/prefill)
            for part in parts:
                torch.cuda.nvtx.range_push(part)
            for i in range(iters):
                fn(states[i % len(states)])
            for _ in parts:
                torch.cuda.nvtx.range_pop()
            if device == "cuda":
                torch.cuda.synchronize()
            if checks is not None:
                # one more call, outside the range, on inputs copied first: an in-place variant
                # (Liger's RoPE, triton_inplace) has rotated `state` by now, so the range's last
                # output is not what the reference of the current inputs must match
                ref = fresh(state)
                out = fn(state)
                rec = reference_check(w, ref, variant, out, dtype) if out is not None else None
                if rec is not None:
                    checks[name] = rec
                del out, ref
            ran.append(name)
        del state, states
    return ran


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m profkit.kernels.run")
    p.add_argument("op")
    p.add_argument("--variant", action="append")
    p.add_argument("--shape", action="append")
    p.add_argument("--dtype")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rotate", type=int, default=1, help="Cycle the calls over this many copies of the inputs.")
    p.add_argument(
        "--l2-fill",
        action="store_true",
        help="Fill the L2 with other data (a read of twice the L2) before each range opens.",
    )
    p.add_argument(
        "--check-out",
        metavar="PATH",
        help="Check each variant's last output against the reference; write {range: record} JSON here.",
    )
    p.add_argument("--tuned-out", metavar="PATH", help="Write the launch configurations tuned in this run here.")
    p.add_argument(
        "--tuned-in",
        metavar="PATH",
        help="Take these tuned launch configurations (a --tuned-out file) instead of timing candidates.",
    )
    a, rest = p.parse_known_args(argv)
    w = get(a.op)
    main = getattr(w, "main", None)  # (a user's MODULE:NAME object may lack it)
    if main is not None:
        return main(rest) or 0
    from .timing import dump_tuned, load_tuned

    if a.tuned_in:
        try:
            load_tuned(a.tuned_in)
        except (OSError, ValueError) as e:  # (json's errors are ValueErrors)
            print(f"--tuned-in {a.tuned_in}: {e}", file=sys.stderr)
            return 2
    checks: dict | None = {} if a.check_out else None
    if a.rotate < 1:
        print(f"--rotate {a.rotate}: give 1 or more input copies", file=sys.stderr)
        return 2
    for name in run(
        a.op, a.variant, a.shape, a.dtype, a.iters, a.warmup, checks=checks, rotate=a.rotate, l2_fill=a.l2_fill
    ):
        print(name, file=sys.stderr)
    if a.tuned_out:
        dump_tuned(a.tuned_out)
    if a.check_out:
        import json

        with open(a.check_out, "w") as f:
            json.dump(checks, f, indent=2, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
