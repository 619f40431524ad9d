"""Round 13 of the kernel lab (issue 21 item 1): softmax over vocabulary rows on the H200, captured
with `profkit capture softmax --variant triton_r12 --variant triton --variant triton_h2 --variant
triton_ff --variant compile --shape S --metrics lean --no-nsys` (benchmarks/gpu/round13.sh cap) on
an H200 (-h200c) and an H100 (-h100a). Three changes, each its own pair:
- triton_r12 -> triton: each thread's exponentials against its own max among the tuner's
  launches (a tie: 0.998-1.005x);
- triton -> triton_h2: the held exponentials in bf16, 5 programs an SM where 4 fitted (supported
  on the H200 at 2048 x 128256 only; a second rounding, so opt-in); -h200e (round13.sh h2, H200):
  the same with the registers capped among triton_h2's launches, supported at both shapes (-h100b:
  the H100, a tie);
- triton -> triton_ff: the late finish before the next row's reduce, registers capped (rejected,
  0.82-0.90x).
Verdicts under ncu (one kernel at a time, caches flushed); graph-replay figures in
benchmarks/results/kernels.md, "Round 13"."""
import pytest

from profdata import over_pairs, pair_row, runs_store, variant_counters

_H200 = "softmax-{}-r13-h200c"
_H100 = "softmax-{}-r13-h100a"
_H2CAP = "softmax-{}-r13-h200e"  # the bf16 hold's launches with the registers capped among its candidates
_H2CAP100 = "softmax-{}-r13-h100b"  # the same on the H100
LL, QW = "llama3vocab-t2048", "qwen7bvocab-t1024"
RUNS = {  # run -> [(before, after, speed-up, verdict)]
    _H200.format(LL): [("triton_r12", "triton", 0.999, "rejected"), ("triton", "triton_h2", 1.041, "supported"),
                       ("triton", "triton_ff", 0.818, "rejected"), ("compile", "triton", 2.032, "supported")],
    _H200.format(QW): [("triton_r12", "triton", 1.003, "caveated"), ("triton", "triton_h2", 0.992, "rejected"),
                       ("triton", "triton_ff", 0.825, "rejected"), ("compile", "triton", 2.047, "supported")],
    _H100.format(LL): [("triton_r12", "triton", 0.998, "rejected"), ("triton", "triton_h2", 1.002, "caveated"),
                       ("triton", "triton_ff", 0.899, "rejected"), ("compile", "triton", 1.704, "supported")],
    _H100.format(QW): [("triton_r12", "triton", 1.005, "supported"), ("triton", "triton_h2", 0.985, "rejected"),
                       ("triton", "triton_ff", 0.894, "rejected"), ("compile", "triton", 1.757, "supported")],
    _H2CAP.format(LL): [("triton", "triton_h2", 1.040, "supported"), ("compile", "triton_h2", 2.110, "supported")],
    _H2CAP.format(QW): [("triton", "triton_h2", 1.021, "supported"), ("compile", "triton_h2", 2.074, "supported")],
    _H2CAP100.format(LL): [("triton", "triton_h2", 1.002, "caveated"), ("compile", "triton_h2", 1.706, "supported")],
    _H2CAP100.format(QW): [("triton", "triton_h2", 1.000, "caveated"), ("compile", "triton_h2", 1.753, "supported")],
}


store = runs_store("r13", RUNS)


@over_pairs(RUNS)
def test_round13_pairs(store, run, before, after, speedup, verdict):
    r = pair_row(store, run, before, after, verdict, speedup)
    # the lab's call: the row slots' fill and the row-group kernel; compile's: one fused reduction
    assert r["before_detail"]["kernels_per_call"] == (1 if before == "compile" else 2)
    assert r["after_detail"]["kernels_per_call"] == 2


def test_capped_bf16_hold_fits_five_programs_at_152064(store):
    """-h200e at 1024 x 152064: triton's launch is 8192 columns on 8 warps (123 registers, 2
    programs an SM); triton_h2's is 4096 columns on 4 warps capped at 96 registers, 5 programs an
    SM (the uncapped bf16 hold needs 115 there: 4), with more warp slots active."""
    run = _H2CAP.format(QW)
    (before, *_), (after, *_) = _rowgroup(store, run, "triton"), _rowgroup(store, run, "triton_h2")
    assert (before["launch__block_size"], before["launch__occupancy_limit_registers"]) == (256, 2)
    assert (after["launch__block_size"], after["launch__registers_per_thread"]) == (128, 96)
    assert after["launch__occupancy_limit_registers"] == 5
    active = "sm__warps_active.avg.pct_of_peak_sustained_active"
    assert after[active] > 1.2 * before[active]


def _rowgroup(store, run, variant):
    """The counters of the variant's row-group kernel launches in run."""
    return variant_counters(store, run, variant, "_softmax_rowgroup")


def test_bf16_hold_fits_a_fifth_program_where_it_won(store):
    """Where triton_h2 won (H200, 2048 x 128256) its launch holds 96 registers, not 122: five
    programs of 4 warps an SM instead of four (ncu's register limit), so more warps are active;
    the DRAM bytes stay at the minimum (each row read once)."""
    from profkit.core.metrics import lookup

    run = _H200.format(LL)
    (before, *_), (after, *_) = _rowgroup(store, run, "triton"), _rowgroup(store, run, "triton_h2")
    assert before["launch__registers_per_thread"] == 122 and after["launch__registers_per_thread"] == 96
    assert before["launch__occupancy_limit_registers"] == 4 and after["launch__occupancy_limit_registers"] == 5
    assert before["launch__block_size"] == after["launch__block_size"] == 128
    active = "sm__warps_active.avg.pct_of_peak_sustained_active"
    assert after[active] > 1.2 * before[active]  # 29 % of the warp slots against 23 %
    for c in (before, after):
        assert lookup(c, "dram_read_bytes") == pytest.approx(2048 * 128256 * 2, rel=0.005)


def test_every_variant_reads_each_row_once(store):
    """No change moved DRAM bytes: every lab variant reads rows x N x 2 bytes (the minimum), the
    late finish's capped registers included (its spills stay on chip)."""
    from profkit.core.metrics import lookup

    for shape, n_rows, n in ((LL, 2048, 128256), (QW, 1024, 152064)):
        for run in (_H200.format(shape), _H100.format(shape), _H2CAP.format(shape), _H2CAP100.format(shape)):
            four = run in (_H200.format(shape), _H100.format(shape))
            for v in ("triton_r12", "triton", "triton_h2", "triton_ff") if four else ("triton", "triton_h2"):
                reads = [lookup(c, "dram_read_bytes") for c in _rowgroup(store, run, v)]
                assert len(reads) == 3, (run, v)
                assert sum(reads) / len(reads) == pytest.approx(n_rows * n * 2, rel=0.005), (run, v)
