"""fp8 (e4m3) GEMM with scales, bf16 output: y = (A_q @ B_q^T) * sa * sb.

A (M, K) activations, B (N, K) weights (nn.Linear layout, i.e. K-major for the MMA), both
float8_e4m3fn. Two scaling schemes:
    per-tensor  sa, sb are scalars (one amax each)
    per-row     sa (M,) per token, sb (N,) per output channel; applied to the fp32
                accumulator in the epilogue, so the K loop is a plain fp8 MMA

Accumulation. Hopper's fp8 MMA adds its products into the accumulator with reduced precision
(~14 bits); over a whole K of thousands that fails the error bound, so cuBLAS (without fast
accumulation) and DeepSeek-V3's kernels add the MMA's partial sum into an fp32 accumulator on
the CUDA cores every 128 K elements ("promotion"). v1 (variant "triton") asks Triton for it:
tl.dot's max_num_imprecise_acc = BLOCK_K = 128 splits each tile's MMA chain and adds the
partial into the fp32 accumulator, waiting on the MMA first (the tensor cores idle during the
adds: 72-75 % of _scaled_mm on an H100, 65-72 % on an H200). v2 (``fp8_gemm``, variant
"triton_v2") writes the promotion into the kernel: PROMOTE tiles of BLOCK_K chain their MMAs
in a partial accumulator that is then added to the fp32 one (PROMOTE >= 2 keeps Triton from
folding `acc + dot(a, b, 0)` into `dot(a, b, acc)`, which would drop the promotion); measured
slower than v1 on an H100 (62 % against 72 % at 4096 x 6144 x 4096): the partial accumulator is
zeroed and consumed every iteration, so no MMA stays in flight across the adds, and a longer
interval (512, PROMOTE 4 tiles unrolled in one pipelined iteration) needs PROMOTE x stages tiles
of shared memory (576 KB: out of resources). Kept as the rejected attempt. v3
(``fp8_gemm_promote``, variants "triton_promote" / "triton_promote_tensor") promotes at most every
PROMOTE_K = 2048 elements on a persistent TMA kernel whose (tile, chunk) loop Triton fuses with
the k loop, so loads run ahead across promotions (round 3, benchmarks/gpu/fp8_promotion/: every
promotion costs 1-2 us on Hopper + Triton 3.6, and 2048 keeps a 2x margin to the error bound).

Variants: "triton" (v1, per-row scales, promotion every 128), "triton_tensor" (v1, per-tensor),
"triton_v2" (v2, per-row, every 128), "triton_promote" (v3, per-row, every <= 2048; round 5:
scales loaded after the last promotion), "triton_promote_early" (v3 as rounds 3-4 ran it: scales
loaded before each promotion),
"triton_promote_tensor" (v3, per-tensor), "triton_splitk" / "triton_splitk_tensor" (decode, M <= 64:
split-K or one program per tile, round 6; see fp8_gemm_splitk), "triton_streamk" / "_tensor" and
"triton_helped" / "_tensor" (one-wave shapes, rounds 7 and 10: the rejected attempts, kept), "triton_fastacc" (v1 without promotion: fast, and at
K = 8192 it misses the max-error bound: expected-inexact); "gluon_ws" / "gluon_ws_tensor" (round 15:
the promotion kernel warp-specialized in Gluon, fp8_gemm_ws.py; Hopper only) and "gluon_ws_sk" / "_tensor"
(the same with the partial last wave split by k over all programs, stream-K: the rejected attempt, kept);
"gluon_ws112" / "_tensor" (round 16: cuBLAS's 128 x 112 tile from three wgmma chains,
fp8_gemm_ws112.py; rejected, kept); "cuda_ws112" / "_tensor" (round 17: that tile in CUDA C++
with cuBLAS's own instruction, wgmma m64n112k32, fp8_gemm_cuda.py; Hopper and nvcc; its CTAs paired along
M, sharing B) and "cuda_ws112_g2" / "_tensor" (round 18: the same without clusters, launched
plainly so that the SMs of a GPC take neighbouring tiles and the L2 request coalescer merges their
reads, in GROUP_M 2 order); "cuda_ws112_steer" / "_tensor" (round 19: round 17's pairs along M
with the clusters numbered GPC by GPC where they land, GROUP_M 1, so that one GPC's clusters share
A; rejected: the coalescer merges no more, kept); "cuda_ws112_kflip" / "_tensor" (round 20:
cuda_ws112_g2 with every other tile's k loop run from K's end down, so a wave starts on the L2's
most recent reads: 24 % fewer DRAM bytes, no faster; rejected, kept); "cuda_ws112_tma" / "_tensor"
(round 21: cuda_ws112_g2 with its epilogue through shared memory and TMA stores) and "cuda_ws112_tma8" /
"_tensor" (the same in GROUP_M 8 order: B read from DRAM about once); baselines "scaled_mm"
(torch._scaled_mm, row-wise scales) and "scaled_mm_tensor". Reference: the dequantized
operands in float64.
"""
from __future__ import annotations

import triton
import triton.language as tl

from . import Workload
from ._gemm_common import (LLM_PROJ, all_gemm_shapes, autotune_cache, cast_out, gemm_model, interpreting, num_sms,
                           tile_coords, tma_supported)
from ._numerics import pdl_ok
from .fp8_gemm_ws import fp8_gemm_ws
from .fp8_gemm_ws112 import fp8_gemm_ws112
from .fp8_gemm_cuda import fp8_gemm_cuda

try:  # Triton >= 3.4: programmatic dependent launch (grid dependency control)
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # pragma: no cover
    gdc_launch_dependents = gdc_wait = None

FP8_MAX = 448.0  # largest finite float8_e4m3fn


@triton.jit
def _scaled(acc, SA, SB, rm, rn, M, N, ROW_SCALES: tl.constexpr):
    """The fp32 tile acc (rows rm, columns rn) times its scales: sa[m] * sb[n], or the two scalars."""
    if ROW_SCALES:
        sa = tl.load(SA + rm, mask=rm < M, other=0.0)
        sb = tl.load(SB + rn, mask=rn < N, other=0.0)
        return acc * sa[:, None] * sb[None, :]
    return acc * (tl.load(SA) * tl.load(SB))


@triton.jit
def _fp8_gemm_kernel(A, B, C, SA, SB, M, N, K,
                     stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                     ROW_SCALES: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     GROUP_M: tl.constexpr, UPCAST: tl.constexpr, IMPRECISE_ACC: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = tile_coords(pid, num_pid_m, num_pid_n, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptr = A + rm[:, None].to(tl.int64) * stride_am + rk[None, :] * stride_ak
    b_ptr = B + rk[:, None] * stride_bk + rn[None, :].to(tl.int64) * stride_bn  # (BK, BN) tile of B^T
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptr, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        b = tl.load(b_ptr, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0)
        # Hopper's fp8 wgmma accumulates in reduced precision; Triton's default lets that run
        # over the whole K (2^30 imprecise adds). Promote into the fp32 accumulator every
        # IMPRECISE_ACC elements instead (0 = Triton's default), as cuBLAS / CUTLASS do.
        if IMPRECISE_ACC >= BLOCK_K:  # promotion at least once per tile: every tile
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=BLOCK_K)
        elif IMPRECISE_ACC > 0:
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=IMPRECISE_ACC)
        else:
            acc = tl.dot(a, b, acc)
        a_ptr += BLOCK_K * stride_ak
        b_ptr += BLOCK_K * stride_bk
    acc = _scaled(acc, SA, SB, rm, rn, M, N, ROW_SCALES)
    c_ptr = C + rm[:, None].to(tl.int64) * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptr, cast_out(acc, C.dtype.element_ty, UPCAST), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _fp8_gemm_promote(A, B, C, SA, SB, M, N, K,
                      stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                      ROW_SCALES: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PROMOTE: tl.constexpr,
                      UPCAST: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = tile_coords(pid, num_pid_m, num_pid_n, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptr = A + rm[:, None].to(tl.int64) * stride_am + rk[None, :] * stride_ak
    b_ptr = B + rk[:, None] * stride_bk + rn[None, :].to(tl.int64) * stride_bn  # (BK, BN) tile of B^T
    mmask = rm[:, None] < M
    nmask = rn[None, :] < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, tl.cdiv(K, BLOCK_K * PROMOTE)):
        part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in tl.static_range(PROMOTE):
            k_left = K - (k0 * PROMOTE + kk) * BLOCK_K  # <= 0 past the end: the masks load zeros
            a = tl.load(a_ptr, mask=mmask & (rk[None, :] < k_left), other=0.0)
            b = tl.load(b_ptr, mask=(rk[:, None] < k_left) & nmask, other=0.0)
            part = tl.dot(a, b, part)
            a_ptr += BLOCK_K * stride_ak
            b_ptr += BLOCK_K * stride_bk
        acc += part  # promotion: the MMA's partial sum into the fp32 accumulator
    acc = _scaled(acc, SA, SB, rm, rn, M, N, ROW_SCALES)
    c_ptr = C + rm[:, None].to(tl.int64) * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptr, cast_out(acc, C.dtype.element_ty, UPCAST), mask=mmask & nmask)


PROMOTE_INTERVAL = 128  # K elements between promotions (cuBLAS's and DeepSeek-V3's interval)


def _promote_configs(interval: int):
    """Candidate tiles of the v2 kernel for a promotion interval: BLOCK_K * PROMOTE = interval
    (PROMOTE >= 2, so intervals below 2 * BLOCK_K round up); large tiles (one CTA per SM) and
    smaller ones (two per SM) for large M, narrow-M tiles for decode shapes."""
    if interpreting():
        return [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4,
                               "PROMOTE": max(2, interval // 32)}, num_warps=4, num_stages=1)]
    bk = 64 if interval <= 128 else 128
    out = []
    for bm, bn, w, s, g in [(128, 256, 8, 3, 8), (128, 128, 8, 4, 8), (128, 128, 4, 4, 8), (128, 64, 4, 4, 8),
                            (256, 128, 8, 3, 8), (16, 128, 4, 4, 1), (16, 64, 4, 4, 1)]:
        out.append(triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g,
                                  "PROMOTE": max(2, interval // bk)}, num_warps=w, num_stages=s))
    return out


def _prune_promote(configs, named_args, **kw):
    m = named_args["M"]
    keep = [c for c in configs if (c.kwargs["BLOCK_M"] <= 64 or m >= 2 * c.kwargs["BLOCK_M"])
            and (c.kwargs["BLOCK_M"] > 16 or m <= 64)]
    return keep or configs


_PROMOTE_KERNELS: dict = {}


def _promote_kernel(interval: int):
    k = _PROMOTE_KERNELS.get(interval)
    if k is None:
        k = _PROMOTE_KERNELS[interval] = triton.autotune(
            configs=_promote_configs(interval), key=["M", "N", "K", "ROW_SCALES"],
            prune_configs_by={"early_config_prune": _prune_promote})(_fp8_gemm_promote)
    return k


# ---- v3: promotion every <= 2048 K elements, persistent TMA (variant "triton_promote") ----
#
# Why 2048: round 3 (benchmarks/results/gemm.md, "Round 3"; experiments in
# benchmarks/gpu/fp8_promotion/) measured every promotion on Hopper + Triton 3.6 at 1-2 us
# (MMA wait, 128 FADDs, 128 MOVs to zero the partial, spills); every 128 (v1) costs ~30 %,
# every <= 2048 elements 0-8 %. The error grows with the interval: max|err|/rms 1.5-2.4e-2 at 2048
# (v1 and _scaled_mm: 1.2-1.8e-2), 2.0-3.5e-2 at 4096 (and at K <= 4096 that is no promotion at
# all), 3.3-6.5e-2 without: 2048 keeps a 2x margin to the bound (5e-2) at K up to 18944.
# Registered, on an H100: 93-106 % of _scaled_mm at M >= 1024 (v1 63-75 %; gemm.md, "Round 3 in
# the lab").
PROMOTE_K = 2048


@triton.jit
def promote_chunks(k_tiles, max_tiles):
    """(n_chunks, chunk): k_tiles split into the fewest chunks of at most max_tiles, all of one
    length (so the k loop's trip count is loop-invariant), evened out so that the steps past
    the end, n_chunks * chunk - k_tiles, are fewer than n_chunks (all in the last chunk).
    Integer arithmetic only: the same code runs in the kernel and, as promote_chunks.fn, on
    the host (tests)."""
    n_chunks = (k_tiles + max_tiles - 1) // max_tiles
    chunk = (k_tiles + n_chunks - 1) // n_chunks
    return n_chunks, chunk


@triton.jit
def _fp8_gemm_pchunk(a_desc, b_desc, c_desc, SA, SB, M, N, K,
                     ROW_SCALES: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, CHUNK_K: tl.constexpr,
                     NUM_SMS: tl.constexpr, FLATTEN: tl.constexpr, UPCAST: tl.constexpr,
                     SCALE_LATE: tl.constexpr = False, SK_TILES: tl.constexpr = 0, P=None, stride_p=0,
                     SUMS: tl.constexpr = False, PDL: tl.constexpr = False):
    """Persistent; one loop over (output tile, promotion chunk) work items, each a k loop of
    `chunk` tiles chaining the MMA into `part`, then acc += part in fp32 (the promotion), and
    after a tile's last chunk the scaled bf16 store. The k loop's trip count is loop-invariant,
    so Triton fuses it into the outer loop (FuseNestedLoops) and the TMA loads run ahead across
    promotions and tiles. Descriptors of A (M, K), B (N, K), C (M, N), made on the host (kernel
    parameters; descriptors made in the kernel measured 2-4 % slower here on an H100): boxes past
    the edges read zeros, the TMA store clips. SCALE_LATE: per-row scales loaded after a tile's
    last promotion (fewer registers live across the loop) instead of before it (latency hidden
    behind the MMA wait). SK_TILES > 0 (fp8_gemm_streamk): the last SK_TILES tiles are left to
    the stream-K kernel launched after this one (_fp8_gemm_sktail). SUMS (fp8_gemm_helped's helper
    grid): each tile's fp32 sum goes unscaled to P (row stride stride_p) instead of C, and with
    PDL the dependent grid (_fp8_gemm_head) may launch at once."""
    if SUMS and PDL:
        gdc_launch_dependents()
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    MAX_TILES: tl.constexpr = (CHUNK_K + BLOCK_K - 1) // BLOCK_K  # whole k tiles per promotion
    n_chunks, chunk = promote_chunks(tl.cdiv(K, BLOCK_K), MAX_TILES)
    my_tiles = tl.cdiv(num_pid_m * num_pid_n - SK_TILES - start, NUM_SMS)  # <= 0: none
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for w in tl.range(0, my_tiles * n_chunks, flatten=FLATTEN):
        t = w // n_chunks
        c = w - t * n_chunks
        pid_m, pid_n = tile_coords(start + t * NUM_SMS, num_pid_m, num_pid_n, GROUP_M)
        om = pid_m * BLOCK_M
        on = pid_n * BLOCK_N
        part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(chunk):  # past K (last chunk only) TMA reads zeros
            ok = (c * chunk + kk) * BLOCK_K
            a = a_desc.load([om, ok])
            b = b_desc.load([on, ok])
            part = tl.dot(a, b.T, part)
        last = c == n_chunks - 1
        if ROW_SCALES and not SCALE_LATE:  # loads issued before the promotion waits on the MMA; only the last
            # chunk's read anything (the bound is a scalar select: Triton 3.9's interpreter
            # cannot mask with `tensor & scalar bool`)
            rm = om + tl.arange(0, BLOCK_M)
            rn = on + tl.arange(0, BLOCK_N)
            sa = tl.load(SA + rm, mask=rm < tl.where(last, M, 0), other=0.0)
            sb = tl.load(SB + rn, mask=rn < tl.where(last, N, 0), other=0.0)
        acc += part  # promotion: the MMA's partial sum into the fp32 accumulator
        if SUMS:
            if last:
                pr = om + tl.arange(0, BLOCK_M)
                pc = on + tl.arange(0, BLOCK_N)
                tl.store(P + pr.to(tl.int64)[:, None] * stride_p + pc[None, :], acc)
        elif last:
            if ROW_SCALES and SCALE_LATE:
                rm = om + tl.arange(0, BLOCK_M)
                rn = on + tl.arange(0, BLOCK_N)
                sa = tl.load(SA + rm, mask=rm < M, other=0.0)
                sb = tl.load(SB + rn, mask=rn < N, other=0.0)
            if ROW_SCALES:
                y = acc * sa[:, None] * sb[None, :]
            else:
                y = acc * (tl.load(SA) * tl.load(SB))
            c_desc.store([om, on], cast_out(y, c_desc.dtype, UPCAST))
        # the next tile starts from zero. Not `if last: acc = 0`: an if that yields acc breaks
        # FuseNestedLoops in Triton 3.6; acc is finite (fp8 products), so the multiply is exact.
        acc = acc * (c != n_chunks - 1).to(tl.float32)


@triton.jit
def _fp8_gemm_head(a_desc, b_desc, c_desc, SA, SB, P, stride_p, M, N, K,
                   ROW_SCALES: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, CHUNK_K: tl.constexpr,
                   FLATTEN: tl.constexpr, UPCAST: tl.constexpr, PDL: tl.constexpr):
    """fp8_gemm_helped's main grid: one output tile a program, v3's (promotion chunk, k) loop over
    the head of K (the descriptors' K), then, after the loop, the helper grid's sum of the tile's
    tail (P, fp32, row stride stride_p; with PDL waited for here and only here) added before the
    scales. The wait and the sum's load sit after the loop: inside v3's fused loop gdc_wait kept
    Triton from pipelining the TMA loads, and the load's layout change took 128 KB of shared
    memory beside the loop's buffers (sm_90a builds, Triton 3.9)."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = tile_coords(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
    om = pid_m * BLOCK_M
    on = pid_n * BLOCK_N
    n_chunks, chunk = promote_chunks(tl.cdiv(K, BLOCK_K), (CHUNK_K + BLOCK_K - 1) // BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for c in tl.range(0, n_chunks, flatten=FLATTEN):
        part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(chunk):  # past the head (last chunk only) TMA reads zeros
            ok = (c * chunk + kk) * BLOCK_K
            a = a_desc.load([om, ok])
            b = b_desc.load([on, ok])
            part = tl.dot(a, b.T, part)
        acc += part  # promotion
    if PDL:
        gdc_wait()
    pr = om + tl.arange(0, BLOCK_M)
    pc = on + tl.arange(0, BLOCK_N)
    acc += tl.load(P + pr.to(tl.int64)[:, None] * stride_p + pc[None, :])
    c_desc.store([om, on], cast_out(_scaled(acc, SA, SB, pr, pc, M, N, ROW_SCALES), c_desc.dtype, UPCAST))


# ---- stream-K tail (variants "triton_streamk" / "triton_streamk_tensor", round 7) ----------------
#
# Why: at qwen7b-down-m1024 (N = 3584) v3 has 112 tiles of 128x256 for 132 SMs: one wave, 15 % of
# the chip idle, and per-tensor _scaled_mm runs 256 tiles of 112x128 in two waves (ncu/torch.profiler
# names, H200, round 7); at 8192^3 the 2048 tiles leave a last wave of 68. Triton tiles are powers of
# two, so the balance has to come from K: the last T % NUM_SMS tiles' (tile, promotion chunk) items
# are dealt out in equal contiguous ranges, one per program (stream-K, Osama et al. 2023; "DP + SK").
# Fewer items than a tile per program, so a range touches at most two tiles: the head of the later
# one (run first; its partial stored and flagged unless it is the whole tile) and the tail of the
# earlier one (run second; it holds the tile's last item, so it adds the partials of the programs
# before it that hold the rest, nearest first, and stores the tile). A program only waits on
# programs before it, which ran their heads first: no long waits on the GPU, and none at all under
# the interpreter, which runs programs in order. Round 4's stream-K kept the partial store, the
# atomic and the barrier inside the fused loop and lost the pipelining; here each segment is a loop
# of its own with v3's body, and all the synchronisation is between the loops.

@triton.jit
def _sk_segment(a_desc, b_desc, om, on, s0, s1, t, n_chunks, chunk, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, FLATTEN: tl.constexpr):
    """fp32 sum of items [s0, s1) of tile t (whole promotion chunks, each promoted into acc)."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for w in tl.range(s0, s1, flatten=FLATTEN):
        c = w - t * n_chunks
        part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(chunk):
            ok = (c * chunk + kk) * BLOCK_K
            a = a_desc.load([om, ok])
            b = b_desc.load([on, ok])
            part = tl.dot(a, b.T, part)
        acc += part
    return acc


@triton.jit
def _sk_finish(acc, c_desc, SA, SB, P, LOCKS, M, N, om, on, pid, t, SK_ITEMS, n_chunks, ROW_SCALES: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, NUM_SMS: tl.constexpr, UPCAST: tl.constexpr):
    """The tile's last segment: add the partials of programs pid-1, pid-2, ... whose ranges reach
    into tile t (each waited for on its flag, which is then reset), scale, store bf16."""
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    q = pid - 1
    hi_q = pid * SK_ITEMS // NUM_SMS
    while (q >= 0) & (hi_q > t * n_chunks):
        lo_q = q * SK_ITEMS // NUM_SMS
        if hi_q > lo_q:
            while tl.atomic_add(LOCKS + q, 0, sem="acquire", scope="gpu") == 0:
                pass
            acc += tl.load(P + q.to(tl.int64) * (BLOCK_M * BLOCK_N) + offs, cache_modifier=".cg")
            tl.atomic_xchg(LOCKS + q, 0, sem="relaxed", scope="gpu")  # ready for the next launch
        hi_q = lo_q
        q -= 1
    y = _scaled(acc, SA, SB, om + tl.arange(0, BLOCK_M), on + tl.arange(0, BLOCK_N), M, N, ROW_SCALES)
    c_desc.store([om, on], cast_out(y, c_desc.dtype, UPCAST))


@triton.jit
def _streamk_tail(a_desc, b_desc, c_desc, SA, SB, P, LOCKS, M, N, pid, num_pid_m, num_pid_n, first, SK_ITEMS,
                  n_chunks, chunk, ROW_SCALES: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, FLATTEN: tl.constexpr,
                  UPCAST: tl.constexpr):
    """Program pid's share of the stream-K tiles (ids first, first + 1, ...): items [lo, hi). Both
    segment loops sit outside any `if` (an empty range is a zero-trip loop), as v3's loop does: only
    the epilogues are conditional."""
    lo = pid * SK_ITEMS // NUM_SMS
    hi = (pid + 1) * SK_ITEMS // NUM_SMS
    tb = (tl.maximum(hi, 1) - 1) // n_chunks  # the later tile: its head [s0, hi)
    s0 = tl.maximum(lo, tb * n_chunks)
    pid_m, pid_n = tile_coords(first + tb, num_pid_m, num_pid_n, GROUP_M)
    acc = _sk_segment(a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, s0, hi, tb, n_chunks, chunk,
                      BLOCK_M, BLOCK_N, BLOCK_K, FLATTEN)
    if hi > lo:
        if hi == (tb + 1) * n_chunks:  # holds the tile's end (and, if s0 == lo, waits on earlier programs)
            _sk_finish(acc, c_desc, SA, SB, P, LOCKS, M, N, pid_m * BLOCK_M, pid_n * BLOCK_N, pid, tb, SK_ITEMS,
                       n_chunks, ROW_SCALES, BLOCK_M, BLOCK_N, NUM_SMS, UPCAST)
        else:
            offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
            tl.store(P + pid.to(tl.int64) * (BLOCK_M * BLOCK_N) + offs, acc)
            tl.debug_barrier()  # every thread's part stored before the one release (as _fp8_gemm_splitk)
            tl.atomic_xchg(LOCKS + pid, 1, sem="release", scope="gpu")
    ta = lo // n_chunks  # the earlier tile's tail [lo, end of ta), when the range reaches past it
    split = (ta != tb) & (hi > lo)
    pid_m, pid_n = tile_coords(first + ta, num_pid_m, num_pid_n, GROUP_M)
    acc = _sk_segment(a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, lo, tl.where(split, (ta + 1) * n_chunks, lo),
                      ta, n_chunks, chunk, BLOCK_M, BLOCK_N, BLOCK_K, FLATTEN)
    if split:  # its last segment
        _sk_finish(acc, c_desc, SA, SB, P, LOCKS, M, N, pid_m * BLOCK_M, pid_n * BLOCK_N, pid, ta, SK_ITEMS,
                   n_chunks, ROW_SCALES, BLOCK_M, BLOCK_N, NUM_SMS, UPCAST)


def _pchunk_configs():
    """128x256x128 w8 s3: round 3's measured tile (one CTA per SM); 128x128 beside it (more
    tiles where N is narrow); narrow-M tiles for decode shapes (M <= 64), down to 64x32 (round
    5): at M = 16, N = 6144 a 128-wide tile gives 48 programs for 132 SMs."""
    if interpreting():
        return [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4},
                              num_warps=4, num_stages=1, pre_hook=_pchunk_blocks)]
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 128, "GROUP_M": g},
                          num_warps=w, num_stages=s, pre_hook=_pchunk_blocks)
            for bm, bn, w, s, g in [(128, 256, 8, 3, 8), (128, 128, 8, 4, 8), (16, 128, 4, 4, 1),
                                    (64, 128, 4, 4, 1), (64, 64, 4, 6, 1), (64, 32, 4, 6, 1)]]


def _pchunk_blocks(nargs):
    """Autotune pre-hook: the host descriptors' boxes are the config's tiles."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk]
    nargs["c_desc"].block_shape = [bm, bn]


def _prune_pchunk(configs, named_args, **kw):
    """Narrow-M tiles for decode only; 128x128 only where N is narrower than 256. 128x128 was the
    slower tile at every registered M >= 1024 shape in rounds 3-5, and at qkv-m4096 (H100) the
    autotuner still picked it by timing noise in 2 of 4 runs: 7 % more GPU time per call."""
    m, n = named_args["M"], named_args["N"]
    keep = [c for c in configs if (c.kwargs["BLOCK_M"] <= 64) == (m <= 64)
            and not (c.kwargs["BLOCK_M"] == 128 and c.kwargs["BLOCK_N"] == 128 and n >= 256)]
    return keep or configs


_fp8_pchunk_autotuned = triton.autotune(configs=_pchunk_configs(), key=["M", "N", "K", "ROW_SCALES", "CHUNK_K", "SCALE_LATE"],
                                        prune_configs_by={"early_config_prune": _prune_pchunk})(_fp8_gemm_pchunk)


def _configs():
    if interpreting():
        return [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4},
                              num_warps=4, num_stages=1)]
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g},
                          num_warps=w, num_stages=s)
            for bm, bn, bk, w, s, g in [
                (128, 256, 128, 8, 3, 8),
                (128, 128, 128, 8, 4, 8),
                (256, 128, 128, 8, 3, 8),
                (64, 128, 128, 4, 4, 8),
                (64, 256, 128, 4, 3, 8),
                (16, 128, 256, 4, 4, 1),
                (16, 64, 256, 4, 3, 1),
            ]]


def _prune(configs, named_args, **kw):
    m = named_args["M"]
    keep = [c for c in configs if c.kwargs["BLOCK_M"] <= 64 or m >= 2 * c.kwargs["BLOCK_M"]]
    return keep or configs


_fp8_autotuned = triton.autotune(configs=_configs(), key=["M", "N", "K", "ROW_SCALES"],
                                 prune_configs_by={"early_config_prune": _prune})(_fp8_gemm_kernel)


# K elements between promotions of the fp8 MMA accumulator (see kernel). Measured on an H200
# (Triton 3.6), 8192^3: 0 (Triton default, promote never) 0.90 ms but max|err|/rms 5e-2 against
# the dequantized float64 reference (rel_fro 2.6e-3); 128: 2.58 ms, 1.8e-2 (rel_fro 1.7e-3,
# as _scaled_mm). Correct by default; "triton_fastacc" keeps the fast, imprecise one.
IMPRECISE_ACC = 128


def _fp8_args(a, b, sa, sb, out):
    import torch

    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"fp8_gemm: a {tuple(a.shape)}, b {tuple(b.shape)} (b is (N, K))")
    M, K = a.shape
    N = b.shape[0]
    row = sa.numel() != 1 or sb.numel() != 1
    if row and (sa.numel() != M or sb.numel() != N):
        raise ValueError(f"fp8_gemm: per-row scales need sa ({M},) and sb ({N},), got "
                         f"{tuple(sa.shape)}, {tuple(sb.shape)}")
    if sa.ndim != 1 or sa.dtype != torch.float32:
        sa = sa.reshape(-1).to(torch.float32)
    if sb.ndim != 1 or sb.dtype != torch.float32:
        sb = sb.reshape(-1).to(torch.float32)
    if out is None:
        out = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    return M, N, K, row, sa, sb, out, grid


def _tma_args(a, b, sa, sb, out, chunk_k, name):
    """_fp8_args of the TMA kernels (v3, stream-K): chunk_k >= 1, operands TMA can read."""
    M, N, K, row, sa, sb, out, _ = _fp8_args(a, b, sa, sb, out)
    if chunk_k < 1:
        raise ValueError(f"fp8_gemm_{name}: chunk_k must be >= 1, got {chunk_k}")
    why = tma_supported(a, b, out, names=("A", "B", "out"))
    if why:
        raise NotImplementedError(f"triton_{name}: {why}")
    return M, N, K, row, sa, sb, out


def fp8_gemm_v1(a, b, sa, sb, out=None, imprecise_acc: int | None = None):
    """v1: a (M, K) fp8, b (N, K) fp8, sa/sb fp32 scalars (per-tensor) or (M,)/(N,) (per-row);
    promotion through tl.dot's max_num_imprecise_acc (0: none, fast accumulation)."""
    M, N, K, row, sa, sb, out, grid = _fp8_args(a, b, sa, sb, out)
    _fp8_autotuned[grid](a, b, out, sa, sb, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         out.stride(0), out.stride(1), ROW_SCALES=row, UPCAST=interpreting(),
                         IMPRECISE_ACC=IMPRECISE_ACC if imprecise_acc is None else imprecise_acc)
    return out


def fp8_gemm(a, b, sa, sb, out=None, interval: int = PROMOTE_INTERVAL):
    """a (M, K) fp8, b (N, K) fp8, sa/sb fp32: scalars (per-tensor) or (M,)/(N,) (per-row);
    bf16 out. The MMA's partial sums are promoted into fp32 every `interval` K elements."""
    M, N, K, row, sa, sb, out, grid = _fp8_args(a, b, sa, sb, out)
    _promote_kernel(interval)[grid](a, b, out, sa, sb, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                                    b.stride(1), out.stride(0), out.stride(1), ROW_SCALES=row,
                                    UPCAST=interpreting())
    return out


def fp8_gemm_promote(a, b, sa, sb, out=None, chunk_k: int = PROMOTE_K, programs: int | None = None,
                     scale_late: bool = True):
    """v3: a (M, K) fp8, b (N, K) fp8, sa/sb fp32 scalars (per-tensor) or (M,)/(N,) (per-row);
    bf16 out. Promotion into fp32 at most every `chunk_k` K elements (rounded up to whole
    BLOCK_K tiles, 128 on the GPU), persistent over `programs` (default: one per SM). Operands go through
    tensor descriptors: contiguous, K a multiple of 16 and N of 8 (NotImplementedError if not).
    scale_late: per-row scales loaded after a tile's last promotion (see the kernel; round 5: 2-8 %
    less GPU time per call than loading them before it, H100, benchmarks/results/gemm.md)."""
    M, N, K, row, sa, sb, out = _tma_args(a, b, sa, sb, out, chunk_k, "promote")
    from triton.tools.tensor_descriptor import TensorDescriptor

    progs = programs or num_sms(a.device)
    key = (M, N, K, row, chunk_k, progs, scale_late, a.device)
    plan = _PLANS.get(key)
    if plan is None:  # first call of this problem: the autotuner picks (and times, once)
        _plan(key, a, b, sa, sb, out)
        return out
    # later calls: the same compiled kernel launched with the pick, past the autotuner's dispatch
    # and pre-hook (host time per call: benchmarks/results/gemm.md, "the launcher")
    grid, box_a, box_b, box_c, kw = plan
    _fp8_gemm_pchunk[grid](TensorDescriptor.from_tensor(a, box_a), TensorDescriptor.from_tensor(b, box_b),
                           TensorDescriptor.from_tensor(out, box_c), sa, sb, M, N, K, **kw)
    return out


def _plan(key, a, b, sa, sb, out):
    """Autotuned launch of a new problem; its pick kept in _PLANS as (grid, boxes, kwargs)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    M, N, K, row, chunk_k, progs, scale_late, _ = key
    grid = lambda meta: (min(progs, triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])),)
    descs = [TensorDescriptor.from_tensor(t, [1, 1]) for t in (a, b, out)]  # boxes: _pchunk_blocks
    const = dict(ROW_SCALES=row, CHUNK_K=chunk_k, NUM_SMS=progs, FLATTEN=not interpreting(),
                 UPCAST=interpreting(), SCALE_LATE=scale_late)
    _fp8_pchunk_autotuned[grid](*descs, sa, sb, M, N, K, **const)
    cfg = _fp8_pchunk_autotuned.best_config
    bm, bn, bk = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.kwargs["BLOCK_K"]
    _PLANS[key] = ((min(progs, triton.cdiv(M, bm) * triton.cdiv(N, bn)),), [bm, bk], [bn, bk], [bm, bn],
                   {**const, **cfg.all_kwargs()})


@triton.jit
def _fp8_gemm_sktail(a_desc, b_desc, c_desc, SA, SB, P, LOCKS, M, N, K, SK_TILES,
                     ROW_SCALES: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, CHUNK_K: tl.constexpr,
                     NUM_SMS: tl.constexpr, FLATTEN: tl.constexpr, UPCAST: tl.constexpr):
    """The stream-K tiles, as a kernel of their own after v3's (in one kernel with v3's loop the
    128x256 accumulator pair spilled 78-86 registers against v3's 20-22, and the spill traffic
    through the L2 made it 1.2x slower than v3 alone: H100, round 7)."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    n_chunks, chunk = promote_chunks(tl.cdiv(K, BLOCK_K), (CHUNK_K + BLOCK_K - 1) // BLOCK_K)
    _streamk_tail(a_desc, b_desc, c_desc, SA, SB, P, LOCKS, M, N, tl.program_id(0), num_pid_m, num_pid_n,
                  num_pid_m * num_pid_n - SK_TILES, SK_TILES * n_chunks, n_chunks, chunk, ROW_SCALES,
                  BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_SMS, FLATTEN, UPCAST)


# 128x256x128, 8 warps, 3 stages, GROUP_M 8: the tile v3's autotuner picks at every registered
# M >= 1024 shape on both GPUs (rounds 3-5)
STREAMK_TILE = (128, 256, 128, 8, 3, 8)


def fp8_gemm_streamk(a, b, sa, sb, out=None, chunk_k: int = PROMOTE_K, programs: int | None = None,
                     config: tuple | None = None):
    """v3 with a stream-K tail (see _streamk_tail): the first T - T % programs output tiles as v3
    (persistent, promotion every <= chunk_k), the last T % programs tiles' promotion chunks dealt
    out evenly over all programs. Same operands, scales and numerics as fp8_gemm_promote (each
    partial is whole promotion chunks, added in fp32 in a fixed order: deterministic).
    config: (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, GROUP_M), default STREAMK_TILE."""
    M, N, K, row, sa, sb, out = _tma_args(a, b, sa, sb, out, chunk_k, "streamk")
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bn, bk, w, st, g = config or ((32, 32, 32, 4, 1, 4) if interpreting() else STREAMK_TILE)
    progs = programs or num_sms(a.device)
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    sk = tiles % progs
    descs = (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bn, bk]),
             TensorDescriptor.from_tensor(out, [bm, bn]))
    const = dict(ROW_SCALES=row, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=g, CHUNK_K=chunk_k, NUM_SMS=progs,
                 FLATTEN=not interpreting(), UPCAST=interpreting(), num_warps=w, num_stages=st)
    if tiles > sk:  # whole waves: v3
        _fp8_gemm_pchunk[(progs,)](*descs, sa, sb, M, N, K, SCALE_LATE=True, SK_TILES=sk, **const)
    if sk:
        locks, part = _splitk_buffers(a.device, progs, progs * bm * bn)
        _fp8_gemm_sktail[(progs,)](*descs, sa, sb, part, locks, M, N, K, sk, **const)
    return out


# ---- helper SMs for one-wave shapes (variants "triton_helped" / "triton_helped_tensor", round 10) --
#
# Why: at qwen7b-down-m1024 v3's 112 tiles of 128x256 leave 20 of 132 SMs idle for the whole
# kernel (stream-K, round 7, spilled: its bookkeeping lives in the k loop's registers). Here K is
# cut instead, between two grids that run side by side: the helper grid (one program on each idle
# SM; v3's kernel with SUMS) computes the tail of K for every tile and stores fp32 sums; the main
# grid (one program a tile, _fp8_gemm_head) runs v3's loop over the head, so each main program
# does ~15 % fewer k steps, and waits for the helper grid only after its loop (programmatic
# dependent launch), where it adds the tile's sum before scaling. Nothing is added to a k loop.
# The helpers' tiles are 128x128 (their fp32 store's layout change fits beside the loop's buffers
# in shared memory; 128x256's does not) over the same sums matrix.
# Measured (round 10, benchmarks/results/gemm.md): 0.86-0.91x of v3 at the balance on an H100 and
# an H200, 0.95-1.01x at best. Each grid alone is as fast as predicted; together they are not,
# because v3 already runs at the board's power cap and the extra SMs lower the clock. Kept as the
# rejected attempt.

HELP_TILE = (128, 128, 128, 8, 4, 8)  # (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, GROUP_M) of the helpers
HELP_EPILOGUE_STEPS = 2  # cost of storing / loading one tile's fp32 sum, in the main tile's k steps


def helped_split(M: int, N: int, K: int, tile=None, sms: int = 132, chunk_k: int = PROMOTE_K,
                 main_k_tiles: int | None = None, help_tile=None):
    """(main tiles, helpers, main k tiles) of a helped launch, or None where the main tiles fill
    the chip. The head is as long as balances a main program (the head's k steps, in whole
    promotion chunks, and its epilogue) against the busiest helper (its tiles' tails, each step
    weighted by its tile's size against the main tile's, and their stores); main_k_tiles
    overrides it."""
    bm, bn, bk = (tile or STREAMK_TILE)[:3]
    hm, hn = (help_tile or HELP_TILE)[:2]
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    kt = triton.cdiv(K, bk)
    helpers = sms - tiles
    if helpers < 1 or kt < 2:
        return None
    per = triton.cdiv(triton.cdiv(M, hm) * triton.cdiv(N, hn), helpers)
    weight = hm * hn / (bm * bn)
    e = HELP_EPILOGUE_STEPS
    most = triton.cdiv(chunk_k, bk)

    def steps(k):  # k steps a grid runs for k tiles of K: whole promotion chunks (zeros past the end)
        n, c = promote_chunks.fn(k, most)
        return n * c

    head = main_k_tiles or min(range(1, kt),
                               key=lambda h: (max(steps(h) + e, per * weight * (steps(kt - h) + e)), -h))
    if not 0 < head < kt:
        raise ValueError(f"fp8_gemm_helped: main_k_tiles must be in 1..{kt - 1}, got {head}")
    return tiles, helpers, head


def fp8_gemm_helped(a, b, sa, sb, out=None, chunk_k: int = PROMOTE_K, programs: int | None = None,
                    main_k_tiles: int | None = None, config: tuple | None = None, help_config: tuple | None = None,
                    pdl: bool | None = None):
    """v3 where its tiles leave SMs idle (see helped_split): the idle SMs compute the tail of every
    tile's K (fp32 sums in a scratch matrix), the tiles' programs the head, side by side; else v3's
    launch (fp8_gemm_streamk with no stream-K tiles). Same numerics as v3 (promotion every <=
    chunk_k; the head's and the tail's sums added in fp32 in a fixed order: deterministic).
    config / help_config: (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, GROUP_M) of the main
    and helper grids (the helper's tile must divide the main one). pdl: the main grid launched as a
    programmatic dependent of the helper grid (default: where supported; without it the grids run
    one after the other: correct, not faster)."""
    import torch

    M, N, K, row, sa, sb, out = _tma_args(a, b, sa, sb, out, chunk_k, "helped")
    from triton.tools.tensor_descriptor import TensorDescriptor

    small = (32, 32, 32, 4, 1, 4) if interpreting() else None
    bm, bn, bk, w, st, g = config or small or STREAMK_TILE
    hm, hn, _, hw, hst, hg = help_config or small or HELP_TILE
    if bm % hm or bn % hn:
        raise ValueError(f"fp8_gemm_helped: the helper tile {hm}x{hn} must divide the main tile {bm}x{bn}")
    progs = programs or num_sms(a.device)
    split = helped_split(M, N, K, (bm, bn, bk), progs, chunk_k, main_k_tiles, (hm, hn))
    if split is None:
        return fp8_gemm_streamk(a, b, sa, sb, out, chunk_k, programs, (bm, bn, bk, w, st, g))
    tiles, helpers, head = split
    if pdl is None:
        pdl = pdl_ok(str(a.device))
    kh = head * bk
    const = dict(ROW_SCALES=row, BLOCK_K=bk, CHUNK_K=chunk_k, FLATTEN=not interpreting(), UPCAST=interpreting(),
                 PDL=pdl)
    # the sums, padded to whole main tiles (no masks); every element is written by a helper
    stride_p = triton.cdiv(N, bn) * bn
    part = torch.empty((triton.cdiv(M, bm) * bm, stride_p), dtype=torch.float32, device=a.device)
    # the tail and the head: views of A and B (TMA reads zeros past a view's end, so a promotion
    # chunk that overruns it adds nothing)
    _fp8_gemm_pchunk[(helpers,)](TensorDescriptor.from_tensor(a[:, kh:], [hm, bk]),
                                 TensorDescriptor.from_tensor(b[:, kh:], [hn, bk]),
                                 TensorDescriptor.from_tensor(out, [hm, hn]), sa, sb, M, N, K - kh,
                                 BLOCK_M=hm, BLOCK_N=hn, GROUP_M=hg, NUM_SMS=helpers, P=part, stride_p=stride_p,
                                 SUMS=True, num_warps=hw, num_stages=hst, **const)
    _fp8_gemm_head[(tiles,)](TensorDescriptor.from_tensor(a[:, :kh], [bm, bk]),
                             TensorDescriptor.from_tensor(b[:, :kh], [bn, bk]),
                             TensorDescriptor.from_tensor(out, [bm, bn]), sa, sb, part, stride_p, M, N, kh,
                             BLOCK_M=bm, BLOCK_N=bn, GROUP_M=g, num_warps=w, num_stages=st, **const,
                             **({"launch_pdl": True} if pdl else {}))
    return out


# (M, N, K, per-row, chunk_k, programs, scale_late, device) -> (grid, boxes of A, B, C, kernel
# kwargs): the autotuner's pick for that problem. The key holds every input of the autotuner's
# own key (M, N, K, ROW_SCALES, CHUNK_K; the operand dtypes are fixed: fp8 in, bf16 out) and of
# the grid and constexprs.
_PLANS: dict[tuple, tuple] = {}


# ---- split-K for decode shapes (variants "triton_splitk" / "triton_splitk_tensor") -------------
#
# Why (round 6): at M = 16 (llama8b-qkv decode, N 6144, K 4096) v3 gives each 64-wide N tile
# one program that walks all 32 k tiles in series, 13-14 us of GPU time against cuBLAS's 6-7 us
# per-tensor kernel (weights warm in the L2, H100 and H200): a chain of 32 dependent TMA-wait /
# MMA steps, not bandwidth. Split-K cuts the chain: SPLIT programs per N tile each sum one
# K range of at most PROMOTE_K elements (the split is the promotion chunk, so the numerics are
# v3's), write the fp32 partial, and count themselves in on a per-tile semaphore; the last to
# arrive adds the tile's partials in split order (so the result does not depend on who came
# last), scales, stores bf16 and resets the counter. One launch, no float atomics. The tile is
# computed transposed (B tile x A tile^T: the N tile is the MMA's 64/128-row side and the few
# tokens its narrow side), as small-M kernels do, instead of padding M to 64 rows. SPLIT 1 is a
# candidate too (one program per tile, deep pipeline, promotion every k tile: cuBLAS's shape),
# the fastest at llama8b-qkv-m16 on an H100 (splitk_candidates).

@triton.jit
def _fp8_gemm_splitk(A, B, C, SA, SB, P, LOCKS, M, N, K, stride_am, stride_bn, stride_cm, k_per_split,
                     ROW_SCALES: tl.constexpr, SPLIT: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr,
                     TMA: tl.constexpr = False, PROMOTE_EACH: tl.constexpr = False):
    """TMA: A and B are tensor descriptors (boxes BLOCK_M x BLOCK_K, BLOCK_N x BLOCK_K; zeros past
    the edges), else pointers with masked loads. PROMOTE_EACH: a split longer than PROMOTE_K
    (SPLIT 1: the whole K, one program per tile as cuBLAS's kernel) promotes every k tile through
    tl.dot's max_num_imprecise_acc (v1's way; the MMA wait it adds hides behind the loads at
    decode). SPLIT 1 stores its tile directly: no partial, no semaphore."""
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    pid_m = tl.program_id(2)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    k0 = pid_s * k_per_split
    k_end = tl.minimum(k0 + k_per_split, K)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    if TMA:  # a split's range is whole k tiles (the last one ends at K, past which TMA reads zeros)
        for k in range(k0, k_end, BLOCK_K):
            b = B.load([pid_n * BLOCK_N, k])
            a = A.load([pid_m * BLOCK_M, k])
            acc = _splitk_dot(b, a, acc, BLOCK_K, PROMOTE_EACH)
    else:
        rk = tl.arange(0, BLOCK_K)
        b_ptr = B + rn[:, None].to(tl.int64) * stride_bn + (k0 + rk)[None, :]
        a_ptr = A + rm[:, None].to(tl.int64) * stride_am + (k0 + rk)[None, :]
        nmask = rn[:, None] < N
        mmask = rm[:, None] < M
        for k in range(k0, k_end, BLOCK_K):
            kmask = (k + rk)[None, :] < k_end
            b = tl.load(b_ptr, mask=nmask & kmask, other=0.0)
            a = tl.load(a_ptr, mask=mmask & kmask, other=0.0)
            acc = _splitk_dot(b, a, acc, BLOCK_K, PROMOTE_EACH)
            b_ptr += BLOCK_K
            a_ptr += BLOCK_K
    out_mask = (rn[:, None] < N) & (rm[None, :] < M)
    if SPLIT == 1:
        _splitk_store(C, SA, SB, acc, rm, rn, M, N, stride_cm, out_mask, ROW_SCALES, UPCAST)
    else:
        tile_off = rm[None, :].to(tl.int64) * N + rn[:, None]  # P[s] is (M, N), written transposed
        tl.store(P + pid_s.to(tl.int64) * M * N + tile_off, acc, mask=out_mask)
        # every thread's partial stored before the release below (CUTLASS's semaphore pattern:
        # barrier, then one gpu-scope release by the counting thread)
        tl.debug_barrier()
        lock = LOCKS + pid_m * tl.num_programs(0) + pid_n
        if tl.atomic_add(lock, 1, sem="acq_rel", scope="gpu") == SPLIT - 1:
            tot = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
            for s in tl.static_range(SPLIT):  # split order: the same sum whoever arrives last
                tot += tl.load(P + s * M * N + tile_off, mask=out_mask, other=0.0, cache_modifier=".cg")
            _splitk_store(C, SA, SB, tot, rm, rn, M, N, stride_cm, out_mask, ROW_SCALES, UPCAST)
            tl.atomic_xchg(lock, 0, sem="relaxed", scope="gpu")  # ready for the next launch


@triton.jit
def _splitk_dot(b, a, acc, BLOCK_K: tl.constexpr, PROMOTE_EACH: tl.constexpr):
    """acc + b @ a^T: a chain of at most PROMOTE_K elements (promoted by the fp32 sum of the
    splits), or promoted into fp32 every k tile."""
    if PROMOTE_EACH:
        return tl.dot(b, a.T, acc, max_num_imprecise_acc=BLOCK_K)
    return tl.dot(b, a.T, acc)


@triton.jit
def _splitk_store(C, SA, SB, tot, rm, rn, M, N, stride_cm, out_mask, ROW_SCALES: tl.constexpr,
                  UPCAST: tl.constexpr):
    """The scaled bf16 tile (tot is transposed: channels x tokens) into C (tokens x channels)."""
    if ROW_SCALES:
        sa = tl.load(SA + rm, mask=rm < M, other=0.0)
        sb = tl.load(SB + rn, mask=rn < N, other=0.0)
        tot = tot * sb[:, None] * sa[None, :]
    else:
        tot = tot * (tl.load(SA) * tl.load(SB))
    c_ptr = C + rm[None, :].to(tl.int64) * stride_cm + rn[:, None]
    tl.store(c_ptr, cast_out(tot, C.dtype.element_ty, UPCAST), mask=out_mask)


SPLITK_MAX_M = 64  # decode: above this v3's tiles have work enough per program


def splitk_candidates(M: int, N: int, K: int, sms: int) -> tuple[tuple[int, int, int, int, int], ...]:
    """(BLOCK_N, BLOCK_K, SPLIT, num_warps, num_stages), the default first: 1-6 programs per SM,
    every K range at most PROMOTE_K elements (the promotion bound) and at least two k tiles; and
    SPLIT 1 (per_sm 0 below: one program per tile, deep pipelines, promotion every k tile), the
    shape of cuBLAS's decode kernel (ncu: 96 CTAs, 180 KB of shared memory at llama8b-qkv-m16):
    on an H100 there, (64, 256, 1, 4, 6) took 6.76 us per-tensor against the best split's 7.25.
    Round 6 (H100, llama8b-qkv-m16 per-tensor, GPU time): BLOCK_K 128 with 4 stages 8.4 us, SPLIT 9
    10.8 us; BLOCK_K 256 with 3 stages 7.7 us, SPLIT 2 with 4 stages 7.3 us: fewer, longer splits of
    wider k tiles, and deeper pipelines (the last three candidates)."""
    if interpreting():
        return ((32, 32, max(2, triton.cdiv(K, 64)), 4, 1),)
    bm = max(16, min(64, triton.next_power_of_2(M)))
    out = []
    for bn, bk, per_sm, w, st in [(64, 256, 3, 4, 3), (64, 256, 2, 4, 3), (64, 256, 1, 4, 4), (128, 256, 2, 4, 3),
                                  (64, 128, 3, 4, 4), (32, 256, 2, 4, 3), (64, 256, 4, 4, 3), (128, 256, 3, 8, 3),
                                  (64, 256, 1, 4, 5), (64, 128, 1, 4, 8), (64, 256, 1, 8, 4),
                                  (64, 256, 0, 4, 6), (64, 256, 0, 4, 8), (64, 128, 0, 4, 8), (32, 256, 0, 4, 8)]:
        tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
        split = 1 if per_sm == 0 else max(triton.cdiv(K, PROMOTE_K), min(triton.cdiv(per_sm * sms, tiles),
                                                                          K // (2 * bk)), 1)
        c = (bn, bk, split, w, st)
        if c not in out:
            out.append(c)
    return tuple(out)


# (device, stream) -> [semaphores (int32, zero between launches), partials (fp32)]: kept across
# calls (a launch leaves its semaphores at zero); per stream, so launches on two streams never
# share them. A stream first seen inside a CUDA-graph capture gets its buffers there: their
# zeroing is then a node of the graph (once per replay, however many calls the graph holds).
# The 16 most recent streams keep theirs (benchmarks make a stream per timing).
_SPLITK_BUFS: dict[tuple, list] = {}
_SPLITK_STREAMS = 16


def _splitk_buffers(device, tiles: int, partial: int):
    import torch

    # the stream Triton launches on (what it asks at every launch; 0 on the CPU)
    stream = triton.runtime.driver.active.get_current_stream(device.index) if device.type == "cuda" else 0
    bufs = _SPLITK_BUFS.get((device, stream))
    if bufs is None or bufs[0].numel() < tiles or bufs[1].numel() < partial:
        old = bufs or [torch.empty(0, dtype=torch.int32), torch.empty(0)]
        if bufs is None and len(_SPLITK_BUFS) >= _SPLITK_STREAMS:
            _SPLITK_BUFS.pop(next(iter(_SPLITK_BUFS)))  # the oldest stream's (freed on its own stream)
        bufs = _SPLITK_BUFS[(device, stream)] = [
            torch.zeros(max(tiles, old[0].numel()), dtype=torch.int32, device=device),
            torch.empty(max(partial, old[1].numel()), dtype=torch.float32, device=device)]
    return bufs


def _splitk_plan(M, N, K, cfg):
    """(grid, k_per_split, boxes of A and B or None, kernel kwargs) of a candidate (BLOCK_N,
    BLOCK_K, SPLIT, num_warps, num_stages[, TMA]); the split evened to whole k tiles."""
    bn, bk, split, w, st = cfg[:5]
    tma = len(cfg) > 5 and cfg[5]
    k_per_split = triton.cdiv(triton.cdiv(K, split), bk) * bk
    split = triton.cdiv(K, k_per_split)
    bm = max(16, min(64, triton.next_power_of_2(M)))
    grid = (triton.cdiv(N, bn), split, triton.cdiv(M, bm))
    return grid, k_per_split, ([bm, bk], [bn, bk]) if tma else None, dict(
        SPLIT=split, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, UPCAST=interpreting(), TMA=tma,
        PROMOTE_EACH=k_per_split > PROMOTE_K, num_warps=w, num_stages=st)


def _tma_ready(a, b) -> bool:
    """What a plan made with TMA needs of later operands of its shape (K, in the key, already
    keeps the rows 16-byte multiples): row-major and 16-byte aligned."""
    return a.is_contiguous() and b.is_contiguous() and a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0


# (M, N, K, per-row, device) -> the picked candidate's plan (the launcher's host time at decode
# shapes is the whole call when do_bench flushes the L2: each piece not redone per call counts)
_SK_PLANS: dict[tuple, tuple] = {}


def fp8_gemm_splitk(a, b, sa, sb, out=None, config=None):
    """Split-K fp8 GEMM for decode shapes (M <= SPLITK_MAX_M): a (M, K) fp8, b (N, K) fp8,
    sa/sb fp32 scalars (per-tensor) or (M,)/(N,) (per-row); bf16 out (contiguous).
    config: (BLOCK_N, BLOCK_K, SPLIT, num_warps, num_stages[, TMA]), else the candidate with the least
    GPU time on this GPU (timing.tuned by CUDA-graph replay, once per problem: do_bench would time
    the launcher). Promotion into fp32 at most every PROMOTE_K elements, as v3 (each split is one
    chain; a split longer than that, SPLIT 1 included, promotes every k tile)."""
    M, N, K, row, sa, sb, out, _ = _fp8_args(a, b, sa, sb, out)
    if M > SPLITK_MAX_M:
        raise NotImplementedError(f"triton_splitk: for decode shapes (M <= {SPLITK_MAX_M}); M = {M}")
    if not out.is_contiguous() or a.stride(1) != 1 or b.stride(1) != 1:
        raise NotImplementedError("triton_splitk: a, b need unit stride along K and out must be contiguous")

    def launch(plan):
        grid, k_per_split, boxes, kw = plan
        # (SPLIT 1 stores its tile directly: no semaphore, no partial; any pointer fills the slots)
        locks, part = _splitk_buffers(a.device, grid[0] * grid[2], grid[1] * M * N) if grid[1] > 1 else (out, out)
        A, B = a, b
        if boxes and not _tma_ready(a, b):  # planned on operands TMA can read; these it cannot: same tiles, pointers
            kw = {**kw, "TMA": False}
        elif boxes:
            from triton.tools.tensor_descriptor import TensorDescriptor

            A, B = TensorDescriptor.from_tensor(a, boxes[0]), TensorDescriptor.from_tensor(b, boxes[1])
        _fp8_gemm_splitk[grid](A, B, out, sa, sb, part, locks, M, N, K, a.stride(0), b.stride(0), out.stride(0),
                               k_per_split, ROW_SCALES=row, **kw)

    if config is not None:
        launch(_splitk_plan(M, N, K, config))
        return out
    key = (M, N, K, row, a.device)
    plan = _SK_PLANS.get(key)
    if plan is None:
        from .timing import tuned

        cands = splitk_candidates(M, N, K, num_sms(a.device))
        if tma_supported(a, b, names=("A", "B")) is None:  # each candidate also through TMA
            cands = cands + tuple(c + (True,) for c in cands)
        best = tuned(("fp8_gemm_splitk",) + key, cands, lambda c: launch(_splitk_plan(M, N, K, c)), a.device,
                     graph=True)
        plan = _SK_PLANS[key] = _splitk_plan(M, N, K, best)
    launch(plan)
    return out


def quantize(x, per_row: bool):
    """x (R, K) -> (x_fp8, scale) with x ~= x_fp8 * scale; scale fp32, () or (R,)."""
    import torch

    xf = x.float()
    amax = xf.abs().amax(dim=1) if per_row else xf.abs().amax()
    scale = (amax / FP8_MAX).clamp(min=1e-12)
    q = (xf / (scale[:, None] if per_row else scale)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale.to(torch.float32)


def dequantize(q, scale):
    s = scale.double()
    return q.double() * (s[:, None] if s.ndim == 1 else s)


def fp8_reference(a, b, sa, sb):
    """float64 y from the dequantized operands."""
    return dequantize(a, sa) @ dequantize(b, sb).T


def scaled_mm(a, b, sa, sb, out=None):
    """torch._scaled_mm baseline (cuBLASLt fp8; row-wise scales through CUTLASS)."""
    import torch

    if sa.numel() == 1 and sb.numel() == 1:
        sa2, sb2 = sa.reshape(()).float(), sb.reshape(()).float()
    else:
        sa2, sb2 = sa.reshape(-1, 1).float(), sb.reshape(1, -1).float()
    y = torch._scaled_mm(a, b.t(), scale_a=sa2, scale_b=sb2, out_dtype=torch.bfloat16)
    if out is not None:
        out.copy_(y)
        return out
    return y


def autotune_choices() -> dict[str, dict[str, str]]:
    out = {"fp8_gemm.v1": autotune_cache(_fp8_autotuned), "fp8_gemm.promote": autotune_cache(_fp8_pchunk_autotuned)}
    for interval, k in _PROMOTE_KERNELS.items():
        out[f"fp8_gemm.promote{interval}"] = autotune_cache(k)
    return out


def _setup(p: dict, dtype: str, device: str):
    import torch

    a = torch.randn(p["M"], p["K"], device=device, dtype=torch.bfloat16)
    b = torch.randn(p["N"], p["K"], device=device, dtype=torch.bfloat16) * 0.02
    s = {}
    for mode, per_row in (("row", True), ("tensor", False)):
        aq, sa = quantize(a, per_row)
        bq, sb = quantize(b, per_row)
        s[mode] = (aq, bq, sa, sb)
    return s


def reference(state, variant: str):
    """float64 output of `variant` (its scale mode's dequantized operands)."""
    return fp8_reference(*state[VARIANTS[variant][0]])


VARIANTS = {  # variant -> (scale mode, fn)
    "triton": ("row", fp8_gemm_v1),
    "triton_tensor": ("tensor", fp8_gemm_v1),
    "triton_v2": ("row", fp8_gemm),
    "triton_fastacc": ("row", lambda *a, **k: fp8_gemm_v1(*a, imprecise_acc=0, **k)),
    "triton_promote": ("row", fp8_gemm_promote),
    "triton_promote_early": ("row", lambda *a, **k: fp8_gemm_promote(*a, scale_late=False, **k)),
    "triton_promote_tensor": ("tensor", fp8_gemm_promote),
    "triton_streamk": ("row", fp8_gemm_streamk),
    "triton_streamk_tensor": ("tensor", fp8_gemm_streamk),
    "triton_splitk": ("row", fp8_gemm_splitk),
    "triton_splitk_tensor": ("tensor", fp8_gemm_splitk),
    "triton_helped": ("row", fp8_gemm_helped),
    "triton_helped_tensor": ("tensor", fp8_gemm_helped),
    "gluon_ws": ("row", fp8_gemm_ws),
    "gluon_ws_tensor": ("tensor", fp8_gemm_ws),
    "gluon_ws_sk": ("row", lambda *a, **k: fp8_gemm_ws(*a, streamk=True, **k)),
    "gluon_ws_sk_tensor": ("tensor", lambda *a, **k: fp8_gemm_ws(*a, streamk=True, **k)),
    "gluon_ws112": ("row", fp8_gemm_ws112),
    "gluon_ws112_tensor": ("tensor", fp8_gemm_ws112),
    "cuda_ws112": ("row", fp8_gemm_cuda),
    "cuda_ws112_tensor": ("tensor", fp8_gemm_cuda),
    "cuda_ws112_g2": ("row", lambda *a, **k: fp8_gemm_cuda(*a, cluster=1, group_m=2, **k)),
    "cuda_ws112_g2_tensor": ("tensor", lambda *a, **k: fp8_gemm_cuda(*a, cluster=1, group_m=2, **k)),
    "cuda_ws112_steer": ("row", lambda *a, **k: fp8_gemm_cuda(*a, cluster=2, group_m=1, steer=True, **k)),
    "cuda_ws112_steer_tensor": ("tensor", lambda *a, **k: fp8_gemm_cuda(*a, cluster=2, group_m=1, steer=True, **k)),
    "cuda_ws112_kflip": ("row", lambda *a, **k: fp8_gemm_cuda(*a, cluster=1, group_m=2, kflip=True, **k)),
    "cuda_ws112_kflip_tensor": ("tensor", lambda *a, **k: fp8_gemm_cuda(*a, cluster=1, group_m=2, kflip=True, **k)),
    "cuda_ws112_tma": ("row", lambda *a, **k: fp8_gemm_cuda(*a, cluster=1, group_m=2, epilogue="tma", **k)),
    "cuda_ws112_tma_tensor": ("tensor", lambda *a, **k: fp8_gemm_cuda(*a, cluster=1, group_m=2, epilogue="tma", **k)),
    "cuda_ws112_tma8": ("row", lambda *a, **k: fp8_gemm_cuda(*a, cluster=1, group_m=8, epilogue="tma", **k)),
    "cuda_ws112_tma8_tensor": ("tensor", lambda *a, **k: fp8_gemm_cuda(*a, cluster=1, group_m=8, epilogue="tma", **k)),
    "scaled_mm": ("row", scaled_mm),
    "scaled_mm_tensor": ("tensor", scaled_mm),
}


def _shape(proj: str, m: int) -> tuple[str, dict]:
    k, n = LLM_PROJ[proj]
    return f"{proj}-m{m}", {"M": m, "N": n, "K": k}


def all_shapes() -> dict[str, dict]:
    """The full sweep (benchmarks/gemm.py --full): every LLM projection x M >= 16, and 8192^3."""
    return {k: v for k, v in all_gemm_shapes().items() if v["M"] >= 16}


SHAPES = dict([
    _shape("llama8b-qkv", 16),
    _shape("llama8b-gateup", 1024),
    _shape("qwen7b-down", 1024),
    _shape("llama8b-qkv", 4096),
    _shape("llama8b-down", 4096),
    ("m8192-n8192-k8192", {"M": 8192, "N": 8192, "K": 8192}),
])


def model(p: dict, dtype: str = "fp8") -> dict:
    d = gemm_model(p, "fp8")
    d["bytes"] += 4 * (p["M"] + p["N"])  # per-row scales (upper bound; per-tensor: 8 bytes)
    return d


WORKLOAD = Workload(
    op="fp8_gemm",
    setup=_setup,
    variants={name: (lambda mode, fn: (lambda s: fn(*s[mode])))(mode, fn) for name, (mode, fn) in VARIANTS.items()},
    shapes=SHAPES,
    model=model,
    dtypes=("fp8",),
    default_dtype="fp8",
    description="fp8 e4m3 GEMM, per-tensor and per-row (token x channel) scales, bf16 out, vs torch._scaled_mm",
    reference=reference,
    numerics="gemm",
    baselines=("scaled_mm", "scaled_mm_tensor"),
    # each variant against _scaled_mm in its own scale mode; Gluon and wgmma CUDA C++ run on Hopper
    # only, with no interpreter: both follow from VARIANTS instead of lists kept by hand
    peers={v: "scaled_mm" if mode == "row" else "scaled_mm_tensor" for v, (mode, _) in VARIANTS.items()
           if v not in ("scaled_mm", "scaled_mm_tensor")},
    gpu_only=tuple(v for v in VARIANTS if v.startswith(("gluon_", "cuda_"))),
    inexact=("triton_fastacc",),  # Hopper's reduced-precision fp8 accumulation over the whole K
    quick=("llama8b-qkv-m16", "llama8b-qkv-m4096", "m8192-n8192-k8192"),
    selftest={"t-m33-n24-k40": {"M": 33, "N": 24, "K": 64}},
    bench="gemm",
)
