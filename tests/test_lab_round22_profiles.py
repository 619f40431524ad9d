"""Round 22 of the kernel lab (issue 21 item 3): the CUDA C++ fp8 GEMM between its tiles
(kernels/cuda/fp8_gemm.cu). Round 21's clock64 stamps left 0.7 K cycles between a consumer's tiles,
1.4-1.5 K before its first k loop and 0.5 K after its last store. One edit took all three on: the
tensor maps prefetched at the kernel's start, the next tile's coordinates computed under the first
k tile's MMAs, and the kernel's end waiting for the stores' reads only. The registered variants
were captured before (the source of commit a84dbcf) and after the edit in one H100 call
(benchmarks/gpu/fp8_edit_pair.sh script,cap r22 h100a; runs -h100a-before/-after), so the pair
spans two runs. Rejected in both scale modes: the gap between tiles fell from 0.67 K to 0.38 K
cycles, but the k loops ran 1-2 K cycles a tile slower with the division in them
(benchmarks/results/gemm.md, "Round 22"); the source is back to a84dbcf's.
Then the cell itself, cuBLAS against cuda_ws112_tma8, captured with `--calls 12` (new in this round:
from 10 calls a side profkit compare's band is a bootstrap interval, not a range) on an H100 and
an H200 (runs -h100e, -h200a): per-tensor cuBLAS is ahead by 0.8-1.4 %, its interval clear of 1 on
both GPUs; per-row the kernel is 1.12-1.16x."""
import pytest

from profdata import one_kernel_pairs, pair_row, runs_store, tensor_pipe

_RUN = "fp8_gemm-qwen7b-down-m1024-r22-h100a-"
BEFORE, AFTER = _RUN + "before", _RUN + "after"
RUNS = {  # run -> [(before, after, speed-up, verdict)]
    BEFORE: [],
    AFTER: [("scaled_mm_tensor", "cuda_ws112_tma8_tensor", 0.979, "rejected"),
            ("scaled_mm", "cuda_ws112_tma8", 1.126, "supported")],
}
CELL = {"fp8_gemm-qwen7b-down-m1024-r22-" + gpu: [("scaled_mm_tensor", "cuda_ws112_tma8_tensor", sp_t, "rejected"),
                                                  ("scaled_mm", "cuda_ws112_tma8", sp_r, "supported")]
        for gpu, sp_t, sp_r in (("h100e", 0.9925, 1.1556), ("h200a", 0.9857, 1.1180))}
RUNS.update(CELL)
# the cells the summary called ties (0.99-1.00x of the better peer), 12 calls a side
# (benchmarks/gpu/round22_ties.sh h100|h200): run -> [(before, after, speed-up, verdict)]
TIES = {
    "softmax-scores-r65536-n1024-r22-h100f": [("liger", "triton", 1.0071, "caveated"),
                                              ("compile", "triton", 1.0015, "caveated")],
    "fp8_gemm-m8192-n8192-k8192-r22-h100f": [("scaled_mm_tensor", "triton_promote_tensor", 0.9792, "rejected"),
                                             ("scaled_mm_tensor", "gluon_ws_tensor", 0.9722, "rejected")],
    "rmsnorm-llama8b-t32768-r22-h200b": [("liger", "triton", 0.9952, "rejected"),
                                         ("compile", "triton", 1.1226, "supported")],
    "softmax-scores-r32768-n4096-r22-h200b": [("liger", "triton", 1.0163, "supported"),
                                              ("compile", "triton", 2.4562, "supported")],
    "rope-llama8b-t32768-r22-h200b": [("liger", "triton", 1.0256, "supported"),
                                      ("compile", "triton", 0.9841, "rejected")],
    "fp8_gemm-m8192-n8192-k8192-r22-h200b": [("scaled_mm_tensor", "triton_promote_tensor", 0.9699, "rejected"),
                                             ("scaled_mm_tensor", "gluon_ws_tensor", 0.9584, "rejected")],
}
RUNS.update(TIES)
# the edit, run to run: [(variant, speed-up, verdict)]
CHANGE = [("cuda_ws112_tma8_tensor", 0.992, "rejected"), ("cuda_ws112_tma8", 0.990, "rejected")]

store = runs_store("r22", RUNS)

test_round22_pairs = one_kernel_pairs(RUNS)


@pytest.mark.parametrize("variant,speedup,verdict", CHANGE)
def test_between_tiles_edit_across_runs(store, variant, speedup, verdict):
    """One change, re-profiled: the same registered variant before (one run) and after (the next)
    the edit, no faster in either scale mode."""
    pair_row(store, BEFORE, variant, variant, verdict, speedup, after_run=AFTER)


@pytest.mark.parametrize("variant", ["cuda_ws112_tma8_tensor", "cuda_ws112_tma8"])
def test_the_edit_left_the_pipe_less_busy(store, variant):
    """Why it lost, in the counters: the busiest SM's tensor pipe is active a smaller share of the
    kernel after the edit (the stamps put the loss in the k loops, not between the tiles)."""
    assert tensor_pipe(store, AFTER, variant)[1] < tensor_pipe(store, BEFORE, variant)[1] - 0.5


@pytest.mark.parametrize("run,before,after", [(run, b, a) for run, ps in {**CELL, **TIES}.items() for b, a, _, _ in ps])
def test_twelve_calls_a_side_give_bootstrap_bands(store, run, before, after):
    """Every pair captured with --calls 12 has 12 calls a side and a bootstrap band, which puts a
    number on what the summary called ties: e.g. RoPE at 32768 tokens on the H200 is 0.984x of
    compile [0.978-0.990], a loss, and the softmax at 32768 x 4096 there 1.016x of Liger
    [1.012-1.026], a win."""
    from profkit.analyses.compare import rows

    (row,) = rows(store, f"{run}:{before}", f"{run}:{after}")
    assert "bootstrap" in row["band_method"] and row["before_detail"]["calls"] == row["after_detail"]["calls"] == 12
    assert row["speedup_low"] <= row["speedup"] <= row["speedup_high"]


@pytest.mark.parametrize("run", list(CELL))
def test_twelve_calls_a_side_give_a_bootstrap_interval_clear_of_one(store, run):
    """With 12 calls a side the band is the bootstrap's, and it settles what three calls could not:
    per-tensor cuBLAS is faster (the interval's top under 1), per-row the kernel is (its bottom
    over 1.1)."""
    from profkit.analyses.compare import rows

    (t,) = rows(store, f"{run}:scaled_mm_tensor", f"{run}:cuda_ws112_tma8_tensor")
    (r,) = rows(store, f"{run}:scaled_mm", f"{run}:cuda_ws112_tma8")
    for row in (t, r):
        assert "bootstrap" in row["band_method"] and row["before_detail"]["calls"] == row["after_detail"]["calls"] == 12
    assert t["speedup_high"] < 1.0 and r["speedup_low"] > 1.1
