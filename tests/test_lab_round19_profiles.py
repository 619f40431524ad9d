"""Round 19 of the kernel lab (issue 21 item 3): the CUDA C++ fp8 GEMM (kernels/cuda/fp8_gemm.cu).
Two changes, each captured with `profkit capture fp8_gemm --variant ... --shape qwen7b-down-m1024
--metrics lean --no-nsys` on an H100 and an H200:
- the clusters numbered GPC by GPC where they land (steer, variant cuda_ws112_steer_tensor, pairs
  along M sharing B, GROUP_M 1) against round 18's plain launch (cuda_ws112_g2_tensor): rejected
  on both GPUs (benchmarks/gpu/round19.sh cap; runs -h100c, -h200a);
- the per-row scales loaded when a tile starts instead of one dependent load a column pair in the
  epilogue: the same variants captured before the change (the source of commit 86bb10a) and after
  it in one device call each (benchmarks/gpu/round19_scales.sh; runs -h100d-before/-after,
  -h200b-before/-after), so the pair spans two runs: per-row supported on both GPUs, per-tensor
  unchanged. benchmarks/results/gemm.md, "Round 19"."""
import pytest

from profdata import one_kernel_pairs, pair_row, runs_store, tensor_pipe as pipe, variant_counters

_RUN = "fp8_gemm-qwen7b-down-m1024-r19-"
_STEER = {"h100": _RUN + "h100c", "h200": _RUN + "h200a"}
_SCALES = {"h100": (_RUN + "h100d-before", _RUN + "h100d-after"), "h200": (_RUN + "h200b-before", _RUN + "h200b-after")}
RUNS = {  # run -> [(before, after, speed-up, verdict)] within the run
    _STEER["h100"]: [("cuda_ws112_g2_tensor", "cuda_ws112_steer_tensor", 0.959, "rejected"),
                     ("scaled_mm_tensor", "cuda_ws112_steer_tensor", 0.894, "rejected")],
    _STEER["h200"]: [("cuda_ws112_g2_tensor", "cuda_ws112_steer_tensor", 0.976, "rejected"),
                     ("scaled_mm_tensor", "cuda_ws112_steer_tensor", 0.905, "rejected")],
    _SCALES["h100"][0]: [],
    _SCALES["h100"][1]: [("scaled_mm", "cuda_ws112_g2", 1.075, "supported"), ("gluon_ws", "cuda_ws112_g2", 1.041, "supported")],
    _SCALES["h200"][0]: [],
    _SCALES["h200"][1]: [("scaled_mm", "cuda_ws112_g2", 1.045, "supported"), ("gluon_ws", "cuda_ws112_g2", 1.045, "supported")],
}
# the scales change, run to run: gpu -> [(variant, speed-up, verdict)]
CHANGE = {
    "h100": [("cuda_ws112_g2", 1.205, "supported"), ("cuda_ws112_g2_tensor", 0.976, "rejected")],
    "h200": [("cuda_ws112_g2", 1.111, "supported"), ("cuda_ws112_g2_tensor", 1.009, "caveated")],
}

store = runs_store("r19", RUNS)


test_round19_pairs = one_kernel_pairs(RUNS)


@pytest.mark.parametrize("gpu,variant,speedup,verdict", [(g, *c) for g, cs in CHANGE.items() for c in cs])
def test_scales_loaded_early_across_runs(store, gpu, variant, speedup, verdict):
    """One change, re-profiled: the same variant before (one run) and after (the next) the edit.
    Per-row gains (its epilogue waited on 28 scale loads in a row); per-tensor loads no scales and
    stays where it was."""
    before, after = _SCALES[gpu]
    pair_row(store, before, variant, variant, verdict, speedup, after_run=after)


def _us(store, run, variant):
    (t,) = store.query("SELECT avg(duration_ns) / 1e3 t FROM kernels WHERE run = ? AND source = 'ncu' AND "
                       "nvtx_path = ?", (run, f"fp8_gemm/{variant}/qwen7b-down-m1024"))
    return t["t"]


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_per_row_now_costs_what_per_tensor_costs(store, gpu):
    """Before the change per-row took 1.12-1.22x per-tensor's time with identical main loops (the
    mode is a runtime flag of one kernel); after it, within 3 %. The tensor pipe shows the same:
    per-row's is as busy as per-tensor's only after."""
    before, after = _SCALES[gpu]
    assert _us(store, before, "cuda_ws112_g2") > 1.1 * _us(store, before, "cuda_ws112_g2_tensor")
    assert _us(store, after, "cuda_ws112_g2") == pytest.approx(_us(store, after, "cuda_ws112_g2_tensor"), rel=0.03)
    assert pipe(store, before, "cuda_ws112_g2")[0] + 5 < pipe(store, after, "cuda_ws112_g2")[0]
    assert pipe(store, after, "cuda_ws112_g2")[0] == pytest.approx(pipe(store, after, "cuda_ws112_g2_tensor")[0], abs=3)


@pytest.mark.parametrize("run", list(_STEER.values()))
def test_steered_pairs_are_round_17s_launch_shape(store, run):
    """The steered variant launches clusters of two (B multicast along M) on the 132 SMs, the same
    CTAs as round 18's plain launch; only the tile each cluster takes differs."""
    for v, cluster in (("cuda_ws112_steer_tensor", 2), ("cuda_ws112_g2_tensor", 0)):
        for c in variant_counters(store, run, v):
            assert c["launch__grid_size"] == 132 and c["launch__block_size"] == 384
            assert c["launch__cluster_size"] == cluster and c["launch__registers_per_thread"] == 168
