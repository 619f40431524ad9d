"""Round 11 of the kernel lab (issue 21 item 1): RoPE at many tokens, captured with `profkit
capture rope --variant triton_r10 --variant triton_fp32tab --variant triton --variant liger
--variant compile --shape S --metrics lean --no-nsys` (benchmarks/gpu/round11.sh rp2) on an H100
(-h100d) and an H200 (-h200c). Two changes, each its own pair: every load of a token before any
store (triton_r10 -> triton_fp32tab), then cos/sin tables in the model's dtype (triton_fp32tab ->
triton); and the final kernel against Liger and torch.compile. Verdicts under ncu (one kernel at a
time, caches flushed); the graph-replay figures are in benchmarks/results/kernels.md, "Round 11"."""
import pytest

from profdata import over_pairs, pair_row, runs_store, variant_counters

_H100 = "rope-{}-r11-h100d"
_H200 = "rope-{}-r11-h200c"
RUNS = {  # run -> [(before, after, speed-up, verdict)]
    _H100.format("llama8b-t4096"): [("triton_r10", "triton_fp32tab", 1.040, "supported"),
                                    ("triton_fp32tab", "triton", 0.972, "rejected"),
                                    ("triton_r10", "triton", 1.012, "supported"),
                                    ("liger", "triton", 0.968, "rejected"),
                                    ("compile", "triton", 1.022, "supported")],
    _H100.format("qwen7b-t4096"): [("triton_r10", "triton_fp32tab", 1.006, "caveated"),
                                   ("triton_fp32tab", "triton", 1.044, "supported"),
                                   ("triton_r10", "triton", 1.050, "supported"),
                                   ("liger", "triton", 0.982, "rejected"),
                                   ("compile", "triton", 1.157, "supported")],
    _H100.format("llama8b-t32768"): [("triton_r10", "triton_fp32tab", 1.005, "supported"),
                                     ("triton_fp32tab", "triton", 1.018, "supported"),
                                     ("triton_r10", "triton", 1.022, "supported"),
                                     ("liger", "triton", 1.026, "supported"),
                                     ("compile", "triton", 0.998, "rejected")],
    _H200.format("llama8b-t4096"): [("triton_r10", "triton_fp32tab", 1.024, "supported"),
                                    ("triton_fp32tab", "triton", 1.022, "supported"),
                                    ("triton_r10", "triton", 1.047, "supported"),
                                    ("liger", "triton", 0.997, "rejected"),
                                    ("compile", "triton", 1.148, "supported")],
    _H200.format("qwen7b-t4096"): [("triton_r10", "triton_fp32tab", 1.033, "caveated"),
                                   ("triton_fp32tab", "triton", 1.017, "caveated"),
                                   ("triton_r10", "triton", 1.051, "supported"),
                                   ("liger", "triton", 1.000, "rejected"),
                                   ("compile", "triton", 1.216, "supported")],
    _H200.format("llama8b-t32768"): [("triton_r10", "triton_fp32tab", 0.995, "rejected"),
                                     ("triton_fp32tab", "triton", 1.014, "supported"),
                                     ("triton_r10", "triton", 1.009, "supported"),
                                     ("liger", "triton", 1.033, "supported"),
                                     ("compile", "triton", 0.989, "rejected")],
}


store = runs_store("r11", RUNS)


@over_pairs(RUNS)
def test_round11_pairs(store, run, before, after, speedup, verdict):
    r = pair_row(store, run, before, after, verdict, speedup)
    assert r["before_detail"]["kernels_per_call"] == (2 if before == "compile" else 1)  # compile: q and k apart


def test_bf16_tables_move_fewer_bytes(store):
    """The bytes behind the second change (ncu, 32768 tokens, cold L2): the fp32 tables are 16.8 MB
    (32768 positions x 64 x 4 B x 2) of DRAM reads, the bf16 ones half that; the program order
    (triton_r10 -> triton_fp32tab) moves the same bytes."""
    from profkit.core.metrics import lookup

    for run in (_H100.format("llama8b-t32768"), _H200.format("llama8b-t32768")):
        mb = {}
        for v in ("triton_r10", "triton_fp32tab", "triton"):
            reads = [lookup(c, "dram_read_bytes") for c in variant_counters(store, run, v)]
            mb[v] = sum(reads) / len(reads) / 1e6  # one kernel a call
        assert mb["triton_r10"] == pytest.approx(mb["triton_fp32tab"], abs=0.1)
        assert mb["triton_fp32tab"] - mb["triton"] == pytest.approx(8.39, abs=0.1)
