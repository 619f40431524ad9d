"""Round 15 of the kernel lab (issue 21 item 3): the fp8 GEMM warp-specialized in Gluon
(kernels/fp8_gemm_ws.py, variants gluon_ws / gluon_ws_tensor, and the stream-K option
gluon_ws_sk_tensor). Captured with `profkit capture fp8_gemm --variant ... --shape S --metrics
lean --no-nsys` (benchmarks/gpu/round15.sh cap) on an H200 (-h200a) and an H100 (-h100c, -h100d).
v3 -> gluon_ws is supported at both shapes on both GPUs (per-tensor 8192^3 on the H100 aside);
_scaled_mm -> gluon_ws is supported per-row at qwen7b-down-m1024 on both GPUs and at 8192^3 on
the H100, rejected per-tensor at qwen7b-down-m1024 (0.89-0.90x: 224 tiles of 128 x 128 in 1.7
waves, cuBLAS's 112-wide tiles fill 1.94) and within 1-3 % at 8192^3 otherwise; stream-K of the
partial wave is rejected (0.82x: it reads 2.2x the DRAM bytes). benchmarks/results/gemm.md,
"Round 15"."""
import pytest

from profdata import one_kernel_pairs, runs_store, variant_counters

_QW_H200, _BIG_H200 = "fp8_gemm-qwen7b-down-m1024-r15-h200a", "fp8_gemm-m8192-n8192-k8192-r15-h200a"
_QW_H100, _BIG_H100 = "fp8_gemm-qwen7b-down-m1024-r15-h100c", "fp8_gemm-m8192-n8192-k8192-r15-h100d"
RUNS = {  # run -> [(before, after, speed-up, verdict)]
    _QW_H200: [("triton_promote", "gluon_ws", 1.037, "supported"), ("scaled_mm", "gluon_ws", 1.019, "supported"),
               ("triton_promote_tensor", "gluon_ws_tensor", 1.036, "supported"),
               ("scaled_mm_tensor", "gluon_ws_tensor", 0.904, "rejected")],
    _BIG_H200: [("triton_promote", "gluon_ws", 1.028, "supported"), ("scaled_mm", "gluon_ws", 0.994, "rejected"),
                ("triton_promote_tensor", "gluon_ws_tensor", 1.011, "supported"),
                ("scaled_mm_tensor", "gluon_ws_tensor", 0.985, "rejected")],
    _QW_H100: [("triton_promote", "gluon_ws", 1.028, "supported"), ("scaled_mm", "gluon_ws", 1.064, "supported"),
               ("triton_promote_tensor", "gluon_ws_tensor", 1.009, "supported"),
               ("scaled_mm_tensor", "gluon_ws_tensor", 0.887, "rejected"),
               ("gluon_ws_tensor", "gluon_ws_sk_tensor", 0.824, "rejected")],
    _BIG_H100: [("triton_promote", "gluon_ws", 1.020, "supported"), ("scaled_mm", "gluon_ws", 1.128, "supported"),
                ("triton_promote_tensor", "gluon_ws_tensor", 0.985, "rejected"),
                ("scaled_mm_tensor", "gluon_ws_tensor", 0.967, "rejected")],
}

store = runs_store("r15", RUNS)


test_round15_pairs = one_kernel_pairs(RUNS)


@pytest.mark.parametrize("run", list(RUNS))
def test_warp_specialized_launch(store, run):
    """One persistent program an SM, 384 threads (two consumer warpgroups and the loader's,
    setmaxnreg'd from 168 registers), one CTA an SM by its ~197 KB ring: the launch shape
    cuBLAS's own fp8 kernel has here; v3 runs 256 threads at 255 registers."""
    for v in ("gluon_ws", "gluon_ws_tensor"):
        for c in variant_counters(store, run, v):
            assert c["launch__grid_size"] == c["launch__sm_count"] == 132
            assert c["launch__block_size"] == 384 and c["launch__registers_per_thread"] == 168
            assert 5 * 32768 + 2 * 16384 <= c["launch__shared_mem_per_block_dynamic"] < 200_000  # 5 stages + 2 C tiles
    for c in variant_counters(store, run, "scaled_mm_tensor"):
        assert c["launch__block_size"] == 384 and c["launch__registers_per_thread"] == 168
    for c in variant_counters(store, run, "triton_promote_tensor"):
        assert c["launch__block_size"] == 256 and c["launch__registers_per_thread"] == 255


def test_stream_k_reads_twice_the_dram_bytes(store):
    """Why stream-K lost (0.82x) though it balances the k iterations (252 a program against 296):
    its programs start the partial wave's tiles at scattered k, so they no longer share A and B
    panels through the L2 in step: DRAM reads 2.2x the data-parallel kernel's (which reads about
    what cuBLAS does), on top of the partials' hand-over."""
    from profkit.core.metrics import lookup

    def reads(v):
        r = [lookup(c, "dram_read_bytes") for c in variant_counters(store, _QW_H100, v)]
        return sum(r) / len(r)

    dp, sk, cublas = reads("gluon_ws_tensor"), reads("gluon_ws_sk_tensor"), reads("scaled_mm_tensor")
    assert 2.1 < sk / dp < 2.4
    assert dp == pytest.approx(cublas, rel=0.03)
    minimum = 1024 * 18944 + 3584 * 18944  # A and B once, fp8
    assert 1.2 < dp / minimum < 1.3
