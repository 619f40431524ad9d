"""The checker itself: tolerances in one place, tight enough to catch real errors."""
import ast
import inspect

import pytest
import torch
from _kernel_helpers import check, nan_like, randn
from profkit.kernels import _numerics as N
from profkit.kernels import rmsnorm as R
from profkit.kernels import rope, softmax, swiglu


def test_tolerances_stated_once_and_tight():
    for table in (N.TOL, N.GRAD_TOL, N.BASELINE_TOL):
        assert set(table) == {"fp32", "bf16", "fp16"}
        assert all(0 < t < 1e-1 for t in table.values())
    assert N.TOL["fp32"] <= 1e-5 and N.TOL["fp16"] <= 2e-3 and N.TOL["bf16"] <= 1e-2


def test_known_wrong_reference_fails(dtype):
    """A deliberately wrong reference (Gemma's 1 + w where w is meant) must fail."""
    x, w = randn(8, 200, dtype=dtype), randn(200, dtype=dtype, scale=0.1) + 1
    y = R.rmsnorm(x, w)
    check(y, R.rmsnorm_reference(x, w), dtype)
    with pytest.raises(AssertionError, match="relative error"):
        check(y, R.rmsnorm_reference(x, w, gemma=True), dtype)


def test_known_wrong_eps_and_rounding_caught_in_fp32():
    x, w = randn(8, 200), randn(200)
    y = R.rmsnorm(x, w)
    with pytest.raises(AssertionError):  # mean over N+1: a 1/(2N) ~ 2.5e-3 error
        check(y, R.rmsnorm_reference(torch.cat([x, torch.zeros(8, 1)], 1), torch.cat([w, w[:1]]))[:, :200], "fp32")
    with pytest.raises(AssertionError):  # a bf16-rounded result is not fp32-accurate
        check(y.bfloat16(), R.rmsnorm_reference(x, w), "fp32")


def test_known_wrong_rope_layout_fails():
    q, k = randn(4, 2, 16), randn(4, 1, 16)
    cos, sin = rope.rope_cache(16, 16)
    pos = torch.arange(4) + 1
    qo, _ = rope.rope(q, k, cos, sin, pos, interleaved=True)
    with pytest.raises(AssertionError):
        check(qo, rope.rope_reference(q, k, cos, sin, pos, interleaved=False)[0], "bf16")


def test_skipped_elements_are_caught():
    """Poisoned outputs: an element the kernel never writes stays NaN and fails the check."""
    x = randn(4, 100)
    out = nan_like(x)
    softmax.softmax(x[:, :50], out=out[:, :50].contiguous())  # writes a different buffer
    assert N.rel_err(out, softmax.softmax_reference(x)) == float("inf")
    with pytest.raises(AssertionError):
        check(out, softmax.softmax_reference(x), "fp32")


def test_wrong_gradient_fails():
    g, u, dy = randn(3, 100), randn(3, 100), randn(3, 100)
    dg, du = swiglu.swiglu_bwd(dy, g, u)
    with pytest.raises(AssertionError):  # d/dgate without the (1 + g(1 - s)) term
        check(dg, (dy * u * torch.sigmoid(g)).double(), "bf16", grad=True)


def _jit_sources():
    from profkit.kernels import add_rmsnorm, rmsnorm_rope

    for mod in (R, add_rmsnorm, rope, rmsnorm_rope, swiglu, softmax):
        for name, obj in vars(mod).items():
            fn = getattr(obj, "fn", None)
            if callable(fn) and getattr(fn, "__module__", None) == mod.__name__:
                yield f"{mod.__name__}.{name}", inspect.getsource(fn)


def test_program_ids_are_int64():
    """Offsets can pass 2^31 elements: every program_id is widened before use."""
    found = 0
    for name, src in _jit_sources():
        for node in ast.walk(ast.parse(src.lstrip())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "program_id":
                found += 1
                seg = ast.get_source_segment(src.lstrip(), node)
                assert f"{seg}.to(tl.int64)" in src, f"{name}: {seg} not cast to int64"
    assert found >= 6
