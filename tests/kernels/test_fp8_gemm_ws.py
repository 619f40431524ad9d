"""The warp-specialized Gluon fp8 GEMM (kernels/fp8_gemm_ws.py, round 15). Gluon has no
interpreter: its numerics are checked on the GPU (benchmarks/gpu/fp8_ws15.py, every launch
against float64 first, raw rows in benchmarks/results/r15/); here, without a GPU, the chunk
schedule, the refusal off Hopper, and the kernel compiled for an H100 (sm_90a) with ptxas."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from profkit.kernels import fp8_gemm_ws as W


@pytest.mark.parametrize("k_tiles", [1, 7, 8, 9, 16, 17, 32, 64, 112, 148])
@pytest.mark.parametrize("chunk,off", [(16, 0), (16, 8), (8, 4), (32, 16), (1, 0)])
def test_chunks_cover_k_once_and_never_exceed_the_promotion_interval(k_tiles, chunk, off):
    b = W.chunk_bounds(k_tiles, chunk, off)
    assert b[0][0] == 0 and b[-1][1] == k_tiles
    assert all(k1 == n0 for (_, k1), (n0, _) in zip(b, b[1:]))  # contiguous, no k tile twice
    assert all(0 < k1 - k0 <= chunk for k0, k1 in b)  # the error bound's interval, never longer
    if k_tiles > chunk - off:
        assert b[0] == (0, chunk - off)  # the staggered warpgroup promotes half a chunk early


def test_staggered_warpgroups_promote_at_different_k():
    ends0 = {k1 for _, k1 in W.chunk_bounds(148, 16, 0)}
    ends1 = {k1 for _, k1 in W.chunk_bounds(148, 16, 8)}
    assert ends0 & ends1 == {148}  # only the tile's end is shared


def test_refuses_off_hopper_with_reason():
    if W.available() is None:
        pytest.skip("a Hopper GPU is here: the GPU scripts check the numerics")
    a = torch.zeros(4, 32).to(torch.float8_e4m3fn)
    with pytest.raises(NotImplementedError, match="gluon_ws"):
        W.fp8_gemm_ws(a, a, torch.ones(1), torch.ones(1))


def test_compiles_for_h100_warp_specialized_without_spills_or_serialized_mma():
    """Built for sm_90a in a child process: a loader at 24 registers and consumers raised to 232
    (setmaxnreg), 16 m64n128k32 e4m3 wgmma (2 warpgroups x (peeled + loop) x 4 k-steps), and
    ptxas neither serializes the wgmma pipeline (C7511/C7515) nor spills."""
    code = textwrap.dedent("""
        import json, re, subprocess, tempfile
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.backends.nvidia.compiler import get_ptxas
        from triton.experimental.gluon._runtime import GluonASTSource
        from triton.experimental.gluon import language as gl
        from profkit.kernels import fp8_gemm_ws as W
        la = gl.NVMMASharedLayout.get_default_for([128, 128], gl.float8e4nv)
        lc = gl.NVMMASharedLayout.get_default_for([64, 128], gl.bfloat16)
        td = lambda dt, s, l: f"tensordesc<{dt}[{s[0]}, {s[1]}],{l!r}>"
        sig = {"a_desc": td("fp8e4nv", [128, 128], la), "b_desc": td("fp8e4nv", [128, 128], la),
               "c_desc": td("bf16", [64, 128], lc), "SA": "*fp32", "SB": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
        cx = dict(ROW_SCALES=True, STAGES=5, CHUNK=16, STAGGER=True, GROUP_M=8, NPROG=132, CONSUMER_REGS=232)
        sig.update({n: "constexpr" for n in cx})
        k = triton.compile(GluonASTSource(fn=W._fp8_gemm_ws, signature=sig, constexprs=cx),
                           target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
        ptx = k.asm["ptx"]
        with tempfile.TemporaryDirectory() as d:
            open(d + "/k.ptx", "w").write(ptx)
            r = subprocess.run([get_ptxas(90).path, "-arch=sm_90a", "-v", d + "/k.ptx", "-o", d + "/k.cubin"],
                               capture_output=True, text=True)
        print(json.dumps(dict(
            rc=r.returncode, err=r.stderr[-400:],
            wgmma=len(re.findall(r"wgmma\\.mma_async\\.sync\\.aligned\\.m64n128k32\\.f32\\.e4m3\\.e4m3", ptx)),
            regs=sorted({int(x) for x in re.findall(r"setmaxnreg\\.(?:inc|dec)\\.sync\\.aligned\\.u32\\s+(\\d+)", ptx)}),
            serialized=re.findall(r"C751[15]", r.stderr), spills=re.findall(r"(\\d+) bytes spill stores", r.stderr),
            shared=k.metadata.shared)))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "TRITON_INTERPRET": "0"}, timeout=300)
    if r.returncode and ("gluon" in r.stderr.lower() and "No module" in r.stderr or "GPUTarget" in r.stderr
                         or "get_ptxas" in r.stderr):
        pytest.skip(f"this Triton cannot build Gluon for sm_90 here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["rc"] == 0, got["err"]
    assert got["wgmma"] == 16
    assert 24 in got["regs"] and 232 in got["regs"]
    assert got["serialized"] == [] and got["spills"] == ["0"]
    assert 5 * 2 * 128 * 128 + 2 * 64 * 128 * 2 <= got["shared"] <= 227 * 1024  # 5 stages of A and B, two C tiles
