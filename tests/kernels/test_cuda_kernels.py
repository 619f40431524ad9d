"""The CUDA C++ kernels (kernels/cuda/*.cu) run on the CPU: the same sources built with g++ and
tests/kernels/cuda_emu.h (each block's threads as host threads), called through the real
Python launchers, checked against the float64 references with the lab's tolerances.
What this cannot show (speed, the GPU's own rounding of intrinsics) the GPU run checks
(benchmarks/gpu/cuda_lab.sh). Without g++ or the CUDA headers these skip with the reason;
the argument checks at the bottom need neither."""
import _cuda_emu
import pytest
import torch
from _kernel_helpers import check, nan_like, randn
from profkit.kernels import _cuda_build, rmsnorm, rope, sgemm, softmax, swiglu
from profkit.kernels._cuda_ops import rmsnorm_cuda, rope_cuda, softmax_cluster_plan, softmax_cuda, swiglu_cuda
from profkit.kernels._numerics import measure


def gemm_check(out, ref, dtype):
    r = measure(out, ref, dtype, policy="gemm")
    return r.ok, r


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    why = _cuda_emu.why_not()
    if why:
        pytest.skip(why)
    saved = _cuda_emu.install(tmp_path_factory.mktemp("cuda_emu"))
    yield
    _cuda_emu.uninstall(saved)


# ---- RMSNorm -------------------------------------------------------------------------------

@pytest.mark.parametrize("m,n", [(3, 4096), (2, 3584), (3, 203), (1, 20000), (2, 128), (1, 70000)])
def test_rmsnorm_matches_reference(emulated, dtype, m, n):
    """4096/3584: 16-byte packs in registers; 203: element by element; 20000: 4 packs per
    thread over 625 threads; 70000 (bf16/fp16): too long for registers, the loop kernel."""
    x = randn(m, n, dtype=dtype, scale=3.0)
    w = randn(n, dtype=dtype) * 0.1 + 1
    y = nan_like(x)
    rstd = torch.full((m,), float("nan"))
    out = rmsnorm_cuda(x, w, out=y, rstd=rstd)
    assert out is y
    check(y, rmsnorm.rmsnorm_reference(x, w), dtype, f"rmsnorm {m}x{n}")
    ref_rstd = (x.double().pow(2).mean(-1) + 1e-6).rsqrt()
    assert torch.allclose(rstd.double(), ref_rstd, rtol=1e-5)


def test_rmsnorm_gemma_strided_3d(emulated, dtype):
    base = randn(2, 3, 4160, dtype=dtype)
    x = base[..., :4096]  # rows 4160 apart: the row stride is passed, nothing copied
    w = randn(4096, dtype=dtype) * 0.1
    check(rmsnorm_cuda(x, w, gemma=True), rmsnorm.rmsnorm_reference(x, w, gemma=True), dtype, "gemma")


def test_rmsnorm_fp16_large_values_do_not_overflow(emulated):
    x = randn(2, 4096, dtype="fp16", scale=300.0)  # x^2 overflows fp16; the sum is fp32
    w = randn(4096, dtype="fp16")
    y = rmsnorm_cuda(x, w)
    assert torch.isfinite(y).all()
    check(y, rmsnorm.rmsnorm_reference(x, w), "fp16")


def test_rmsnorm_workload_variant(emulated):
    w = rmsnorm.WORKLOAD
    s = w.setup({"tokens": 2, "hidden": 4096}, "bf16", "cpu")
    check(w.variants["cuda"](s), w.reference(s, "cuda"), "bf16", "rmsnorm/cuda")


# ---- RoPE ----------------------------------------------------------------------------------

ROPE_CASES = {
    "llama-gqa": dict(t=3, hq=8, hk=2, d=128, rd=None, inter=False),
    "gptj": dict(t=3, hq=4, hk=4, d=64, rd=None, inter=True),
    "phi2-partial": dict(t=2, hq=4, hk=4, d=80, rd=32, inter=False),
    "partial-gptj": dict(t=2, hq=3, hk=1, d=80, rd=32, inter=True),
    "odd-half": dict(t=2, hq=2, hk=1, d=20, rd=10, inter=False),  # half = 5: element by element
}


@pytest.mark.parametrize("case", list(ROPE_CASES))
def test_rope_matches_reference(emulated, dtype, case):
    c = ROPE_CASES[case]
    q = randn(c["t"], c["hq"], c["d"], dtype=dtype)
    k = randn(c["t"], c["hk"], c["d"], dtype=dtype)
    rd = c["rd"] or c["d"]
    cos, sin = rope.rope_cache(64, rd)
    pos = torch.tensor([5, 0, 37][: c["t"]])
    qo, ko = rope_cuda(q, k, cos, sin, pos, c["rd"], c["inter"], q_out=nan_like(q), k_out=nan_like(k))
    rq, rk = rope.rope_reference(q, k, cos, sin, pos, c["rd"], c["inter"])
    check(qo, rq, dtype, f"{case} q")
    check(ko, rk, dtype, f"{case} k")


def test_rope_in_place_on_fused_qkv_views(emulated):
    """q and k as views into one [T, (HQ + 2 HK) * D] buffer (token stride > heads * D)."""
    t, hq, hk, d = 3, 8, 2, 128
    qkv = randn(t, (hq + 2 * hk) * d, dtype="bf16")
    q = qkv[:, : hq * d].view(t, hq, d)
    k = qkv[:, hq * d: (hq + hk) * d].view(t, hk, d)
    cos, sin = rope.rope_cache(16, d)
    pos = torch.tensor([3, 1, 2])
    rq, rk = rope.rope_reference(q, k, cos, sin, pos)
    v_before = qkv[:, (hq + hk) * d:].clone()
    qo, ko = rope_cuda(q, k, cos, sin, pos, q_out=q, k_out=k)
    assert qo.data_ptr() == q.data_ptr() and ko.data_ptr() == k.data_ptr()
    check(q, rq, "bf16", "q in place")
    check(k, rk, "bf16", "k in place")
    assert torch.equal(qkv[:, (hq + hk) * d:], v_before)  # v untouched


def test_rope_workload_variant(emulated):
    w = rope.WORKLOAD
    for name in ("llama8b-t4096", "phi2partial-t4096"):
        p = dict(w.shapes[name], tokens=2)
        s = w.setup(p, "fp32", "cpu")
        out, ref = w.variants["cuda"](s), w.reference(s, "cuda")
        for o, r in zip(out, ref):
            check(o, r, "fp32", f"rope/cuda/{name}")


# ---- SwiGLU --------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 300), (2, 4096), (1, 7)])
def test_swiglu_matches_reference(emulated, dtype, shape):
    g, u = randn(*shape, dtype=dtype, scale=4.0), randn(*shape, dtype=dtype)
    y = nan_like(g)
    assert swiglu_cuda(g, u, out=y) is y
    check(y, swiglu.swiglu_reference(g, u), dtype)


def test_swiglu_unaligned_and_extreme(emulated):
    """Inputs one element off 16-byte alignment (element path); gate of -1000 and +1000."""
    g = randn(1, 1001, dtype="fp16")[:, 1:]
    u = randn(1, 1001, dtype="fp16")[:, 1:]
    g[0, :2] = torch.tensor([-1000.0, 1000.0], dtype=torch.float16)
    y = swiglu_cuda(g, u)
    assert torch.isfinite(y).all() and y[0, 0] == 0
    check(y, swiglu.swiglu_reference(g, u), "fp16")


# ---- SGEMM ---------------------------------------------------------------------------------

def _ab(m, n, k):
    return torch.randn(m, k), torch.randn(k, n)


@pytest.mark.parametrize("step", sgemm.STEPS)
def test_sgemm_every_step_and_config(emulated, step):
    for i, name in enumerate(sgemm.configs(step)):
        bm, bn, bk = sgemm.tile(step, i)
        m, n, k = (67, 45, 39) if bm == 1 else (2 * bm, 256 if bn <= 128 else bn, 3 * bk)
        a, b = _ab(m, n, k)
        out = nan_like(torch.empty(m, n))
        sgemm.sgemm(a, b, step, out=out, config=i)
        ok, info = gemm_check(out, sgemm.sgemm_reference(a, b), "fp32")
        assert ok, (step, name, info)


def test_sgemm_rectangular_and_autotune(emulated):
    a, b = _ab(384, 256, 64)  # M != N; warptile's 128x256 / 256x128 tiles do not all fit
    out = sgemm.sgemm(a, b, "warptile")
    assert gemm_check(out, sgemm.sgemm_reference(a, b), "fp32")[0]
    chosen = sgemm.autotune_choices()["emulated|warptile|384x256x64"]["config"]
    assert chosen in sgemm.configs("warptile")
    assert sgemm.fits("warptile", sgemm.configs("warptile").index(chosen), 384, 256, 64)


def test_sgemm_refuses_what_the_tiles_do_not_cover(emulated):
    a, b = _ab(100, 128, 64)
    with pytest.raises(ValueError, match=r"M % 128 == N % 128 == K % 8 == 0"):
        sgemm.sgemm(a, b, "blocktile_2d")
    with pytest.raises(ValueError, match="no warptile configuration divides"):
        sgemm.sgemm(a, b, "warptile")
    with pytest.raises(ValueError, match="16-byte aligned"):
        flat = torch.randn(128 * 64 + 1)
        sgemm.sgemm(flat[1:].view(128, 64), torch.randn(64, 128), "vectorized")
    with pytest.raises(ValueError, match="no configuration 'nope'"):
        sgemm.sgemm(torch.randn(128, 128), torch.randn(128, 128), "tuned", config="nope")


def test_sgemm_workload_runs_every_variant(emulated):
    w = sgemm.WORKLOAD
    assert list(w.variants) == [*sgemm.STEPS, "cublas"] and set(w.gpu_only) == set(sgemm.STEPS)
    s = w.setup({"M": 256, "N": 256, "K": 32}, "fp32", "cpu")
    for v, fn in w.variants.items():
        ok, info = gemm_check(fn(s), sgemm.WORKLOAD.reference(s, "cublas"), "fp32")
        assert ok, (v, info)
    assert w.model(w.shapes["4096"], "fp32") == {"bytes": 3 * 4096 * 4096 * 4, "flops": 2 * 4096**3}


def test_a_wrong_kernel_is_caught(emulated):
    """The check is not lenient: B transposed (a plausible indexing bug) fails it."""
    a, b = _ab(128, 128, 128)
    out = sgemm.sgemm(a, b.t().contiguous(), "smem")
    assert not gemm_check(out, sgemm.sgemm_reference(a, b), "fp32")[0]


# ---- argument checks: no GPU, no compiler needed ----------------------------------------------

def test_launchers_refuse_cpu_tensors_before_building(monkeypatch):
    monkeypatch.setattr(_cuda_build, "EMULATED", False)
    monkeypatch.setattr(_cuda_build, "load", lambda name: pytest.fail("must not build for a bad call"))
    x, w = torch.randn(2, 64), torch.randn(64)
    with pytest.raises(ValueError, match="need CUDA tensors"):
        rmsnorm_cuda(x, w)
    with pytest.raises(ValueError, match="need CUDA tensors"):
        swiglu_cuda(x, x)
    with pytest.raises(ValueError, match="need CUDA tensors"):
        sgemm.sgemm(torch.randn(128, 128), torch.randn(128, 128), "naive")
    with pytest.raises(ValueError, match="need CUDA tensors"):
        softmax_cuda(torch.randn(2, 128256).bfloat16())


@pytest.mark.parametrize("call, match", [
    (lambda: rmsnorm_cuda(torch.randn(2, 64), torch.randn(32)), r"w has shape \(32,\), want \(64,\)"),
    (lambda: rmsnorm_cuda(torch.randn(2, 64), torch.randn(64).half()), "w is torch.float16"),
    (lambda: rmsnorm_cuda(torch.randn(2, 64).double(), torch.randn(64).double()), "not float64"),
    (lambda: rmsnorm_cuda(torch.randn(2, 64), torch.randn(64), out=torch.empty(2, 64).t()), "out must be"),
    (lambda: swiglu_cuda(torch.randn(2, 64), torch.randn(2, 63)), "differ"),
    (lambda: rope_cuda(torch.randn(2, 4, 16), torch.randn(2, 4, 16), *rope.rope_cache(8, 14), torch.arange(2), 14,
                       True, q_out=torch.empty(2, 4, 17)[..., :16]), "shape|even token and head strides"),
    (lambda: rope_cuda(torch.randn(2, 4, 16), torch.randn(2, 4, 16), *rope.rope_cache(8, 15), torch.arange(2), 15),
     "must be even"),
    (lambda: rope_cuda(torch.randn(2, 4, 16), torch.randn(2, 4, 16), *rope.rope_cache(8, 16), torch.arange(3)),
     r"positions must be integer \[2\]"),
    (lambda: sgemm.sgemm(torch.randn(4, 5), torch.randn(4, 5), "naive"), "shapes"),
    (lambda: sgemm.sgemm(torch.randn(4, 4).half(), torch.randn(4, 4).half(), "naive"), "fp32 operands only"),
    (lambda: sgemm.sgemm(torch.randn(4, 4), torch.randn(4, 4), "fastest"), "no step 'fastest'"),
    (lambda: softmax_cuda(torch.randn(2, 4096).bfloat16()), "at least 8192"),
    (lambda: softmax_cuda(torch.randn(2, 8196).bfloat16()), "not a multiple of 8"),
    (lambda: softmax_cuda(torch.randn(2, 152064).bfloat16(), cluster=4, per_sm=2), "6 chunks"),
    (lambda: softmax_cuda(torch.randn(2, 128256).bfloat16(), cluster=9), "not one of"),
    (lambda: softmax_cuda(torch.randn(2, 128256).bfloat16(), stages=8, per_sm=2), "stages 8 not in 2..7"),
    (lambda: softmax_cuda(torch.randn(2, 128256).bfloat16(), out=torch.empty(2, 128256)), "out must be"),
])
def test_launcher_argument_checks(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("esize", [2, 4])
@pytest.mark.parametrize("n", [8192, 8200, 65544, 128256, 152064, 262144])
def test_softmax_cluster_plan_covers_every_column(n, esize):
    """Every cluster size the plan accepts splits a row into 16-byte-aligned slices that cover it
    exactly, none empty, each within the kernel's chunks (kernels/cuda/softmax.cu's launch_shape)."""
    v = 16 // esize
    seen = 0
    for per_sm in (1, 2):
        chunk_bytes, _, most = _cuda_ops_shapes()[per_sm]
        for c in range(1, 9):
            try:
                cluster, sl, chunks = softmax_cluster_plan(n, esize, c, per_sm)
            except ValueError as e:
                assert "chunks" in str(e) or "no columns" in str(e)
                continue
            seen += 1
            last = n - (cluster - 1) * sl
            assert cluster == c and sl % v == 0 and 0 < last <= sl
            assert chunks == -(-sl * esize // chunk_bytes) <= most
    fits = n * esize <= 8 * 8 * 15360  # 8 CTAs of 8 chunks of 15 KB: the widest row any plan takes
    assert bool(seen) == fits
    # the default: the smallest cluster whose slices fit 5 chunks (4 CTAs at the vocabulary rows)
    assert softmax_cluster_plan(128256, 2)[0] == 4 and softmax_cluster_plan(152064, 2)[0] == 4


def _cuda_ops_shapes():
    from profkit.kernels._cuda_ops import SOFTMAX_SHAPES

    return SOFTMAX_SHAPES


def test_softmax_cluster_has_no_cpu_stand_in(emulated):
    """Clusters, bulk copies and mbarriers have no CPU emulation: the emulated build says so as
    a CUDA error through the launcher, not a crash (the GPU run checks the kernel)."""
    with pytest.raises(RuntimeError, match=r"softmax \(CUDA\): CUDA error"):
        softmax_cuda(torch.randn(3, 16384).bfloat16())


def test_cuda_variants_are_registered_gpu_only():
    for mod in (rmsnorm, rope, softmax, swiglu):
        w = mod.WORKLOAD
        assert "cuda" in w.variants and w.gpu_only == ("cuda",), w.op


def test_benchmark_script_on_the_emulated_build(emulated, tmp_path):
    """benchmarks/cuda_lab.py end to end on the CPU (Triton interpreted, CUDA C++ emulated,
    tiny shapes): every row checked and timed, the JSON and the tables written."""
    import importlib.util
    import json

    from profdata import ROOT

    spec = importlib.util.spec_from_file_location("cuda_lab_bench", ROOT / "benchmarks" / "cuda_lab.py")
    lab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lab)
    rc = lab.main(["--out", str(tmp_path), "--device", "cpu", "--quick", "--sgemm-shapes", "128x128x32"])
    res = json.loads((tmp_path / "cuda.json").read_text())
    assert rc == 0, [r for r in res["rows"] + res["checks"] + res["sgemm"] if not r.get("ok", True)]
    assert {(r["op"], r["variant"]) for r in res["rows"] if "ms" in r} == {
        (op, v) for op in ("rmsnorm", "rope", "swiglu") for v in ("triton", "cuda")}
    assert all("speedup_vs_triton" in r for r in res["rows"] if r["variant"] == "cuda")
    assert len(res["checks"]) == 33 and all(c["ok"] for c in res["checks"])
    assert [r["variant"] for r in res["sgemm"]] == [*sgemm.STEPS, "cublas"]
    assert all(r["ok"] and r["pct_cublas"] > 0 for r in res["sgemm"])
    md = lab.markdown(res)
    assert "| sgemm" not in md and "| 128x128x32 | warptile |" in md and "CUDA vs Triton" in md
