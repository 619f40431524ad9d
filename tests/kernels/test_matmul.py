"""CPU tests of the matmul ladder under TRITON_INTERPRET=1 against a float64 reference.

Tolerances: kernels/_numerics.GEMM_TOL (rel_fro from the lab policy kernels/_numerics.TOL,
bf16 1e-2 / fp16 2e-3; max |err| / rms(ref): bf16 5e-2 / fp16 1e-2). Inputs are fresh random
each run (conftest seeds from os.urandom and prints the seed); outputs are preallocated and
NaN-poisoned before each launch, so an element the kernel skips fails the check.

Interpreter notes (see _gemm_common.UPCAST_NOTE): Triton 3.9's interpreter multiplies bf16
dot operands as raw uint16 bits and truncates fp32 -> bf16; the kernels take a constexpr
UPCAST (True only when interpreting) that upcasts tiles to fp32 before tl.dot and rounds
to nearest even by hand. What the CPU cannot cover is listed in the skips below.
"""
import os

os.environ["TRITON_INTERPRET"] = "1"  # tests/kernels/conftest.py does it too

import pytest  # noqa: E402
import torch  # noqa: E402
from profkit.kernels import matmul as mm  # noqa: E402
from profkit.kernels._gemm_common import has_warp_specialize, interpreting  # noqa: E402
from profkit.kernels._numerics import GEMM_TOL as TOLERANCES  # noqa: E402
from profkit.kernels._numerics import measure  # noqa: E402


def check(out, ref, dtype):
    """(ok, numbers) under the GEMM policy of kernels/_numerics.py."""
    r = measure(out, ref, dtype, policy="gemm")
    return r.ok, {"rel_fro": r.rel_err, "max_rel": r.max_rel}

DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
SHAPES = [(32, 48, 64), (33, 17, 40), (1, 24, 40), (65, 40, 72), (16, 64, 96)]
TRITON_VARIANTS = ["naive", "tiled", "autotuned", "persistent_tma", "splitk"]


def _inputs(M, N, K, dtype):
    a = torch.randn(M, K, dtype=torch.float64).to(DT[dtype])
    b = torch.randn(K, N, dtype=torch.float64).to(DT[dtype])
    return a, b


def _poisoned(M, N, dtype):
    return torch.full((M, N), float("nan"), dtype=DT[dtype])


def test_runs_interpreted():
    assert interpreting(), "TRITON_INTERPRET=1 must be set before triton is imported"


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("variant", TRITON_VARIANTS + ["cublas"])
def test_matmul_vs_float64(variant, shape, dtype):
    M, N, K = shape
    a, b = _inputs(M, N, K, dtype)
    out = _poisoned(M, N, dtype)
    ref = mm.matmul_reference(a, b)
    if variant == "persistent_tma":
        why = mm.tma_supported(a, b)
        if why is not None:  # a property of TMA, not of the interpreter: the launcher must say so
            assert "16 bytes" in why
            with pytest.raises(NotImplementedError, match="16 bytes"):
                mm.matmul_persistent_tma(a, b, out=out)
            return
    res = mm.VARIANTS[variant](a, b, out=out)
    assert res.data_ptr() == out.data_ptr(), "launcher must write into the given out"
    ok, info = check(out, ref, dtype)
    assert ok, f"{variant} {shape} {dtype}: {info}"


@pytest.mark.parametrize("variant", ["naive", "tiled", "autotuned"])
def test_strided_operands(variant):
    """Pointer kernels take any strides: B as a transposed view, A as a column slice."""
    M, N, K = 33, 24, 40
    a = torch.randn(M, K + 8, dtype=torch.float64).to(torch.bfloat16)[:, 3:K + 3]
    b = torch.randn(N, K, dtype=torch.float64).to(torch.bfloat16).T
    out = _poisoned(M, N, "bf16")
    mm.VARIANTS[variant](a, b, out=out)
    ok, info = check(out, mm.matmul_reference(a, b), "bf16")
    assert ok, info


def test_persistent_more_tiles_than_programs():
    """The persistent loop must cover every tile when tiles > programs (4 'SMs' on CPU)."""
    M, N, K = 160, 136, 48  # 5 x 5 = 25 tiles of 32x32 over 4 programs
    a, b = _inputs(M, N, K, "bf16")
    out = _poisoned(M, N, "bf16")
    mm.matmul_persistent_tma(a, b, out=out)
    ok, info = check(out, mm.matmul_reference(a, b), "bf16")
    assert ok, info


def test_persistent_warp_specialize_flag():
    if not has_warp_specialize():
        pytest.skip("installed Triton's tl.range has no warp_specialize argument")
    # The interpreter runs tl.range(..., warp_specialize=True) as a plain loop: this checks
    # that the kernel with the flag is correct, not that warps are specialized (GPU only).
    a, b = _inputs(40, 32, 48, "fp16")
    out = _poisoned(40, 32, "fp16")
    mm.matmul_persistent_tma(a, b, out=out, warp_specialize=True)
    ok, info = check(out, mm.matmul_reference(a, b), "fp16")
    assert ok, info


def test_gpu_only_paths_are_skipped_with_reason():
    pytest.skip("GPU only, not testable under TRITON_INTERPRET=1: autotune timing (the "
                "interpreter has one config per kernel, so nothing is benchmarked), TMA hardware "
                "(descriptors are emulated by numpy slicing), warp specialization, and bf16/fp16 "
                "tensor-core MMA (tiles are upcast to fp32, see UPCAST_NOTE); benchmarks/gemm.py "
                "checks them against float64 on the GPU")


# ---- the checker must catch wrong answers ----------------------------------------------

def _short_k_kernel(a, b, out):
    """Deliberately wrong: drops the last column of A / row of B (K - 1)."""
    M, K = a.shape
    N = b.shape[1]
    mm._matmul_kernel[(triton_cdiv(M, 32) * triton_cdiv(N, 32),)](
        a, b, out, M, N, K - 1, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        out.stride(0), out.stride(1), BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=1, UPCAST=True)
    return out


def triton_cdiv(x, y):
    return (x + y - 1) // y


def test_known_wrong_kernel_fails_check():
    a, b = _inputs(33, 24, 40, "bf16")
    out = _short_k_kernel(a, b, _poisoned(33, 24, "bf16"))
    ok, info = check(out, mm.matmul_reference(a, b), "bf16")
    assert not ok, f"a K-1 kernel passed the checker: {info}"


def test_known_wrong_references_fail_check():
    a, b = _inputs(32, 48, 64, "bf16")
    out = mm.matmul_tiled(a, b, out=_poisoned(32, 48, "bf16"))
    ref = mm.matmul_reference(a, b)
    assert check(out, ref, "bf16")[0]
    wrong = ref.clone()
    wrong[5, 7] += 0.2 * ref.abs().max()  # one element off by 20% of the largest entry
    assert not check(out, wrong, "bf16")[0], "one wrong element must fail (max_rel)"
    assert not check(out, ref * 1.02, "bf16")[0], "a 2% scale error must fail (rel_fro)"
    assert not check(out, ref.T.contiguous().T[:, :47], "bf16")[0], "shape mismatch must fail"


def test_unwritten_output_fails_check():
    a, b = _inputs(33, 17, 40, "fp16")
    out = _poisoned(33, 17, "fp16")
    out[:32] = mm.matmul_reference(a, b)[:32].to(torch.float16)  # last row never written
    assert not check(out, mm.matmul_reference(a, b), "fp16")[0]


def test_bf16_rounding_matches_gpu():
    """Interpreter fp32 -> bf16 truncates; the kernels round to nearest even by hand. With
    plain truncation rel_fro is ~2x the RNE figure: guard the workaround."""
    a, b = _inputs(64, 64, 64, "bf16")
    ref = mm.matmul_reference(a, b)
    out = mm.matmul_naive(a, b, out=_poisoned(64, 64, "bf16"))
    assert torch.equal(out, ref.float().to(torch.bfloat16)) or \
        check(out, ref, "bf16")[1]["rel_fro"] <= 1.3 * check(ref.to(torch.bfloat16), ref, "bf16")[1]["rel_fro"]


# ---- registry / model ------------------------------------------------------------------

def test_workload_registration():
    w = mm.WORKLOAD
    assert w.op == "matmul"
    assert set(w.variants) == {"naive", "tiled", "autotuned", "persistent_tma", "splitk", "cublas"}
    assert 8 <= len(w.shapes) <= 10
    for name, p in w.shapes.items():
        assert "/" not in name
        m = w.model(p, "bf16")
        assert m["flops"] == 2 * p["M"] * p["N"] * p["K"]
        assert m["bytes"] == 2 * (p["M"] * p["K"] + p["K"] * p["N"] + p["M"] * p["N"])
    assert set(TOLERANCES) >= {"bf16", "fp16"}


def test_workload_variants_run_on_tiny_state():
    w = mm.WORKLOAD
    state = w.setup({"M": 17, "N": 32, "K": 48}, "fp16", "cpu")
    ref = mm.WORKLOAD.reference(state, "cublas")
    for name, fn in w.variants.items():
        ok, info = check(fn(state), ref, "fp16")
        assert ok, (name, info)


def test_autotune_choices_shape():
    mm.matmul_autotuned(*_inputs(16, 32, 32, "bf16"))
    ch = mm.autotune_choices()
    assert set(ch) == {"matmul.autotuned", "matmul.persistent_tma"}
    assert all(isinstance(v, dict) for v in ch.values())


@pytest.mark.parametrize("config", [(32, 32, 1, 4, 1), (32, 32, 3, 4, 1), (16, 64, 5, 4, 1)],
                         ids=lambda c: "bn%d-bk%d-split%d" % c[:3])
def test_splitk_configs(config):
    """Several K splits, one whose last K range is short (K = 200 over 3 or 5 splits)."""
    a, b = _inputs(5, 40, 200, "bf16")
    out = _poisoned(5, 40, "bf16")
    mm.matmul_splitk(a, b, out=out, config=config)
    ok, info = check(out, mm.matmul_reference(a, b), "bf16")
    assert ok, info


def test_splitk_refuses_large_m_and_a_lost_split_is_caught():
    a, b = _inputs(300, 16, 32, "bf16")
    with pytest.raises(NotImplementedError, match="decode"):
        mm.matmul_splitk(a, b)
    a, b = _inputs(4, 32, 256, "bf16")
    wrong = mm.matmul_reference(a[:, :192], b[:192])  # one of 4 K ranges never added
    assert not check(wrong.to(torch.bfloat16), mm.matmul_reference(a, b), "bf16")[0]
