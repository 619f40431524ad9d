"""Row softmax over the last dim, fp32 math, output in the input dtype.

Rows up to MAX_SINGLE elements are held whole in registers, BLOCK_M rows per program: one
read, one write (the minimum); (BLOCK_M, num_warps, L2 hint on x) is picked per shape on the GPU.

Longer rows (vocabulary logits, 128k-152k) take two passes over the row. v1
(``softmax_v1``): one program per row; the first pass kept a per-lane running max and
rescaled sum (two exponentials per element: exp(m_old - m_new) and exp(x - m_new)), the
second wrote exp(x - max) / sum. At 2048 x 128256 bf16 on an H200 that ran at 57 % of copy:
three exponentials per element put the SFU near the memory time, and with every row's
program resident at once (2048 rows x 256 KB) the second read missed the L2.
v2 (``softmax`` where there are many rows): a persistent grid (a few programs per SM, each
walking rows), so only ~SMs x 256 KB of rows are in flight and the second read of a row is an L2 hit (first read
marked evict_last, second evict_first); the running max is one scalar per chunk (a max
reduction per chunk), so the first pass costs one exponential per element, the rescale of the
per-lane sums one per chunk.
v3 (``softmax``; the v2 launch kept as ``softmax_rowprog``, variant ``triton_rowprog``): few long
rows (decode: 1 x 128256 logits) split over many programs. v2 gave a row to one program: one SM
walked 128k elements twice while the rest idled (22.5 us on an H100, torch.compile's split
reduction 8.9). Now program (chunk, row) of ``_softmax_split_partials`` writes its chunk's max
and sum of exp(x - max) to a small fp32 workspace, and program (chunk, row) of
``_softmax_split_apply`` combines that row's partials (a few dozen numbers) into the row's max
and sum, re-reads its chunk (an L2 hit: the first read was marked evict_last) and writes
exp(x - max) / sum. Two launches, no atomics: every program of a row combines the same partials
in the same order, so the result is deterministic. Taken when one program per row would leave
at least half the SMs idle and the rows fit well inside the L2 (``split_rows``); (chunk,
num_warps) picked per shape on the GPU by CUDA-graph replay.
v4 (round 8; v3's launches kept as ``softmax_twopass``, variant ``triton_twopass``): many long
rows read once. v3 read each row twice (the second an L2 hit) with one program per row: 73 % of
copy on an H100, 61 % on an H200, ncu showing the minimum bytes but DRAM 70 % busy (latency).
``_softmax_rowgroup`` gives each row to a group of co-resident programs (cooperative launch),
a chunk each held in registers; the chunks' (max, sum) partials meet through 64-bit slots in
global memory and every program writes its chunk: one read, one write (measured in
benchmarks/results/kernels.md, "Round 8"). The tuner weighs v4's launches against v3's; under
the interpreter only one program a row can run (programs run one after another there), so the
tests run v4 with rows of one chunk.
Round 12 (round 11's launches kept as ``softmax_r11``, variant ``triton_r11``): v4's launches with
an L2 bulk prefetch of the chunk 1-2 rows ahead among the tuner's candidates (``triton_pf`` alone:
bytes in flight beyond the registers, the H100's gain), and the exponentials as exp2 with the
log2(e) scale fused (4 instructions an element fewer: the H200's gain). Measured in
benchmarks/results/kernels.md, "Round 12"; the rejected third change is ``triton_full``.
Round 27 (written in a session without a GPU; not yet measured, so not among ``softmax``'s default
launches): ``_softmax_l2hold``, variant ``triton_l2``. Round 13 found v4's programs an SM capped by
the registers each holds (the next row's chunk, two rows' exponentials) and each program's step
the bound. Here a program publishes its chunk's partial and keeps nothing: the chunk stays in the
L2 (read evict_last) and is read again, one step later, to be written. Half v4's registers (an
offline sm_90a compile), so about twice the programs an SM, at the price of a second L2 read and a
second exponential an element. ``benchmarks/gpu/round27.sh`` measures it against ``triton``.
"""
from __future__ import annotations

import re

import triton
import triton.language as tl

from . import Workload, torch_dtype
from ._numerics import ESIZE, compiled, has_module, num_sms, warps_for
from ._cuda_ops import softmax_cluster_plan, softmax_cuda
from .rmsnorm import row_config
from .timing import rotated, tuned

MAX_SINGLE = 16384
CHUNK = 4096
SPLIT_MAX_BYTES = 16 << 20  # the split path reads its rows twice: they should stay in the L2 (50 MB)
MAX_PARTS = 1024  # partials per row at most (the combine loads them all): longer rows get longer chunks


@triton.jit
def _softmax_single(X, Y, sx, sy, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    EVICT: tl.constexpr = True):
    """EVICT: x read evict-first (an L2 hint; a tuned choice since round 9, as RMSNorm's in round 5)."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    m = (rows < M)[:, None] & (cols < N)[None, :]
    if EVICT:
        x = tl.load(X + rows[:, None] * sx + cols[None, :], mask=m, other=-float("inf"),
                    eviction_policy="evict_first").to(tl.float32)
    else:
        x = tl.load(X + rows[:, None] * sx + cols[None, :], mask=m, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(Y + rows[:, None] * sy + cols[None, :], y.to(Y.dtype.element_ty), mask=m)


@triton.jit
def _softmax_online_persistent(X, Y, sx, sy, R, N, NPROG, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    pid = tl.program_id(0).to(tl.int64)
    for i in range(0, R, NPROG):
        base = pid + i  # rows pid, pid + NPROG, ...: the programs walk the rows together
        m = -float("inf")
        d_i = tl.zeros([BLOCK], dtype=tl.float32)
        n_live = tl.where(base < R, N, 0)  # a program past the last row loads and stores nothing
        for start in range(0, N, BLOCK):
            x = tl.load(X + base * sx + start + cols, mask=start + cols < n_live, other=-float("inf"),
                        eviction_policy="evict_last").to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=0))
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # a prefix of -inf only
            d_i = d_i * tl.exp(m - m_safe) + tl.exp(x - m_safe)
            m = m_new
        inv = 1.0 / tl.sum(d_i, axis=0)
        for start in range(0, N, BLOCK):
            mk = start + cols < n_live
            x = tl.load(X + base * sx + start + cols, mask=mk, other=-float("inf"),
                        eviction_policy="evict_first").to(tl.float32)
            tl.store(Y + base * sy + start + cols, (tl.exp(x - m) * inv).to(Y.dtype.element_ty), mask=mk)


@triton.jit
def _softmax_online(X, Y, sx, sy, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m_i = tl.full([BLOCK], -float("inf"), tl.float32)
    d_i = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        x = tl.load(X + row * sx + start + cols, mask=start + cols < N, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m_i, x)
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # lanes that saw only -inf
        d_i = d_i * tl.exp(m_i - m_safe) + tl.exp(x - m_safe)
        m_i = m_new
    mx = tl.max(m_i, axis=0)
    d = tl.sum(d_i * tl.exp(m_i - mx), axis=0)
    inv = 1.0 / d
    for start in range(0, N, BLOCK):
        mk = start + cols < N
        x = tl.load(X + row * sx + start + cols, mask=mk, other=-float("inf"),
                    eviction_policy="evict_first").to(tl.float32)
        tl.store(Y + row * sy + start + cols, (tl.exp(x - mx) * inv).to(Y.dtype.element_ty), mask=mk)


@triton.jit
def _softmax_split_partials(X, WS, sx, N, P, BLOCK: tl.constexpr):
    """Stage 1 of the split-row softmax: program (c, row) reduces columns [c * BLOCK, (c + 1) *
    BLOCK) of its row to (max, sum of exp(x - max)), stored at WS[row, c] and WS[row, P + c]."""
    c = tl.program_id(0).to(tl.int64)
    row = tl.program_id(1).to(tl.int64)
    cols = c * BLOCK + tl.arange(0, BLOCK)
    # evict_last: stage 2 reads the same chunk again, from the L2
    x = tl.load(X + row * sx + cols, mask=cols < N, other=-float("inf"), eviction_policy="evict_last").to(tl.float32)
    m = tl.max(x, axis=0)
    m_safe = tl.where(m == -float("inf"), 0.0, m)  # a chunk of -inf only sums to 0, not NaN
    tl.store(WS + row * 2 * P + c, m)
    tl.store(WS + row * 2 * P + P + c, tl.sum(tl.exp(x - m_safe), axis=0))


@triton.jit
def _softmax_split_apply(X, Y, WS, sx, sy, N, P, BLOCK: tl.constexpr, BLOCK_P: tl.constexpr):
    """Stage 2: program (c, row) combines the row's P partials into its max and sum (every program
    of the row the same numbers in the same order: deterministic) and writes its chunk."""
    c = tl.program_id(0).to(tl.int64)
    row = tl.program_id(1).to(tl.int64)
    cols = c * BLOCK + tl.arange(0, BLOCK)
    mk = cols < N
    x = tl.load(X + row * sx + cols, mask=mk, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
    p = tl.arange(0, BLOCK_P)
    pm = p < P
    mp = tl.load(WS + row * 2 * P + p, mask=pm, other=-float("inf"))
    sp = tl.load(WS + row * 2 * P + P + p, mask=pm, other=0.0)
    mx = tl.max(mp, axis=0)
    inv = 1.0 / tl.sum(sp * tl.exp(mp - mx), axis=0)  # chunks of -inf only and padding: 0 * 0
    tl.store(Y + row * sy + cols, (tl.exp(x - mx) * inv).to(Y.dtype.element_ty), mask=mk)


# (chunk, num_warps) of the split-row kernels, the default first: 1-8 k elements per program
# (128256: 16-126 programs per row), 4-32 elements per thread
SPLIT_CANDIDATES = [(2048, 4), (1024, 4), (1024, 8), (2048, 8), (4096, 4), (4096, 8), (4096, 16), (8192, 8),
                    (8192, 16)]


def split_rows(R: int, N: int, esize: int, device) -> bool:
    """The split-row path for rows too long to hold whole: when one program per row would leave
    at least half the SMs idle (2 R <= SMs) and the rows, read twice, fit well inside the L2."""
    return 2 * R <= num_sms(device) and R * N * esize <= SPLIT_MAX_BYTES and R < 65536


def split_chunk(N: int, chunk: int) -> int:
    """The chunk a (chunk, num_warps) candidate runs with: longer where it would give a row more
    than MAX_PARTS partials."""
    return max(chunk, triton.next_power_of_2(triton.cdiv(N, MAX_PARTS)))


def _launch_split(x2, y2, cfg):
    import torch

    R, N = x2.shape
    chunk, nw = split_chunk(N, cfg[0]), cfg[1]
    P = triton.cdiv(N, chunk)
    ws = torch.empty(R, 2 * P, dtype=torch.float32, device=x2.device)
    _softmax_split_partials[(P, R)](x2, ws, x2.stride(0), N, P, BLOCK=chunk, num_warps=nw)
    _softmax_split_apply[(P, R)](x2, y2, ws, x2.stride(0), y2.stride(0), N, P, BLOCK=chunk,
                                 BLOCK_P=triton.next_power_of_2(P), num_warps=nw)


@triton.jit
def _prefetch_l2(ptr, nbytes):
    """Ask the copy engine (TMA) to bring [ptr, ptr + nbytes) into the L2: one thread of the
    program issues one bulk prefetch (sm_90+, ptr and nbytes multiples of 16). Nothing lands in
    registers, so bytes can be in flight beyond what a program holds (round 12)."""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .u32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
        "@p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r", [ptr, nbytes], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _prefetch_chunk(X, row, sx, c, R, N, BLOCK: tl.constexpr, ESIZE: tl.constexpr):
    """Prefetch program c's chunk of `row` into the L2 (nothing past the last row, nor a tail
    under 16 bytes: the bulk prefetch moves whole 16-byte units, at least one)."""
    nbytes = (tl.minimum(N - c * BLOCK, BLOCK) * ESIZE) // 16 * 16
    if (row < R) & (nbytes > 0):
        _prefetch_l2(X + row * sx + c * BLOCK, nbytes)


@triton.jit
def _load_chunk(X, row, sx, cols, c, R, N, K: tl.constexpr, FULL: tl.constexpr,
                POLICY: tl.constexpr = "evict_first"):
    """Program c's chunk of `row`, read with the L2 POLICY (evict-first; round 27's L2-held kernel
    reads a chunk first evict_last, or without a hint, then again evict_first). A row past the
    last: nothing (-inf), or with
    FULL the last row again (read, never published: its partial is skipped). FULL (round 12,
    rejected): the K - 1 programs whose chunk lies inside the row load without a mask (a masked
    load first sets every register it may leave untouched to -inf: 16 instructions a step of 32
    elements); measured 0.82-0.88x on the H200 (ncu pairs r12-h200c): the load in a branch."""
    if FULL:
        r = tl.minimum(row, R - 1)
        if c < K - 1:
            x = tl.load(X + r * sx + cols, eviction_policy=POLICY)
        else:
            x = tl.load(X + r * sx + cols, mask=cols < N, other=-float("inf"), eviction_policy=POLICY)
    else:
        x = tl.load(X + row * sx + cols, mask=cols < tl.where(row < R, N, 0), other=-float("inf"),
                    eviction_policy=POLICY)
    return x


@triton.jit
def _combine_partials(m1, s1, m2, s2):
    """Two (max, sum of exp(x - max)) partials as one (chunks of -inf only: (-inf, 0))."""
    m = tl.maximum(m1, m2)
    m_safe = tl.where(m == -float("inf"), 0.0, m)
    return m, s1 * tl.exp2((m1 - m_safe) * 1.4426950408889634) + s2 * tl.exp2((m2 - m_safe) * 1.4426950408889634)


@triton.jit
def _publish(x, row, c, R, WS, KP: tl.constexpr, EXP2: tl.constexpr = 0, LOCAL: tl.constexpr = 0):
    """This program's chunk x of `row`: its (max, sum of exp(x - max)) as one 64-bit word in the
    row's slot c (the slots start at -1, a pattern no pair of floats computed here has: a reader
    sees both or neither, so waiting for the partners and reading their partials are one load).
    Returns (max, exp(x - max)): held, in fp32 registers, until the row is combined.
    EXP2 (round 12): exp(x - m) as exp2(x log2e - m log2e), one FFMA and ex2.approx.ftz a
    element; tl.exp lowers to the non-ftz ex2.approx with its subnormal range fix (FSETP and
    three FMUL) and a separate subtract: 4 instructions an element fewer (sm_90 SASS).
    LOCAL = the program's thread count (round 13): each thread's exponentials taken against its
    own elements' max (the chunk viewed as [reps, threads, 16-byte vector], the layout of the
    load), so they start without waiting for the program-wide max; one cross-thread reduction of
    (max, sum) pairs instead of two. Returns (each thread's max, exp(x - that max))."""
    xf = x.to(tl.float32)
    if LOCAL:
        V: tl.constexpr = 128 // x.dtype.primitive_bitwidth
        x3 = tl.reshape(xf, [xf.shape[0] // (LOCAL * V), LOCAL, V])
        mt = tl.max(tl.max(x3, axis=2), axis=0)
        mt_safe = tl.where(mt == -float("inf"), 0.0, mt)
        e = tl.exp2(x3 * 1.4426950408889634 - (mt_safe * 1.4426950408889634)[None, :, None])
        st = tl.sum(tl.sum(e, axis=2), axis=0)
        m, s = tl.reduce((mt, st), 0, _combine_partials)
        m_out = mt
    else:
        m = tl.max(xf, axis=0)
        m_safe = tl.where(m == -float("inf"), 0.0, m)  # a chunk of -inf only sums to 0, not NaN
        if EXP2:
            e = tl.exp2(xf * 1.4426950408889634 - m_safe * 1.4426950408889634)
        else:
            e = tl.exp(xf - m_safe)
        s = tl.sum(e, axis=0)
        m_out = m
    if row < R:
        word = (m.to(tl.int32, bitcast=True).to(tl.int64) << 32) | (s.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF)
        tl.atomic_xchg(WS + row * KP + c, word, sem="relaxed")
    return m_out, e


@triton.jit
def _await_partials(p, row, WS, K: tl.constexpr, KP: tl.constexpr):
    """The row's slots p (a load already issued: volatile, from the L2, never the L1 where a line
    shared with a row still being reduced may sit), reloaded until every partner has published."""
    kk = tl.arange(0, KP)
    while tl.sum((p == -1).to(tl.int32), axis=0) > 0:
        p = tl.load(WS + row * KP + kk, mask=kk < K, other=0, volatile=True)
    return p


@triton.jit
def _row_max_inv(p, K: tl.constexpr, KP: tl.constexpr):
    """A row's K published (max, sum) words, all in: its max and 1 / sum, combined by every
    program of the row alike (deterministic). Chunks of -inf only and padding add 0 * 0."""
    kk = tl.arange(0, KP)
    mp = tl.where(kk < K, (p >> 32).to(tl.int32).to(tl.float32, bitcast=True), -float("inf"))
    sp = tl.where(kk < K, p.to(tl.int32).to(tl.float32, bitcast=True), 0.0)
    mx = tl.max(mp, axis=0)
    return mx, 1.0 / tl.sum(sp * tl.exp(mp - mx), axis=0)


@triton.jit
def _finish(p, row, m, h, cols, mk, WS, Y, sy, K: tl.constexpr, KP: tl.constexpr, LOCAL: tl.constexpr = 0):
    """The row's K partials, once all are in (_await_partials), combined (every program of the row
    alike: deterministic) and this program's chunk written. h: exp(x - m) as _publish returned it
    (m a thread's max with LOCAL), in fp32 or rounded to bf16 (round 13's HOLD 2: rounded again on
    output)."""
    mx, inv = _row_max_inv(_await_partials(p, row, WS, K, KP), K, KP)
    scale = tl.where(m == -float("inf"), 0.0, tl.exp(m - mx) * inv)  # not exp(0 - mx): may overflow
    if LOCAL:
        y = tl.reshape(h.to(tl.float32) * scale[None, :, None], [h.shape[0] * h.shape[1] * h.shape[2]])
    else:
        y = h.to(tl.float32) * scale
    tl.store(Y + row * sy + cols, y.to(Y.dtype.element_ty), mask=mk)


@triton.jit
def _group_program(N, K: tl.constexpr, KP: tl.constexpr, BLOCK: tl.constexpr):
    """This program's place among K sharing each row: (its group, its chunk c, the chunk's columns
    and their mask, the row's slot indices)."""
    pid = tl.program_id(0).to(tl.int64)
    c = pid % K
    cols = c * BLOCK + tl.arange(0, BLOCK)
    return pid // K, c, cols, cols < N, tl.arange(0, KP)


@triton.jit
def _softmax_rowgroup(X, Y, WS, sx, sy, R, N, NGROUP, K: tl.constexpr, KP: tl.constexpr, BLOCK: tl.constexpr,
                      LAG: tl.constexpr = 0, PF: tl.constexpr = 0, EXP2: tl.constexpr = 0, FULL: tl.constexpr = 0,
                      HOLD: tl.constexpr = 0, LOCAL: tl.constexpr = 0, FF: tl.constexpr = 0):
    """v4: a long row read once. K co-resident programs (a group) share each row, a chunk of
    BLOCK columns each, held in registers: each publishes its chunk's partial (_publish), waits
    for the other K - 1 and writes its chunk (_finish). Group g walks rows g, g + NGROUP, ...
    with the next row's chunk loading meanwhile. LAG 1: each row finished one row late, its
    slots loaded before the next row is reduced, so the wait overlaps that work (H200: up to 7 %
    faster; two rows' exp(x - m) held, so fewer programs fit per SM). Launched cooperatively (all
    programs resident, or the launch fails: a program waiting for a partner never scheduled
    would hang).
    Measured and not kept (round 8; the probes' code at commit 950075c, results in
    benchmarks/results/r8): the partials counted in through an atomic counter and then read, two
    L2 round trips a row (the first build; 6-23 % slower with several programs per SM); two rows
    ahead in flight (no gain); exp(x - m) recomputed after the wait (e6b3a1b: 6-24 % slower on the
    H200); no row ahead (ae96052: 2-18 % slower). Triton's pipeliner (tl.range num_stages) has
    nothing to do here, the next row being loaded by hand; with the row loaded in the loop it does
    pipeline it, wait and all (round 13, below: slower).
    PF > 0 (round 12): the chunk PF rows beyond the one loading into registers is prefetched into
    the L2 (_prefetch_l2), so more bytes are in flight than registers hold; the loads then hit
    the L2.
    Round 13 (H200 probes, benchmarks/results/r13): the wait for the partners costs ~3 % (taken
    out, 2048 x 128256 ran 1.027x faster); what a program holds in registers bounds the programs
    an SM, and more of them hide more of each one's step.
    LOCAL (the program's thread count): exponentials against each thread's own max (_publish);
    HOLD 2: the earlier row's exponentials held in a 16-bit input's dtype (5 programs of 4 warps
    an SM at 4096 columns where 4 fitted: 1.04x there, one rounding more); FF 1 (rejected): the
    earlier row finished before the next is reduced, which frees registers but waits on the
    partials' L2 round trip every row (0.82x). Refuted and removed (code at commit 1b63e57): the
    row's chunk loaded in the loop and issued 1-3 rows ahead through shared memory by Triton's
    pipeliner (cp.async, registers capped to fit 4-10 programs an SM): 304-378 us against 285 on
    the H200 at 2048 x 128256."""
    g64, c, cols, mk, kk = _group_program(N, K, KP, BLOCK)
    ES: tl.constexpr = X.dtype.element_ty.primitive_bitwidth // 8
    for j in tl.static_range(2, PF + 2):  # rows g + 2 NGROUP ... g + (PF + 1) NGROUP: the in-loop prefetch's lead
        _prefetch_chunk(X, g64 + j * NGROUP, sx, c, R, N, BLOCK, ES)
    x = _load_chunk(X, g64, sx, cols, c, R, N, K, FULL)
    # what a program holds of its chunk: exp(x - m) in fp32, or (HOLD 2) in a 16-bit input's dtype
    HT: tl.constexpr = X.dtype.element_ty if (HOLD == 2) and (ES == 2) else tl.float32
    if LAG == 1:
        if LOCAL:
            V: tl.constexpr = 16 // ES
            m_prev = tl.zeros([LOCAL], dtype=tl.float32)
            e_prev = tl.zeros([BLOCK // (LOCAL * V), LOCAL, V], dtype=HT)
        else:
            m_prev = tl.max(tl.zeros([BLOCK], dtype=tl.float32), axis=0)
            e_prev = tl.zeros([BLOCK], dtype=HT)
        for i in range(0, R + NGROUP, NGROUP):  # one step more: the last row's finish
            row = g64 + i
            prev = row - NGROUP
            live = (prev >= 0) & (prev < R)
            prev_at = tl.maximum(prev, 0)
            p = tl.load(WS + prev_at * KP + kk, mask=kk < tl.where(live, K, 0), other=0, volatile=True)
            nxt = row + NGROUP
            if PF > 0:
                _prefetch_chunk(X, nxt + PF * NGROUP, sx, c, R, N, BLOCK, ES)
            x_next = _load_chunk(X, nxt, sx, cols, c, R, N, K, FULL)
            if FF:  # the earlier row written first: its exponentials' registers free before this row's exist
                if live:
                    _finish(p, prev_at, m_prev, e_prev, cols, mk, WS, Y, sy, K, KP, LOCAL)
                m, e = _publish(x, row, c, R, WS, KP, EXP2, LOCAL)
            else:
                m, e = _publish(x, row, c, R, WS, KP, EXP2, LOCAL)
                if live:
                    _finish(p, prev_at, m_prev, e_prev, cols, mk, WS, Y, sy, K, KP, LOCAL)
            m_prev = m
            e_prev = e.to(HT)
            x = x_next
    else:
        for i in range(0, R, NGROUP):
            row = g64 + i
            nxt = row + NGROUP
            if PF > 0:
                _prefetch_chunk(X, nxt + PF * NGROUP, sx, c, R, N, BLOCK, ES)
            x_next = _load_chunk(X, nxt, sx, cols, c, R, N, K, FULL)
            if row < R:  # the same for the K programs of a group: all wait, or none
                m, e = _publish(x, row, c, R, WS, KP, EXP2, LOCAL)
                p = tl.load(WS + row * KP + kk, mask=kk < K, other=0, volatile=True)
                _finish(p, row, m, e.to(HT), cols, mk, WS, Y, sy, K, KP, LOCAL)
            x = x_next


# ("group", BLOCK, programs per SM, num_warps) of the row-group kernel, a row over cdiv(N, BLOCK)
# programs; "group_lag": each row finished one row late (LAG 1). Round 8's probes (H100 and H200,
# benchmarks/results/r8): several small programs per SM beat one large one (while one waits for
# its row's partners the others stream), so 2-16 k columns a program, 2-12 programs per SM; the
# late finish holds two rows' exp(x - m), so fewer of its programs fit. A candidate whose programs
# cannot all be resident fails its cooperative launch and the tuner skips it.
GROUP_CANDIDATES = [("group", 4096, 6, 4), ("group", 8192, 3, 8), ("group", 2048, 8, 4), ("group", 2048, 12, 2),
                    ("group", 2048, 10, 2), ("group", 8192, 2, 8), ("group", 32768, 1, 32),
                    ("group_lag", 4096, 4, 4), ("group_lag", 2048, 8, 2), ("group_lag", 8192, 2, 8),
                    ("group_lag", 2048, 8, 4), ("group_lag", 2048, 6, 4), ("group_lag", 4096, 3, 4),
                    ("group_lag", 4096, 3, 8)]  # round 12: 8 warps on 4096 columns, 24 warps an SM
# round 12: the strongest of those with the L2 prefetch 1 or 2 rows ahead of the register load
# (kind + "_pf<n>"); on a GPU before Hopper they raise and the tuner skips them.
GROUP_CANDIDATES += [(f"{kind}_pf{pf}", *rest) for pf in (1, 2)
                     for kind, *rest in (("group_lag", 4096, 4, 4), ("group_lag", 8192, 2, 8), ("group_lag", 2048, 8, 2),
                                         ("group", 8192, 3, 8), ("group", 4096, 6, 4), ("group", 2048, 12, 2),
                                         ("group_lag", 4096, 3, 8))]
# round 13 (measured on the H200, benchmarks/results/r13): each thread's exponentials against its
# own max ("_loc": one cross-thread reduction a row instead of two, 3 barriers a step instead of
# 8 in the sm_90a SASS; 1.00-1.007x); the late finish first ("_ff": the earlier row's
# exponentials freed before the next row's exist, 106-109 registers instead of 118-122 at 4096
# columns on 4 warps) with the registers capped to fit the programs an SM asked for ("_cap",
# implied): rejected, 1.19-1.25x slower at the same programs an SM (the partners' partials then
# wait on an L2 round trip each row), offered only by softmax(ff_only=True); the held
# exponentials in the 16-bit input dtype ("_h2": 96 registers at 4096 / 4 warps, 5 programs an
# SM: 1.04x at 2048 x 128256), a second rounding, so only in softmax(hold16=True).
GROUP_CANDIDATES += [("group_lag_loc_pf1", 4096, 4, 4), ("group_lag_loc_pf1", 8192, 2, 8),
                     ("group_lag_ff_pf1", 4096, 4, 4), ("group_lag_ff_pf1", 4096, 5, 4), ("group_lag_ff_pf1", 8192, 2, 8),
                     ("group_lag_ff_pf1", 2048, 10, 2),
                     ("group_lag_cap_pf1", 4096, 5, 4),  # sweep-only (no softmax() flag offers it): the usual order capped spills
                     ("group_lag_h2_pf1", 4096, 5, 4), ("group_lag_h2_pf1", 4096, 4, 4), ("group_lag_h2_pf1", 8192, 2, 8)]
# round 13, last: the bf16 hold with the registers capped to fit more programs an SM (no or a few
# spills in the sm_90a SASS: 5 of 4 warps at 152064 columns too, 10-12 of 2 warps, 3 of 8 warps)
GROUP_CANDIDATES += [("group_lag_h2_cap", 4096, 5, 4), ("group_lag_h2_cap_pf1", 4096, 5, 4), ("group_lag_h2_cap", 4096, 6, 4),
                     ("group_lag_h2_cap", 2048, 10, 2), ("group_lag_h2_cap", 2048, 12, 2), ("group_lag_h2_cap", 8192, 3, 8)]


def group_kind(kind: str) -> tuple[int, int, int, int, int, int]:
    """(LAG, PF, HOLD, LOCAL, FF, CAP) of a row-group kind: "group" / "group_lag", then any of, in
    this order, "_loc" (each thread's exponentials against its own max, round 13), "_h2" (the held
    exponentials in a 16-bit input's dtype, round 13), "_ff" (the late finish before the next
    row's reduce, round 13), "_cap" (the registers capped so that the programs an SM asked for
    fit, spilling if need be; implied by "_ff") and "_pf<n>" (an L2 prefetch n rows ahead, round 12)."""
    m = re.fullmatch(r"(group(?:_lag)?)(_loc)?(_h2)?(_ff)?(_cap)?(?:_pf(\d+))?", kind)
    if not m:
        raise ValueError(f"not a row-group softmax kind: {kind!r}")
    return (int(m[1] == "group_lag"), int(m[6] or 0), 2 if m[3] else 0, int(bool(m[2])), int(bool(m[4])),
            int(bool(m[4] or m[5])))


def reg_cap(per_sm: int, num_warps: int) -> int:
    """The most registers a thread may use for per_sm programs of num_warps warps to share an
    SM's 64 K (allocated in units of 8 a thread), at most 255."""
    return min(255, 65536 // (per_sm * num_warps * 32) // 8 * 8)


def prefetch_ok(x2) -> bool:
    """The L2 bulk prefetch: a Hopper or newer GPU (not the interpreter), rows starting on
    16-byte boundaries."""
    import torch

    from ._numerics import interpreting

    return (not interpreting() and x2.is_cuda and torch.cuda.get_device_capability(x2.device)[0] >= 9
            and x2.data_ptr() % 16 == 0 and (x2.stride(0) * x2.element_size()) % 16 == 0)


def _group_plan(x2, cfg, local: int, pf: int, what: str):
    """(K programs a row, KP its power of two, groups, the rows' slots at -1: none published) of a
    launch whose rows are shared by co-resident programs, cfg (kind, BLOCK, programs per SM,
    num_warps); refused in one line where it cannot run: a _loc chunk that does not split into the
    threads' 16-byte vectors, partners under the interpreter, the L2 prefetch off Hopper."""
    import torch

    from ._numerics import interpreting

    R, N = x2.shape
    kind, block, per_sm, nw = cfg
    if local and block % (32 * nw * 16 // x2.element_size()):  # _publish views the chunk per thread
        raise ValueError(f"{kind}: {block} columns do not split into {32 * nw} threads' 16-byte vectors")
    k = triton.cdiv(N, block)
    if k > 1 and interpreting():  # the interpreter runs programs one after another: no partner ever comes
        raise ValueError(f"{what} softmax with {k} programs a row cannot run under TRITON_INTERPRET")
    if pf and not prefetch_ok(x2):
        raise ValueError("the L2 prefetch needs a Hopper or newer GPU and rows on 16-byte boundaries")
    ngroup = max(1, min(R, per_sm * num_sms(x2.device) // k))
    kp = triton.next_power_of_2(k)
    return k, kp, ngroup, torch.full((R, kp), -1, dtype=torch.int64, device=x2.device)


def _launch_group(x2, y2, cfg, exp2: bool = True, full: bool = False):
    """One row-group launch: cfg (kind, BLOCK, programs per SM, num_warps), kind one of
    group_kind's; exp2: the partials' exponentials as exp2 with the scale fused; full: the chunks
    inside the row loaded without a mask (both round 12; full rejected)."""
    R, N = x2.shape
    kind, block, per_sm, nw = cfg
    lag, pf, hold, local, ff, cap = group_kind(kind)
    k, kp, ngroup, ws = _group_plan(x2, cfg, local, pf, "row-group")
    _softmax_rowgroup[(ngroup * k,)](x2, y2, ws, x2.stride(0), y2.stride(0), R, N, ngroup, K=k, KP=kp, BLOCK=block,
                                     LAG=lag, PF=pf, EXP2=int(exp2), FULL=int(full), HOLD=hold,
                                     LOCAL=local * 32 * nw, FF=ff, num_warps=nw,
                                     **({"maxnreg": reg_cap(per_sm, nw)} if cap else {}),
                                     launch_cooperative_grid=True)


@triton.jit
def _finish_l2(p, row, xp, cols, mk, WS, Y, sy, K: tl.constexpr, KP: tl.constexpr, CS: tl.constexpr):
    """Round 27: the row's K partials, once all are in, combined (every program of the row alike:
    deterministic) and this program's chunk xp, read again (from the L2), written as
    exp2(x log2e - max log2e) / sum."""
    mx, inv = _row_max_inv(_await_partials(p, row, WS, K, KP), K, KP)
    y = tl.exp2(xp.to(tl.float32) * 1.4426950408889634 - mx * 1.4426950408889634) * inv
    if CS:
        tl.store(Y + row * sy + cols, y.to(Y.dtype.element_ty), mask=mk, eviction_policy="evict_first")
    else:
        tl.store(Y + row * sy + cols, y.to(Y.dtype.element_ty), mask=mk)


@triton.jit
def _softmax_l2hold(X, Y, WS, sx, sy, R, N, NGROUP, K: tl.constexpr, KP: tl.constexpr, BLOCK: tl.constexpr,
                    AHEAD: tl.constexpr = 0, PF: tl.constexpr = 0, LOCAL: tl.constexpr = 0, EL: tl.constexpr = 1,
                    CS: tl.constexpr = 0):
    """Round 27 (written without a GPU; not among the tuner's default launches until measured): a
    long row read once from DRAM, its chunks held in the L2 instead of registers. As v4, K
    co-resident programs (a group) share each row, a chunk each, and meet through the row's 64-bit
    slots (_publish, _await_partials). Unlike v4, a program keeps nothing of a row once its
    partial is published: step i reads row r's chunk (EL 1: evict_last, so that it stays in the
    L2), publishes its partial, then reads row r - NGROUP's chunk again (an L2 hit, evict_first)
    and writes it with the row's combined (max, sum). The L2 holds the rows between their two
    reads: about NGROUP rows (a step of every group), e.g. 33 rows x 256 KB = 8.4 MB at 8 programs
    of 4096 columns an SM over 128256 columns, well inside 50-60 MB.
    Why (round 13's profile of v4 on the H200): the register file caps v4's programs an SM (the
    next row's chunk in flight and two rows' exponentials held, 118-122 registers at 4096 columns
    on 4 warps: 4 programs), and each program's step is the bound, so more programs an SM hide
    more of it. Here a program holds two chunks in the input dtype (this row's, the earlier row's
    second read; three with AHEAD), so about twice the programs fit. The price: a second read of every element from
    the L2 (three L2 transfers an element instead of two) and a second exponential (the SFU).
    AHEAD 1: the next row's chunk loads into registers a step ahead (as v4). PF n: an L2 bulk
    prefetch of the chunk n rows ahead. LOCAL: the partial's exponentials against each thread's
    own max (round 13's _loc). CS 1: outputs stored evict-first."""
    g64, c, cols, mk, kk = _group_program(N, K, KP, BLOCK)
    ES: tl.constexpr = X.dtype.element_ty.primitive_bitwidth // 8
    FIRST: tl.constexpr = "evict_last" if EL else ""  # the first read's L2 policy
    for j in tl.static_range(1 + AHEAD, PF + 1 + AHEAD):  # the in-loop prefetch's lead
        _prefetch_chunk(X, g64 + j * NGROUP, sx, c, R, N, BLOCK, ES)
    if AHEAD:
        x = _load_chunk(X, g64, sx, cols, c, R, N, K, 0, FIRST)
    for i in range(0, R + NGROUP, NGROUP):  # one step more: the last row's finish
        row = g64 + i
        prev = row - NGROUP
        live = (prev >= 0) & (prev < R)
        prev_at = tl.maximum(prev, 0)
        if PF > 0:
            _prefetch_chunk(X, row + (PF + AHEAD) * NGROUP, sx, c, R, N, BLOCK, ES)
        if AHEAD:
            x_next = _load_chunk(X, row + NGROUP, sx, cols, c, R, N, K, 0, FIRST)
        else:
            x = _load_chunk(X, row, sx, cols, c, R, N, K, 0, FIRST)
        # the earlier row's slots and its chunk again (an L2 hit), in flight beside this row's chunk;
        # before the first row's finish (no earlier row) a row past the last: nothing read
        p = tl.load(WS + prev_at * KP + kk, mask=kk < tl.where(live, K, 0), other=0, volatile=True)
        xp = _load_chunk(X, tl.where(live, prev, R), sx, cols, c, R, N, K, 0)
        _publish(x, row, c, R, WS, KP, 1, LOCAL)
        if live:
            _finish_l2(p, prev_at, xp, cols, mk, WS, Y, sy, K, KP, CS)
        if AHEAD:
            x = x_next


# (kind, BLOCK, programs per SM, num_warps) of the L2-held kernel (round 27, not yet measured): "l2",
# then any of, in this order, "_a" (AHEAD 1), "_loc", "_en" (the first read without evict_last),
# "_cs" (outputs evict-first), "_pf<n>". Programs an SM from the registers of an offline sm_90a
# compile (triton 3.9, ptxas -v; the GPU machine's 3.6 may differ, and a launch whose programs do
# not all fit fails and the tuner skips it): at 4096 columns on 4 warps 64 registers (l2, l2_loc:
# 8 programs an SM; v4's group_lag_loc_pf1 116: 4), 72 with the chunk ahead (l2_a_loc: 7), 96
# (l2_a: 5); at 2048 on 2 warps 64 / 72 (16 / 14); at 2048 on 4 warps 40 / 48 (12 / 10); at 8192
# on 8 warps 61 (l2_loc: 4) / 80 (l2_a_loc: 3); at 4096 on 8 warps 40-48 (6 / 5). A fewer-programs
# fallback for the strongest kinds, in case 3.6 allocates more.
L2_CANDIDATES = [("l2_loc", 4096, 8, 4), ("l2", 4096, 8, 4), ("l2_a_loc", 4096, 7, 4), ("l2_a", 4096, 5, 4),
                 ("l2_loc", 4096, 6, 4), ("l2_a_loc", 4096, 5, 4),
                 ("l2_loc", 2048, 16, 2), ("l2_a_loc", 2048, 14, 2), ("l2_loc", 2048, 12, 4), ("l2_a_loc", 2048, 10, 4),
                 ("l2_loc", 8192, 4, 8), ("l2_a_loc", 8192, 3, 8), ("l2_loc", 4096, 6, 8), ("l2_a_loc", 4096, 5, 8),
                 ("l2_loc_en", 4096, 8, 4), ("l2_loc_cs", 4096, 8, 4), ("l2_loc_pf1", 4096, 8, 4),
                 ("l2_a_loc_pf1", 4096, 7, 4), ("l2_loc_pf1", 2048, 16, 2)]


def l2_kind(kind: str) -> tuple[int, int, int, int, int]:
    """(AHEAD, PF, LOCAL, EL, CS) of an L2-held kind (round 27)."""
    m = re.fullmatch(r"l2(_a)?(_loc)?(_en)?(_cs)?(?:_pf(\d+))?", kind)
    if not m:
        raise ValueError(f"not an L2-held softmax kind: {kind!r}")
    return int(bool(m[1])), int(m[5] or 0), int(bool(m[2])), int(not m[3]), int(bool(m[4]))


def _launch_l2(x2, y2, cfg):
    """One launch of the L2-held kernel (round 27): cfg (kind, BLOCK, programs per SM, num_warps),
    kind one of l2_kind's."""
    R, N = x2.shape
    kind, block, per_sm, nw = cfg
    ahead, pf, local, el, cs = l2_kind(kind)
    k, kp, ngroup, ws = _group_plan(x2, cfg, local, pf, "L2-held")
    _softmax_l2hold[(ngroup * k,)](x2, y2, ws, x2.stride(0), y2.stride(0), R, N, ngroup, K=k, KP=kp, BLOCK=block,
                                   AHEAD=ahead, PF=pf, LOCAL=local * 32 * nw, EL=el, CS=cs, num_warps=nw,
                                   launch_cooperative_grid=True)


# (programs per SM, chunk, num_warps) of the persistent online kernel, the default first
ONLINE_CANDIDATES = [(2, 8192, 8), (1, 4096, 8), (2, 4096, 8), (1, 8192, 16), (4, 4096, 4), (1, 16384, 16),
                     (2, 16384, 16), (1, 32768, 32), (1, 16384, 32)]


def _prep(x, out):
    import torch

    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device) if out is None else out
    return x2, y, y.view(x2.shape[0], N)


def softmax(x, out=None, max_single: int = MAX_SINGLE, config=None, split: bool | None = None,
            group: bool = True, evict: tuple[bool, ...] = (True, False), prefetch: bool = True,
            exp2: bool = True, full: bool = False, local: bool = True, hold16: bool = False, ff_only: bool = False,
            l2: bool = False):
    """Triton softmax over the last dim; out: optional preallocated output (any float dtype).
    config: (BLOCK_M, num_warps[, EVICT]) for rows held whole, (programs per SM, chunk, num_warps) for
    the persistent online kernel, ("group", chunk, programs per SM, num_warps) for the row-group
    kernel, (chunk, num_warps) for the split-row kernels; else picked per shape on the GPU.
    split: rows longer than max_single through the split-row kernels (True) or the persistent /
    row-group ones (False); None: by shape (split_rows), or by the config's length. group: the
    row-group kernel among the tuner's candidates (False: v3's launches only). evict: the
    EVICT values the tuner weighs for rows held whole (round 9; (True,): round 8's launch).
    prefetch: the row-group launches with the L2 prefetch among them (round 12; False: round
    11's candidates). exp2: the row-group kernel's exponentials as exp2 with the log2(e) scale
    fused (round 12; False: round 11's tl.exp). full: its chunks inside the row loaded without a
    mask (round 12, rejected: 0.82-0.88x on the H200; variant triton_full). local: the row-group
    launches whose threads take exponentials against their own max among the candidates (round
    13; False: round 12's). hold16: also those holding the exponentials in the input's 16-bit
    dtype (round 13; a second rounding). ff_only: only the launches finishing the earlier row
    first with their registers capped (round 13, rejected: 1.2x slower on the H200; variant
    triton_ff). l2: the L2-held launches (round 27, _softmax_l2hold: rows read once, held in the L2
    between a chunk's partial and its output instead of in registers) among the candidates too;
    config ("l2...", chunk, programs per SM, num_warps) runs one."""
    x2, y, y2 = _prep(x, out)
    R, N = x2.shape
    if R == 0:
        return y
    BLOCK_N = triton.next_power_of_2(N)
    if BLOCK_N <= max_single:
        def launch(cfg):
            _softmax_single[(triton.cdiv(R, cfg[0]),)](x2, y2, x2.stride(0), y2.stride(0), R, N, BLOCK_M=cfg[0],
                                                       BLOCK_N=BLOCK_N, EVICT=cfg[2] if len(cfg) > 2 else True,
                                                       num_warps=cfg[1])

        launch(config or row_config("softmax", R, N, x.dtype, x.device, launch, evict=evict))
        return y
    if split is None:
        split = len(config) == 2 if config is not None else split_rows(R, N, x2.element_size(), x.device)
    if split:
        def launch_split(cfg):
            _launch_split(x2, y2, cfg)

        launch_split(config or tuned(("softmax_split", triton.next_power_of_2(R), N, x.dtype, x.device),
                                     SPLIT_CANDIDATES, launch_split, x.device, graph=True))
        return y
    sms = num_sms(x.device)

    def launch_online(cfg):
        if isinstance(cfg[0], str):
            if cfg[0].startswith("l2"):
                _launch_l2(x2, y2, cfg)
            else:
                _launch_group(x2, y2, cfg, exp2=exp2, full=full)
            return
        per_sm, chunk, nw = cfg
        P = max(1, min(R, per_sm * sms))
        _softmax_online_persistent[(P,)](x2, y2, x2.stride(0), y2.stride(0), R, N, P, BLOCK=chunk, num_warps=nw)

    if config is None:
        # the persistent kernel stays the default (it runs anywhere, the interpreter included)
        # and a candidate: the tuner takes the row-group kernel only where it is faster
        def offered(kind):
            _, pf, hold, loc, first, cap = group_kind(kind)
            return ((prefetch or not pf) and (local or not loc) and (hold16 or not hold)
                    and (bool(first) == ff_only) and (ff_only or hold or not cap))

        groups = ([c for c in GROUP_CANDIDATES if offered(c[0])] + (L2_CANDIDATES if l2 else [])) if group else []
        flags = (prefetch, exp2, full, local, hold16, ff_only)  # rounds 12-13's changes; each stage's picks under its own key
        rnd = {(True, True, False, True, False, False): "", (False, False, False, False, False, False): "_r11",
               (True, False, False, False, False, False): "_pf", (True, True, True, False, False, False): "_full",
               (True, True, False, False, False, False): "_r12", (True, True, False, True, True, False): "_h2",
               (True, True, False, True, False, True): "_ff"}.get(flags, "_" + "".join(str(int(f)) for f in flags))
        rnd += "_l2" if l2 and group else ""  # round 27's launches offered: picks of their own
        key = ("softmax_online" + rnd if group else "softmax_online_v3", triton.next_power_of_2(R), N, x.dtype,
               x.device)
        config = ONLINE_CANDIDATES[0] if R * N < (1 << 22) else tuned(key, ONLINE_CANDIDATES + groups, launch_online,
                                                                      x.device)
    launch_online(config)
    return y


def softmax_r11(x, out=None):
    """Round 11's launches: the row-group kernel without the L2 prefetch, with tl.exp, every load
    masked (before of round 12)."""
    return softmax(x, out=out, prefetch=False, exp2=False, full=False, local=False)


def softmax_pf(x, out=None):
    """Round 12's first change alone: the L2 prefetch among the row-group launches."""
    return softmax(x, out=out, exp2=False, full=False, local=False)


def softmax_full(x, out=None):
    """Round 12's third change, rejected: the chunks inside the row loaded without a mask."""
    return softmax(x, out=out, full=True, local=False)


def softmax_r12(x, out=None):
    """Round 12's launches (before of round 13): no thread-local exponentials."""
    return softmax(x, out=out, local=False)


def softmax_ff(x, out=None):
    """Round 13, rejected: only the launches finishing the earlier row before reducing the next,
    their registers capped to fit more programs an SM."""
    return softmax(x, out=out, ff_only=True)


def softmax_h2(x, out=None):
    """Round 13's second change: the launches holding the exponentials in the input's 16-bit
    dtype among the candidates too."""
    return softmax(x, out=out, hold16=True)


def softmax_l2(x, out=None):
    """Round 27 (not yet measured on a GPU): the L2-held launches among the candidates too."""
    return softmax(x, out=out, l2=True)


def softmax_rowprog(x, out=None):
    """v2's launch at every shape (before/after baseline of v3): a long row is one program's."""
    return softmax(x, out=out, split=False, group=False)


def softmax_evict(x, out=None):
    """Round 8's launch of rows held whole (before/after baseline of round 9): x always read
    evict-first."""
    return softmax(x, out=out, evict=(True,))


def softmax_twopass(x, out=None):
    """v3's launches (before/after baseline of v4): long rows read twice, never by a row group."""
    return softmax(x, out=out, group=False)


def softmax_v1(x, out=None, max_single: int = MAX_SINGLE, chunk: int = CHUNK):
    """v1 (before/after baseline): one program per row; rows longer than max_single through the
    per-lane online kernel (two exponentials per element in the first pass)."""
    x2, y, y2 = _prep(x, out)
    R, N = x2.shape
    if R == 0:
        return y
    BLOCK_N = triton.next_power_of_2(N)
    if BLOCK_N <= max_single:
        _softmax_single[(R,)](x2, y2, x2.stride(0), y2.stride(0), R, N, BLOCK_M=1, BLOCK_N=BLOCK_N,
                              num_warps=warps_for(BLOCK_N))
    else:
        _softmax_online[(R,)](x2, y2, x2.stride(0), y2.stride(0), N, BLOCK=chunk,
                              num_warps=warps_for(chunk))
    return y


# round 14: the CUDA C++ cluster kernel's (cluster, ring stages, CTAs an SM), the default first;
# cluster None: the smallest whose slices fit 5 chunks (softmax_cluster_plan: 4 at 128256-152064
# columns). The fastest of round 14's sweep on the H200 (softmax_cluster14.py sweep) among them.
CUDA_CANDIDATES = [(None, 8, 1), (None, 12, 1), (3, 12, 1), (6, 6, 2), (8, 4, 2), (8, 6, 2)]


def softmax_cluster(x, out=None, config=None):
    """Softmax over long rows (>= 8192 columns) by the CUDA C++ kernel of kernels/cuda/softmax.cu:
    a row's slices held by a thread-block cluster, fed by the bulk copy engine through a shared-
    memory ring, the partials exchanged in distributed shared memory (round 14; rejected: 0.80x
    of softmax() on the H200, 0.85-0.88x on the H100). config: (cluster, stages, CTAs an SM);
    else the fastest of CUDA_CANDIDATES on this GPU (graph replay, inputs rotated past the L2).
    Needs a Hopper GPU and nvcc."""
    x2, y, y2 = _prep(x, out)
    R, N = x2.shape
    if R == 0:
        return y
    if config is None:
        cands = []
        for c in CUDA_CANDIDATES:
            try:
                plan = softmax_cluster_plan(N, x2.element_size(), c[0], c[2])
            except ValueError:
                continue
            if (plan[0], *c[1:]) not in cands:
                cands.append((plan[0], *c[1:]))
        if not cands:  # no cluster fits: say why in the plan's words
            softmax_cluster_plan(N, x2.element_size(), None)
        key = ("softmax_cluster", triton.next_power_of_2(R), N, x.dtype, x.device)
        config = tuned(key, cands, rotated(lambda cfg, a, b: softmax_cuda(a, b, *cfg[:2], per_sm=cfg[2]), [x2, y2]),
                       x.device, graph=True)
    softmax_cuda(x2, y2, *config[:2], per_sm=config[2])
    return y


def softmax_eager(x):
    """As HF eager attention writes it: softmax in fp32, cast back."""
    import torch

    return torch.nn.functional.softmax(x, dim=-1, dtype=torch.float32).to(x.dtype)


def softmax_reference(x):
    import torch

    return torch.softmax(x.double(), dim=-1)


def model(p: dict, dtype: str) -> dict:
    e = ESIZE[dtype]
    n = p["rows"] * p["n"]
    return {"bytes": 2 * n * e, "flops": 5 * n}


def _setup(p: dict, dtype: str, device: str):
    import torch

    x = torch.randn(p["rows"], p["n"], dtype=torch_dtype(dtype), device=device) * p.get("scale", 4.0)
    return {"x": x}




LIGER_MAX_N = 65536  # Liger 0.8.5 refuses wider rows (one block per row); seen on the H200, 2026-11-22


def _liger(s):
    n = s["x"].shape[-1]
    if n > LIGER_MAX_N:  # say so in one line rather than through Liger's traceback
        raise ValueError(f"liger softmax takes rows of at most {LIGER_MAX_N} (this shape: {n}); "
                         "use a vocab-free shape such as scores-r32768-n4096")
    from liger_kernel.ops.softmax import LigerSoftmaxFunction  # liger_kernel >= 0.6

    return LigerSoftmaxFunction.apply(s["x"])


_VARIANTS = {
    "eager": lambda s: softmax_eager(s["x"]),
    "compile": lambda s: compiled("softmax", softmax_eager)(s["x"]),
    "triton": lambda s: softmax(s["x"]),
    "triton_r11": lambda s: softmax_r11(s["x"]),  # round 11: no L2 prefetch, tl.exp in the row-group kernel
    "triton_pf": lambda s: softmax_pf(s["x"]),  # round 12's L2 prefetch alone (tl.exp)
    "triton_full": lambda s: softmax_full(s["x"]),  # round 12's rejected third change (unmasked inner chunks)
    "triton_r12": lambda s: softmax_r12(s["x"]),  # round 12: no thread-local exponentials
    "triton_h2": lambda s: softmax_h2(s["x"]),  # round 13: exponentials held in bf16 among the launches
    "triton_l2": lambda s: softmax_l2(s["x"]),  # round 27: rows held in the L2 among the launches (unmeasured)
    "triton_ff": lambda s: softmax_ff(s["x"]),  # round 13, rejected: the late finish first, registers capped
    "triton_rowprog": lambda s: softmax_rowprog(s["x"]),  # v2: one program per long row
    "triton_twopass": lambda s: softmax_twopass(s["x"]),  # v3: many long rows read twice
    "triton_evict": lambda s: softmax_evict(s["x"]),  # round 8: rows held whole read evict-first
    "triton_v1": lambda s: softmax_v1(s["x"]),
    "cuda": lambda s: softmax_cluster(s["x"]),  # round 14: kernels/cuda/softmax.cu, rows >= 8192 columns
}
if has_module("liger_kernel"):
    _VARIANTS["liger"] = _liger

WORKLOAD = Workload(
    op="softmax",
    setup=_setup,
    variants=_VARIANTS,
    shapes={
        "scores-r65536-n1024": {"rows": 65536, "n": 1024},
        "scores-r32768-n4096": {"rows": 32768, "n": 4096},
        "llama3vocab-t1": {"rows": 1, "n": 128256},
        "llama3vocab-t2048": {"rows": 2048, "n": 128256},
        "qwen7bvocab-t1024": {"rows": 1024, "n": 152064},
    },
    model=model,
    dtypes=("bf16", "fp16", "fp32"),
    description="Row softmax (attention-score rows and vocabulary-size rows)",
    requires={"liger": "liger_kernel"},
    reference=lambda s, v: softmax_reference(s["x"]),
    quick=("scores-r32768-n4096", "llama3vocab-t2048"),
    selftest={"t-2x300": {"rows": 2, "n": 300}, "t-1x20000": {"rows": 1, "n": 20000}},
    bench="kernels",
    gpu_only=("cuda",),
)
