"""Round 16 of the kernel lab (issue 21 item 3): the fp8 GEMM's 128 x 112 tile, built from three
wgmma chains (64 + 32 + 16 columns) with A read into registers (kernels/fp8_gemm_ws112.py,
variant gluon_ws112_tensor), aimed at the last per-tensor cell short of _scaled_mm
(qwen7b-down-m1024). Captured with `profkit capture fp8_gemm --variant ... --shape
qwen7b-down-m1024 --metrics lean --no-nsys` (benchmarks/gpu/round16.sh cap) on an H100 (-h100f)
and an H200 (-h200a). Rejected on both: 0.92x of the 128 x 128 kernel, 0.81x of cuBLAS.
benchmarks/results/gemm.md, "Round 16"."""
import pytest

from profdata import one_kernel_pairs, runs_store, tensor_pipe as pipe, variant_counters

_H100, _H200 = "fp8_gemm-qwen7b-down-m1024-r16-h100f", "fp8_gemm-qwen7b-down-m1024-r16-h200a"
RUNS = {  # run -> [(before, after, speed-up, verdict)]
    _H100: [("gluon_ws_tensor", "gluon_ws112_tensor", 0.920, "rejected"),
            ("scaled_mm_tensor", "gluon_ws112_tensor", 0.811, "rejected")],
    _H200: [("gluon_ws_tensor", "gluon_ws112_tensor", 0.918, "rejected"),
            ("scaled_mm_tensor", "gluon_ws112_tensor", 0.814, "rejected")],
}

store = runs_store("r16", RUNS)


test_round16_pairs = one_kernel_pairs(RUNS)


@pytest.mark.parametrize("run", list(RUNS))
def test_112_wide_tiles_balance_the_sms_but_keep_the_tensor_pipe_less_busy(store, run):
    """Why it lost though it does what cuBLAS does with the waves: 256 tiles of 128 x 112 spread
    the tensor pipe's work evenly (busiest SM within 4 points of the mean; the 128 x 128
    kernel's 224 tiles leave 92 SMs with one tile fewer: 13 points), but the pipe is active only
    about 68 % of the time on every SM, against 87 % on the 128 x 128 kernel's busiest SMs and
    on cuBLAS's: the n32 and n16 wgmma of the narrow chains do less work per instruction."""
    avg112, top112 = pipe(store, run, "gluon_ws112_tensor")
    avg128, top128 = pipe(store, run, "gluon_ws_tensor")
    avg_cb, top_cb = pipe(store, run, "scaled_mm_tensor")
    assert top112 - avg112 < 4 < 10 < top128 - avg128
    assert 60 < avg112 < top112 < 75 < 84 < top128 and 84 < top_cb
    assert avg_cb - avg112 > 15


@pytest.mark.parametrize("run", list(RUNS))
def test_launch_and_dram_bytes_as_the_128_wide_kernel(store, run):
    """The same launch shape (one 384-thread program an SM at 168 registers, six 30 KB stages and
    six C blocks: 213 KB) and the same DRAM reads as the 128 x 128 kernel within 2 %: the loss is
    not in the memory system."""
    from profkit.core.metrics import lookup

    for c in variant_counters(store, run, "gluon_ws112_tensor"):
        assert c["launch__grid_size"] == c["launch__sm_count"] == 132
        assert c["launch__block_size"] == 384 and c["launch__registers_per_thread"] == 168
        assert 6 * (16384 + 14336) + 2 * 64 * 112 * 2 <= c["launch__shared_mem_per_block_dynamic"] < 227 * 1024

    def reads(v):
        r = [lookup(c, "dram_read_bytes") for c in variant_counters(store, run, v)]
        return sum(r) / len(r)

    assert reads("gluon_ws112_tensor") == pytest.approx(reads("gluon_ws_tensor"), rel=0.02)
