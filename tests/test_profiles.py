"""The shipped dataset (profiles/, one folder a run, profiles/README.md says what each shows):
every before/after pair it holds, checked against profkit compare's real row, and the facts
each run's story rests on (the counters that say why a variant won or lost)."""
import json
import re

import pytest
from profdata import DATA, PROFILES, ROOT

from profkit.analyses.classify import classify
from profkit.analyses.compare import rows
from profkit.core.metrics import lookup
from profkit.store.profiles import load_profiles
from profkit.store.store import Store

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
# run -> GPU; every folder of profiles/ is here and nothing else
RUNS = {
    "known": H200, "hf-llama-decode": H100, "cuda-vector-ops": H100, "cuda-vs-triton-h200": H200,
    "e2e-decode": H200, "ddp-2gpu": H200, "ddp-2gpu-slow": H200,
    "rmsnorm-eager-vs-triton-h200": H200, "softmax-vocab-cuda-cluster-rejected-h100": H100,
    "fp8-gemm-cublas-vs-cuda-h100": H100, "fp8-gemm-cublas-vs-cuda-h200": H200,
    "rmsnorm-rope-tuned-under-ncu-rejected-h100": H100, "rmsnorm-rope-tuned-in-plain-run-h200": H200,
    "softmax-one-token-split-rows-h100": H100, "softmax-one-token-split-rows-h200": H200,
    "add-rmsnorm-weight-first-h200": H200, "swiglu-one-token-h100": H100,
    "rmsnorm-bwd-persistent-vs-compile-h100": H100, "rope-one-token-split-heads-h200": H200,
    "gpt2-train-compile": H100, "resnet18-train-eager": H100, "llama-decode-eager": H100,
    "llama-decode-cudagraphs": H100,
}
PROGRAMS = ("hf-llama-decode", "cuda-vector-ops", "gpt2-train-compile", "resnet18-train-eager", "llama-decode-eager",
            "llama-decode-cudagraphs")
LAB = [r for r in RUNS if r not in ("known", "e2e-decode", "ddp-2gpu", "ddp-2gpu-slow", "cuda-vs-triton-h200",
                                    *PROGRAMS)]

# profkit compare BEFORE AFTER (GPU time per call) on each pair of the dataset:
# (run, range, before, after, verdict, speed-up, band low, band high, label before, label after,
#  DRAM MB per call before, after, calls a side)
PAIRS = [
    # the story: eager's 8 kernels a call fused into one Triton kernel; Liger's is the same work
    ("rmsnorm-eager-vs-triton-h200", "rmsnorm/qwen7b-t4096", "eager", "triton", "supported", 12.123, 12.087, 14.134, "dram", "dram", 429.69, 33.46, 3),
    ("rmsnorm-eager-vs-triton-h200", "rmsnorm/qwen7b-t4096", "eager", "liger", "supported", 12.100, 11.863, 12.276, "dram", "dram", 429.69, 37.88, 3),
    ("rmsnorm-eager-vs-triton-h200", "rmsnorm/qwen7b-t4096", "liger", "triton", "caveated", 1.002, 0.994, 1.180, "dram", "dram", 37.88, 33.46, 3),
    # a thread-block-cluster CUDA softmax: slower than the Triton kernel (idle SMs), faster than compile
    ("softmax-vocab-cuda-cluster-rejected-h100", "softmax/llama3vocab-t2048", "triton", "cuda", "rejected", 0.851, 0.848, 0.870, "dram", "dram", 1028.98, 1027.88, 3),
    ("softmax-vocab-cuda-cluster-rejected-h100", "softmax/llama3vocab-t2048", "compile", "cuda", "supported", 1.449, 1.444, 1.455, "dram", "dram", 1534.26, 1027.88, 3),
    # 12 calls a side: per-tensor scales cuBLAS stays ahead, per-row the CUDA kernel wins, both GPUs
    ("fp8-gemm-cublas-vs-cuda-h100", "fp8_gemm/qwen7b-down-m1024", "scaled_mm_tensor", "cuda_ws112_tma8_tensor", "rejected", 0.992, 0.986, 0.998, "tensor_core", "tensor_core", 117.13, 115.09, 12),
    ("fp8-gemm-cublas-vs-cuda-h100", "fp8_gemm/qwen7b-down-m1024", "scaled_mm", "cuda_ws112_tma8", "supported", 1.156, 1.137, 1.185, "tensor_core", "tensor_core", 140.15, 115.04, 12),
    ("fp8-gemm-cublas-vs-cuda-h200", "fp8_gemm/qwen7b-down-m1024", "scaled_mm_tensor", "cuda_ws112_tma8_tensor", "rejected", 0.986, 0.979, 0.991, "tensor_core", "tensor_core", 117.20, 115.08, 12),
    ("fp8-gemm-cublas-vs-cuda-h200", "fp8_gemm/qwen7b-down-m1024", "scaled_mm", "cuda_ws112_tma8", "supported", 1.118, 1.114, 1.124, "tensor_core", "tensor_core", 140.19, 115.09, 12),
    # the same head-grouped launch: picked under ncu (H100) it loses; picked in a plain run (H200) it wins
    ("rmsnorm-rope-tuned-under-ncu-rejected-h100", "rmsnorm_rope/qwen3-8b-t4096", "triton_tokenprog", "triton", "rejected", 0.615, 0.610, 0.617, "dram", "dram", 68.73, 70.42, 3),
    ("rmsnorm-rope-tuned-under-ncu-rejected-h100", "rmsnorm_rope/qwen3-8b-t4096", "compile", "triton", "rejected", 0.611, 0.604, 0.630, "dram", "dram", 62.95, 70.42, 3),
    ("rmsnorm-rope-tuned-in-plain-run-h200", "rmsnorm_rope/qwen3-8b-t4096", "triton_tokenprog", "triton", "supported", 1.277, 1.259, 1.292, "dram", "occupancy", 65.90, 64.22, 3),
    ("rmsnorm-rope-tuned-in-plain-run-h200", "rmsnorm_rope/qwen3-8b-t4096", "compile", "triton", "supported", 1.307, 1.273, 1.315, "dram", "occupancy", 60.23, 64.22, 3),
    # one token: a vocabulary row split over programs instead of one program a row
    ("softmax-one-token-split-rows-h100", "softmax/llama3vocab-t1", "triton_rowprog", "triton", "supported", 4.277, 4.242, 4.312, "occupancy", "launch_overhead", 0.27, 0.53, 3),
    ("softmax-one-token-split-rows-h100", "softmax/llama3vocab-t1", "compile", "triton", "supported", 2.563, 2.507, 2.585, "launch_overhead", "launch_overhead", 1.31, 0.53, 3),
    ("softmax-one-token-split-rows-h200", "softmax/llama3vocab-t1", "triton_rowprog", "triton", "supported", 5.029, 5.017, 5.219, "occupancy", "launch_overhead", 0.27, 0.53, 3),
    ("softmax-one-token-split-rows-h200", "softmax/llama3vocab-t1", "compile", "triton", "supported", 2.538, 2.514, 2.692, "launch_overhead", "launch_overhead", 1.31, 0.53, 3),
    # one token: the weight loaded first wins; untuned and Liger are faster
    ("add-rmsnorm-weight-first-h200", "add_rmsnorm/llama8b-t1", "triton_untuned", "triton", "rejected", 0.938, 0.908, 1.000, "launch_overhead", "launch_overhead", 0.03, 0.04, 3),
    ("add-rmsnorm-weight-first-h200", "add_rmsnorm/llama8b-t1", "triton_wlate", "triton", "supported", 1.237, 1.194, 1.326, "launch_overhead", "launch_overhead", 0.04, 0.04, 3),
    ("add-rmsnorm-weight-first-h200", "add_rmsnorm/llama8b-t1", "liger", "triton", "rejected", 0.948, 0.888, 1.033, "launch_overhead", "launch_overhead", 0.03, 0.04, 3),
    ("swiglu-one-token-h100", "swiglu/llama8b-t1", "triton_v1", "triton", "supported", 1.140, 1.108, 1.239, "launch_overhead", "launch_overhead", 0.07, 0.07, 3),
    ("swiglu-one-token-h100", "swiglu/llama8b-t1", "compile", "triton", "rejected", 0.935, 0.925, 0.967, "launch_overhead", "launch_overhead", 0.06, 0.07, 3),
    # the RMSNorm backward: one program an SM, rows in flight, the dw reduce launched early
    ("rmsnorm-bwd-persistent-vs-compile-h100", "rmsnorm_bwd/llama8b-t4096", "triton_v2_direct", "triton_direct", "supported", 1.186, 1.171, 1.218, "dram", "dram", 82.64, 89.04, 3),
    ("rmsnorm-bwd-persistent-vs-compile-h100", "rmsnorm_bwd/llama8b-t4096", "compile_direct", "triton_direct", "supported", 1.892, 1.861, 1.937, "dram", "dram", 158.74, 89.04, 3),
    ("rope-one-token-split-heads-h200", "rope/llama8b-t1", "triton_tokenprog", "triton", "supported", 1.353, 1.318, 1.412, "launch_overhead", "launch_overhead", 0.02, 0.02, 3),
    ("rope-one-token-split-heads-h200", "rope/llama8b-t1", "liger", "triton", "rejected", 0.988, 0.976, 1.059, "launch_overhead", "launch_overhead", 0.01, 0.02, 3),
    # CUDA C++ beside Triton at 4096 tokens: the same time, within noise
    ("cuda-vs-triton-h200", "rmsnorm/llama8b-t4096", "triton", "cuda", "rejected", 0.990, 0.846, 1.046, "dram", "dram", 40.19, 44.55, 3),
    ("cuda-vs-triton-h200", "rope/llama8b-t4096", "triton", "cuda", "caveated", 1.004, 0.995, 1.013, "dram", "dram", 63.95, 64.14, 3),
    ("cuda-vs-triton-h200", "swiglu/llama8b-t4096", "triton", "cuda", "caveated", 1.008, 0.994, 1.024, "dram", "dram", 327.43, 339.03, 3),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("profiles") / "profiles.db")
    load_profiles(PROFILES, db)
    s = Store(db)
    yield s
    s.close()


def _meta(store, run):
    return json.loads(store.query("SELECT meta FROM runs WHERE run = ?", (run,))[0]["meta"])


def test_the_dataset_is_the_listed_runs_within_its_budget(store):
    runs = {r["run"]: r["gpu_name"] for r in store.query("SELECT run, gpu_name FROM runs")}
    assert runs == RUNS
    folders = sorted(p.name for p in PROFILES.iterdir() if p.is_dir())
    assert folders == sorted(RUNS)
    assert sum(f.stat().st_size for f in PROFILES.rglob("*") if f.is_file()) <= 20_000_000
    assert len(folders) <= 25
    # a name says what the run shows: no capture-round or host codes
    assert not [r for r in RUNS if re.search(r"-r\d+-|-h[12]00[a-z]\b", r)]
    # a run's files are named after its folder (ingest names the run after the folder)
    for run in RUNS:
        reports = [f.name for f in (PROFILES / run).iterdir() if f.name not in ("capture.json", "CAPTURE.txt")]
        assert reports and all(f.startswith(run + ".") for f in reports), (run, reports)


def test_profiles_readme_names_every_run():
    text = (PROFILES / "README.md").read_text()
    for run in RUNS:
        assert f"`{run}`" in text, run


@pytest.mark.parametrize("run,rng,before,after,verdict,speedup,low,high,label_before,label_after,mb_before,mb_after,calls",
                         PAIRS, ids=[f"{p[0]}:{p[2]}->{p[3]}:{p[1]}" for p in PAIRS])
def test_pairs(store, run, rng, before, after, verdict, speedup, low, high, label_before, label_after,
               mb_before, mb_after, calls):
    got = {r["range"]: r for r in rows(store, f"{run}:{before}", f"{run}:{after}")}
    r = got[rng]
    assert r["verdict"] == verdict, r["why"]
    assert r["speedup"] == pytest.approx(speedup, abs=0.005)
    assert (r["speedup_low"], r["speedup_high"]) == (pytest.approx(low, abs=0.005), pytest.approx(high, abs=0.005))
    assert (r["label_before"], r["label_after"]) == (label_before, label_after)
    assert r["before_detail"]["dram_bytes_per_call"] / 1e6 == pytest.approx(mb_before, abs=0.1)
    assert r["after_detail"]["dram_bytes_per_call"] / 1e6 == pytest.approx(mb_after, abs=0.1)
    assert r["before_detail"]["calls"] == r["after_detail"]["calls"] == calls
    if verdict == "supported":
        assert "reference check passed" in r["why"] and r["speedup_low"] > 1.0
    if calls >= 10:
        assert "bootstrap" in r["band_method"]


def test_the_main_jobs_claims_are_the_eager_pairs(store):
    """profkit analyse lists baseline (eager) -> variant pairs: the story's two."""
    from profkit.analyses import overview

    good = [(c["run"], c["from"], c["to"]) for c in overview.claims(store) if c["verdict"] == "supported"]
    assert good == [("rmsnorm-eager-vs-triton-h200", "eager", "triton"), ("rmsnorm-eager-vs-triton-h200", "eager", "liger")]


@pytest.mark.parametrize("run", LAB)
def test_lab_runs_record_gpu_versions_and_passing_reference_checks(store, run):
    meta = json.loads((PROFILES / run / "capture.json").read_text())
    assert meta["gpu_name"] == RUNS[run] and meta["driver"] == "580.159.04"
    assert meta["torch_version"].startswith("2.11") and meta["triton_version"] == "3.6.0"
    assert meta["ncu_version"] and "profkit.kernels.run" in meta["command"]
    assert meta["correctness"] and all(c["ok"] for c in meta["correctness"].values())
    assert _meta(store, run)["correctness"] == meta["correctness"]  # capture.json reached the run


def test_rmsnorm_eager_is_eight_kernels_a_call_and_triton_one(store):
    run = "rmsnorm-eager-vs-triton-h200"
    n = {r["nvtx_path"]: r["n"] for r in store.query(
        "SELECT nvtx_path, count(*) n FROM kernels WHERE run = ? AND source = 'nsys' AND nvtx_path IS NOT NULL "
        "GROUP BY nvtx_path", (run,))}
    assert n == {"rmsnorm/eager/qwen7b-t4096": 24, "rmsnorm/triton/qwen7b-t4096": 3, "rmsnorm/liger/qwen7b-t4096": 3}
    classify(store, run)
    labels = {}
    for r in store.query("SELECT k.nvtx_path, c.label FROM classifications c JOIN kernels k USING (kernel_id) "
                         "WHERE c.run = ? AND k.nvtx_path IS NOT NULL", (run,)):
        labels.setdefault(r["nvtx_path"], set()).add(r["label"])
    assert labels["rmsnorm/eager/qwen7b-t4096"] == {"dram", "launch_overhead"}  # two tiny casts a call
    assert labels["rmsnorm/triton/qwen7b-t4096"] == {"dram"}


def _counters(store, run, variant, kernel=None):
    from profkit.analyses import selection

    counters = store.counters(run)
    (group,) = selection.groups(store, selection.parse(f"{run}:{variant}")).values()
    return [counters[k["kernel_id"]] for k in group.kernels if kernel is None or k["kernel_name"] == kernel]


def test_the_cluster_softmax_leaves_sms_idle(store):
    """Why the CUDA cluster kernel loses: its persistent grid is every cluster that fits times the
    cluster's CTAs, one CTA an SM, and clusters of 3-4 CTAs fit only 117-120 of the 132 SMs."""
    launches = _counters(store, "softmax-vocab-cuda-cluster-rejected-h100", "cuda")
    assert len(launches) == 3
    for c in launches:
        size, active = c["launch__cluster_size"], c["launch__cluster_max_active"]
        assert size in (3, 4) and c["launch__grid_size"] == size * active
        assert 117 <= c["launch__grid_size"] <= 120 < c["launch__sm_count"] == 132
        assert c["launch__block_size"] == 512 and c["launch__occupancy_limit_shared_mem"] == 1
        # the bulk copies read the minimum: each row once, rows x N x 2 bytes
        assert lookup(c, "dram_read_bytes") == pytest.approx(2048 * 128256 * 2, rel=0.005)


def test_the_plain_runs_tuned_pick_reached_the_profiled_launch():
    """The H200 capture tuned in a plain run and handed the pick over (8 heads, 1 warp); the H100
    one tuned under ncu, which picked a launch 1.6x slower: the rejection is the profiler's."""
    tuned = json.loads((PROFILES / "rmsnorm-rope-tuned-in-plain-run-h200" / "capture.json").read_text())["tuned"]
    assert list(tuned.values()) == ["(8, 1)"]
    assert "tuned" not in json.loads((PROFILES / "rmsnorm-rope-tuned-under-ncu-rejected-h100" / "capture.json").read_text())


def test_cuda_beside_triton_capture(store):
    run = "cuda-vs-triton-h200"
    classify(store, run)
    p = {r["nvtx_path"]: r for r in store.query("""
        SELECT k.nvtx_path, k.short_name, count(*) n, group_concat(DISTINCT c.label) labels,
               sum(k.kernel_id IN (SELECT kernel_id FROM counters WHERE run = :run)) with_counters
        FROM kernels k LEFT JOIN classifications c USING (kernel_id)
        WHERE k.run = :run AND k.nvtx_path IS NOT NULL AND k.source = 'nsys' GROUP BY k.nvtx_path""", {"run": run})}
    names = {"rmsnorm": ("_rmsnorm_fwd", "rmsnorm_fwd_regs"), "rope": ("_rope_fwd", "rope_fwd"),
             "swiglu": ("_swiglu_fwd", "swiglu_fwd")}
    for op, (triton_name, cuda_name) in names.items():
        tri, cu = p[f"{op}/triton/llama8b-t4096"], p[f"{op}/cuda/llama8b-t4096"]
        assert (tri["short_name"], cu["short_name"]) == (triton_name, cuda_name)
        assert tri["n"] == cu["n"] == 3 and tri["with_counters"] == cu["with_counters"] == 3
        assert tri["labels"] == cu["labels"] == "dram"


def test_committed_gpu_results_checked_every_cuda_variant():
    res = json.loads((ROOT / "benchmarks" / "results" / "cuda.json").read_text())
    assert res["info"]["gpu"] == "NVIDIA H200"
    cuda = [r for r in res["rows"] if r["variant"] == "cuda"]
    assert {(r["op"], r["shape"]) for r in cuda} == {(r["op"], r["shape"]) for r in res["rows"]}
    assert all(r["ok"] for r in cuda) and all(c["ok"] for c in res["checks"]) and len(res["checks"]) == 33


def test_nccl_kernels_are_communication(store):
    """The 2-GPU DDP captures: every NCCL kernel is labelled communication, nothing else is."""
    for run in ("ddp-2gpu", "ddp-2gpu-slow"):
        got = classify(store, run)
        nccl = [r for r in got if r["kernel_name"].lower().startswith("nccl")]
        assert len(nccl) == 74 and {r["label"] for r in nccl} == {"communication"}
        assert not [r for r in got if r["label"] == "communication" and r not in nccl]


def test_cupti_tracer_sees_the_same_kernels_per_nvtx_range_as_nsys(tmp_path):
    """The same workload captured by the CUPTI tracer and by nsys on the H200 (2026-11-22),
    loaded into the same views: the same kernels under the same NVTX ranges."""
    from profkit.parsers import cupti_trace

    from profkit.store.ingest import ingest

    db = str(tmp_path / "both.db")
    ingest(db, [DATA / "rmsnorm-cupti" / "rmsnorm-cupti.cupti.jsonl"], run="cupti")
    ingest(db, [DATA / "rmsnorm-cupti" / "rmsnorm-nsys.nsys.sqlite"], run="nsys")
    with Store(db) as s:
        per = {run: {(r["nvtx_path"], r["short_name"]): r["n"] for r in s.query(
            "SELECT nvtx_path, short_name, count(*) n FROM kernels WHERE run = ? GROUP BY 1, 2", (run,))}
            for run in ("cupti", "nsys")}
    assert per["cupti"] == per["nsys"]
    by_range = {}
    for (path, _), n in per["cupti"].items():
        by_range[path] = by_range.get(path, 0) + n
    assert by_range == {None: 22, "rmsnorm/eager/llama8b-t4096": 24, "rmsnorm/triton/llama8b-t4096": 3}
    c = cupti_trace.parse(DATA / "rmsnorm-cupti" / "rmsnorm-cupti.cupti.jsonl")
    assert len(c.ranges) == 6  # op > variant > shape, twice: the markers reached the tracer
