import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import triton
import triton.language as tl
from _kernel_helpers import check, nan_like, randn, spy
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


def test_rows_held_whole_tune_the_l2_hint(monkeypatch):
    """The evict-first hint on x of rows held whole is a tuned choice, (BLOCK_M, num_warps, EVICT)
    candidates under their own key, the hinted launch first (the default where nothing is timed)."""
    from profkit.kernels import rmsnorm as RN

    seen = {}

    def fake_tuned(key, cands, run, device, **kw):
        seen[key] = cands
        return cands[-1]  # the last candidate: no hint

    monkeypatch.setattr(RN, "TUNE_MIN_ELEMS", 0)  # tune even this small problem
    monkeypatch.setattr(RN, "tuned", fake_tuned)
    spies = spy(monkeypatch, K, "_softmax_single")
    x = randn(6, 300, scale=10.0)
    check(K.softmax(x, out=nan_like(x)), K.softmax_reference(x), "bf16")
    assert spies["_softmax_single"].kwargs[-1]["EVICT"] is False
    (key, cands), = seen.items()
    assert key[-1] == (True, False) and {c[2] for c in cands} == {True, False} and cands[0][2] is True


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


# --- the split-row path (few long rows) ---------------------------------------------------

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
    for short rows."""
    assert K.num_sms("cpu") == 4
    kernels = spy(monkeypatch, K, "_softmax_split_partials", "_softmax_split_apply", "_softmax_online_persistent",
                  "_softmax_single")

    def ran(x):
        for s in kernels.values():
            s.grids.clear()
        check(K.softmax(x), K.softmax_reference(x), "bf16")
        return {n for n, s in kernels.items() if s.grids}

    assert ran(randn(1, 20000, dtype="bf16", scale=5.0)) == {"_softmax_split_partials", "_softmax_split_apply"}
    assert kernels["_softmax_split_partials"].grids == [(10, 1)]  # 20000 / 2048: 10 programs for one row
    assert ran(randn(2, 20000, dtype="bf16")) == {"_softmax_split_partials", "_softmax_split_apply"}
    assert ran(randn(3, 20000, dtype="bf16")) == {"_softmax_online_persistent"}
    assert ran(randn(1, 3000, dtype="bf16")) == {"_softmax_single"}
    assert not K.split_rows(1, 1 << 24, 2, "cpu")  # 32 MB of row: the second read would miss the L2


# --- the row-group kernel (many long rows, each read once) --------------------------------
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


@pytest.mark.parametrize("config", [("group", 8192, 1, 4), ("group", 8192, 2, 4), ("group_lag", 8192, 1, 4),
                                    ("group_lag", 8192, 3, 4)], ids=str)
def test_row_group(dtype, config):
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
        K._launch_group(x, y, config)
    finally:
        K._softmax_rowgroup = real
    check(y, K.softmax_reference(x), dtype, f"group {config}")
    ((grid, kw),) = launches
    assert grid == (min(11, config[2] * K.num_sms("cpu")),) and kw["K"] == 1 and kw["launch_cooperative_grid"]
    assert kw["LAG"] == (config[0] == "group_lag") and kw["PF"] == 0 and kw["LOCAL"] == 0
    y2 = nan_like(x)
    K._launch_group(x, y2, config)
    assert torch.equal(y, y2)  # deterministic


@pytest.mark.parametrize("config", [("group_lag_loc", 8192, 3, 4), ("group_loc", 8192, 2, 4)], ids=str)
def test_row_group_thread_local(dtype, config, monkeypatch):
    """The "_loc" kinds on _group_rows: each thread's exponentials against its own max (LOCAL =
    the program's threads; the chunk viewed per thread): right, another order of additions than
    the plain kind's."""
    x = _group_rows(dtype)
    s = spy(monkeypatch, K, "_softmax_rowgroup")["_softmax_rowgroup"]
    y = nan_like(x)
    K._launch_group(x, y, config)
    check(y, K.softmax_reference(x), dtype, f"group {config}")
    lag, _, local = K.group_kind(config[0])
    assert (s.kwargs[0]["LAG"], s.kwargs[0]["LOCAL"]) == (lag, 32 * config[3]) and local == 1


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


def test_tuner_weighs_row_groups(monkeypatch):
    """The long-row path offers the tuner the persistent launches plus the row groups (the
    persistent one first: the default where nothing is timed)."""
    seen = []

    def fake_tuned(key, candidates, run, device, **kw):
        seen.append((key[0], list(candidates)))
        return candidates[0]

    monkeypatch.setattr(K, "tuned", fake_tuned)
    monkeypatch.setattr(K, "TUNE_MIN_ELEMS", 0)  # tune even this small problem
    x = randn(8, 1000, dtype="bf16", scale=4.0)
    check(K.softmax(x, max_single=256), K.softmax_reference(x), "bf16")
    (k1, c1), = seen
    assert k1 == "softmax_online" and c1 == K.ONLINE_CANDIDATES + K.GROUP_CANDIDATES
    assert {K.group_kind(c[0])[1] for c in K.GROUP_CANDIDATES} == {0, 1, 2}
    assert all(len(c) == 4 for c in K.GROUP_CANDIDATES) and len(set(K.GROUP_CANDIDATES)) == len(K.GROUP_CANDIDATES)


@pytest.mark.parametrize("kind, flags", [("group", (0, 0, 0)), ("group_lag", (1, 0, 0)), ("group_pf1", (0, 1, 0)),
                                         ("group_lag_pf2", (1, 2, 0)), ("group_lag_loc_pf1", (1, 1, 1)),
                                         ("group_loc", (0, 0, 1))])
def test_group_kind(kind, flags):
    assert K.group_kind(kind) == flags


@pytest.mark.parametrize("kind", ["groups", "group_lag_pfx", "group_pf", "lag", "group_pf1_loc", "group_lag_h2"])
def test_group_kind_refuses(kind):
    with pytest.raises(ValueError, match="not a row-group softmax kind"):
        K.group_kind(kind)


@triton.jit
def _load_chunk_probe(X, OUT, row, sx, R, N, K: tl.constexpr, BLOCK: tl.constexpr):
    c = tl.program_id(0)
    x = _load_chunk(X, row, sx, c * BLOCK + tl.arange(0, BLOCK), c, R, N, K)  # K: the chunks a row
    tl.store(OUT + c * BLOCK + tl.arange(0, BLOCK), x)


@pytest.mark.parametrize("row", [0, 2, 3, 7])
def test_load_chunk(row):
    """The row-group kernel's chunk load (a row of K = 3 chunks of 8, the last one partial): the
    first K - 1 chunks whole, the last masked to -inf past the row's end (the next row's large
    values never show); a row past the last gives -inf, never a read past the array."""
    R, N, B = 3, 21, 8
    x = torch.arange(R * (N + 3), dtype=torch.float32).reshape(R, N + 3) + 100.0
    out = torch.full((3 * B,), float("nan"))
    _load_chunk_probe[(3,)](x, out, row, x.stride(0), R, N, K=3, BLOCK=B)
    want = torch.full((3 * B,), -float("inf"))
    if row < R:
        want[:N] = x[row, :N]
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
    and ptxas assembles it; PF 0 carries none. The exponentials are the ftz exp2, one an element;
    LOCAL (each thread's own max) leaves fewer barriers than one max and one sum across the
    program."""
    pytest.importorskip("triton")
    code = textwrap.dedent("""
        import json, triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from profkit.kernels import softmax as K
        sig = {"X": "*bf16", "Y": "*bf16", "WS": "*i64", "sx": "i64", "sy": "i64", "R": "i32", "N": "i32",
               "NGROUP": "i32", "K": "constexpr", "KP": "constexpr", "BLOCK": "constexpr", "LAG": "constexpr",
               "PF": "constexpr", "LOCAL": "constexpr"}
        names = list(sig)
        attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in ("X", "Y", "WS", "sx", "sy", "N")}
        counts = {}
        for pf, local in ((0, 0), (1, 0), (2, 0), (1, 128)):
            src = ASTSource(fn=K._softmax_rowgroup, signature=sig, attrs=attrs,
                            constexprs={"K": 32, "KP": 32, "BLOCK": 4096, "LAG": 1, "PF": pf, "LOCAL": local})
            kern = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
            assert kern.asm["cubin"]
            ptx = kern.asm["ptx"]
            counts[f"{pf}-{local}"] = [ptx.count("cp.async.bulk.prefetch.L2.global"),
                                       ptx.count("ex2.approx.ftz.f32"), ptx.count("bar.sync")]
        print(json.dumps(counts))
    """)
    counts = _sm90_child(code)
    assert [c[0] for c in counts.values()] == [0, 2, 3, 2]
    assert all(c[1] >= 32 for c in counts.values())  # exp2 (ex2.approx.ftz) for each of a thread's 32 elements
    assert counts["1-128"][2] < counts["1-0"][2]


def test_thread_local_kind_refuses_a_chunk_it_cannot_view_per_thread():
    """_loc views a program's chunk as [reps, threads, 16-byte vector]: a chunk smaller than one
    vector a thread is a one-line refusal, not a compile error."""
    x = randn(3, 900, dtype="bf16")
    with pytest.raises(ValueError, match="do not split into 256 threads' 16-byte vectors"):
        K._launch_group(x, torch.empty_like(x), ("group_lag_loc", 1024, 1, 8))
