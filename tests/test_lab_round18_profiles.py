"""Round 18 of the kernel lab (issue 21 item 3): the CUDA C++ fp8 GEMM's 128 x 112 tile
(kernels/cuda/fp8_gemm.cu) launched without a cluster attribute, so that the SMs of one GPC take
neighbouring tiles and the L2 request coalescer merges their identical reads (variant
cuda_ws112_g2_tensor: no cluster, GROUP_M 2), against round 17's clusters of two sharing B by
multicast (cuda_ws112_tensor). Captured with `profkit capture fp8_gemm --variant ... --shape
qwen7b-down-m1024 --metrics lean --no-nsys` (benchmarks/gpu/round18.sh cap) on an H100 (-h100i)
and an H200 (-h200a): supported against round 17's build and the Gluon kernel on both GPUs,
rejected against cuBLAS on both (0.93x / 0.94x). benchmarks/results/gemm.md, "Round 18"."""
import pytest

from profdata import one_kernel_pairs, runs_store, tensor_pipe as pipe, variant_counters

_H100, _H200 = "fp8_gemm-qwen7b-down-m1024-r18-h100i", "fp8_gemm-qwen7b-down-m1024-r18-h200a"
_AFTER = "cuda_ws112_g2_tensor"
RUNS = {  # run -> [(before, after, speed-up, verdict)]
    _H100: [("cuda_ws112_tensor", _AFTER, 1.138, "supported"), ("gluon_ws_tensor", _AFTER, 1.056, "supported"),
            ("scaled_mm_tensor", _AFTER, 0.933, "rejected")],
    _H200: [("cuda_ws112_tensor", _AFTER, 1.037, "supported"), ("gluon_ws_tensor", _AFTER, 1.043, "supported"),
            ("scaled_mm_tensor", _AFTER, 0.940, "rejected")],
}

store = runs_store("r18", RUNS)


test_round18_pairs = one_kernel_pairs(RUNS)


@pytest.mark.parametrize("run", list(RUNS))
def test_the_change_is_the_launch_not_the_tile(store, run):
    """Both builds run the same 132 persistent CTAs of 384 threads and seven 30 KB stages; round
    18's is launched without a cluster attribute (ncu: cluster size 0), round 17's in clusters of
    two."""
    for v, cluster in ((_AFTER, 0), ("cuda_ws112_tensor", 2)):
        for c in variant_counters(store, run, v):
            assert c["launch__grid_size"] == 132 and c["launch__block_size"] == 384
            assert c["launch__cluster_size"] == cluster and c["launch__registers_per_thread"] == 168
            assert 7 * (16384 + 14336) <= c["launch__shared_mem_per_block_dynamic"] < 7 * (16384 + 14336) + 2048


@pytest.mark.parametrize("run", list(RUNS))
def test_the_tensor_pipe_is_busier_than_round_17s_and_gluons_not_cublas(store, run):
    """Where the time went: the stages arrive sooner when the L2 serves fewer sectors, so the
    tensor pipe is busier than in round 17's build and the Gluon kernel's on both GPUs; cuBLAS's
    is busier still (it multicasts A in pairs and the coalescer merges much of the rest:
    benchmarks/results/r18/h100e)."""
    avg, _ = pipe(store, run, _AFTER)
    avg17, _ = pipe(store, run, "cuda_ws112_tensor")
    avg_gl, _ = pipe(store, run, "gluon_ws_tensor")
    avg_cb, _ = pipe(store, run, "scaled_mm_tensor")
    assert max(avg17, avg_gl) + 2 < avg < avg_cb
