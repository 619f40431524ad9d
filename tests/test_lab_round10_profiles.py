"""Round 10 of the kernel lab (issue 21 item 3): the helped fp8 launch at qwen7b-down-m1024,
captured with a timeline and counters (`profkit capture fp8_gemm --variant ... --shape
qwen7b-down-m1024 --metrics lean`, nsys + ncu, benchmarks/gpu/round10.sh fh) on an H100 (-h100a)
and an H200 (-h200a). Every pair is `rejected` (benchmarks/results/gemm.md, "Round 10"), and the
runs are the first real reports in profiles/ whose kernels overlap within one call: the helped
launch's main grid is a programmatic dependent of its helper grid, so a call's GPU time is the
union of the two grids' intervals, not the sum of their durations (profkit/analyses/compare.py)."""
import json

import pytest

from profdata import PROFILES, over_pairs, pair_row, runs_store
from profkit.analyses.compare import busy_ns, compare

RUNS = {  # run -> [(before, after, speed-up)], all rejected
    "fp8_gemm-qwen7b-down-m1024-r10-h100a": [("triton_promote_tensor", "triton_helped_tensor", 0.534),
                                             ("scaled_mm_tensor", "triton_helped_tensor", 0.461),
                                             ("triton_promote", "triton_helped", 0.524),
                                             ("scaled_mm", "triton_helped", 0.551)],
    "fp8_gemm-qwen7b-down-m1024-r10-h200a": [("triton_promote_tensor", "triton_helped_tensor", 0.593),
                                             ("scaled_mm_tensor", "triton_helped_tensor", 0.533),
                                             ("triton_promote", "triton_helped", 0.600),
                                             ("scaled_mm", "triton_helped", 0.577)],
}


store = runs_store("r10", RUNS)


@over_pairs(RUNS, "run,before,after,speedup")
def test_round10_pairs_are_rejected(store, run, before, after, speedup):
    r = pair_row(store, run, before, after, "rejected", speedup)
    assert r["after_detail"]["kernels_per_call"] == 2  # the helper grid and the main grid
    assert r["before_detail"]["counters"] and r["after_detail"]["counters"]


def test_overlapping_grids_count_once(store):
    """H100, triton_helped_tensor's third call: the main grid started 5.5 us before the helper
    grid ended. Its GPU time is the union of the two intervals (= the call's span: no gap), 5.5 us
    less than the sum of the durations; the other calls, one grid after the other, are the sums."""
    run = "fp8_gemm-qwen7b-down-m1024-r10-h100a"
    (c,) = compare(store, f"{run}:triton_promote_tensor", f"{run}:triton_helped_tensor")
    from profkit.analyses import selection

    (group,) = selection.groups(store, selection.parse(f"{run}:triton_helped_tensor")).values()
    calls = selection.iterations(group.kernels)
    sums = [sum(k["duration_ns"] for k in call) / 1e3 for call in calls]
    assert c.after.gpu_us == pytest.approx([busy_ns(call) / 1e3 for call in calls])
    overlap = [s - g for s, g in zip(sums, c.after.gpu_us)]
    assert overlap[0] == pytest.approx(0) and overlap[1] == pytest.approx(0)
    assert overlap[2] == pytest.approx(5.472, abs=0.01)
    assert c.after.gpu_us[2] == pytest.approx(c.after.span_us[2])
    helper, head = sorted(calls[2], key=lambda k: k["start_ns"])
    assert (helper["short_name"], head["short_name"]) == ("_fp8_gemm_pchunk", "_fp8_gemm_head")
    assert head["start_ns"] < helper["end_ns"]  # the dependent grid began before its primary ended


def test_on_the_h200_every_helped_call_overlaps(store):
    """H200: in each of the 6 helped calls the main grid started 16-44 us before the helper grid
    ended, and the call's GPU time is the sum of the durations less that overlap."""
    from profkit.analyses import selection

    run = "fp8_gemm-qwen7b-down-m1024-r10-h200a"
    for v in ("triton_helped_tensor", "triton_helped"):
        (c,) = compare(store, f"{run}:triton_promote", f"{run}:{v}")
        (group,) = selection.groups(store, selection.parse(f"{run}:{v}")).values()
        for call, gpu in zip(selection.iterations(group.kernels), c.after.gpu_us):
            helper, head = sorted(call, key=lambda k: k["start_ns"])
            overlap = (helper["end_ns"] - head["start_ns"]) / 1e3
            assert 16 < overlap < 45
            assert gpu == pytest.approx((helper["duration_ns"] + head["duration_ns"]) / 1e3 - overlap)


def test_busy_ns_is_the_union_of_intervals():
    ks = [{"start_ns": 0, "end_ns": 10}, {"start_ns": 5, "end_ns": 8}, {"start_ns": 8, "end_ns": 12},
          {"start_ns": 20, "end_ns": 25}]
    assert busy_ns(ks) == 17  # [0, 12] and [20, 25]
    assert busy_ns(list(reversed(ks))) == 17
    assert busy_ns([{"start_ns": 3, "end_ns": 9}]) == 6


def test_round10_runs_record_the_gpu_and_passing_checks():
    for run in RUNS:
        meta = json.loads((PROFILES / run / "capture.json").read_text())
        assert meta["gpu_name"] == ("NVIDIA H200" if "-h200" in run else "NVIDIA H100 80GB HBM3")
        assert meta["triton_version"] == "3.6.0" and meta["nsys_version"] and meta["ncu_version"]
        assert meta["correctness"] and all(c["ok"] for c in meta["correctness"].values())
        assert sum(f.stat().st_size for f in (PROFILES / run).iterdir()) < 560_000
