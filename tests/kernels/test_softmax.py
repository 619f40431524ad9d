import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import triton
import triton.language as tl

from _kernel_helpers import DTYPES, check, nan_like, randn, spy
from profkit.kernels import softmax as K
from profkit.kernels.softmax import _load_chunk


@pytest.mark.parametrize("n", [100, 3000])
@pytest.mark.parametrize("block_m", [1, 4])
def test_single_tile(dtype, n, block_m):
    x = randn(5, n, dtype=dtype, scale=30.0)  # 5 rows: the last program of 4 is partial
    x[0, 3] = -float("inf")  # masked logit
    y = K.softmax(x, out=nan_like(x), config=(block_m, 4))
    check(y, K.softmax_reference(x), dtype, "triton")
    check(K.softmax_eager(x), K.softmax_reference(x), dtype, "eager", baseline=True)
    check(K.softmax_v1(x, out=nan_like(x)), K.softmax_reference(x), dtype, "v1")


def test_rows_held_whole_tune_the_l2_hint(monkeypatch):
    """Round 9: the evict-first hint on x of rows held whole is a tuned choice, (BLOCK_M,
    num_warps, EVICT) candidates under their own key; both kernels right; triton_evict (round 8's
    launch) weighs the hinted launch only."""
    from profkit.kernels import rmsnorm as RN

    seen = {}

    def fake_tuned(key, cands, run, device, **kw):
        seen[key] = cands
        return cands[-1]  # the last candidate: no hint

    monkeypatch.setattr(RN, "TUNE_MIN_ELEMS", 0)  # tune even this small problem
    monkeypatch.setattr(RN, "tuned", fake_tuned)
    spies = spy(monkeypatch, K, "_softmax_single")
    x = randn(6, 300, scale=10.0)
    for fn, evict, hint in ((K.softmax, (True, False), False), (K.softmax_evict, (True,), True)):
        check(fn(x, out=nan_like(x)), K.softmax_reference(x), "bf16", f"evict={hint}")
        assert spies["_softmax_single"].kwargs[-1]["EVICT"] is hint
        (key, cands), = seen.items()
        seen.clear()
        assert key[-1] == evict and {c[2] for c in cands} == set(evict) and cands[0][2] is True
    assert "triton_evict" in K.WORKLOAD.variants


@pytest.mark.parametrize("n", [1000, 5003])
@pytest.mark.parametrize("per_sm", [1, 2])
def test_online_long_rows(dtype, n, per_sm):
    # small thresholds push these rows down the online (vocabulary-size) path; 11 rows over
    # per_sm * 4 interpreter "SMs": programs walk several rows, some one fewer
    x = randn(11, n, dtype=dtype, scale=300.0 if dtype == "fp16" else 20.0)
    x[1, : n // 2] = -float("inf")  # a row whose first chunks are all -inf
    x[4, 700:] = 1e4 if dtype != "fp16" else 6e4  # the max arrives late: earlier sums rescaled
    y = K.softmax(x, out=nan_like(x), max_single=256, config=(per_sm, 256, 4))
    check(y, K.softmax_reference(x), dtype, "online")
    check(K.softmax_v1(x, out=nan_like(x), max_single=256, chunk=256), K.softmax_reference(x), dtype, "v1")


def test_online_without_rescale_is_caught():
    """A known-wrong online softmax (sums never rescaled when the max grows) fails the check."""
    x = randn(2, 1024, scale=5.0)
    x[:, 600:] += 20.0  # later chunks hold the max
    wrong = torch.cat([torch.exp(x[:, :512] - x[:, :512].max(1, keepdim=True).values),
                       torch.exp(x[:, 512:] - x.max(1, keepdim=True).values)], 1)
    wrong = wrong / wrong.sum(1, keepdim=True)
    with pytest.raises(AssertionError):
        check(wrong, K.softmax_reference(x), "fp32")
    check(K.softmax(x, max_single=256, config=(1, 512, 4)), K.softmax_reference(x), "fp32")


def test_vocab_row_default_path():
    x = randn(1, 20000, dtype="bf16", scale=5.0)  # > MAX_SINGLE: online path
    check(K.softmax(x), K.softmax_reference(x), "bf16")


def test_fp32_out_for_bf16_input():
    x = randn(4, 300, dtype="bf16", scale=10.0)
    out = torch.full((4, 300), float("nan"), dtype=torch.float32)
    K.softmax(x, out=out)
    check(out, K.softmax_reference(x), "fp32")


def test_liger_variant_refuses_rows_wider_than_liger_supports():
    import pytest
    import torch

    from profkit.kernels import softmax as sm

    with pytest.raises(ValueError, match="at most 65536"):
        sm._liger({"x": torch.zeros(1, sm.LIGER_MAX_N + 1)})


# --- v3: the split-row path (few long rows) ---------------------------------------------------

@pytest.mark.parametrize("config", [(256, 4), (1024, 8), (2048, 4)], ids=str)
def test_split_rows(dtype, config):
    """Several rows, each over several chunks, the last chunk partial (5003 is no multiple of any
    chunk); a row starting with whole chunks of -inf, a row whose max is in its last chunk. The
    rows are a strided view whose padding holds large logits: a read past a row's end shows."""
    n = 5003
    base = randn(5, n + 7, dtype=dtype, scale=300.0 if dtype == "fp16" else 20.0)
    base[:, n:] = 5e3
    x = base[:, :n]
    x[1, : n // 2] = -float("inf")
    x[3, -3:] = 1e4 if dtype != "fp16" else 6e4
    y = K.softmax(x, out=nan_like(x), max_single=256, config=config)  # a 2-tuple: the split path
    check(y, K.softmax_reference(x), dtype, f"split {config}")
    assert torch.equal(y, K.softmax(x, max_single=256, config=config, split=True))  # deterministic


@pytest.mark.parametrize("config", K.SPLIT_CANDIDATES, ids=str)
def test_every_split_candidate(config, monkeypatch):
    kernels = spy(monkeypatch, K, "_softmax_split_partials", "_softmax_split_apply")
    x = randn(2, 20000, dtype="bf16", scale=8.0)
    check(K.softmax(x, out=nan_like(x), config=config), K.softmax_reference(x), "bf16", f"split {config}")
    for s in kernels.values():  # launched as asked: a chunk a program, both stages
        assert s.grids == [(-(-20000 // config[0]), 2)]
        assert (s.kwargs[0]["BLOCK"], s.kwargs[0]["num_warps"]) == config


def test_split_caps_the_partials_per_row(monkeypatch):
    """Rows that would take more than MAX_PARTS chunks get longer chunks (the combine loads every
    partial of its row in one block)."""
    monkeypatch.setattr(K, "MAX_PARTS", 4)
    launches = spy(monkeypatch, K, "_softmax_split_partials")["_softmax_split_partials"]
    x = randn(3, 5003, scale=10.0)
    check(K.softmax(x, out=nan_like(x), max_single=256, config=(256, 4)), K.softmax_reference(x), "fp32")
    assert launches.grids == [(3, 3)]  # chunks of 2048, not 20 of 256
    assert K.split_chunk(5003, 256) == 2048 and K.split_chunk(1000, 256) == 256


def test_split_fp32_out_for_bf16_input():
    x = randn(2, 20000, dtype="bf16", scale=10.0)
    out = torch.full((2, 20000), float("nan"), dtype=torch.float32)
    K.softmax(x, out=out, split=True)
    check(out, K.softmax_reference(x), "fp32")


def test_dispatch_few_rows_split_many_rows_persistent(monkeypatch):
    """Long rows: split over programs while one program per row would leave half the SMs idle
    (the interpreter has 4 'SMs': 1-2 rows), the persistent kernel for more rows, rows held whole
    for short rows; triton_rowprog (v2's launch) never splits."""
    assert K.num_sms("cpu") == 4
    kernels = spy(monkeypatch, K, "_softmax_split_partials", "_softmax_split_apply", "_softmax_online_persistent",
                  "_softmax_single")

    def ran(x, fn=K.softmax):
        for s in kernels.values():
            s.grids.clear()
        check(fn(x), K.softmax_reference(x), "bf16")
        return {n for n, s in kernels.items() if s.grids}

    assert ran(randn(1, 20000, dtype="bf16", scale=5.0)) == {"_softmax_split_partials", "_softmax_split_apply"}
    assert kernels["_softmax_split_partials"].grids == [(10, 1)]  # 20000 / 2048: 10 programs for one row
    assert ran(randn(2, 20000, dtype="bf16")) == {"_softmax_split_partials", "_softmax_split_apply"}
    assert ran(randn(3, 20000, dtype="bf16")) == {"_softmax_online_persistent"}
    assert ran(randn(1, 20000, dtype="bf16"), K.softmax_rowprog) == {"_softmax_online_persistent"}
    assert ran(randn(1, 3000, dtype="bf16")) == {"_softmax_single"}
    assert K.WORKLOAD.variants["triton_rowprog"]
    assert not K.split_rows(1, 1 << 24, 2, "cpu")  # 32 MB of row: the second read would miss the L2


# --- v4: the row-group kernel (many long rows, each read once) --------------------------------
# The interpreter runs programs one after another, so a row can have one program here (its chunk
# the whole row): the partial's publish, wait and combine all run, the cross-program meeting only
# on the GPU (benchmarks/gpu/softmax_group.py checks every launch candidate there in float64).

def _group_rows(dtype):
    """11 rows of 5003 for the row-group kernel: a row of -inf but one late logit, a row starting
    with -inf, a row whose max is last; a strided view whose padding holds large logits (a read
    past a row's end shows)."""
    n = 5003
    base = randn(11, n + 7, dtype=dtype, scale=300.0 if dtype == "fp16" else 20.0)
    base[:, n:] = 5e3
    x = base[:, :n]
    x[1, : n // 2] = -float("inf")
    x[2, :] = -float("inf")
    x[2, 4000] = -30.0
    x[3, -3:] = 1e4 if dtype != "fp16" else 6e4
    return x


@pytest.mark.parametrize("exp2, full", [(True, False), (False, False), (True, True)], ids=["r12", "r11", "full"])
@pytest.mark.parametrize("config", [("group", 8192, 1, 4), ("group", 8192, 2, 4), ("group_lag", 8192, 1, 4),
                                    ("group_lag", 8192, 3, 4)], ids=str)
def test_row_group(dtype, config, exp2, full):
    """More rows than groups (each group walks several, the next row loading; the late finish
    one row behind) over _group_rows."""
    x = _group_rows(dtype)
    launches = []
    real = K._softmax_rowgroup

    class Spy:
        def __getitem__(self, grid):
            def call(*a, **kw):
                launches.append((grid, kw))
                return real[grid](*a, **kw)
            return call

    y = nan_like(x)
    try:
        K._softmax_rowgroup = Spy()
        K._launch_group(x, y, config, exp2=exp2, full=full)
    finally:
        K._softmax_rowgroup = real
    check(y, K.softmax_reference(x), dtype, f"group {config}")
    ((grid, kw),) = launches
    assert grid == (min(11, config[2] * K.num_sms("cpu")),) and kw["K"] == 1 and kw["launch_cooperative_grid"]
    assert kw["LAG"] == (config[0] == "group_lag") and kw["PF"] == 0 and kw["EXP2"] == exp2 and kw["FULL"] == full
    y2 = nan_like(x)
    K._launch_group(x, y2, config, exp2=exp2, full=full)
    assert torch.equal(y, y2)  # deterministic


@pytest.mark.parametrize("config", [("group_lag_loc", 8192, 3, 4), ("group_loc", 8192, 2, 4), ("group_lag_h2", 8192, 3, 4),
                                    ("group_lag_ff", 8192, 3, 4), ("group_lag_cap", 8192, 5, 4),
                                    ("group_lag_loc_h2_ff", 8192, 1, 8), ("group_lag_h2_cap", 8192, 6, 4)], ids=str)
def test_row_group_round13(dtype, config, monkeypatch):
    """Round 13's kinds on _group_rows: each thread's exponentials against its own max
    (LOCAL = the program's threads; the chunk viewed per thread), the held exponentials in the
    16-bit input dtype (HOLD 2: within one rounding of the exact kernel's output, and the same
    output for fp32 input, which is never held narrower), the late finish first and the register
    cap (maxnreg for the programs an SM asked for)."""
    x = _group_rows(dtype)
    s = spy(monkeypatch, K, "_softmax_rowgroup")["_softmax_rowgroup"]
    y = nan_like(x)
    K._launch_group(x, y, config)
    check(y, K.softmax_reference(x), dtype, f"group {config}")
    kw = s.kwargs[0]
    lag, _, hold, local, ff, cap = K.group_kind(config[0])
    assert (kw["LAG"], kw["HOLD"], kw["LOCAL"], kw["FF"]) == (lag, hold, local * 32 * config[3], ff)
    assert kw.get("maxnreg") == (K.reg_cap(config[2], config[3]) if cap else None)
    plain = nan_like(x)
    K._launch_group(x, plain, ("group_lag" if lag else "group", *config[1:]))
    if hold and dtype != "fp32":
        keep = plain.float().abs() > 2.0 ** -100  # not the subnormal tail (0 on the GPU: ex2.approx.ftz)
        # one rounding more: at most one ulp on the GPU (round to nearest), two here (the
        # interpreter's fp32 -> bf16 cast truncates); below the smallest normal the ulp is the
        # subnormal spacing (fp16's 2^-24: a probability ~2e-6 is subnormal in fp16)
        fi = torch.finfo(DTYPES[dtype])
        ulp = (plain.float().abs() * fi.eps).clamp(min=fi.smallest_normal * fi.eps)
        assert ((y.float() - plain.float()).abs() <= 2 * ulp)[keep].all()
        assert dtype == "fp16" or not torch.equal(y, plain)  # it shows somewhere (fp16's rows here are ~one-hot)
    elif not local:
        assert torch.equal(y, plain)  # the same arithmetic in another order of statements


def test_row_group_through_softmax_and_its_workspace_sentinel():
    """softmax(config=("group", ...)) takes the row-group kernel; a NaN logit gives a NaN row (as
    torch's softmax), not a wait forever: a computed NaN partial is no -1 slot."""
    x = randn(6, 5003, scale=10.0)
    x[4, 17] = float("nan")
    y = K.softmax(x, out=nan_like(x), max_single=256, config=("group", 8192, 1, 4))
    ref = torch.softmax(x.double(), dim=-1)
    assert torch.isnan(y[4]).all() and torch.isnan(ref[4]).all()
    keep = [0, 1, 2, 3, 5]
    check(y[keep], K.softmax_reference(x[keep]), "fp32")


def test_row_group_refuses_partners_under_the_interpreter():
    """Rows longer than one chunk need partners running at once: under TRITON_INTERPRET that is a
    one-line refusal, not a hang."""
    x = randn(3, 5003)
    with pytest.raises(ValueError, match="cannot run under TRITON_INTERPRET"):
        K.softmax(x, max_single=256, config=("group", 2048, 1, 4))


def test_tuner_weighs_row_groups_unless_asked_for_v3(monkeypatch):
    """The long-row path offers the tuner v3's persistent launches plus v4's row groups (the
    persistent one first: the default where nothing is timed); triton_twopass (v3) and
    triton_rowprog (v2) never get a row group, under their own tuning key."""
    seen = []

    def fake_tuned(key, candidates, run, device, **kw):
        seen.append((key[0], list(candidates)))
        return candidates[0]

    monkeypatch.setattr(K, "tuned", fake_tuned)
    x = randn(256, 16400, dtype="bf16", scale=4.0)  # 4.2 M elements: tuned, not the small-shape default
    fns = (K.softmax, K.softmax_twopass, K.softmax_r11, K.softmax_pf, K.softmax_full, K.softmax_r12, K.softmax_h2,
           K.softmax_ff)
    for fn in fns:
        check(fn(x), K.softmax_reference(x), "bf16")
    (k1, c1), (k2, c2), (k3, c3), (k4, c4), (k5, c5), (k6, c6), (k7, c7), (k8, c8) = seen
    kinds = {c: K.group_kind(c[0]) for c in K.GROUP_CANDIDATES}  # (LAG, PF, HOLD, LOCAL, FF, CAP)
    # round 13's default: every row group but the 16-bit holds and the rejected late-finish-first
    assert k1 == "softmax_online" and c1 == K.ONLINE_CANDIDATES + [c for c, k in kinds.items() if not (k[2] or k[4] or k[5])]
    assert k2 == "softmax_online_v3" and c2 == K.ONLINE_CANDIDATES
    # round 12's launches: no thread-local exponentials; round 11's: no L2 prefetch either
    r12 = [c for c, k in kinds.items() if not (k[2] or k[3] or k[4] or k[5])]
    assert k6 == "softmax_online_r12" and c6 == K.ONLINE_CANDIDATES + r12
    assert k3 == "softmax_online_r11" and c3 == K.ONLINE_CANDIDATES + [c for c in r12 if not kinds[c][1]]
    assert k4 == "softmax_online_pf" and c4 == c6  # the prefetch alone: its own key (tl.exp in the kernel)
    assert k5 == "softmax_online_full" and c5 == c6
    # the 16-bit holds too, those among them with the registers capped included
    assert k7 == "softmax_online_h2" and c7 == K.ONLINE_CANDIDATES + [
        c for c, k in kinds.items() if not k[4] and (k[2] or not k[5])]
    assert k8 == "softmax_online_ff" and c8 == K.ONLINE_CANDIDATES + [c for c, k in kinds.items() if k[4]]
    assert len(c8) - len(K.ONLINE_CANDIDATES) == 4 and len(c7) - len(c1) == 9 and len(c1) - len(c6) == 2
    pf = [c for c in r12 if kinds[c][1]]
    assert {kinds[c][1] for c in pf} == {1, 2} and len(pf) == 14
    assert all(len(c) == 4 for c in K.GROUP_CANDIDATES)
    assert {"triton_twopass", "triton_rowprog", "triton", "triton_r11", "triton_pf", "triton_full", "triton_r12",
            "triton_h2", "triton_ff"} <= set(K.WORKLOAD.variants)


@pytest.mark.parametrize("kind, flags", [("group", (0, 0, 0, 0, 0, 0)), ("group_lag", (1, 0, 0, 0, 0, 0)),
                                         ("group_pf1", (0, 1, 0, 0, 0, 0)), ("group_lag_pf2", (1, 2, 0, 0, 0, 0)),
                                         ("group_lag_loc_pf1", (1, 1, 0, 1, 0, 0)), ("group_lag_h2", (1, 0, 2, 0, 0, 0)),
                                         ("group_lag_ff_pf1", (1, 1, 0, 0, 1, 1)), ("group_lag_cap", (1, 0, 0, 0, 0, 1)),
                                         ("group_lag_loc_h2_ff_pf1", (1, 1, 2, 1, 1, 1))])
def test_group_kind(kind, flags):
    assert K.group_kind(kind) == flags


def test_reg_cap():
    """The register cap a launch of per_sm programs asks for: 64 K registers an SM, 8 a thread at a time."""
    assert [K.reg_cap(p, w) for p, w in ((4, 4), (5, 4), (6, 4), (4, 8), (10, 2), (1, 4))] == [128, 96, 80, 64, 96, 255]


@pytest.mark.parametrize("kind", ["groups", "group_lag_pfx", "group_pf", "lag", "group_ff_loc", "group_h1"])
def test_group_kind_refuses(kind):
    with pytest.raises(ValueError, match="not a row-group softmax kind"):
        K.group_kind(kind)


@triton.jit
def _load_chunk_probe(X, OUT, row, sx, R, N, K: tl.constexpr, BLOCK: tl.constexpr, FULL: tl.constexpr):
    c = tl.program_id(0)
    x = _load_chunk(X, row, sx, c * BLOCK + tl.arange(0, BLOCK), c, R, N, K, FULL)  # K: the chunks a row
    tl.store(OUT + c * BLOCK + tl.arange(0, BLOCK), x)


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("row", [0, 2, 3, 7])
def test_load_chunk(full, row):
    """The row-group kernel's chunk load (a row of K = 3 chunks of 8, the last one partial): the
    first K - 1 chunks whole, the last masked to -inf past the row's end (the next row's large
    values never show); a row past the last gives -inf, or with FULL (round 12: unmasked loads) the
    last row again, never a read past the array."""
    R, N, B = 3, 21, 8
    x = torch.arange(R * (N + 3), dtype=torch.float32).reshape(R, N + 3) + 100.0
    out = torch.full((3 * B,), float("nan"))
    _load_chunk_probe[(3,)](x, out, row, x.stride(0), R, N, K=3, BLOCK=B, FULL=full)
    want = torch.full((3 * B,), -float("inf"))
    if row < R or full:
        want[:N] = x[min(row, R - 1), :N]
    assert torch.equal(out, want)


def test_prefetch_refused_off_hopper():
    """The L2 bulk prefetch is sm_90+ PTX: on the CPU (and under the interpreter) a prefetching
    launch is refused in one line (the tuner then skips it), never run without its prefetch."""
    x = randn(3, 5003)
    with pytest.raises(ValueError, match="L2 prefetch needs a Hopper"):
        K._launch_group(x, nan_like(x), ("group_lag_pf1", 8192, 1, 4))


def _sm90_child(code: str):
    """The JSON last printed by `code`, run in a child process without the interpreter (it
    compiles kernels for sm_90a, no GPU needed); skips where this Triton cannot compile for sm_90."""
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    if r.returncode and ("ptxas" in r.stderr.lower() or "GPUTarget" in r.stderr):
        pytest.skip(f"this Triton cannot compile for sm_90 here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_prefetch_compiles_to_one_bulk_prefetch_per_row_for_sm90():
    """The row-group kernel with PF rows of L2 prefetch, compiled for an H100 (sm_90a) without a
    GPU (in a child process: the tests' TRITON_INTERPRET gives interpreted kernels, which do not
    compile): the PTX carries the bulk prefetch (one before the loop per row of lead, one a step)
    and ptxas assembles it; PF 0 carries none. EXP2 1 gives the ftz exp2 an element. Round 13's
    LOCAL, HOLD 2 and the register cap show in the PTX too."""
    pytest.importorskip("triton")
    code = textwrap.dedent("""
        import json, triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from profkit.kernels import softmax as K
        sig = {"X": "*bf16", "Y": "*bf16", "WS": "*i64", "sx": "i64", "sy": "i64", "R": "i32", "N": "i32",
               "NGROUP": "i32", "K": "constexpr", "KP": "constexpr", "BLOCK": "constexpr", "LAG": "constexpr",
               "PF": "constexpr", "EXP2": "constexpr", "FULL": "constexpr", "HOLD": "constexpr", "LOCAL": "constexpr",
               "FF": "constexpr"}
        names = list(sig)
        attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in ("X", "Y", "WS", "sx", "sy", "N")}
        counts = {}
        # (PF, EXP2, HOLD, LOCAL, FF, maxnreg): rounds 12 and 13
        for pf, exp2, hold, local, ff, cap in ((0, 0, 0, 0, 0, None), (1, 0, 0, 0, 0, None), (2, 1, 0, 0, 0, None),
                                              (1, 1, 0, 0, 0, None), (1, 1, 0, 128, 0, None), (1, 1, 2, 0, 0, None),
                                              (1, 1, 0, 0, 1, 96)):
            src = ASTSource(fn=K._softmax_rowgroup, signature=sig, attrs=attrs,
                            constexprs={"K": 32, "KP": 32, "BLOCK": 4096, "LAG": 1, "PF": pf, "EXP2": exp2,
                                        "FULL": int(pf == 2), "HOLD": hold,
                                        "LOCAL": local, "FF": ff})
            kern = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                                  options={"num_warps": 4, **({"maxnreg": cap} if cap else {})})
            assert kern.asm["cubin"]
            ptx = kern.asm["ptx"]
            counts[f"{pf}{exp2}{hold}{local}{ff}"] = [ptx.count("cp.async.bulk.prefetch.L2.global"),
                                                       ptx.count("ex2.approx.ftz.f32"), ptx.count("bar.sync"),
                                                       ptx.count("cvt.rn.bf16x2.f32"), ptx.count(".maxnreg 96")]
        print(json.dumps(counts))
    """)
    counts = _sm90_child(code)
    assert [c[0] for c in counts.values()] == [0, 2, 3, 2, 2, 2, 2]
    # EXP2: exp2 (ex2.approx.ftz) for every one of a thread's 32 elements; tl.exp: the non-ftz form only
    assert counts["00000"][1] == counts["10000"][1] == 0 and counts["21000"][1] >= 32
    # round 13: LOCAL (each thread's own max) leaves fewer barriers than one max and one sum across
    # the program; HOLD 2 packs the held exponentials to bf16 pairs (16 a thread more than the
    # output's); FF's launch carries the register cap
    r12, loc, h2, ff = counts["11000"], counts["110128" + "0"], counts["11200"], counts["11001"]
    assert loc[2] < r12[2] and h2[3] >= r12[3] + 16 and ff[4] == 1 and r12[4] == loc[4] == h2[4] == 0


def test_thread_local_kind_refuses_a_chunk_it_cannot_view_per_thread():
    """_loc views a program's chunk as [reps, threads, 16-byte vector]: a chunk smaller than one
    vector a thread is a one-line refusal, not a compile error."""
    x = randn(3, 900, dtype="bf16")
    with pytest.raises(ValueError, match="do not split into 256 threads' 16-byte vectors"):
        K._launch_group(x, torch.empty_like(x), ("group_lag_loc", 1024, 1, 8))


# --- round 27: the L2-held kernel (rows read once, held in the L2 between partial and output) ---
# As v4's, the cross-program meeting runs only on the GPU (benchmarks/gpu/softmax_group.py checks
# every L2_CANDIDATES launch in float64 there); here rows of one chunk, several rows a group.

@pytest.mark.parametrize("config", [("l2", 8192, 1, 4), ("l2", 8192, 3, 4), ("l2_a", 8192, 2, 4),
                                    ("l2_en_cs", 8192, 1, 4), ("l2_a_en_cs", 8192, 3, 4), ("l2_loc", 8192, 2, 4),
                                    ("l2_a_loc_en_cs", 8192, 1, 8)], ids=str)
def test_l2_hold(dtype, config, monkeypatch):
    """The L2-held kernel over _group_rows (a row of -inf but one logit, a row starting with -inf,
    a large last logit, a strided view with large padding), each group walking several rows
    (4 CPU "SMs" x per_sm groups for 11 rows) with the earlier row finished a step late. Without
    LOCAL a row of one chunk is v4's arithmetic exactly (exp2(x log2e - max log2e) / sum): the
    same bits as the row-group kernel; deterministic."""
    x = _group_rows(dtype)
    s = spy(monkeypatch, K, "_softmax_l2hold")["_softmax_l2hold"]
    y = K.softmax(x, out=nan_like(x), max_single=256, config=config)
    check(y, K.softmax_reference(x), dtype, f"l2 {config}")
    (grid,), (kw,) = s.grids, s.kwargs
    ahead, pf, local, el, cs = K.l2_kind(config[0])
    assert grid == (min(11, config[2] * K.num_sms("cpu")),) and kw["K"] == 1 and kw["launch_cooperative_grid"]
    assert (kw["AHEAD"], kw["PF"], kw["LOCAL"], kw["EL"], kw["CS"]) == (ahead, 0, local * 32 * config[3], el, cs)
    y2 = nan_like(x)
    K._launch_l2(x, y2, config)
    assert torch.equal(y, y2)
    v4 = nan_like(x)
    K._launch_group(x, v4, ("group", 8192, 1, 4))
    if not local:
        assert torch.equal(y, v4)
    else:  # the partial's sum taken per thread first: another order of additions
        check(y, v4.double(), dtype, "l2 against v4")


@pytest.mark.parametrize("kind, flags", [("l2", (0, 0, 0, 1, 0)), ("l2_a", (1, 0, 0, 1, 0)), ("l2_loc", (0, 0, 1, 1, 0)),
                                         ("l2_en", (0, 0, 0, 0, 0)), ("l2_cs", (0, 0, 0, 1, 1)),
                                         ("l2_a_loc_en_cs_pf2", (1, 2, 1, 0, 1)), ("l2_loc_pf1", (0, 1, 1, 1, 0))])
def test_l2_kind(kind, flags):
    assert K.l2_kind(kind) == flags  # (AHEAD, PF, LOCAL, EL, CS)


@pytest.mark.parametrize("kind", ["l2x", "l2_loc_a", "l2_pf", "group_lag", "l2_cs_en", "L2"])
def test_l2_kind_refuses(kind):
    with pytest.raises(ValueError, match="not an L2-held softmax kind"):
        K.l2_kind(kind)


def test_l2_refusals():
    """One line each, never a hang or a silent fallback: partners under the interpreter, the
    prefetch off Hopper, a _loc chunk that does not split per thread."""
    x = randn(3, 5003)
    with pytest.raises(ValueError, match="L2-held softmax with 3 programs a row cannot run under TRITON_INTERPRET"):
        K.softmax(x, max_single=256, config=("l2", 2048, 1, 4))
    with pytest.raises(ValueError, match="L2 prefetch needs a Hopper"):
        K._launch_l2(x, nan_like(x), ("l2_pf1", 8192, 1, 4))
    with pytest.raises(ValueError, match="do not split into 256 threads' 16-byte vectors"):
        K._launch_l2(x, nan_like(x), ("l2_loc", 512, 1, 8))


def test_tuner_offers_l2_launches_only_to_triton_l2(monkeypatch):
    """softmax(l2=True) (variant triton_l2) offers round 13's default candidates plus every
    L2_CANDIDATES launch under a key of its own; the default softmax offers none of them until
    they are measured on a GPU."""
    seen = []

    def fake_tuned(key, candidates, run, device, **kw):
        seen.append((key[0], list(candidates)))
        return candidates[0]

    monkeypatch.setattr(K, "tuned", fake_tuned)
    x = randn(256, 16400, dtype="bf16", scale=4.0)
    for fn in (K.softmax, K.softmax_l2, lambda a: K.softmax(a, l2=True, group=False)):
        check(fn(x), K.softmax_reference(x), "bf16")
    (k1, c1), (k2, c2), (k3, c3) = seen
    assert k1 == "softmax_online" and not any(c[0].startswith("l2") for c in c1 if isinstance(c[0], str))
    assert k2 == "softmax_online_l2" and c2 == c1 + K.L2_CANDIDATES
    assert k3 == "softmax_online_v3" and c3 == K.ONLINE_CANDIDATES  # no row groups asked for: no L2-held launches
    assert "triton_l2" in K.WORKLOAD.variants
    assert all(len(c) == 4 and K.l2_kind(c[0]) for c in K.L2_CANDIDATES) and len(set(K.L2_CANDIDATES)) == len(K.L2_CANDIDATES)


def test_l2_hold_compiles_for_sm90_with_its_hints_and_fewer_registers():
    """The L2-held kernel compiled for an H100 (sm_90a) without a GPU (a child process, as the
    prefetch test above): the first read of a chunk carries the L2 evict_last policy (EL 1; none
    with _en), the second read evict_first, the outputs evict_first with CS; PF 1 gives one bulk
    prefetch before the loop and one a step. The reason for the kernel, pinned: at 4096 columns on
    4 warps it takes fewer registers than v4's late finish at the same launch (cuobjdump's
    resource usage of the cubins), so more of its programs fit an SM."""
    pytest.importorskip("triton")
    code = textwrap.dedent("""
        import json, os, re, subprocess, tempfile, triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from profkit.kernels import softmax as K
        base = {"X": "*bf16", "Y": "*bf16", "WS": "*i64", "sx": "i64", "sy": "i64", "R": "i32", "N": "i32",
                "NGROUP": "i32", "K": "constexpr", "KP": "constexpr", "BLOCK": "constexpr"}
        cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")

        def build(fn, extra, constexprs):
            sig = {**base, **{k: "constexpr" for k in extra}}
            names = list(sig)
            attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in ("X", "Y", "WS", "sx", "sy", "N")}
            kern = triton.compile(ASTSource(fn=fn, signature=sig, attrs=attrs,
                                            constexprs={"K": 32, "KP": 32, "BLOCK": 4096, **constexprs}),
                                  target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
            regs = None
            if os.path.exists(cuobjdump):
                with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
                    f.write(kern.asm["cubin"])
                r = subprocess.run([cuobjdump, "-res-usage", f.name], capture_output=True, text=True)
                m = re.search(r"REG:(\\d+)", r.stdout)
                regs = int(m[1]) if m else None
            ptx = kern.asm["ptx"]
            ld = re.findall(r"ld\\.global\\.[^ \\t]*", ptx)
            st = re.findall(r"st\\.global\\.[^ \\t]*", ptx)
            return {"regs": regs, "pol_last": ptx.count("createpolicy.fractional.L2::evict_last"),
                    "pol_first": ptx.count("createpolicy.fractional.L2::evict_first"),
                    "ld_last": sum("L1::evict_last" in s for s in ld), "ld_first": sum("L1::evict_first" in s for s in ld),
                    "st_first": sum("evict_first" in s for s in st), "st": len(st),
                    "pf": ptx.count("cp.async.bulk.prefetch.L2.global")}

        l2x = ("AHEAD", "PF", "LOCAL", "EL", "CS")
        out = {kind: build(K._softmax_l2hold, l2x, dict(zip(l2x, (a, pf, loc * 128, el, cs))))
               for kind, (a, pf, loc, el, cs) in (("l2_loc", (0, 0, 1, 1, 0)), ("l2_a_loc", (1, 0, 1, 1, 0)),
                                                   ("l2_en_cs", (0, 0, 0, 0, 1)), ("l2_loc_pf1", (0, 1, 1, 1, 0)))}
        v4x = ("LAG", "PF", "EXP2", "FULL", "HOLD", "LOCAL", "FF")
        out["v4"] = build(K._softmax_rowgroup, v4x, dict(zip(v4x, (1, 1, 1, 0, 0, 128, 0))))
        print(json.dumps(out))
    """)
    got = _sm90_child(code)
    loc, ahead, en, pf, v4 = got["l2_loc"], got["l2_a_loc"], got["l2_en_cs"], got["l2_loc_pf1"], got["v4"]
    for k in (loc, ahead, pf):  # first read evict_last, second evict_first; stores plain
        assert k["pol_last"] >= 1 and k["ld_last"] >= 1 and k["ld_first"] >= 1 and k["st_first"] == 0
    assert en["pol_last"] == 0 and en["ld_last"] == 0 and en["ld_first"] >= 1  # _en: no evict_last anywhere
    assert en["st"] >= 1 and en["st_first"] == en["st"]  # _cs: every output store evict-first
    assert loc["pf"] == 0 and pf["pf"] == 2
    if v4["regs"] is None:
        pytest.skip("no cuobjdump beside this Triton: registers not read")
    # 4096 columns on 4 warps (triton 3.9 here: 56-72 against v4's 116): at least a third fewer
    assert loc["regs"] <= 2 * v4["regs"] // 3 and ahead["regs"] <= 2 * v4["regs"] // 3, (got, v4)
