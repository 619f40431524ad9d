"""Registry contract of the operator modules, and each registered shape run small."""
import importlib

import pytest
import torch

from _kernel_helpers import check
from profkit.kernels import Workload

OPS = ("rmsnorm", "add_rmsnorm", "rope", "rmsnorm_rope", "swiglu", "softmax")


def _mod(op):
    return importlib.import_module(f"profkit.kernels.{op}")


@pytest.mark.parametrize("op", OPS)
def test_contract(op):
    m = _mod(op)
    w = m.WORKLOAD
    assert isinstance(w, Workload) and w.op == op
    assert {"eager", "compile", "triton"} <= set(w.variants)
    for v, mod in w.requires.items():
        assert v == "liger" and mod == "liger_kernel"
    if "liger" in w.variants:
        assert "liger" in w.requires
    assert 1 <= len(w.shapes) <= 6
    for name, p in w.shapes.items():
        assert "/" not in name
        for dt in w.dtypes:
            mdl = w.model(p, dt)
            assert mdl["bytes"] > 0 and mdl["flops"] > 0
    assert callable(m.reference_from_state)


def _small(p):
    p = dict(p)
    for key in ("tokens", "rows"):
        if key in p:
            p[key] = 2
    return p


@pytest.mark.parametrize("op", OPS)
def test_shapes_run_small(op):
    """Every registered geometry (tokens cut to 2), eager and triton vs the reference."""
    m = _mod(op)
    w = m.WORKLOAD
    for name, p in w.shapes.items():
        s = w.setup(_small(p), "fp32", "cpu")
        ref = m.reference_from_state(s)
        for v in ("eager", "triton"):
            out = w.variants[v](s)
            outs, refs = (out, ref) if isinstance(out, tuple) else ((out,), (ref,))
            for o, r in zip(outs, refs):
                check(o, r, "fp32", f"{op}/{v}/{name}", baseline=v != "triton")


def test_reload_makes_interpreted():
    from triton.runtime.interpreter import InterpretedFunction

    from profkit.kernels import rmsnorm

    assert isinstance(rmsnorm._rmsnorm_fwd, InterpretedFunction)
