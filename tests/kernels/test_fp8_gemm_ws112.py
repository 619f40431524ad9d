"""The 128 x 112 tile fp8 GEMM (kernels/fp8_gemm_ws112.py, round 16: measured and rejected,
kept as the ledger's attempt). Gluon has no interpreter: its numerics are checked on the GPU
(benchmarks/gpu/fp8_ws16.py, edge shapes and every launch against float64 first, raw rows in
benchmarks/results/r16/); here, without a GPU: the kernel built for an H100 (sm_90a) with
ptxas in both A modes, and what the host refuses."""
import pytest
import torch
from _gluon_build import build_sm90

from profkit.kernels import fp8_gemm_ws112 as W

SIG = {"a_desc": ["fp8e4nv", [128, 128]], "b0_desc": ["fp8e4nv", [64, 128]], "b1_desc": ["fp8e4nv", [32, 128]],
       "b2_desc": ["fp8e4nv", [16, 128]], "c0_desc": ["bf16", [64, 64]], "c1_desc": ["bf16", [64, 32]],
       "c2_desc": ["bf16", [64, 16]], "SA": "*fp32", "SB": "*fp32", "M": "i32", "N": "i32", "K": "i32",
       "S_STRIDE": "i32"}


@pytest.mark.parametrize("a_regs", [True, False])
def test_compiles_for_h100_three_chains_without_spills_or_serialized_mma(a_regs):
    """Three chains of m64n64k32, m64n32k32 and m64n16k32 e4m3 wgmma (64 + 32 + 16 = 112
    columns), consumers at 232 registers and the loader at 24, no spills, and no serialized
    wgmma pipeline: with A in registers every chunk is unrolled into runs of 16, 8, 4, 2 and 1 k
    tiles (31 k tiles x 4 k steps x 2 warpgroups = 248 wgmma of each shape); a loop carrying
    register-A MMAs in flight across its back edge made ptxas serialize them all (C7512, this
    round's first build). From shared memory: one k tile a loop iteration (4 k steps x 2)."""
    got = build_sm90("profkit.kernels.fp8_gemm_ws112", "_fp8_gemm_ws112", SIG,
                     dict(STAGES=6, CHUNK=16, STAGGER=True, GROUP_M=8, NPROG=132, A_REGS=a_regs, CONSUMER_REGS=232))
    assert got["rc"] == 0, got["err"]
    n = 2 * (2 * W.RUN - 1) * 4 if a_regs else 2 * 4
    assert got["wgmma"] == {"m64n64k32": n, "m64n32k32": n, "m64n16k32": n}
    assert 24 in got["regs"] and 232 in got["regs"]
    assert got["serialized"] == [] and got["spills"] == ["0"]
    assert 6 * (128 + 112) * 128 + 2 * 64 * 112 * 2 <= got["shared"] <= 227 * 1024  # 6 stages, six C blocks


def test_refuses_a_chunk_longer_than_its_unrolled_runs():
    a = torch.zeros(4, 32).to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="1-31 k tiles"):
        W.fp8_gemm_ws112(a, a, torch.ones(1), torch.ones(1), chunk=32)


def test_refuses_off_hopper_with_reason():
    if W.available() is None:
        pytest.skip("a Hopper GPU is here: the GPU scripts check the numerics")
    a = torch.zeros(4, 32).to(torch.float8_e4m3fn)
    with pytest.raises(NotImplementedError, match="gluon_ws112"):
        W.fp8_gemm_ws112(a, a, torch.ones(1), torch.ones(1))

