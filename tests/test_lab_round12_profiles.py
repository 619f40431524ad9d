"""Round 12 of the kernel lab (issue 21 item 1): softmax over vocabulary rows, captured with
`profkit capture softmax --variant triton_r11 --variant triton_pf --variant triton --variant compile
--shape S --metrics lean --no-nsys` (benchmarks/gpu/round12.sh sm2) on an H100 (-h100b) and an H200
(-h200b). Two changes, each its own pair: the row-group launches with an L2 bulk prefetch among the
tuner's candidates (triton_r11 -> triton_pf), then exp2 with the log2(e) scale fused (triton_pf ->
triton). -h200c (round12.sh sm3) holds the rejected third change, the chunks inside a row loaded
without a mask: there it was named `triton` and the two changes before it `triton_exp2` (today's
`triton_full` and `triton`). Verdicts under ncu (one kernel at a time, caches flushed); the
graph-replay figures are in benchmarks/results/kernels.md, "Round 12"."""
import pytest

from profdata import over_pairs, pair_row, runs_store, variant_counters

_H100 = "softmax-{}-r12-h100b"
_H200 = "softmax-{}-r12-h200b"
_REJ = "softmax-{}-r12-h200c"
LL, QW = "llama3vocab-t2048", "qwen7bvocab-t1024"
RUNS = {  # run -> [(before, after, speed-up, verdict)]
    _H100.format(LL): [("triton_r11", "triton_pf", 1.014, "supported"), ("triton_pf", "triton", 1.014, "supported"),
                       ("triton_r11", "triton", 1.028, "supported"), ("compile", "triton", 1.701, "supported")],
    _H100.format(QW): [("triton_r11", "triton_pf", 1.022, "supported"), ("triton_pf", "triton", 1.019, "supported"),
                       ("triton_r11", "triton", 1.042, "supported"), ("compile", "triton", 1.761, "supported")],
    _H200.format(LL): [("triton_r11", "triton_pf", 1.008, "supported"), ("triton_pf", "triton", 1.038, "supported"),
                       ("triton_r11", "triton", 1.046, "supported"), ("compile", "triton", 2.028, "supported")],
    _H200.format(QW): [("triton_r11", "triton_pf", 1.005, "caveated"), ("triton_pf", "triton", 1.053, "supported"),
                       ("triton_r11", "triton", 1.058, "supported"), ("compile", "triton", 2.042, "supported")],
    _REJ.format(LL): [("triton_r11", "triton_pf", 0.995, "rejected"), ("triton_pf", "triton_exp2", 1.032, "supported"),
                      ("triton_exp2", "triton", 0.881, "rejected"), ("compile", "triton", 1.776, "supported")],
    _REJ.format(QW): [("triton_r11", "triton_pf", 1.006, "caveated"), ("triton_pf", "triton_exp2", 1.043, "supported"),
                      ("triton_exp2", "triton", 0.821, "rejected"), ("compile", "triton", 1.661, "supported")],
}


store = runs_store("r12", RUNS)


@over_pairs(RUNS)
def test_round12_pairs(store, run, before, after, speedup, verdict):
    r = pair_row(store, run, before, after, verdict, speedup)
    # the lab's call: the row slots' fill and the row-group kernel; compile's: one fused reduction
    assert r["before_detail"]["kernels_per_call"] == (1 if before == "compile" else 2)
    assert r["after_detail"]["kernels_per_call"] == 2


def test_changes_move_the_same_dram_bytes(store):
    """Neither change moves DRAM bytes (ncu, cold L2): the prefetch brings the lines the loads then
    read, exp2 is arithmetic; every lab variant reads each row once (the minimum: rows x N x 2 B)."""
    from profkit.core.metrics import lookup

    for shape, n_rows, n in ((LL, 2048, 128256), (QW, 1024, 152064)):
        for run in (_H100.format(shape), _H200.format(shape)):
            mb = {}
            for v in ("triton_r11", "triton_pf", "triton"):
                reads = [lookup(c, "dram_read_bytes") for c in variant_counters(store, run, v, "_softmax_rowgroup")]
                mb[v] = sum(reads) / len(reads) / 1e6
            assert mb["triton_pf"] == pytest.approx(mb["triton_r11"], rel=0.002), run
            assert mb["triton"] == pytest.approx(mb["triton_r11"], rel=0.002), run
            assert mb["triton"] == pytest.approx(n_rows * n * 2 / 1e6, rel=0.01), run
