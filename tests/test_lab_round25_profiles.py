"""Round 25 of the kernel lab (issue 21 item 1): RoPE with the cos/sin tables gathered per token.
Round 22 left RoPE at 32768 tokens on the H200 at 0.984x of torch.compile [0.978-0.990]. compile
and Liger are handed HF's cos_full / sin_full, gathered by position once per forward; the lab's
launch was handed the half tables and the positions, so each program loaded its position and only
then its cos/sin row, a second memory wait the peers do not have. One change: rope(...,
positions=None) reads tables already gathered per token (HF's full width: the first half of each
row), the kernels' HAS_POS=False; registered as triton_gathered, with the peers' very inputs.

Captured with profkit (ncu lean, 12 calls a variant, benchmarks/gpu/round25.sh pairs, NVIDIA H100
80GB HBM3 and NVIDIA H200, driver 580.159.04, torch 2.11.0+cu130, triton 3.6.0, Liger 0.8.5,
2026-11-25T02:54-03:14Z):
- the change, triton -> triton_gathered: supported in 6 of 7 captures (1.004-1.047x), caveated in
  one (H100 qwen7b-t4096, 1.020x [0.999-1.031]);
- the RoPE cell of round 22, H200 32768 tokens: compile -> triton was 0.985x (rejected) again;
  compile -> triton_gathered 1.002x [0.998-1.005], a tie (1.011-1.014x by graph replay); on the H100
  1.005x, supported;
- against Liger at 4096 tokens under ncu the gathered launch ties or wins where the position launch
  lost (H200 llama8b 0.987x -> 1.006x, qwen7b 0.991x -> 1.008x; H100 qwen7b 0.986x -> 1.005x and,
  on a second host, 1.023x supported);
- rotating in place, as Liger does (triton_gathered_inplace), is no faster: 0.990-0.999x, rejected.

The fused q/k RMSNorm + RoPE at 32768 tokens on the H200 (rmsnorm_rope-qwen3-8b-t32768-r25-h200g,
-h200i): fed the gathered tables the same way it lost, 0.898x (rejected): its early table loads
hold 78 registers a thread against 71, and fewer programs fit an SM. The tuner weighing its
one-warp launches capped at 64 registers (32 programs an SM, the block limit, instead of 28) is
1.015x [1.009-1.017], supported; the H100's tuner kept the uncapped launch (h100g, 1.000x).

Then round 24's launch plans in the RoPE launcher (the fresh table's do_bench column had RoPE at
4096 tokens host-bound and behind compile and Liger there). One capture a GPU, the plans off
(*_noplan) and on in one process, nsys, 12 calls a variant, compared by host time (round23.sh
inproc, runs rope-qwen7b-t4096-r25-h100e / -h200f): plans 1.96-2.85x, supported on both GPUs for
both table forms; the lab against compile 1.34x / 0.94x before, 2.56-3.74x after; by GPU time the
same kernel (0.997-1.004x)."""
import pytest

from profdata import one_kernel_pairs, runs_store

T32, T4, Q4 = "rope-llama8b-t32768-r25-", "rope-llama8b-t4096-r25-", "rope-qwen7b-t4096-r25-"
RUNS = {  # run -> [(before, after, speed-up, verdict)]
    T32 + "h100a": [("triton", "triton_gathered", 1.0039, "supported"),
                    ("compile", "triton_gathered", 1.0053, "supported"),
                    ("liger", "triton_gathered", 1.0331, "supported"),
                    ("compile", "triton", 1.0014, "caveated")],
    T32 + "h200a": [("triton", "triton_gathered", 1.0173, "supported"),
                    ("compile", "triton_gathered", 1.0020, "caveated"),
                    ("liger", "triton_gathered", 1.0432, "supported"),
                    ("compile", "triton", 0.9849, "rejected")],
    T4 + "h100a": [("triton", "triton_gathered", 1.0466, "supported"),
                   ("compile", "triton_gathered", 1.1503, "supported"),
                   ("liger", "triton_gathered", 1.0503, "supported"),
                   ("liger", "triton", 1.0036, "caveated")],
    T4 + "h200c": [("triton", "triton_gathered", 1.0189, "supported"),
                   ("compile", "triton_gathered", 1.2660, "supported"),
                   ("liger", "triton_gathered", 1.0055, "caveated"),
                   ("liger", "triton", 0.9868, "rejected"),
                   ("triton_gathered", "triton_gathered_inplace", 0.9898, "rejected")],
    Q4 + "h100b": [("triton", "triton_gathered", 1.0199, "caveated"),
                   ("compile", "triton_gathered", 1.1446, "supported"),
                   ("liger", "triton_gathered", 1.0054, "caveated"),
                   ("liger", "triton", 0.9857, "rejected")],
    Q4 + "h100c": [("liger", "triton_gathered", 1.0233, "supported"),
                   ("liger", "triton_gathered_inplace", 1.0178, "supported"),
                   ("triton_gathered", "triton_gathered_inplace", 0.9946, "rejected"),
                   ("triton_inplace", "triton_gathered_inplace", 1.0363, "supported")],
    Q4 + "h200c": [("triton", "triton_gathered", 1.0172, "supported"),
                   ("compile", "triton_gathered", 1.1912, "supported"),
                   ("liger", "triton_gathered", 1.0076, "caveated"),
                   ("liger", "triton", 0.9906, "rejected"),
                   ("triton_gathered", "triton_gathered_inplace", 0.9990, "rejected")],
}

# the fused q/k RMSNorm + RoPE (H200, 32768 tokens, 92 % of copy): the gathered tables, rejected;
# the tuner weighing one-warp launches capped at 64 registers, supported
FUSED = "rmsnorm_rope-qwen3-8b-t32768-r25-"
RUNS.update({
    FUSED + "h200g": [("triton", "triton_gathered", 0.8980, "rejected"),
                      ("compile", "triton_gathered", 1.1336, "supported"),
                      ("compile", "triton", 1.2624, "supported")],
    FUSED + "h200i": [("triton_nocap", "triton", 1.0148, "supported"),
                      ("compile", "triton", 1.2842, "supported")],
    # the H100's tuner kept the uncapped (8, 1): the same kernel both sides
    FUSED + "h100g": [("triton_nocap", "triton", 1.0001, "caveated"),
                      ("compile", "triton", 1.1985, "supported")],
})
# the plans, one process a GPU (nsys; by host time): run -> [(before, after, verdict, speed-up)]
PLANS = {
    Q4 + "h100e": [("triton_gathered_noplan", "triton_gathered", "supported", 1.9609),
                   ("triton_noplan", "triton", "supported", 2.2771),
                   ("compile", "triton_gathered_noplan", "supported", 1.3451),
                   ("compile", "triton_gathered", "supported", 2.6377),
                   ("liger", "triton_gathered", "supported", 2.2297)],
    Q4 + "h200f": [("triton_gathered_noplan", "triton_gathered", "supported", 2.7124),
                   ("triton_noplan", "triton", "supported", 2.8475),
                   ("compile", "triton_gathered_noplan", "rejected", 0.9440),
                   ("compile", "triton_gathered", "supported", 2.5605),
                   ("liger", "triton_gathered", "supported", 3.2708)],
}
RUNS = {**RUNS, **{r: [] for r in PLANS}}  # every folder of the round (tests/test_lab_profiles.py)

store = runs_store("r25", RUNS)

test_round25_pairs = one_kernel_pairs(RUNS)


def _counter(store, run, variant, metric):
    from profdata import variant_counters

    cs = variant_counters(store, run, variant)
    return sum(c[metric] for c in cs) / len(cs)


@pytest.mark.parametrize("run", [T32 + "h100a", T32 + "h200a"])
def test_the_same_dram_bytes_at_32768_tokens(store, run):
    """What changed is how long each program waits, not what it moves: the gathered launch reads
    the DRAM bytes of the position launch within 0.1 % (the tables are read once a token either
    way: 128 B of each 256 B full-width bf16 row)."""
    for m in ("dram__bytes_read.sum", "dram__bytes_write.sum"):
        a, b = _counter(store, run, "triton", m), _counter(store, run, "triton_gathered", m)
        assert b == pytest.approx(a, rel=0.01), m


def test_the_gathered_launch_keeps_more_warps_resident_on_the_h200(store):
    """The profile's one other difference (H200, 32768 tokens): warps active, % of the peak, 43 with
    the position load (4 warps a program, 64 registers) against 50 gathered (8 warps, 43)."""
    m = "sm__warps_active.avg.pct_of_peak_sustained_active"
    assert _counter(store, T32 + "h200a", "triton_gathered", m) > _counter(store, T32 + "h200a", "triton", m) + 3


@pytest.mark.parametrize("run,before,after,verdict,speedup", [(r, *p) for r, ps in PLANS.items() for p in ps],
                         ids=[f"{r}:{p[0]}->{p[1]}" for r, ps in PLANS.items() for p in ps])
def test_rope_plans_by_host_time(store, run, before, after, verdict, speedup):
    """By host time, 12 calls a side, one process: the plans, and the lab against its peers before
    and after them."""
    from profdata import compare_one

    r = compare_one(store, f"{run}:{before}", f"{run}:{after}", "host")
    assert (r["verdict"], r["speedup"]) == (verdict, pytest.approx(speedup, abs=0.005)), r["why"]
    assert r["before_detail"]["calls"] == r["after_detail"]["calls"] == 12


@pytest.mark.parametrize("run", list(PLANS))
def test_rope_plans_move_no_kernel(store, run):
    """By GPU time a plan's launch is the full path's kernel (within 1 %), never a supported change."""
    from profdata import compare_one

    for before, after in (("triton_gathered_noplan", "triton_gathered"), ("triton_noplan", "triton")):
        g = compare_one(store, f"{run}:{before}", f"{run}:{after}", "gpu")
        assert abs(g["speedup"] - 1) < 0.01 and g["verdict"] != "supported"


def test_what_the_fused_kernel_holds(store):
    """Why the fused pair went each way, in ncu's launch records: 78 registers a thread with the
    gathered tables (71 with positions), 64 with the cap the tuner picked, and the warps active
    an SM follow (H200, 32768 tokens)."""
    regs = {(r["run"][-5:], r["nvtx_path"].split("/")[1]): r["reg"] for r in store.query(
        "SELECT run, nvtx_path, MAX(registers_per_thread) AS reg FROM kernels WHERE run IN (?, ?) "
        "GROUP BY run, nvtx_path", (FUSED + "h200g", FUSED + "h200i"))}
    assert regs["h200g", "triton"] == regs["h200i", "triton_nocap"] == 71  # round 24's pick, (8, 1)
    assert regs["h200g", "triton_gathered"] == 78 and regs["h200i", "triton"] == 64
    m = "sm__warps_active.avg.pct_of_peak_sustained_active"
    assert _counter(store, FUSED + "h200i", "triton", m) > _counter(store, FUSED + "h200i", "triton_nocap", m) + 3
    assert _counter(store, FUSED + "h200g", "triton_gathered", m) < _counter(store, FUSED + "h200g", "triton", m) - 3
