"""The lab runner's reference check (what `profkit capture` records as `correctness`), on CPU."""

import pytest
import torch
from profkit.kernels import get
from profkit.kernels import run as runner


def _state(op, shape, dtype="fp32"):
    w = get(op)
    p = dict(w.shapes[shape])
    for key in ("tokens", "rows", "M"):
        if key in p:
            p[key] = 2
    return w, w.setup(p, dtype, "cpu")


@pytest.mark.parametrize("variant", ["eager", "triton"])
def test_rmsnorm_outputs_pass(variant):
    w, s = _state("rmsnorm", "llama8b-t4096")
    rec = runner.reference_check(w, s, variant, w.variants[variant](s), "fp32")
    assert rec["ok"] is True and rec["rel_err"] < 1e-5
    assert rec["tol"] == (1e-5 if variant == "triton" else 1e-4)  # baselines get _numerics.BASELINE_TOL
    assert "Workload.reference" in rec["reference"] and "rel_l2" in rec["reference"] and rec["dtype"] == "fp32"


def test_a_wrong_output_fails():
    w, s = _state("softmax", "scores-r32768-n4096")
    out = w.variants["triton"](s) * 1.001  # off by 0.1 %: a hundred times the fp32 tolerance
    rec = runner.reference_check(w, s, "triton", out, "fp32")
    assert rec["ok"] is False and rec["rel_err"] == pytest.approx(1e-3, rel=1e-2) and rec["tol"] == 1e-5


def test_gemm_uses_the_gemm_policy():
    w, s = _state("matmul", "llama8b-qkv-m16", "fp32")
    rec = runner.reference_check(w, s, "cublas", w.variants["cublas"](s), "fp32")
    assert rec["ok"] is True and "gemm" in rec["reference"] and rec["max_rel"] <= rec["tol_max_rel"]


def test_backward_workload_checks_gradients():
    w, s = _state("rmsnorm_bwd", "llama8b-t4096")
    rec = runner.reference_check(w, s, "triton", w.variants["triton"](s), "fp32")
    assert rec["ok"] is True and rec["tol"] == 1e-5
    dx, dw = w.variants["triton"](s)
    rec = runner.reference_check(w, s, "triton", (dx, dw * 1.001), "fp32")  # dw off by 0.1 %
    assert rec["ok"] is False


def test_run_records_each_range_after_it_closes(monkeypatch, tmp_path):
    pushed = []
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: pushed.append(name))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: pushed.append(None))
    checks = {}
    ran = runner.run("swiglu", ["eager", "triton"], ["llama8b-t1"], "fp32", iters=2, warmup=0,
                     device="cpu", checks=checks)
    assert ran == ["swiglu/eager/llama8b-t1", "swiglu/triton/llama8b-t1"]
    assert set(checks) == set(ran) and all(r["ok"] for r in checks.values())
    assert pushed.count(None) == 6


def test_run_checks_an_in_place_variant_against_the_inputs_it_read(monkeypatch):
    """triton_inplace rotates q and k in place: by the end of the range the state holds the
    warm-up's and the range's rotations, so the check needs its own call on inputs copied first
    (it recorded a failure for every in-place variant, Liger's RoPE among them, before)."""
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: None)
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: None)
    # three tokens at positions 0-2: a rotation that is not the identity (one token at 0 would hide it)
    monkeypatch.setitem(get("rope").shapes, "t3", {"tokens": 3, "q_heads": 4, "kv_heads": 2, "head_dim": 16})
    checks = {}
    runner.run("rope", ["triton_inplace", "triton"], ["t3"], "fp32", iters=2, warmup=1, device="cpu", checks=checks)
    assert set(checks) == {"rope/triton_inplace/t3", "rope/triton/t3"}
    assert all(r["ok"] and r["rel_err"] < 1e-5 for r in checks.values()), checks
