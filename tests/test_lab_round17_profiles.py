"""Round 17 of the kernel lab (issue 21 item 3): the fp8 GEMM's 128 x 112 tile in CUDA C++ with
cuBLAS's own instruction (wgmma m64n112k32) and clusters of two CTAs sharing B's tile by TMA
multicast (kernels/cuda/fp8_gemm.cu, variant cuda_ws112_tensor), aimed at the last per-tensor
cell short of _scaled_mm (qwen7b-down-m1024). Captured with `profkit capture fp8_gemm --variant
... --shape qwen7b-down-m1024 --metrics lean --no-nsys` (benchmarks/gpu/round17.sh cap) on an
H100 (-h100f) and an H200 (-h200a). Against the Gluon 128 x 128 kernel: rejected on the H100
(0.95x), supported on the H200 (1.02x); against cuBLAS rejected on both (0.85x / 0.91x).
benchmarks/results/gemm.md, "Round 17"."""
import pytest

from profdata import one_kernel_pairs, runs_store, tensor_pipe as pipe, variant_counters

_H100, _H200 = "fp8_gemm-qwen7b-down-m1024-r17-h100f", "fp8_gemm-qwen7b-down-m1024-r17-h200a"
RUNS = {  # run -> [(before, after, speed-up, verdict)]
    _H100: [("gluon_ws_tensor", "cuda_ws112_tensor", 0.954, "rejected"),
            ("scaled_mm_tensor", "cuda_ws112_tensor", 0.847, "rejected")],
    _H200: [("gluon_ws_tensor", "cuda_ws112_tensor", 1.022, "supported"),
            ("scaled_mm_tensor", "cuda_ws112_tensor", 0.909, "rejected")],
}

store = runs_store("r17", RUNS)


test_round17_pairs = one_kernel_pairs(RUNS)


@pytest.mark.parametrize("run", list(RUNS))
def test_launched_as_cublas_is_in_clusters_of_two(store, run):
    """The launch the kernel was built to match: cuBLAS's (nvjet ..._112x128_128x7_2x1_...) is
    132 CTAs of 384 threads in 66 clusters of two; so is ours (seven 30 KB stages: 211 KB of
    dynamic shared memory), where the Gluon kernel runs no clusters."""
    for v in ("cuda_ws112_tensor", "scaled_mm_tensor"):
        for c in variant_counters(store, run, v):
            assert c["launch__grid_size"] == 132 and c["launch__block_size"] == 384
            assert c["launch__cluster_size"] == 2 and c["launch__cluster_max_active"] == 66
    for c in variant_counters(store, run, "cuda_ws112_tensor"):
        assert c["launch__registers_per_thread"] == 168
        assert 7 * (16384 + 14336) <= c["launch__shared_mem_per_block_dynamic"] < 7 * (16384 + 14336) + 2048
    assert all(c["launch__cluster_size"] == 0 for c in variant_counters(store, run, "gluon_ws_tensor"))


@pytest.mark.parametrize("run", list(RUNS))
def test_single_wgmma_112_tiles_balance_the_sms_and_keep_the_pipe_busier_than_round_16(store, run):
    """What the one-instruction tile fixed: the busiest SM's tensor pipe within 4 points of the
    mean (the 128 x 128 kernel: 13), and the mean above round 16's three-chain tile (~68 %) on
    both GPUs; what it did not: cuBLAS's pipe is busier still on every SM (87-88 % mean), by 14
    points on the H100 and 7 on the H200 (the consumers wait on the stages' `full` barriers:
    benchmarks/results/r17/probe4)."""
    avg, top = pipe(store, run, "cuda_ws112_tensor")
    avg128, top128 = pipe(store, run, "gluon_ws_tensor")
    avg_cb, _ = pipe(store, run, "scaled_mm_tensor")
    assert top - avg < 4 < 10 < top128 - avg128
    assert 70 < avg < top < 85 < avg_cb
    assert 5 < avg_cb - avg < 17


@pytest.mark.parametrize("run", list(RUNS))
def test_dram_reads_as_the_others(store, run):
    """DRAM reads within 2 % of the Gluon kernel's and cuBLAS's: the loss is not in DRAM."""
    from profkit.core.metrics import lookup

    def reads(v):
        r = [lookup(c, "dram_read_bytes") for c in variant_counters(store, run, v)]
        return sum(r) / len(r)

    assert reads("cuda_ws112_tensor") == pytest.approx(reads("gluon_ws_tensor"), rel=0.02)
    assert reads("cuda_ws112_tensor") == pytest.approx(reads("scaled_mm_tensor"), rel=0.02)
