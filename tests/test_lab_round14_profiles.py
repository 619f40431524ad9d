"""Round 14 of the kernel lab (issue 21 item 1): the vocabulary softmax in CUDA C++
(kernels/cuda/softmax.cu, variant `cuda`): a row shared by a thread-block cluster, fed by the
bulk copy engine through a shared-memory ring, the partials exchanged in distributed shared memory.
Captured with `profkit capture softmax --variant triton --variant cuda --variant compile --shape S
--metrics lean --no-nsys` (benchmarks/gpu/round14.sh cap) on an H200 (-h200e) and an H100 (-h100a).
triton -> cuda is rejected on both GPUs (0.80-0.86x); compile -> cuda is supported (1.45-1.69x).
The measured reasons (benchmarks/results/kernels.md, "Round 14"): clusters of 3-4 CTAs fit 117-120
of the 132 SMs, and each CTA works one row at a time, so its reduction, exchange and stores do
not overlap other rows' work (probes: without the exchange 0.83-0.91x, without most stores too
1.00-1.12x; the loads alone run at 4.2 TB/s)."""
import pytest

from profdata import over_pairs, pair_row, runs_store, variant_counters

_H200 = "softmax-{}-r14-h200e"
_H100 = "softmax-{}-r14-h100a"
LL, QW = "llama3vocab-t2048", "qwen7bvocab-t1024"
RUNS = {  # run -> [(before, after, speed-up, verdict)]
    _H200.format(LL): [("triton", "cuda", 0.803, "rejected"), ("compile", "cuda", 1.619, "supported")],
    _H200.format(QW): [("triton", "cuda", 0.827, "rejected"), ("compile", "cuda", 1.687, "supported")],
    _H100.format(LL): [("triton", "cuda", 0.851, "rejected"), ("compile", "cuda", 1.449, "supported")],
    _H100.format(QW): [("triton", "cuda", 0.856, "rejected"), ("compile", "cuda", 1.499, "supported")],
}
KERNELS_PER_CALL = {"triton": 2, "cuda": 1, "compile": 1}  # the lab's Triton call also fills its row slots


store = runs_store("r14", RUNS)


@over_pairs(RUNS)
def test_round14_pairs(store, run, before, after, speedup, verdict):
    r = pair_row(store, run, before, after, verdict, speedup)
    assert r["before_detail"]["kernels_per_call"] == KERNELS_PER_CALL[before]
    assert r["after_detail"]["kernels_per_call"] == 1


@pytest.mark.parametrize("run", list(RUNS))
def test_cluster_grid_leaves_sms_idle(store, run):
    """Why the cluster kernel starts behind: its persistent grid is every cluster that fits
    (ncu's launch__cluster_max_active) times the cluster's CTAs, one CTA an SM, and clusters of the
    3-4 CTAs the tuner picked fit only 117-120 of the 132 SMs (a cluster sits in one GPC)."""
    launches = variant_counters(store, run, "cuda")
    assert len(launches) == 3
    for c in launches:
        size, active = c["launch__cluster_size"], c["launch__cluster_max_active"]
        assert size in (3, 4)
        assert c["launch__grid_size"] == size * active  # persistent: every cluster that fits
        assert 117 <= c["launch__grid_size"] <= 120 < c["launch__sm_count"] == 132
        assert c["launch__block_size"] == 512  # 15 consumer warps and the producer
        assert c["launch__occupancy_limit_shared_mem"] == 1  # the ring: one CTA an SM


@pytest.mark.parametrize("shape,n_rows,n", [(LL, 2048, 128256), (QW, 1024, 152064)])
def test_cluster_kernel_reads_each_row_once(store, shape, n_rows, n):
    """The bulk copies read the minimum: rows x N x 2 bytes from DRAM on both GPUs."""
    from profkit.core.metrics import lookup

    for run in (_H200.format(shape), _H100.format(shape)):
        reads = [lookup(c, "dram_read_bytes") for c in variant_counters(store, run, "cuda")]
        assert sum(reads) / len(reads) == pytest.approx(n_rows * n * 2, rel=0.005), run
