"""fp8 (e4m3) GEMM with scales, bf16 output: y = (A_q @ B_q^T) * sa * sb.

A (M, K) activations, B (N, K) weights (nn.Linear layout, i.e. K-major for the MMA), both
float8_e4m3fn. Two scaling schemes:
    per-tensor  sa, sb are scalars (one amax each)
    per-row     sa (M,) per token, sb (N,) per output channel; applied to the fp32
                accumulator in the epilogue, so the K loop is a plain fp8 MMA

Accumulation. Hopper's fp8 MMA adds its products into the accumulator with reduced precision
(~14 bits); over a whole K of thousands that fails the error bound, so cuBLAS (without fast
accumulation) and DeepSeek-V3's kernels add the MMA's partial sum into an fp32 accumulator on
the CUDA cores at intervals ("promotion"). Three Triton kernels:
- ``fp8_gemm`` (variant "triton"): tl.dot's max_num_imprecise_acc = BLOCK_K = 128 splits each
  tile's MMA chain and adds the partial into the fp32 accumulator, waiting on the MMA first (the
  tensor cores idle during the adds: 72-75 % of _scaled_mm on an H100). The simple kernel, the
  before of the promotion kernel.
- ``fp8_gemm_promote`` ("triton_promote"): promotes at most every PROMOTE_K = 2048 elements on a
  persistent TMA kernel whose (tile, chunk) loop Triton fuses with the k loop, so loads run
  ahead across promotions (93-106 % of _scaled_mm at M >= 1024 on an H100).
- ``fp8_gemm_splitk`` ("triton_splitk"): decode shapes (M <= 64), split-K or one program per tile.
Each has a per-tensor variant ("_tensor"). "cuda_ws112_tma8" / "_tensor": the CUDA C++ kernel of
fp8_gemm_cuda.py (Hopper and nvcc). Baselines "scaled_mm" (torch._scaled_mm, row-wise scales)
and "scaled_mm_tensor". Reference: the dequantized operands in float64.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import triton
import triton.language as tl

from profkit.model.ops.matmul import FP8_GEMM_SHAPES as SHAPES
from profkit.model.ops.matmul import fp8_all_shapes as all_shapes  # noqa: F401  (benchmarks/gemm.py --full)
from profkit.model.ops.matmul import fp8_gemm_model as model

from . import Workload
from ._gemm_common import (
    autotune_cache,
    cast_out,
    interpreting,
    num_sms,
    tile_coords,
    tma_supported,
)
from .fp8_gemm_cuda import fp8_gemm_cuda

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
def _fp8_gemm_kernel(
    A,
    B,
    C,
    SA,
    SB,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bn,
    stride_bk,
    stride_cm,
    stride_cn,
    ROW_SCALES: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    UPCAST: tl.constexpr,
    IMPRECISE_ACC: tl.constexpr,
):
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


# ---- promotion every <= 2048 K elements, persistent TMA (variant "triton_promote") ----
#
# Why 2048: every promotion costs 1-2 us on Hopper + Triton 3.6 (MMA wait, 128 FADDs, 128 MOVs to
# zero the partial, spills); every 128 costs ~30 %, every <= 2048 elements 0-8 %. The error grows
# with the interval: max|err|/rms 1.5-2.4e-2 at 2048 (promotion every 128 and _scaled_mm:
# 1.2-1.8e-2), 2.0-3.5e-2 at 4096 (and at K <= 4096 that is no promotion at all), 3.3-6.5e-2
# without: 2048 keeps a 2x margin to the bound (5e-2) at K up to 18944 (benchmarks/results/gemm.md).
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
def _fp8_gemm_pchunk(
    a_desc,
    b_desc,
    c_desc,
    SA,
    SB,
    M,
    N,
    K,
    ROW_SCALES: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    CHUNK_K: tl.constexpr,
    NUM_SMS: tl.constexpr,
    FLATTEN: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """Persistent; one loop over (output tile, promotion chunk) work items, each a k loop of
    `chunk` tiles chaining the MMA into `part`, then acc += part in fp32 (the promotion), and
    after a tile's last chunk the scaled bf16 store. The k loop's trip count is loop-invariant,
    so Triton fuses it into the outer loop (FuseNestedLoops) and the TMA loads run ahead across
    promotions and tiles. Descriptors of A (M, K), B (N, K), C (M, N), made on the host (kernel
    parameters; descriptors made in the kernel measured 2-4 % slower here on an H100): boxes past
    the edges read zeros, the TMA store clips. Per-row scales are loaded after a tile's last
    promotion (fewer registers live across the loop: 2-8 % less GPU time per call than loading
    them before it, H100)."""
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    MAX_TILES: tl.constexpr = (CHUNK_K + BLOCK_K - 1) // BLOCK_K  # whole k tiles per promotion
    n_chunks, chunk = promote_chunks(tl.cdiv(K, BLOCK_K), MAX_TILES)
    my_tiles = tl.cdiv(num_pid_m * num_pid_n - start, NUM_SMS)  # <= 0: none
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
        acc += part  # promotion: the MMA's partial sum into the fp32 accumulator
        if last:
            if ROW_SCALES:
                rm = om + tl.arange(0, BLOCK_M)
                rn = on + tl.arange(0, BLOCK_N)
                sa = tl.load(SA + rm, mask=rm < M, other=0.0)
                sb = tl.load(SB + rn, mask=rn < N, other=0.0)
                y = acc * sa[:, None] * sb[None, :]
            else:
                y = acc * (tl.load(SA) * tl.load(SB))
            c_desc.store([om, on], cast_out(y, c_desc.dtype, UPCAST))
        # the next tile starts from zero. Not `if last: acc = 0`: an if that yields acc breaks
        # FuseNestedLoops in Triton 3.6; acc is finite (fp8 products), so the multiply is exact.
        acc = acc * (c != n_chunks - 1).to(tl.float32)


def _pchunk_configs():
    """128x256x128 w8 s3: the measured tile (one CTA per SM); 128x128 beside it (more tiles where
    N is narrow); narrow-M tiles for decode shapes (M <= 64), down to 64x32: at M = 16, N = 6144 a
    128-wide tile gives 48 programs for 132 SMs."""
    if interpreting():
        return [
            triton.Config(
                {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4},
                num_warps=4,
                num_stages=1,
                pre_hook=_pchunk_blocks,
            )
        ]
    return [
        triton.Config(
            {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 128, "GROUP_M": g},
            num_warps=w,
            num_stages=s,
            pre_hook=_pchunk_blocks,
        )
        for bm, bn, w, s, g in [
            (128, 256, 8, 3, 8),
            (128, 128, 8, 4, 8),
            (16, 128, 4, 4, 1),
            (64, 128, 4, 4, 1),
            (64, 64, 4, 6, 1),
            (64, 32, 4, 6, 1),
        ]
    ]


def _pchunk_blocks(nargs):
    """Autotune pre-hook: the host descriptors' boxes are the config's tiles."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk]
    nargs["c_desc"].block_shape = [bm, bn]


def _prune_pchunk(configs, named_args, **kw):
    """Narrow-M tiles for decode only; 128x128 only where N is narrower than 256. 128x128 was the
    slower tile at every registered M >= 1024 shape, and at qkv-m4096 (H100) the
    autotuner still picked it by timing noise in 2 of 4 runs: 7 % more GPU time per call."""
    m, n = named_args["M"], named_args["N"]
    keep = [
        c
        for c in configs
        if (c.kwargs["BLOCK_M"] <= 64) == (m <= 64)
        and not (c.kwargs["BLOCK_M"] == 128 and c.kwargs["BLOCK_N"] == 128 and n >= 256)
    ]
    return keep or configs


_fp8_pchunk_autotuned = triton.autotune(
    configs=_pchunk_configs(),
    key=["M", "N", "K", "ROW_SCALES", "CHUNK_K"],
    prune_configs_by={"early_config_prune": _prune_pchunk},
)(_fp8_gemm_pchunk)


def _configs():
    if interpreting():
        return [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4}, num_warps=4, num_stages=1)]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g}, num_warps=w, num_stages=s)
        for bm, bn, bk, w, s, g in [
            (128, 256, 128, 8, 3, 8),
            (128, 128, 128, 8, 4, 8),
            (256, 128, 128, 8, 3, 8),
            (64, 128, 128, 4, 4, 8),
            (64, 256, 128, 4, 3, 8),
            (16, 128, 256, 4, 4, 1),
            (16, 64, 256, 4, 3, 1),
        ]
    ]


def _prune(configs, named_args, **kw):
    m = named_args["M"]
    keep = [c for c in configs if c.kwargs["BLOCK_M"] <= 64 or m >= 2 * c.kwargs["BLOCK_M"]]
    return keep or configs


_fp8_autotuned = triton.autotune(
    configs=_configs(), key=["M", "N", "K", "ROW_SCALES"], prune_configs_by={"early_config_prune": _prune}
)(_fp8_gemm_kernel)


# K elements between promotions of the fp8 MMA accumulator (see kernel). Measured on an H200
# (Triton 3.6), 8192^3: 0 (Triton default, promote never) 0.90 ms but max|err|/rms 5e-2 against
# the dequantized float64 reference (rel_fro 2.6e-3); 128: 2.58 ms, 1.8e-2 (rel_fro 1.7e-3,
# as _scaled_mm): correct, so promoted.
IMPRECISE_ACC = 128


def _fp8_args(a, b, sa, sb, out):
    import torch

    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"fp8_gemm: a {tuple(a.shape)}, b {tuple(b.shape)} (b is (N, K))")
    M, K = a.shape
    N = b.shape[0]
    row = sa.numel() != 1 or sb.numel() != 1
    if row and (sa.numel() != M or sb.numel() != N):
        raise ValueError(
            f"fp8_gemm: per-row scales need sa ({M},) and sb ({N},), got {tuple(sa.shape)}, {tuple(sb.shape)}"
        )
    if sa.ndim != 1 or sa.dtype != torch.float32:
        sa = sa.reshape(-1).to(torch.float32)
    if sb.ndim != 1 or sb.dtype != torch.float32:
        sb = sb.reshape(-1).to(torch.float32)
    if out is None:
        out = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    return M, N, K, row, sa, sb, out, grid


def _tma_args(a, b, sa, sb, out, chunk_k, name):
    """_fp8_args of the TMA kernel: chunk_k >= 1, operands TMA can read."""
    M, N, K, row, sa, sb, out, _ = _fp8_args(a, b, sa, sb, out)
    if chunk_k < 1:
        raise ValueError(f"fp8_gemm_{name}: chunk_k must be >= 1, got {chunk_k}")
    why = tma_supported(a, b, out, names=("A", "B", "out"))
    if why:
        raise NotImplementedError(f"triton_{name}: {why}")
    return M, N, K, row, sa, sb, out


def fp8_gemm(a, b, sa, sb, out=None):
    """a (M, K) fp8, b (N, K) fp8, sa/sb fp32 scalars (per-tensor) or (M,)/(N,) (per-row); bf16
    out; promotion every IMPRECISE_ACC elements through tl.dot's max_num_imprecise_acc."""
    M, N, K, row, sa, sb, out, grid = _fp8_args(a, b, sa, sb, out)
    _fp8_autotuned[grid](
        a,
        b,
        out,
        sa,
        sb,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        out.stride(0),
        out.stride(1),
        ROW_SCALES=row,
        UPCAST=interpreting(),
        IMPRECISE_ACC=IMPRECISE_ACC,
    )
    return out


def fp8_gemm_promote(a, b, sa, sb, out=None, chunk_k: int = PROMOTE_K, programs: int | None = None):
    """a (M, K) fp8, b (N, K) fp8, sa/sb fp32 scalars (per-tensor) or (M,)/(N,) (per-row);
    bf16 out. Promotion into fp32 at most every `chunk_k` K elements (rounded up to whole
    BLOCK_K tiles, 128 on the GPU), persistent over `programs` (default: one per SM). Operands go through
    tensor descriptors: contiguous, K a multiple of 16 and N of 8 (NotImplementedError if not)."""
    M, N, K, row, sa, sb, out = _tma_args(a, b, sa, sb, out, chunk_k, "promote")
    from triton.tools.tensor_descriptor import TensorDescriptor

    progs = programs or num_sms(a.device)
    key = (M, N, K, row, chunk_k, progs, a.device)
    plan = _PLANS.get(key)
    if plan is None:  # first call of this problem: the autotuner picks (and times, once)
        _plan(key, a, b, sa, sb, out)
        return out
    # later calls: the same compiled kernel launched with the pick, past the autotuner's dispatch
    # and pre-hook (host time per call: benchmarks/results/gemm.md, "the launcher")
    grid, box_a, box_b, box_c, kw = plan
    _fp8_gemm_pchunk[grid](
        TensorDescriptor.from_tensor(a, box_a),
        TensorDescriptor.from_tensor(b, box_b),
        TensorDescriptor.from_tensor(out, box_c),
        sa,
        sb,
        M,
        N,
        K,
        **kw,
    )
    return out


def _plan(key, a, b, sa, sb, out):
    """Autotuned launch of a new problem; its pick kept in _PLANS as (grid, boxes, kwargs)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    M, N, K, row, chunk_k, progs, _ = key
    grid = lambda meta: (min(progs, triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])),)
    descs = [TensorDescriptor.from_tensor(t, [1, 1]) for t in (a, b, out)]  # boxes: _pchunk_blocks
    const = dict(ROW_SCALES=row, CHUNK_K=chunk_k, NUM_SMS=progs, FLATTEN=not interpreting(), UPCAST=interpreting())
    _fp8_pchunk_autotuned[grid](*descs, sa, sb, M, N, K, **const)
    cfg = _fp8_pchunk_autotuned.best_config
    bm, bn, bk = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.kwargs["BLOCK_K"]
    _PLANS[key] = (
        (min(progs, triton.cdiv(M, bm) * triton.cdiv(N, bn)),),
        [bm, bk],
        [bn, bk],
        [bm, bn],
        {**const, **cfg.all_kwargs()},
    )


# (M, N, K, per-row, chunk_k, programs, device) -> (grid, boxes of A, B, C, kernel
# kwargs): the autotuner's pick for that problem. The key holds every input of the autotuner's
# own key (M, N, K, ROW_SCALES, CHUNK_K; the operand dtypes are fixed: fp8 in, bf16 out) and of
# the grid and constexprs.
_PLANS: dict[tuple, tuple] = {}


# ---- split-K for decode shapes (variants "triton_splitk" / "triton_splitk_tensor") -------------
#
# Why: at M = 16 (llama8b-qkv decode, N 6144, K 4096) the promotion kernel gives each 64-wide N tile
# one program that walks all 32 k tiles in series, 13-14 us of GPU time against cuBLAS's 6-7 us
# per-tensor kernel (weights warm in the L2, H100 and H200): a chain of 32 dependent TMA-wait /
# MMA steps, not bandwidth. Split-K cuts the chain: SPLIT programs per N tile each sum one
# K range of at most PROMOTE_K elements (the split is the promotion chunk, so the numerics are
# fp8_gemm_promote's), write the fp32 partial, and count themselves in on a per-tile semaphore; the last to
# arrive adds the tile's partials in split order (so the result does not depend on who came
# last), scales, stores bf16 and resets the counter. One launch, no float atomics. The tile is
# computed transposed (B tile x A tile^T: the N tile is the MMA's 64/128-row side and the few
# tokens its narrow side), as small-M kernels do, instead of padding M to 64 rows. SPLIT 1 is a
# candidate too (one program per tile, deep pipeline, promotion every k tile: cuBLAS's shape),
# the fastest at llama8b-qkv-m16 on an H100 (splitk_candidates).


@triton.jit
def _fp8_gemm_splitk(
    A,
    B,
    C,
    SA,
    SB,
    P,
    LOCKS,
    M,
    N,
    K,
    stride_am,
    stride_bn,
    stride_cm,
    k_per_split,
    ROW_SCALES: tl.constexpr,
    SPLIT: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    UPCAST: tl.constexpr,
    TMA: tl.constexpr = False,
    PROMOTE_EACH: tl.constexpr = False,
):
    """TMA: A and B are tensor descriptors (boxes BLOCK_M x BLOCK_K, BLOCK_N x BLOCK_K; zeros past
    the edges), else pointers with masked loads. PROMOTE_EACH: a split longer than PROMOTE_K
    (SPLIT 1: the whole K, one program per tile as cuBLAS's kernel) promotes every k tile through
    tl.dot's max_num_imprecise_acc (as fp8_gemm; the MMA wait it adds hides behind the loads at
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
def _splitk_store(C, SA, SB, tot, rm, rn, M, N, stride_cm, out_mask, ROW_SCALES: tl.constexpr, UPCAST: tl.constexpr):
    """The scaled bf16 tile (tot is transposed: channels x tokens) into C (tokens x channels)."""
    if ROW_SCALES:
        sa = tl.load(SA + rm, mask=rm < M, other=0.0)
        sb = tl.load(SB + rn, mask=rn < N, other=0.0)
        tot = tot * sb[:, None] * sa[None, :]
    else:
        tot = tot * (tl.load(SA) * tl.load(SB))
    c_ptr = C + rm[None, :].to(tl.int64) * stride_cm + rn[:, None]
    tl.store(c_ptr, cast_out(tot, C.dtype.element_ty, UPCAST), mask=out_mask)


SPLITK_MAX_M = 64  # decode: above this the promotion kernel's tiles have work enough per program


def splitk_candidates(M: int, N: int, K: int, sms: int) -> tuple[tuple[int, int, int, int, int], ...]:
    """(BLOCK_N, BLOCK_K, SPLIT, num_warps, num_stages), the default first: 1-6 programs per SM,
    every K range at most PROMOTE_K elements (the promotion bound) and at least two k tiles; and
    SPLIT 1 (per_sm 0 below: one program per tile, deep pipelines, promotion every k tile), the
    shape of cuBLAS's decode kernel (ncu: 96 CTAs, 180 KB of shared memory at llama8b-qkv-m16):
    on an H100 there, (64, 256, 1, 4, 6) took 6.76 us per-tensor against the best split's 7.25.
    Measured (H100, llama8b-qkv-m16 per-tensor, GPU time): BLOCK_K 128 with 4 stages 8.4 us, SPLIT 9
    10.8 us; BLOCK_K 256 with 3 stages 7.7 us, SPLIT 2 with 4 stages 7.3 us: fewer, longer splits of
    wider k tiles, and deeper pipelines (the last three candidates)."""
    if interpreting():
        return ((32, 32, max(2, triton.cdiv(K, 64)), 4, 1),)
    bm = max(16, min(64, triton.next_power_of_2(M)))
    out = []
    for bn, bk, per_sm, w, st in [
        (64, 256, 3, 4, 3),
        (64, 256, 2, 4, 3),
        (64, 256, 1, 4, 4),
        (128, 256, 2, 4, 3),
        (64, 128, 3, 4, 4),
        (32, 256, 2, 4, 3),
        (64, 256, 4, 4, 3),
        (128, 256, 3, 8, 3),
        (64, 256, 1, 4, 5),
        (64, 128, 1, 4, 8),
        (64, 256, 1, 8, 4),
        (64, 256, 0, 4, 6),
        (64, 256, 0, 4, 8),
        (64, 128, 0, 4, 8),
        (32, 256, 0, 4, 8),
    ]:
        tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
        split = (
            1
            if per_sm == 0
            else max(triton.cdiv(K, PROMOTE_K), min(triton.cdiv(per_sm * sms, tiles), K // (2 * bk)), 1)
        )
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
            torch.empty(max(partial, old[1].numel()), dtype=torch.float32, device=device),
        ]
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
    return (
        grid,
        k_per_split,
        ([bm, bk], [bn, bk]) if tma else None,
        dict(
            SPLIT=split,
            BLOCK_M=bm,
            BLOCK_N=bn,
            BLOCK_K=bk,
            UPCAST=interpreting(),
            TMA=tma,
            PROMOTE_EACH=k_per_split > PROMOTE_K,
            num_warps=w,
            num_stages=st,
        ),
    )


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
    the launcher). Promotion into fp32 at most every PROMOTE_K elements, as fp8_gemm_promote (each split is one
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
        _fp8_gemm_splitk[grid](
            A,
            B,
            out,
            sa,
            sb,
            part,
            locks,
            M,
            N,
            K,
            a.stride(0),
            b.stride(0),
            out.stride(0),
            k_per_split,
            ROW_SCALES=row,
            **kw,
        )

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
        best = tuned(
            ("fp8_gemm_splitk",) + key, cands, lambda c: launch(_splitk_plan(M, N, K, c)), a.device, graph=True
        )
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
    return {"fp8_gemm": autotune_cache(_fp8_autotuned), "fp8_gemm.promote": autotune_cache(_fp8_pchunk_autotuned)}


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


VARIANTS: dict[str, tuple[str, Callable[..., Any]]] = {  # variant -> (scale mode, fn)
    "triton": ("row", fp8_gemm),
    "triton_tensor": ("tensor", fp8_gemm),
    "triton_promote": ("row", fp8_gemm_promote),
    "triton_promote_tensor": ("tensor", fp8_gemm_promote),
    "triton_splitk": ("row", fp8_gemm_splitk),
    "triton_splitk_tensor": ("tensor", fp8_gemm_splitk),
    # the CUDA C++ kernel with its TMA epilogue, in GROUP_M 8 order (B read from DRAM about once)
    "cuda_ws112_tma8": ("row", partial(fp8_gemm_cuda, cluster=1, group_m=8, epilogue="tma")),
    "cuda_ws112_tma8_tensor": ("tensor", partial(fp8_gemm_cuda, cluster=1, group_m=8, epilogue="tma")),
    "scaled_mm": ("row", scaled_mm),
    "scaled_mm_tensor": ("tensor", scaled_mm),
}


WORKLOAD = Workload(
    op="fp8_gemm",
    setup=_setup,
    variants={name: (lambda mode, fn: lambda s: fn(*s[mode]))(mode, fn) for name, (mode, fn) in VARIANTS.items()},
    shapes=SHAPES,
    model=model,
    dtypes=("fp8",),
    default_dtype="fp8",
    description="fp8 e4m3 GEMM, per-tensor and per-row (token x channel) scales, bf16 out, vs torch._scaled_mm",
    reference=reference,
    numerics="gemm",
    baselines=("scaled_mm", "scaled_mm_tensor"),
    # each variant against _scaled_mm in its own scale mode; the wgmma CUDA C++ runs on Hopper only,
    # with no interpreter: both follow from VARIANTS instead of lists kept by hand
    peers={
        v: "scaled_mm" if mode == "row" else "scaled_mm_tensor"
        for v, (mode, _) in VARIANTS.items()
        if v not in ("scaled_mm", "scaled_mm_tensor")
    },
    gpu_only=tuple(v for v in VARIANTS if v.startswith("cuda_")),
    quick=("llama8b-qkv-m16", "llama8b-qkv-m4096", "m8192-n8192-k8192"),
    selftest={"t-m33-n24-k40": {"M": 33, "N": 24, "K": 64}},
    bench="gemm",
)
