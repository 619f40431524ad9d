import warnings

import pytest
import torch
from _kernel_helpers import check, grads64, nan_like, randn, spy
from profkit.kernels import swiglu as K


@pytest.mark.parametrize("shape", [(3, 1000), (2, 18944 // 16)])
def test_forward_backward(dtype, shape):
    # |gate| up to ~1000: exp(-gate) overflows fp32 to inf, sigmoid -> 0, not NaN
    g, u = randn(*shape, dtype=dtype, scale=300.0), randn(*shape, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy exp overflow in the interpreter
        out = nan_like(g)
        y = K.swiglu(g, u, out=out)
        assert y is out
        check(y, K.swiglu_reference(g, u), dtype, "triton")
        check(K.swiglu_eager(g, u), K.swiglu_reference(g, u), dtype, "eager")
        dy = randn(*shape, dtype=dtype)
        gr, ur = g.clone().requires_grad_(), u.clone().requires_grad_()
        K.swiglu(gr, ur).backward(dy)
    gg, gu = grads64(K.swiglu_reference, [g, u], dy)
    check(gr.grad, gg, dtype, "dgate", grad=True)
    check(ur.grad, gu, dtype, "dup", grad=True)


def test_backward_poisoned():
    g, u, dy = randn(4, 300), randn(4, 300), randn(4, 300)
    dg, du = K.swiglu_bwd(dy, g, u, dgate=nan_like(g), dup=nan_like(u))
    gg, gu = grads64(K.swiglu_reference, [g, u], dy)
    check(dg, gg, "fp32", grad=True)
    check(du, gu, "fp32", grad=True)


def test_non_contiguous_inputs():
    gu = randn(3, 2, 500, dtype="bf16")
    g, u = gu[:, 0], gu[:, 1]  # halves of a fused gate_up projection
    check(K.swiglu(g, u), K.swiglu_reference(g, u), "bf16")
    assert torch.equal(gu[:, 0], g)


@pytest.mark.parametrize("config", [K.CANDIDATES[0], (1024, 4, ""), (2048, 8, "")], ids=str)
def test_launch_configs(config):
    g, u, dy = randn(3, 1000), randn(3, 1000), randn(3, 1000)
    check(K.swiglu_fwd(g, u, out=nan_like(g), config=config), K.swiglu_reference(g, u), "fp32")
    dg, du = K.swiglu_bwd(dy, g, u, dgate=nan_like(g), dup=nan_like(u), config=config)
    gg, gu = grads64(K.swiglu_reference, [g, u], dy)
    check(dg, gg, "fp32", grad=True)
    check(du, gu, "fp32", grad=True)


@pytest.mark.parametrize("config", K.SMALL_CANDIDATES + [(1024, 4, "evict_first")], ids=str)
def test_small_launch_candidates(dtype, config, monkeypatch):
    """Every small-size candidate, launched as asked: 3000 elements is no multiple of any block
    (the last program partial); the output poisoned first."""
    launches = spy(monkeypatch, K, "_swiglu_fwd")["_swiglu_fwd"]
    g, u = randn(3, 1000, dtype=dtype, scale=30.0), randn(3, 1000, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        y = K.swiglu_fwd(g, u, out=nan_like(g), config=config)
    check(y, K.swiglu_reference(g, u), dtype, f"small {config}")
    kw = launches.kwargs[0]
    assert launches.grids == [(-(-3000 // config[0]),)] and (kw["BLOCK"], kw["num_warps"], kw["EVICT"]) == config


def test_small_sizes_tune_small_blocks_by_graph_replay(monkeypatch):
    """Below TUNE_MIN_ELEMS the forward times SMALL_CANDIDATES by graph replay (the fixed launch
    among them, last); at and above it CANDIDATES by do_bench; the backward keeps the fixed launch
    below it, untimed."""
    calls = []

    def fake_tuned(key, cands, run, device, **kw):
        calls.append((key, cands, kw))
        run(cands[-1])
        return cands[-1]

    monkeypatch.setattr(K, "tuned", fake_tuned)
    monkeypatch.setattr(K, "TUNE_MIN_ELEMS", 2000)
    g, u, dy = randn(1, 1500), randn(1, 1500), randn(1, 1500)
    check(K.swiglu_fwd(g, u), K.swiglu_reference(g, u), "fp32")
    (key, cands, kw), = calls
    assert key[:2] == ("swiglu_fwd", "small") and cands == K.SMALL_CANDIDATES and kw == {"graph": True}
    assert cands[-1] == K.CANDIDATES[0][:2] + ("",)
    assert {c[2] for c in cands} == {""}  # no small launch reads evict_first (see SMALL_CANDIDATES)
    calls.clear()
    K.swiglu_bwd(dy, g, u)
    assert calls == []  # the fixed launch
    g, u = randn(1, 3000), randn(1, 3000)
    check(K.swiglu_fwd(g, u), K.swiglu_reference(g, u), "fp32")
    (key, cands, kw), = calls
    assert key[0] == "swiglu_fwd" and cands == K.CANDIDATES and kw == {}
