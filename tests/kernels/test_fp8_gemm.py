"""CPU tests of the fp8 (e4m3) GEMM under TRITON_INTERPRET=1.

Reference: the dequantized fp8 operands in float64 (fp8_reference), so what remains is fp32
accumulation plus the bf16 output rounding; tolerance kernels/_numerics.GEMM_TOL["fp8"] (rel_fro 1e-2,
max |err| / rms 5e-2). The interpreter runs fp8 tl.dot by converting the operands to fp16
(exact for e4m3) and multiplying in fp32, so the K loop, masks and both scale epilogues are
tested here; Hopper's fp8 wgmma (and its reduced-precision accumulation, which the kernel
promotes every IMPRECISE_ACC elements) is only exercised on the GPU (benchmarks/gemm.py).
"""
import os

os.environ["TRITON_INTERPRET"] = "1"  # tests/kernels/conftest.py does it too

import pytest  # noqa: E402
import torch  # noqa: E402
from profkit.kernels import fp8_gemm as F  # noqa: E402
from profkit.kernels._numerics import measure  # noqa: E402


def check(out, ref, dtype):
    r = measure(out, ref, dtype, policy="gemm")
    return r.ok, r

SHAPES = [(32, 48, 64), (33, 17, 40), (1, 24, 64), (70, 40, 96), (20, 40, 300)]


def _operands(M, N, K, per_row):
    a = torch.randn(M, K, dtype=torch.float32) * 3
    b = torch.randn(N, K, dtype=torch.float32) * 0.05
    aq, sa = F.quantize(a, per_row)
    bq, sb = F.quantize(b, per_row)
    return a, b, aq, bq, sa, sb


def _poisoned(M, N):
    return torch.full((M, N), float("nan"), dtype=torch.bfloat16)


@pytest.mark.parametrize("per_row", [True, False], ids=["per_row", "per_tensor"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fp8_gemm_vs_dequantized_float64(shape, per_row):
    M, N, K = shape
    _, _, aq, bq, sa, sb = _operands(M, N, K, per_row)
    assert aq.dtype == torch.float8_e4m3fn and sa.shape == ((M,) if per_row else ())
    out = _poisoned(M, N)
    res = F.fp8_gemm(aq, bq, sa, sb, out=out)
    assert res.data_ptr() == out.data_ptr()
    ok, info = check(out, F.fp8_reference(aq, bq, sa, sb), "fp8")
    assert ok, info


def test_quantize_roundtrip():
    x = torch.randn(16, 64) * torch.logspace(-2, 2, 16)[:, None]  # rows of very different range
    for per_row, bound in ((True, 0.07), (False, 0.5)):
        q, s = F.quantize(x, per_row)
        assert q.abs().float().max() <= F.FP8_MAX
        err = (F.dequantize(q, s) - x.double()).norm() / x.double().norm()
        assert err < bound, (per_row, err)


def test_scaled_mm_baseline_on_cpu():
    M, N, K = 32, 48, 64
    _, _, aq, bq, sa, sb = _operands(M, N, K, False)
    try:
        y = F.scaled_mm(aq, bq, sa, sb)
    except (RuntimeError, NotImplementedError) as e:
        pytest.skip(f"torch._scaled_mm has no CPU kernel in torch {torch.__version__}: "
                    f"{str(e).splitlines()[0][:160]}")
    ok, info = check(y, F.fp8_reference(aq, bq, sa, sb), "fp8")
    assert ok, info


def test_known_wrong_unquantized_reference_fails():
    """Checking against the unquantized product would blame the kernel for fp8 rounding:
    the check must use the dequantized reference, and this one must fail."""
    a, b, aq, bq, sa, sb = _operands(32, 48, 64, True)
    out = F.fp8_gemm(aq, bq, sa, sb, out=_poisoned(32, 48))
    assert check(out, F.fp8_reference(aq, bq, sa, sb), "fp8")[0]
    assert not check(out, a.double() @ b.double().T, "fp8")[0]


def test_known_wrong_scales_fail():
    _, _, aq, bq, sa, sb = _operands(33, 24, 64, True)
    ref = F.fp8_reference(aq, bq, sa, sb)
    wrong_sa = sa.clone()
    wrong_sa[3] *= 1.5  # one token's scale off
    out = F.fp8_gemm(aq, bq, wrong_sa, sb, out=_poisoned(33, 24))
    assert not check(out, ref, "fp8")[0]
    out = F.fp8_gemm(aq, bq, sa.max(), sb.max(), out=_poisoned(33, 24))  # per-tensor for per-row
    assert not check(out, ref, "fp8")[0]


def test_bad_scale_shapes_raise():
    _, _, aq, bq, sa, sb = _operands(8, 16, 32, True)
    with pytest.raises(ValueError, match="per-row"):
        F.fp8_gemm(aq, bq, sa[:4], sb)


def test_workload_registration():
    w = F.WORKLOAD
    assert w.op == "fp8_gemm" and w.default_dtype == "fp8"
    assert set(w.variants) == {"triton", "triton_tensor", "triton_promote", "triton_promote_tensor", "triton_splitk",
                               "triton_splitk_tensor", "cuda_ws112_tma8", "cuda_ws112_tma8_tensor", "scaled_mm",
                               "scaled_mm_tensor"}
    assert w.gpu_only == ("cuda_ws112_tma8", "cuda_ws112_tma8_tensor") and w.inexact == ()
    assert w.peers["cuda_ws112_tma8"] == "scaled_mm" and w.peers["cuda_ws112_tma8_tensor"] == "scaled_mm_tensor"
    assert w.peers["triton"] == "scaled_mm" and w.peers["triton_tensor"] == "scaled_mm_tensor"
    assert w.peers["triton_splitk"] == "scaled_mm" and w.peers["triton_splitk_tensor"] == "scaled_mm_tensor"
    assert w.peers["triton_promote"] == "scaled_mm" and w.peers["triton_promote_tensor"] == "scaled_mm_tensor"
    for name, p in w.shapes.items():
        assert "/" not in name
        m = w.model(p, "fp8")
        assert m["flops"] == 2 * p["M"] * p["N"] * p["K"]
        assert m["bytes"] == p["M"] * p["K"] + p["K"] * p["N"] + 2 * p["M"] * p["N"] + 4 * (p["M"] + p["N"])
    state = w.setup({"M": 17, "N": 32, "K": 64}, "fp8", "cpu")
    for name in ("triton", "triton_tensor", "triton_promote", "triton_promote_tensor", "triton_splitk",
                 "triton_splitk_tensor"):
        ok, info = check(w.variants[name](state), w.reference(state, name), "fp8")
        assert ok, (name, info)


def test_dropping_the_last_k_group_is_caught():
    """A known-wrong kernel that stops one promotion group early (K = 256 of 384) fails."""
    _, _, aq, bq, sa, sb = _operands(32, 32, 384, True)
    ref = F.fp8_reference(aq, bq, sa, sb)
    short = F.fp8_gemm(aq[:, :256].contiguous(), bq[:, :256].contiguous(), sa, sb)
    assert not check(short, ref, "fp8")[0]


# ---- "triton_promote": persistent TMA, promotion every <= PROMOTE_K elements ------------

def test_promote_chunks_arithmetic():
    """The kernel's chunking (promote_chunks runs in the kernel; .fn is the same code on the
    host): the fewest chunks of at most max_tiles, one length, fewer than n_chunks steps past K."""
    for max_tiles in (1, 2, 3, 7, 16):
        for k_tiles in range(1, 200):
            n, c = F.promote_chunks.fn(k_tiles, max_tiles)
            assert n == -(-k_tiles // max_tiles), (k_tiles, max_tiles)
            assert 1 <= c <= max_tiles and n * c >= k_tiles
            assert n * c - k_tiles < n  # the waste (zeros read past K) is all in the last chunk
            assert (n - 1) * c < k_tiles  # so the last chunk still holds real k tiles
    # the registered GPU shapes (BLOCK_K 128, PROMOTE_K 2048: at most 16 tiles per promotion)
    assert F.PROMOTE_K == 2048
    per = {k: F.promote_chunks.fn(k // 128, F.PROMOTE_K // 128) for k in (4096, 8192, 14336, 18944)}
    assert per == {4096: (2, 16), 8192: (4, 16), 14336: (7, 16), 18944: (10, 15)}


# (M, N, K, chunk_k, programs): chunk_k 64 / 96 = 2 / 3 k tiles of 32 per promotion under the
# interpreter (K 304: 10 tiles, 4 chunks of 3 with 2 steps of zeros past K), few programs so
# that each runs several tiles (the accumulator must restart at every tile)
PROMOTE_CASES = [(33, 24, 64, 2048, None), (70, 40, 96, 64, None), (160, 136, 304, 64, 3),
                 (160, 136, 304, 96, 2), (1, 24, 64, 32, None), (20, 40, 304, 2048, 1)]


@pytest.mark.parametrize("per_row", [True, False], ids=["per_row", "per_tensor"])
@pytest.mark.parametrize("case", PROMOTE_CASES, ids=lambda c: "x".join(map(str, c[:3])) + f"-c{c[3]}-p{c[4]}")
def test_promote_vs_dequantized_float64(case, per_row):
    M, N, K, chunk_k, programs = case
    _, _, aq, bq, sa, sb = _operands(M, N, K, per_row)
    out = _poisoned(M, N)
    res = F.fp8_gemm_promote(aq, bq, sa, sb, out=out, chunk_k=chunk_k, programs=programs)
    assert res.data_ptr() == out.data_ptr()
    ok, info = check(out, F.fp8_reference(aq, bq, sa, sb), "fp8")
    assert ok, info


@pytest.mark.parametrize("per_row", [True, False], ids=["per_row", "per_tensor"])
def test_promote_later_calls_skip_the_autotuner_and_agree(per_row, monkeypatch):
    """After a problem's first call the launcher keeps the autotuner's pick and launches the
    kernel itself: later calls must not enter the autotuner, must give the first call's output
    bit for bit and pass the float64 check; a new problem (other programs) is planned anew."""
    M, N, K = 70, 40, 96
    _, _, aq, bq, sa, sb = _operands(M, N, K, per_row)
    F._PLANS.clear()
    first = F.fp8_gemm_promote(aq, bq, sa, sb, out=_poisoned(M, N), chunk_k=64, programs=3)
    key = (M, N, K, per_row, 64, 3, aq.device)
    assert key in F._PLANS and F._PLANS[key][4]["BLOCK_M"] == 32
    entered = []
    real_run = F._fp8_pchunk_autotuned.run
    monkeypatch.setattr(F._fp8_pchunk_autotuned, "run", lambda *a, **k: entered.append(1) or real_run(*a, **k))
    for _ in range(2):
        again = F.fp8_gemm_promote(aq, bq, sa, sb, out=_poisoned(M, N), chunk_k=64, programs=3)
        assert torch.equal(again.view(torch.int16), first.view(torch.int16))
    assert not entered
    ok, info = check(again, F.fp8_reference(aq, bq, sa, sb), "fp8")
    assert ok, info
    F.fp8_gemm_promote(aq, bq, sa, sb, out=_poisoned(M, N), chunk_k=64, programs=2)
    assert entered and (M, N, K, per_row, 64, 2, aq.device) in F._PLANS


def test_promote_wrong_scales_fail():
    _, _, aq, bq, sa, sb = _operands(70, 40, 96, True)
    ref = F.fp8_reference(aq, bq, sa, sb)
    wrong_sb = sb.clone()
    wrong_sb[-1] *= 1.5  # the last output channel, in the last N tile
    out = F.fp8_gemm_promote(aq, bq, sa, wrong_sb, out=_poisoned(70, 40), chunk_k=64, programs=2)
    assert not check(out, ref, "fp8")[0]


def test_promote_needs_tma_strides():
    """K = 300 fp8 bytes per row is no multiple of 16: the launcher says so instead of running."""
    _, _, aq, bq, sa, sb = _operands(20, 40, 300, True)
    with pytest.raises(NotImplementedError, match="16 bytes"):
        F.fp8_gemm_promote(aq, bq, sa, sb)
    with pytest.raises(ValueError, match="chunk_k"):
        F.fp8_gemm_promote(aq[:, :256].contiguous(), bq[:, :256].contiguous(), sa, sb, chunk_k=0)


def test_promote_gpu_only_paths_are_skipped_with_reason():
    pytest.skip("GPU only, not testable under TRITON_INTERPRET=1: the interpreter multiplies fp8 "
                "tiles in fp32 with an fp32 accumulator, so where the promotion happens does not "
                "change its result (Hopper's reduced-precision wgmma accumulation is what the "
                "promotion bounds); the fused (tile, chunk) loop (FLATTEN, FuseNestedLoops), TMA "
                "hardware and the autotuned 128x256x128 tiles. benchmarks/gemm.py checks "
                "triton_promote against float64 on the GPU at every registered shape")


def test_promote_prune_keeps_the_measured_tiles():
    """The GPU configs' pruning: decode tiles only at M <= 64; 128x128 only where N < 256."""
    import triton

    cfgs = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 128, "GROUP_M": 8})
            for bm, bn in [(128, 256), (128, 128), (64, 128), (64, 32)]]
    tiles = lambda m, n: [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"])
                          for c in F._prune_pchunk(cfgs, {"M": m, "N": n})]
    assert tiles(4096, 6144) == [(128, 256)]
    assert tiles(1024, 128) == [(128, 256), (128, 128)]
    assert tiles(16, 6144) == [(64, 128), (64, 32)]


# ---- split-K for decode shapes, "triton_splitk": one launch, per-tile semaphores ------------

# (M, N, K): under the interpreter BLOCK_N 32, BLOCK_K 32 and two k tiles per split, so K 256 is
# 4 splits, K 300 five (the last split ends in a partial k tile); M 33 a 64-row token tile,
# N 70 / 24 partial N tiles
SPLITK_CASES = [(16, 96, 256), (1, 24, 64), (33, 70, 300), (64, 40, 128), (5, 33, 192)]


@pytest.mark.parametrize("per_row", [True, False], ids=["per_row", "per_tensor"])
@pytest.mark.parametrize("shape", SPLITK_CASES, ids=lambda s: "x".join(map(str, s)))
def test_splitk_vs_dequantized_float64(shape, per_row):
    M, N, K = shape
    _, _, aq, bq, sa, sb = _operands(M, N, K, per_row)
    out = _poisoned(M, N)
    res = F.fp8_gemm_splitk(aq, bq, sa, sb, out=out)
    assert res.data_ptr() == out.data_ptr()
    ok, info = check(out, F.fp8_reference(aq, bq, sa, sb), "fp8")
    assert ok, info


@pytest.mark.parametrize("per_row", [True, False], ids=["per_row", "per_tensor"])
@pytest.mark.parametrize("shape", [s for s in SPLITK_CASES if s[2] % 16 == 0], ids=lambda s: "x".join(map(str, s)))
def test_splitk_tma_loads_vs_dequantized_float64(shape, per_row):
    """The candidates' TMA form (A and B through tensor descriptors; zeros past the M and N edges)."""
    M, N, K = shape
    _, _, aq, bq, sa, sb = _operands(M, N, K, per_row)
    out = _poisoned(M, N)
    F.fp8_gemm_splitk(aq, bq, sa, sb, out=out, config=(32, 32, max(2, -(-K // 64)), 4, 1, True))
    ok, info = check(out, F.fp8_reference(aq, bq, sa, sb), "fp8")
    assert ok, info


def test_splitk_semaphores_reset_and_calls_agree():
    """The last program of a tile resets its semaphore: after a call every counter is zero, and a
    second call (same buffers) gives the first one's output bit for bit. A counter left at 1
    (a launch that died half way) would make the wrong program reduce: caught by the check."""
    M, N, K = 16, 96, 256
    _, _, aq, bq, sa, sb = _operands(M, N, K, True)
    F._SPLITK_BUFS.clear()
    first = F.fp8_gemm_splitk(aq, bq, sa, sb, out=_poisoned(M, N))
    (locks, part), = F._SPLITK_BUFS.values()
    assert locks.numel() >= 3 and int(locks.abs().sum()) == 0
    again = F.fp8_gemm_splitk(aq, bq, sa, sb, out=_poisoned(M, N))
    assert torch.equal(again.view(torch.int16), first.view(torch.int16))
    locks[0] = 1  # tile 0's count off by one: its third split reduces, before the fourth is written
    part.fill_(float("nan"))  # (not the last call's partials, which would hide it)
    bad = F.fp8_gemm_splitk(aq, bq, sa, sb, out=_poisoned(M, N))
    assert not check(bad, F.fp8_reference(aq, bq, sa, sb), "fp8")[0]
    assert bad[:, 32:].isfinite().all() and not bad[:, :32].isfinite().any()  # tile 0 only
    F._SPLITK_BUFS.clear()


def test_splitk_refuses_prefill_and_bad_configs():
    _, _, aq, bq, sa, sb = _operands(65, 24, 64, True)
    with pytest.raises(NotImplementedError, match="decode"):
        F.fp8_gemm_splitk(aq, bq, sa, sb)


@pytest.mark.parametrize("per_row", [True, False], ids=["per_row", "per_tensor"])
@pytest.mark.parametrize("tma", [False, True], ids=["pointers", "tma"])
def test_splitk_one_split_promotes_every_tile_and_stores_directly(per_row, tma, monkeypatch):
    """SPLIT 1 (one program per tile, as cuBLAS's decode kernel): a K longer than PROMOTE_K (made
    64 here) promotes every k tile; no partial and no semaphore (the buffers stay untouched)."""
    from _kernel_helpers import LaunchSpy

    monkeypatch.setattr(F, "PROMOTE_K", 64)
    M, N, K = 5, 70, 256
    _, _, aq, bq, sa, sb = _operands(M, N, K, per_row)
    spy = LaunchSpy(F._fp8_gemm_splitk)
    monkeypatch.setattr(F, "_fp8_gemm_splitk", spy)
    F._SPLITK_BUFS.clear()
    out = F.fp8_gemm_splitk(aq, bq, sa, sb, out=_poisoned(M, N), config=(32, 32, 1, 4, 1, tma))
    kw = spy.kwargs[-1]
    assert spy.grids[-1] == (3, 1, 1) and kw["SPLIT"] == 1 and kw["PROMOTE_EACH"] is True and kw["TMA"] is tma
    assert not F._SPLITK_BUFS
    ok, info = check(out, F.fp8_reference(aq, bq, sa, sb), "fp8")
    assert ok, info


def test_splitk_candidates_keep_the_promotion_bound(monkeypatch):
    """GPU candidates (host arithmetic): every split of several at most PROMOTE_K elements (so no
    per-tile promotion) and at least two k tiles, several programs per SM, at the registered decode
    shape and the long-K ones; SPLIT 1 candidates beside them."""
    monkeypatch.setattr(F, "interpreting", lambda: False)
    for M, N, K in [(16, 6144, 4096), (16, 4096, 14336), (16, 3584, 18944), (1, 4096, 4096), (64, 8192, 8192)]:
        cands = F.splitk_candidates(M, N, K, 132)
        assert len(cands) >= 4
        assert any(c[2] == 1 for c in cands)  # one program per tile (cuBLAS's shape), promoting every tile
        for bn, bk, split, w, st in (c for c in cands if c[2] > 1):
            per = -(-(-(-K // split)) // bk) * bk
            assert per <= F.PROMOTE_K and split * per >= K, (M, N, K, bn, bk, split)
            assert -(-N // bn) * split >= 132  # at least one program per SM
            assert F._splitk_plan(M, N, K, (bn, bk, split, w, st))[3]["PROMOTE_EACH"] is False


def test_splitk_plans_once_and_buffers_stay_bounded(monkeypatch):
    """The first call of a problem picks and keeps its plan (later calls skip the tuner); buffers
    are kept per stream, at most _SPLITK_STREAMS of them."""
    import profkit.kernels.timing as T

    M, N, K = 5, 33, 192
    _, _, aq, bq, sa, sb = _operands(M, N, K, False)
    F._SK_PLANS.clear()
    first = F.fp8_gemm_splitk(aq, bq, sa, sb, out=_poisoned(M, N))
    assert (M, N, K, False, aq.device) in F._SK_PLANS
    monkeypatch.setattr(T, "tuned", lambda *a, **k: pytest.fail("tuner entered on a planned problem"))
    again = F.fp8_gemm_splitk(aq, bq, sa, sb, out=_poisoned(M, N))
    assert torch.equal(again.view(torch.int16), first.view(torch.int16))
    F._SPLITK_BUFS.clear()
    for i in range(F._SPLITK_STREAMS):
        F._SPLITK_BUFS[("fake", i)] = [torch.zeros(1, dtype=torch.int32), torch.empty(1)]
    F._splitk_buffers(aq.device, 4, 64)
    assert len(F._SPLITK_BUFS) == F._SPLITK_STREAMS  # at the cap: the oldest out, the new one in
    assert ("fake", 0) not in F._SPLITK_BUFS and (aq.device, 0) in F._SPLITK_BUFS
    F._SPLITK_BUFS.clear()


def test_splitk_tma_plan_falls_back_to_pointers_for_operands_tma_cannot_read(monkeypatch):
    """A plan picked with TMA loads (aligned, row-major operands) meets a later call of the same
    shape whose A is a strided view: the same tiles run with pointer loads, and the result holds."""
    from _kernel_helpers import LaunchSpy

    M, N, K = 16, 96, 256
    _, _, aq, bq, sa, sb = _operands(M, N, K, False)
    wide = torch.zeros(M, K + 32, dtype=aq.dtype)
    wide[:, 16:16 + K] = aq
    view = wide[:, 16:16 + K]  # rows K + 32 apart: not row-major
    key = (M, N, K, False, aq.device)
    F._SK_PLANS[key] = F._splitk_plan(M, N, K, (32, 32, 4, 4, 1, True))
    spy = LaunchSpy(F._fp8_gemm_splitk)
    monkeypatch.setattr(F, "_fp8_gemm_splitk", spy)
    try:
        out = F.fp8_gemm_splitk(aq, bq, sa, sb, out=_poisoned(M, N))
        assert spy.kwargs[-1]["TMA"] is True
        ok, info = check(out, F.fp8_reference(aq, bq, sa, sb), "fp8")
        assert ok, info
        out = F.fp8_gemm_splitk(view, bq, sa, sb, out=_poisoned(M, N))
        assert spy.kwargs[-1]["TMA"] is False
        ok, info = check(out, F.fp8_reference(aq, bq, sa, sb), "fp8")
        assert ok, info
    finally:
        F._SK_PLANS.pop(key, None)
