"""Row softmax over the last dim, fp32 math, output in the input dtype.

Rows up to MAX_SINGLE elements are held whole in registers, BLOCK_M rows per program: one
read, one write (the minimum); (BLOCK_M, num_warps, L2 hint on x) is picked per shape on the GPU.

Longer rows (vocabulary logits, 128k-152k) take one of three paths:
- few rows (decode: 1 x 128256), ``split_rows``: one program per row would leave most SMs idle,
  so program (chunk, row) of ``_softmax_split_partials`` writes its chunk's max and sum of
  exp(x - max) to a small fp32 workspace and program (chunk, row) of ``_softmax_split_apply``
  combines that row's partials, re-reads its chunk (an L2 hit: the first read was evict_last) and
  writes exp(x - max) / sum. Two launches, no atomics: every program of a row combines the same
  partials in the same order, so the result is deterministic. (chunk, num_warps) is tuned by
  CUDA-graph replay.
- many rows: ``_softmax_online_persistent``, a persistent grid of a few programs an SM walking
  the rows, so only ~SMs x a row are in flight and the second read of a row hits the L2; the
  running max is one scalar a chunk, so the first pass costs one exponential an element. It runs
  anywhere (the interpreter included) and is the default where nothing is timed.
- many rows, on the GPU: ``_softmax_rowgroup`` reads a row once. A group of co-resident programs
  (cooperative launch) shares each row, a chunk each held in registers; the chunks' (max, sum)
  partials meet through 64-bit slots in global memory and every program writes its chunk. The
  tuner weighs its launches (GROUP_CANDIDATES) against the persistent kernel's.
Under the interpreter programs run one after another, so a row-group launch can only have one
program a row there; the tests run it with rows of one chunk.
"""

from __future__ import annotations

import re

import triton
import triton.language as tl

from profkit.model.ops.softmax import SOFTMAX_SHAPES
from profkit.model.ops.softmax import softmax_model as model

from . import Workload, torch_dtype
from ._cuda_ops import softmax_cluster_plan, softmax_cuda
from ._numerics import compiled, has_module, num_sms
from .rmsnorm import row_config
from .timing import rotated, tuned

MAX_SINGLE = 16384
SPLIT_MAX_BYTES = 16 << 20  # the split path reads its rows twice: they should stay in the L2 (50 MB)
MAX_PARTS = 1024  # partials per row at most (the combine loads them all): longer rows get longer chunks
TUNE_MIN_ELEMS = 1 << 22  # long rows below this many elements take the persistent kernel's default, untimed


@triton.jit
def _softmax_single(X, Y, sx, sy, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EVICT: tl.constexpr = True):
    """EVICT: x read evict-first (an L2 hint; a tuned choice, see rmsnorm.row_config)."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    m = (rows < M)[:, None] & (cols < N)[None, :]
    if EVICT:
        x = tl.load(
            X + rows[:, None] * sx + cols[None, :], mask=m, other=-float("inf"), eviction_policy="evict_first"
        ).to(tl.float32)
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
            x = tl.load(
                X + base * sx + start + cols,
                mask=start + cols < n_live,
                other=-float("inf"),
                eviction_policy="evict_last",
            ).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=0))
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # a prefix of -inf only
            d_i = d_i * tl.exp(m - m_safe) + tl.exp(x - m_safe)
            m = m_new
        inv = 1.0 / tl.sum(d_i, axis=0)
        for start in range(0, N, BLOCK):
            mk = start + cols < n_live
            x = tl.load(X + base * sx + start + cols, mask=mk, other=-float("inf"), eviction_policy="evict_first").to(
                tl.float32
            )
            tl.store(Y + base * sy + start + cols, (tl.exp(x - m) * inv).to(Y.dtype.element_ty), mask=mk)


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
SPLIT_CANDIDATES = [(2048, 4), (1024, 4), (1024, 8), (2048, 8), (4096, 4), (4096, 8), (4096, 16), (8192, 8), (8192, 16)]


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
    _softmax_split_apply[(P, R)](
        x2, y2, ws, x2.stride(0), y2.stride(0), N, P, BLOCK=chunk, BLOCK_P=triton.next_power_of_2(P), num_warps=nw
    )


@triton.jit
def _prefetch_l2(ptr, nbytes):
    """Ask the copy engine (TMA) to bring [ptr, ptr + nbytes) into the L2: one thread of the
    program issues one bulk prefetch (sm_90+, ptr and nbytes multiples of 16). Nothing lands in
    registers, so bytes can be in flight beyond what a program holds."""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .u32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
        "@p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r",
        [ptr, nbytes],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _prefetch_chunk(X, row, sx, c, R, N, BLOCK: tl.constexpr, ESIZE: tl.constexpr):
    """Prefetch program c's chunk of `row` into the L2 (nothing past the last row, nor a tail
    under 16 bytes: the bulk prefetch moves whole 16-byte units, at least one)."""
    nbytes = (tl.minimum(N - c * BLOCK, BLOCK) * ESIZE) // 16 * 16
    if (row < R) & (nbytes > 0):
        _prefetch_l2(X + row * sx + c * BLOCK, nbytes)


@triton.jit
def _load_chunk(X, row, sx, cols, c, R, N, K: tl.constexpr):
    """Program c's chunk of `row`, read evict-first (a row past the last: nothing, -inf)."""
    return tl.load(
        X + row * sx + cols, mask=cols < tl.where(row < R, N, 0), other=-float("inf"), eviction_policy="evict_first"
    )


@triton.jit
def _combine_partials(m1, s1, m2, s2):
    """Two (max, sum of exp(x - max)) partials as one (chunks of -inf only: (-inf, 0))."""
    m = tl.maximum(m1, m2)
    m_safe = tl.where(m == -float("inf"), 0.0, m)
    return m, s1 * tl.exp2((m1 - m_safe) * 1.4426950408889634) + s2 * tl.exp2((m2 - m_safe) * 1.4426950408889634)


@triton.jit
def _publish(x, row, c, R, WS, KP: tl.constexpr, LOCAL: tl.constexpr = 0):
    """This program's chunk x of `row`: its (max, sum of exp(x - max)) as one 64-bit word in the
    row's slot c (the slots start at -1, a pattern no pair of floats computed here has: a reader
    sees both or neither, so waiting for the partners and reading their partials are one load).
    Returns (max, exp(x - max)): held, in fp32 registers, until the row is combined.
    exp(x - m) is taken as exp2(x log2e - m log2e): one FFMA and ex2.approx.ftz an element, where
    tl.exp lowers to the non-ftz ex2.approx with its subnormal range fix and a separate subtract
    (4 instructions an element more in the sm_90 SASS).
    LOCAL = the program's thread count: each thread's exponentials taken against its own elements'
    max (the chunk viewed as [reps, threads, 16-byte vector], the layout of the load), so they
    start without waiting for the program-wide max; one cross-thread reduction of (max, sum) pairs
    instead of two. Returns (each thread's max, exp(x - that max))."""
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
        e = tl.exp2(xf * 1.4426950408889634 - m_safe * 1.4426950408889634)
        s = tl.sum(e, axis=0)
        m_out = m
    if row < R:
        word = (m.to(tl.int32, bitcast=True).to(tl.int64) << 32) | (
            s.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF
        )
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
    (m a thread's max with LOCAL)."""
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
def _softmax_rowgroup(
    X,
    Y,
    WS,
    sx,
    sy,
    R,
    N,
    NGROUP,
    K: tl.constexpr,
    KP: tl.constexpr,
    BLOCK: tl.constexpr,
    LAG: tl.constexpr = 0,
    PF: tl.constexpr = 0,
    LOCAL: tl.constexpr = 0,
):
    """A long row read once. K co-resident programs (a group) share each row, a chunk of BLOCK
    columns each, held in registers: each publishes its chunk's partial (_publish), waits for the
    other K - 1 and writes its chunk (_finish). Group g walks rows g, g + NGROUP, ... with the
    next row's chunk loading meanwhile. LAG 1: each row finished one row late, its slots loaded
    before the next row is reduced, so the wait overlaps that work (two rows' exp(x - m) held, so
    fewer programs fit an SM). PF > 0: the chunk PF rows beyond the one loading into registers is
    prefetched into the L2 (_prefetch_l2), so more bytes are in flight than registers hold.
    LOCAL: exponentials against each thread's own max (_publish). Launched cooperatively (all
    programs resident, or the launch fails: a program waiting for a partner never scheduled
    would hang). Why several small programs an SM: while one waits for its row's partners the
    others stream, and what a program holds in registers bounds how many fit."""
    g64, c, cols, mk, kk = _group_program(N, K, KP, BLOCK)
    ES: tl.constexpr = X.dtype.element_ty.primitive_bitwidth // 8
    for j in tl.static_range(2, PF + 2):  # rows g + 2 NGROUP ... g + (PF + 1) NGROUP: the in-loop prefetch's lead
        _prefetch_chunk(X, g64 + j * NGROUP, sx, c, R, N, BLOCK, ES)
    x = _load_chunk(X, g64, sx, cols, c, R, N, K)
    if LAG == 1:
        if LOCAL:
            V: tl.constexpr = 16 // ES
            m_prev = tl.zeros([LOCAL], dtype=tl.float32)
            e_prev = tl.zeros([BLOCK // (LOCAL * V), LOCAL, V], dtype=tl.float32)
        else:
            m_prev = tl.max(tl.zeros([BLOCK], dtype=tl.float32), axis=0)
            e_prev = tl.zeros([BLOCK], dtype=tl.float32)
        for i in range(0, R + NGROUP, NGROUP):  # one step more: the last row's finish
            row = g64 + i
            prev = row - NGROUP
            live = (prev >= 0) & (prev < R)
            prev_at = tl.maximum(prev, 0)
            p = tl.load(WS + prev_at * KP + kk, mask=kk < tl.where(live, K, 0), other=0, volatile=True)
            nxt = row + NGROUP
            if PF > 0:
                _prefetch_chunk(X, nxt + PF * NGROUP, sx, c, R, N, BLOCK, ES)
            x_next = _load_chunk(X, nxt, sx, cols, c, R, N, K)
            m, e = _publish(x, row, c, R, WS, KP, LOCAL)
            if live:
                _finish(p, prev_at, m_prev, e_prev, cols, mk, WS, Y, sy, K, KP, LOCAL)
            m_prev = m
            e_prev = e
            x = x_next
    else:
        for i in range(0, R, NGROUP):
            row = g64 + i
            nxt = row + NGROUP
            if PF > 0:
                _prefetch_chunk(X, nxt + PF * NGROUP, sx, c, R, N, BLOCK, ES)
            x_next = _load_chunk(X, nxt, sx, cols, c, R, N, K)
            if row < R:  # the same for the K programs of a group: all wait, or none
                m, e = _publish(x, row, c, R, WS, KP, LOCAL)
                p = tl.load(WS + row * KP + kk, mask=kk < K, other=0, volatile=True)
                _finish(p, row, m, e, cols, mk, WS, Y, sy, K, KP, LOCAL)
            x = x_next


# ("group", BLOCK, programs per SM, num_warps) of the row-group kernel, a row over cdiv(N, BLOCK)
# programs; "group_lag": each row finished one row late (LAG 1); "_loc": each thread's
# exponentials against its own max; "_pf<n>": the L2 prefetch n rows ahead of the register load
# (Hopper only: elsewhere the launch raises and the tuner skips it). 2-16 k columns a program,
# 2-12 programs an SM (measured on the H100 and H200: several small programs an SM beat one large
# one); the late finish holds two rows' exp(x - m), so fewer of its programs fit. A candidate
# whose programs cannot all be resident fails its cooperative launch and the tuner skips it.
GROUP_CANDIDATES = [
    ("group", 4096, 6, 4),
    ("group", 8192, 3, 8),
    ("group", 2048, 8, 4),
    ("group", 2048, 12, 2),
    ("group", 2048, 10, 2),
    ("group", 8192, 2, 8),
    ("group", 32768, 1, 32),
    ("group_lag", 4096, 4, 4),
    ("group_lag", 2048, 8, 2),
    ("group_lag", 8192, 2, 8),
    ("group_lag", 2048, 8, 4),
    ("group_lag", 2048, 6, 4),
    ("group_lag", 4096, 3, 4),
    ("group_lag", 4096, 3, 8),
]
GROUP_CANDIDATES += [
    (f"{kind}_pf{pf}", block, per_sm, nw)
    for pf in (1, 2)
    for kind, block, per_sm, nw in (
        ("group_lag", 4096, 4, 4),
        ("group_lag", 8192, 2, 8),
        ("group_lag", 2048, 8, 2),
        ("group", 8192, 3, 8),
        ("group", 4096, 6, 4),
        ("group", 2048, 12, 2),
        ("group_lag", 4096, 3, 8),
    )
]
GROUP_CANDIDATES += [("group_lag_loc_pf1", 4096, 4, 4), ("group_lag_loc_pf1", 8192, 2, 8)]


def group_kind(kind: str) -> tuple[int, int, int]:
    """(LAG, PF, LOCAL) of a row-group kind: "group" / "group_lag", then "_loc" (each thread's
    exponentials against its own max) and "_pf<n>" (an L2 prefetch n rows ahead), in this order."""
    m = re.fullmatch(r"(group(?:_lag)?)(_loc)?(?:_pf(\d+))?", kind)
    if not m:
        raise ValueError(f"not a row-group softmax kind: {kind!r}")
    return int(m[1] == "group_lag"), int(m[3] or 0), int(bool(m[2]))


def prefetch_ok(x2) -> bool:
    """The L2 bulk prefetch: a Hopper or newer GPU (not the interpreter), rows starting on
    16-byte boundaries."""
    import torch

    from ._numerics import interpreting

    return (
        not interpreting()
        and x2.is_cuda
        and torch.cuda.get_device_capability(x2.device)[0] >= 9
        and x2.data_ptr() % 16 == 0
        and (x2.stride(0) * x2.element_size()) % 16 == 0
    )


def _group_plan(x2, cfg, local: int, pf: int):
    """(K programs a row, KP its power of two, groups, the rows' slots at -1: none published) of a
    row-group launch, cfg (kind, BLOCK, programs per SM, num_warps); refused in one line where it cannot run: a _loc chunk that does not split into the
    threads' 16-byte vectors, partners under the interpreter, the L2 prefetch off Hopper."""
    import torch

    from ._numerics import interpreting

    R, N = x2.shape
    kind, block, per_sm, nw = cfg
    if local and block % (32 * nw * 16 // x2.element_size()):  # _publish views the chunk per thread
        raise ValueError(f"{kind}: {block} columns do not split into {32 * nw} threads' 16-byte vectors")
    k = triton.cdiv(N, block)
    if k > 1 and interpreting():  # the interpreter runs programs one after another: no partner ever comes
        raise ValueError(f"row-group softmax with {k} programs a row cannot run under TRITON_INTERPRET")
    if pf and not prefetch_ok(x2):
        raise ValueError("the L2 prefetch needs a Hopper or newer GPU and rows on 16-byte boundaries")
    ngroup = max(1, min(R, per_sm * num_sms(x2.device) // k))
    kp = triton.next_power_of_2(k)
    return k, kp, ngroup, torch.full((R, kp), -1, dtype=torch.int64, device=x2.device)


def _launch_group(x2, y2, cfg):
    """One row-group launch: cfg (kind, BLOCK, programs per SM, num_warps), kind one of
    group_kind's."""
    R, N = x2.shape
    kind, block, _, nw = cfg
    lag, pf, local = group_kind(kind)
    k, kp, ngroup, ws = _group_plan(x2, cfg, local, pf)
    _softmax_rowgroup[(ngroup * k,)](
        x2,
        y2,
        ws,
        x2.stride(0),
        y2.stride(0),
        R,
        N,
        ngroup,
        K=k,
        KP=kp,
        BLOCK=block,
        LAG=lag,
        PF=pf,
        LOCAL=local * 32 * nw,
        num_warps=nw,
        launch_cooperative_grid=True,
    )


# (programs per SM, chunk, num_warps) of the persistent online kernel, the default first
ONLINE_CANDIDATES = [
    (2, 8192, 8),
    (1, 4096, 8),
    (2, 4096, 8),
    (1, 8192, 16),
    (4, 4096, 4),
    (1, 16384, 16),
    (2, 16384, 16),
    (1, 32768, 32),
    (1, 16384, 32),
]


def _prep(x, out):
    import torch

    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device) if out is None else out
    return x2, y, y.view(x2.shape[0], N)


def softmax(x, out=None, max_single: int = MAX_SINGLE, config=None, split: bool | None = None):
    """Triton softmax over the last dim; out: optional preallocated output (any float dtype).
    max_single: the longest row (rounded up to a power of two) held whole in registers.
    config: (BLOCK_M, num_warps[, EVICT]) for rows held whole, (programs per SM, chunk, num_warps) for
    the persistent online kernel, (kind, chunk, programs per SM, num_warps) for the row-group
    kernel (group_kind), (chunk, num_warps) for the split-row kernels; else picked per shape on
    the GPU. split: longer rows through the split-row kernels (True) or the persistent / row-group
    ones (False); None: by shape (split_rows), or by the config's length."""
    x2, y, y2 = _prep(x, out)
    R, N = x2.shape
    if R == 0:
        return y
    BLOCK_N = triton.next_power_of_2(N)
    if BLOCK_N <= max_single:

        def launch(cfg):
            _softmax_single[(triton.cdiv(R, cfg[0]),)](
                x2,
                y2,
                x2.stride(0),
                y2.stride(0),
                R,
                N,
                BLOCK_M=cfg[0],
                BLOCK_N=BLOCK_N,
                EVICT=cfg[2] if len(cfg) > 2 else True,
                num_warps=cfg[1],
            )

        launch(config or row_config("softmax", R, N, x.dtype, x.device, launch, evict=(True, False)))
        return y
    if split is None:
        split = len(config) == 2 if config is not None else split_rows(R, N, x2.element_size(), x.device)
    if split:

        def launch_split(cfg):
            _launch_split(x2, y2, cfg)

        launch_split(
            config
            or tuned(
                ("softmax_split", triton.next_power_of_2(R), N, x.dtype, x.device),
                SPLIT_CANDIDATES,
                launch_split,
                x.device,
                graph=True,
            )
        )
        return y
    sms = num_sms(x.device)

    def launch_online(cfg):
        if isinstance(cfg[0], str):
            _launch_group(x2, y2, cfg)
            return
        per_sm, chunk, nw = cfg
        P = max(1, min(R, per_sm * sms))
        _softmax_online_persistent[(P,)](x2, y2, x2.stride(0), y2.stride(0), R, N, P, BLOCK=chunk, num_warps=nw)

    if config is None:
        # the persistent kernel stays the default (it runs anywhere, the interpreter included)
        # and a candidate: the tuner takes a row-group launch only where it is faster
        key = ("softmax_online", triton.next_power_of_2(R), N, x.dtype, x.device)
        config = (
            ONLINE_CANDIDATES[0]
            if R * N < TUNE_MIN_ELEMS
            else tuned(key, ONLINE_CANDIDATES + GROUP_CANDIDATES, launch_online, x.device)
        )
    launch_online(config)
    return y


# the CUDA C++ cluster kernel's (cluster, ring stages, CTAs an SM), the default first; cluster
# None: the smallest whose slices fit 5 chunks (softmax_cluster_plan: 4 at 128256-152064
# columns). The fastest of a sweep on the H200 among them.
CUDA_CANDIDATES = [(None, 8, 1), (None, 12, 1), (3, 12, 1), (6, 6, 2), (8, 4, 2), (8, 6, 2)]


def softmax_cluster(x, out=None, config=None):
    """Softmax over long rows (>= 8192 columns) by the CUDA C++ kernel of kernels/cuda/softmax.cu:
    a row's slices held by a thread-block cluster, fed by the bulk copy engine through a shared-
    memory ring, the partials exchanged in distributed shared memory (measured 0.80x of softmax()
    on the H200, 0.85-0.88x on the H100: the lab's CUDA C++ example, not the default). config: (cluster, stages, CTAs an SM);
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
        config = tuned(
            key,
            cands,
            rotated(lambda cfg, a, b: softmax_cuda(a, b, *cfg[:2], per_sm=cfg[2]), [x2, y2]),
            x.device,
            graph=True,
        )
    softmax_cuda(x2, y2, *config[:2], per_sm=config[2])
    return y


def softmax_eager(x):
    """As HF eager attention writes it: softmax in fp32, cast back."""
    import torch

    return torch.nn.functional.softmax(x, dim=-1, dtype=torch.float32).to(x.dtype)


def softmax_reference(x):
    import torch

    return torch.softmax(x.double(), dim=-1)


def _setup(p: dict, dtype: str, device: str):
    import torch

    x = torch.randn(p["rows"], p["n"], dtype=torch_dtype(dtype), device=device) * p.get("scale", 4.0)
    return {"x": x}


LIGER_MAX_N = 65536  # Liger 0.8.5 refuses wider rows (one block per row); seen on the H200, 2026-11-22


def _liger(s):
    n = s["x"].shape[-1]
    if n > LIGER_MAX_N:  # say so in one line rather than through Liger's traceback
        raise ValueError(
            f"liger softmax takes rows of at most {LIGER_MAX_N} (this shape: {n}); "
            "use a vocab-free shape such as scores-r32768-n4096"
        )
    from liger_kernel.ops.softmax import LigerSoftmaxFunction  # liger_kernel >= 0.6

    return LigerSoftmaxFunction.apply(s["x"])


_VARIANTS = {
    "eager": lambda s: softmax_eager(s["x"]),
    "compile": lambda s: compiled("softmax", softmax_eager)(s["x"]),
    "triton": lambda s: softmax(s["x"]),
    "cuda": lambda s: softmax_cluster(s["x"]),  # kernels/cuda/softmax.cu, rows >= 8192 columns
}
if has_module("liger_kernel"):
    _VARIANTS["liger"] = _liger

WORKLOAD = Workload(
    op="softmax",
    setup=_setup,
    variants=_VARIANTS,
    shapes=SOFTMAX_SHAPES,
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
