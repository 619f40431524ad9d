"""The shipped lab dataset: captured on an H200 with `profkit capture` (nsys + ncu roofline
set), one folder per run under profiles/. Before (eager) and after (triton) sit in one run."""
import json

import pytest

from profkit.profiles import load_profiles
from profkit.classify import classify
from profkit.parsers import cupti_trace, nsys_sqlite
from profkit.store import Store
from profdata import DATA, PROFILES
from test_lab_round2_profiles import ROUND2  # the round-2 kernel lab captures (H100, ncu only)


def _round_runs():
    """{round: its runs} of every later round's profile test (test_lab_round<N>_profiles.RUNS),
    found by name, so a new round's folders are known here without a list to keep."""
    import importlib
    from pathlib import Path

    found = {}
    for f in Path(__file__).parent.glob("test_lab_round*_profiles.py"):
        n = int(f.stem.removeprefix("test_lab_round").removesuffix("_profiles"))
        if n != 2:
            found[n] = importlib.import_module(f.stem).RUNS
    return found


ROUNDS = _round_runs()
PAIRED = (ROUND2, *ROUNDS.values())  # rounds 2 and 5 on: both GPUs
WITH_TIMELINE = {10, 26}  # rounds 10 and 26 captured nsys beside ncu (the helped fp8 launch; SwiGLU in a filled L2)
NCU_ONLY = (ROUND2, *(runs for n, runs in ROUNDS.items() if n not in WITH_TIMELINE))  # no timeline captured


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("lab") / "lab.db")
    load_profiles(PROFILES, db)
    s = Store(db)
    yield s
    s.close()


def by_path(store, run):
    return {r["nvtx_path"]: r for r in store.query(
        "SELECT nvtx_path, count(*) n, sum(duration_ns) t FROM kernels WHERE run = ? AND nvtx_path IS NOT NULL "
        "GROUP BY nvtx_path", (run,))}


# the second capture round (H200, 2026-11-22, roofline set, reference checks recorded):
# run -> (before, after, verdict, label before, label after)
LAB_VERDICTS = {
    "add_rmsnorm-llama8b-t4096": ("eager", "triton", "supported", "dram", "dram"),
    "rope-llama8b-t4096": ("eager", "triton", "supported", "dram", "dram"),
    "rmsnorm_rope-qwen3-8b-t4096": ("eager", "triton", "supported", "dram", "dram"),
    "rmsnorm-eager-vs-triton-h200": ("eager", "triton", "supported", "dram", "dram"),
    "rmsnorm_linear-llama8b-qkv-m16": ("eager", "triton", "supported", "dram", "occupancy"),
    "fp8_gemm-llama8b-qkv-m4096": ("scaled_mm", "triton", "rejected", "tensor_core", "occupancy"),
}


@pytest.mark.parametrize("run", sorted(LAB_VERDICTS))
def test_lab_dataset_verdicts(store, run):
    """profkit compare on every before/after pair of the second capture round."""
    from profkit.compare import rows

    before, after, verdict, lb, la = LAB_VERDICTS[run]
    got = rows(store, f"{run}:{before}", f"{run}:{after}")
    assert len(got) == 1
    r = got[0]
    assert (r["verdict"], r["label_before"], r["label_after"]) == (verdict, lb, la)
    meta = json.loads(store.query("SELECT meta FROM runs WHERE run = ?", (run,))[0]["meta"])
    if verdict == "supported":
        assert all(c["ok"] for c in meta["correctness"].values())


def test_liger_and_triton_rmsnorm_are_within_noise(store):
    from profkit.compare import rows

    r = rows(store, "rmsnorm-eager-vs-triton-h200:liger", "rmsnorm-eager-vs-triton-h200:triton")[0]
    assert r["verdict"] == "caveated" and r["speedup_low"] < 1 < r["speedup_high"]


PROGRAMS = ("hf-llama-decode", "cuda-vector-ops")  # ordinary programs, tests/test_program_profiles.py


def test_every_folder_is_a_run_with_timeline_and_counters(store):
    runs = {r["run"]: r for r in store.query("SELECT run, gpu_name FROM runs")}
    assert set(runs) == {"known", "matmul-llama8b-qkv-m4096", "rmsnorm-eager-vs-triton-h200", "softmax-r32768-n4096",
                         "cuda-vs-triton-h200",
                         "e2e-prefill", "e2e-decode",  # these two: timeline only (tests/test_timeline.py)
                         "ddp-2gpu", "ddp-2gpu-slow",  # two ranks each (tests/test_ranks.py)
                         "sgemm-ladder-4096", "cuda-vs-triton-h200",  # tests/test_cuda_lab_profiles.py
                         *LAB_VERDICTS, *(run for rnd in PAIRED for run in rnd), *PROGRAMS}
    assert {r["gpu_name"] for r in runs.values()} == {"NVIDIA H200", "NVIDIA H100 80GB HBM3"}
    paired = {run for rnd in PAIRED for run in rnd}
    h200 = {r for r in paired if "-h200" in r}
    assert {r for r, v in runs.items() if v["gpu_name"] != "NVIDIA H200"} == paired - h200 | set(PROGRAMS)
    unlinked = store.query("SELECT run, count(*) n FROM kernels WHERE source = 'ncu' GROUP BY run")
    # every ncu launch found the timeline launch it profiled (rounds 2-9, 11-16: ncu-only captures, no timeline)
    assert {r["run"] for r in unlinked} <= {run for rnd in NCU_ONLY for run in rnd}


def test_rmsnorm_before_after(store):
    p = by_path(store, "rmsnorm-eager-vs-triton-h200")
    assert p["rmsnorm/eager/qwen7b-t4096"]["n"] == 24 and p["rmsnorm/triton/qwen7b-t4096"]["n"] == 3
    speedup = p["rmsnorm/eager/qwen7b-t4096"]["t"] / p["rmsnorm/triton/qwen7b-t4096"]["t"]
    assert 10 < speedup < 15  # 5108 us of eager kernels against 417 us of Triton (3 calls each)


def test_lab_labels(store):
    for run in ("rmsnorm-eager-vs-triton-h200", "softmax-r32768-n4096", "cuda-vs-triton-h200", "matmul-llama8b-qkv-m4096"):
        classify(store, run)
    rows = store.query("SELECT k.nvtx_path, c.label, k.duration_ns FROM classifications c JOIN kernels k USING (kernel_id) "
                       "WHERE k.nvtx_path IS NOT NULL AND c.run != 'known'")
    labels = {}
    for r in rows:
        labels.setdefault(r["nvtx_path"], set()).add(r["label"])
    for v in ("cublas", "tiled", "autotuned", "persistent_tma"):
        assert labels[f"matmul/{v}/llama8b-qkv-m4096"] == {"tensor_core"}
    for op in ("rmsnorm/triton/qwen7b-t4096", "softmax/triton/scores-r32768-n4096", "swiglu/triton/llama8b-t4096",
               "softmax/eager/scores-r32768-n4096", "swiglu/eager/llama8b-t4096"):
        assert labels[op] == {"dram"}, op
    assert labels["rmsnorm/eager/qwen7b-t4096"] == {"dram", "launch_overhead"}  # tiny weight casts


def test_capture_metadata_is_kept():
    meta = json.loads((PROFILES / "rmsnorm-eager-vs-triton-h200" / "capture.json").read_text())
    assert meta["gpu_name"] == "NVIDIA H200" and meta["driver"] == "580.159.04"
    assert meta["torch_version"].startswith("2.11") and meta["triton_version"] == "3.6.0"
    assert "ncu_version" in meta and "nsys_version" in meta and "rmsnorm" in meta["command"]


def test_cupti_tracer_sees_the_same_kernels_per_nvtx_range_as_nsys(tmp_path):
    """The same workload captured by the CUPTI tracer and by nsys on the H200 (2026-11-22),
    loaded into the same views: the same kernels under the same NVTX ranges."""
    from profkit.ingest import ingest

    db = str(tmp_path / "both.db")
    ingest(db, [DATA / "rmsnorm-cupti" / "rmsnorm-cupti.cupti.jsonl"], run="cupti")
    ingest(db, [DATA / "rmsnorm-cupti" / "rmsnorm-nsys.nsys.sqlite"], run="nsys")
    s = Store(db)
    try:
        per = {run: {(r["nvtx_path"], r["short_name"]): r["n"] for r in s.query(
            "SELECT nvtx_path, short_name, count(*) n FROM kernels WHERE run = ? GROUP BY 1, 2", (run,))}
            for run in ("cupti", "nsys")}
        assert per["cupti"] == per["nsys"]
        by_range = {}
        for (path, _), n in per["cupti"].items():
            by_range[path] = by_range.get(path, 0) + n
        assert by_range == {None: 22, "rmsnorm/eager/llama8b-t4096": 24, "rmsnorm/triton/llama8b-t4096": 3}
    finally:
        s.close()
    c = cupti_trace.parse(DATA / "rmsnorm-cupti" / "rmsnorm-cupti.cupti.jsonl")
    assert len(c.ranges) == 6  # op > variant > shape, twice: the markers reached the tracer


def test_nccl_kernels_are_communication(store):
    """The 2-GPU DDP captures: every NCCL kernel is labelled communication, nothing else is."""
    from profkit.classify import classify

    for run in ("ddp-2gpu", "ddp-2gpu-slow"):
        got = classify(store, run)
        nccl = [r for r in got if r["kernel_name"].lower().startswith("nccl")]
        assert len(nccl) == 74 and {r["label"] for r in nccl} == {"communication"}
        assert not [r for r in got if r["label"] == "communication" and r not in nccl]
