"""Kernel lab IV's captures (H200, benchmarks/gpu/cuda_lab.sh, 2026-11-22): the SGEMM ladder at
4096^3 (profiles/sgemm-ladder-4096: eight CUDA C++ steps and cuBLAS, nsys + ncu roofline set) and
CUDA C++ beside Triton for RMSNorm / RoPE / SwiGLU (profiles/cuda-vs-triton-h200), plus
the committed benchmark results of the same machine (benchmarks/results/cuda.json)."""
import importlib.util
import json

import pytest

from profdata import PROFILES, ROOT
from profkit.outputs import roofline_plot as roofline
from profkit.profiles import load_profiles
from profkit.classify import classify
from profkit.store import Store

LADDER = "sgemm-ladder-4096"
CVT = "cuda-vs-triton-h200"
STEPS = ("naive", "coalesced", "smem", "blocktile_1d", "blocktile_2d", "vectorized", "tuned", "warptile", "cublas")
N = 4096


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lab4")
    root = tmp / "profiles"
    root.mkdir()
    for run in (LADDER, CVT):
        (root / run).symlink_to(PROFILES / run, target_is_directory=True)
    load_profiles(root, str(tmp / "lab4.db"))
    s = Store(str(tmp / "lab4.db"))
    classify(s, LADDER)
    classify(s, CVT)
    yield s
    s.close()


def per_path(store, run):
    rows = store.query("""
        SELECT k.nvtx_path, k.short_name, count(*) n, sum(k.duration_ns) t, group_concat(DISTINCT c.label) labels,
               sum(k.kernel_id IN (SELECT kernel_id FROM counters WHERE run = :run)) with_counters
        FROM kernels k LEFT JOIN classifications c USING (kernel_id)
        WHERE k.run = :run AND k.nvtx_path IS NOT NULL GROUP BY k.nvtx_path, k.short_name""", {"run": run})
    return {r["nvtx_path"]: r for r in rows}


def test_each_step_is_its_own_kernel_with_counters(store):
    p = per_path(store, LADDER)
    assert set(p) == {f"sgemm/{s}/{N}" for s in STEPS}
    expect = {"naive": "sgemm_naive", "coalesced": "sgemm_coalesced", "smem": "sgemm_smem",
              "blocktile_1d": "sgemm_blocktile_1d", "blocktile_2d": "sgemm_blocktile_2d",
              "vectorized": "sgemm_vectorized", "tuned": "sgemm_vectorized",  # step 5's template, tuned tiles
              "warptile": "sgemm_warptile"}
    for step, name in expect.items():
        r = p[f"sgemm/{step}/{N}"]
        assert (r["short_name"], r["n"], r["with_counters"]) == (name, 3, 3), step
    # cuBLAS's fp32 SGEMM on Hopper with TF32 off: a SIMT (FFMA) kernel, 256x128x8 tiles
    cub = p[f"sgemm/cublas/{N}"]
    assert "f32f32_f32f32_f32" in cub["short_name"] and "ffma" in cub["short_name"] and cub["n"] == 3


def test_every_step_does_exactly_the_gemm(store):
    """ncu's FFMA count: M*N*K for every step (2 FLOPs each, no FADD/FMUL); cuBLAS adds one
    FFMA per output (its alpha/beta epilogue)."""
    rows = store.query("""
        SELECT k.nvtx_path, c.metric, max(c.value) v, min(c.value) lo FROM counters c JOIN kernels k USING (kernel_id)
        WHERE k.run = ? AND c.metric IN ('smsp__sass_thread_inst_executed_op_ffma_pred_on.sum',
                                         'smsp__sass_thread_inst_executed_op_fadd_pred_on.sum',
                                         'smsp__sass_thread_inst_executed_op_fmul_pred_on.sum')
        GROUP BY 1, 2""", (LADDER,))
    got = {(r["nvtx_path"].split("/")[1], r["metric"].split("_op_")[1][:4]): (r["lo"], r["v"]) for r in rows}
    for step in STEPS[:-1]:
        assert got[(step, "ffma")] == (N**3, N**3), step
        assert got[(step, "fadd")] == (0, 0) and got[(step, "fmul")] == (0, 0)
    assert got[("cublas", "ffma")] == (N**3 + N**2, N**3 + N**2)


def test_the_ladder_climbs(store):
    """Recorded kernel times (nsys, 3 launches each) fall at every step; the last step is
    within 10 % of cuBLAS (2.95 ms against 2.68 ms a launch)."""
    p = per_path(store, LADDER)
    t = [p[f"sgemm/{s}/{N}"]["t"] / 3 for s in STEPS]
    assert all(a > b for a, b in zip(t, t[1:])), t
    assert 270e6 < t[0] < 285e6  # naive: ~0.5 TFLOP/s
    assert 0.90 < t[-1] / t[-2] < 0.95  # cuBLAS / warptile
    flops = 2 * N**3
    assert 45e12 < flops / (t[-2] * 1e-9) < 48e12  # warptile: ~46.6 TFLOP/s


def test_labels_with_their_evidence(store):
    p = per_path(store, LADDER)
    labels = {s: p[f"sgemm/{s}/{N}"]["labels"] for s in STEPS}
    # naive and smem do FP32 work at 16 FLOP/B of DRAM, above the FP32 ridge (~14): not DRAM-bound;
    # their L1/LSU (naive) and shared memory (smem) are the busy levels -> latency, bound in L1/L2
    assert labels == {"naive": "latency", "coalesced": "latency", "smem": "latency", "blocktile_1d": "latency",
                      "blocktile_2d": "occupancy", "vectorized": "latency", "tuned": "latency",
                      "warptile": "compute", "cublas": "compute"}
    ev = {r["nvtx_path"].split("/")[1]: json.loads(r["evidence"]) for r in store.query(
        "SELECT k.nvtx_path, c.evidence FROM classifications c JOIN kernels k USING (kernel_id) "
        "WHERE k.run = ? AND k.nvtx_path IS NOT NULL",
        (LADDER,))}

    def val(step, key):
        e = ev[step]
        return (e.get("values") or e)[key]

    # the 8x8 outer product of step 4 takes 142 registers: one 256-thread block per SM
    assert val("blocktile_2d", "theoretical_occupancy") == 12.5 and val("blocktile_2d", "limit_registers") == 1
    assert val("vectorized", "theoretical_occupancy") == 25.0  # 127 registers: two blocks
    assert val("naive", "dram_pct") < 1 and val("naive", "mem_pct") > 95  # the L1/LSU, not DRAM, is what is busy
    assert ev["naive"]["ridge_of"] == "fp32" and 12 < ev["naive"]["ridge_flop_per_byte"] < 16
    assert ev["cublas"]["ridge_of"] == "fp32"  # TF32 off: cuBLAS SGEMM runs on the FMA pipe
    assert val("warptile", "sm_pct") > 75 and val("cublas", "sm_pct") > 85


def test_correctness_recorded_by_the_capture():
    meta = json.loads((PROFILES / LADDER / "capture.json").read_text())
    checks = meta["correctness"]
    assert set(checks) == {f"sgemm/{s}/{N}" for s in STEPS}
    assert all(c["ok"] and c["rel_err"] < 2e-6 for c in checks.values())
    assert meta["gpu_name"] == "NVIDIA H200" and meta["driver"] == "580.159.04"


def test_ladder_roofline_chain(store, tmp_path):
    """benchmarks/sgemm_ladder_roofline.py: nine points joined in ladder order (eight arrows)."""
    spec = importlib.util.spec_from_file_location("ladder_roofline", ROOT / "benchmarks" / "sgemm_ladder_roofline.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    got = mod.draw(PROFILES / LADDER, tmp_path / "ladder.html")
    assert got["arrows"] == 8
    assert got["labels"][f"sgemm/warptile/{N}"] == ["compute"]
    html = (tmp_path / "ladder.html").read_text()
    assert "plotly" in html and "warptile" in html and "blocktile_2d" in html
    fig = roofline.build(store, run=LADDER, chain=list(STEPS))  # variant names work as chain steps too
    assert fig.layout.meta["arrows"] == 8


def test_cuda_beside_triton_capture(store):
    p = per_path(store, CVT)
    names = {"rmsnorm": ("_rmsnorm_fwd", "rmsnorm_fwd_regs"), "rope": ("_rope_fwd", "rope_fwd"),
             "swiglu": ("_swiglu_fwd", "swiglu_fwd")}
    for op, (triton_name, cuda_name) in names.items():
        tri, cu = p[f"{op}/triton/llama8b-t4096"], p[f"{op}/cuda/llama8b-t4096"]
        assert (tri["short_name"], cu["short_name"]) == (triton_name, cuda_name)
        assert tri["n"] == cu["n"] == 3 and tri["with_counters"] == cu["with_counters"] == 3
        assert tri["labels"] == cu["labels"] == "dram"
        assert 0.9 < tri["t"] / cu["t"] < 1.1, op  # at 4096 tokens the kernels take the same time


def test_committed_gpu_results_checked_every_cuda_variant():
    res = json.loads((ROOT / "benchmarks" / "results" / "cuda.json").read_text())
    assert res["info"]["gpu"] == "NVIDIA H200"
    cuda = [r for r in res["rows"] if r["variant"] == "cuda"]
    assert {(r["op"], r["shape"]) for r in cuda} == {(r["op"], r["shape"]) for r in res["rows"]}
    assert all(r["ok"] for r in cuda) and all(c["ok"] for c in res["checks"]) and len(res["checks"]) == 33
    steps = {(r["shape"], r["variant"]): r for r in res["sgemm"]}
    assert all(r["ok"] for r in res["sgemm"]) and len(steps) == 4 * len(STEPS)
    assert steps[("4096", "warptile")]["pct_cublas"] >= 90
