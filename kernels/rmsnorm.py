"""RMSNorm: y = x / sqrt(mean(x^2) + eps) * w  (Gemma: * (1 + w)), forward and backward.

Memory-bound: one read of x, one write of y; w is read once per program (it stays in L2).
Forward: a program normalises BLOCK_M rows held whole in registers (BLOCK_M > 1 for small
hidden sizes such as the 128 of per-head q/k norm, so each program still moves ~4-16 KB);
the sum of squares is taken in fp32 (fp16 inputs of a few hundred overflow when squared in
fp16). (BLOCK_M, num_warps) is picked per shape on the GPU it runs on (kernels/timing.tuned);
at a few rows (decode) the one-row launch's num_warps, by CUDA-graph replay.

Backward: dx = (w*dy - xhat * mean(xhat * w*dy)) * rstd and dw = sum over rows of dy * xhat, in
one pass over dy and x (rstd cached by the forward). ``rmsnorm_bwd``: one program per SM;
program p takes rows p, p + P, p + 2P, ... (the grid sweeps the rows together) with the next rows'
dy and x already in flight while the current row is reduced (Triton's pipeliner, tl.range
num_stages, cp.async into shared memory; or a hand-written register prefetch); its share of dw
stays in fp32 registers, and the P partial rows (P x N fp32, ~2 MB at N = 4096, L2-resident) are
summed and cast to w's dtype by a second, small kernel (a deterministic two-stage reduction: no
atomics), launched as a programmatic dependent where the GPU and Triton allow it. (A few
programs an SM each walking a contiguous block of rows with nothing in flight across steps kept
DRAM only 52-63 % busy at 4096 x 4096.)
"""

from __future__ import annotations

import functools

import triton
import triton.language as tl

from profkit.model.ops.norms import RMSNORM_BWD_SHAPES, RMSNORM_SHAPES
from profkit.model.ops.norms import rmsnorm_bwd_model as model_bwd
from profkit.model.ops.norms import rmsnorm_model as model

from . import Backward, Workload, torch_dtype
from ._cuda_ops import rmsnorm_cuda
from ._launch import Plans, cdiv, fast, next_pow2
from ._numerics import compiled, has_module, num_sms, pdl_ok, warps_for
from .timing import pick_check, rotated, tuned, tuned_cached, tuning_enabled

try:  # Triton >= 3.4: programmatic dependent launch (grid dependency control)
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # pragma: no cover
    gdc_launch_dependents = gdc_wait = None


@triton.jit
def _rmsnorm_fwd(
    X,
    W,
    Y,
    RSTD,
    stride_x,
    stride_y,
    M,
    N,
    eps,
    offset,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    STORE_RSTD: tl.constexpr,
    EVICT: tl.constexpr = True,
):
    """EVICT: x read evict-first and w evict-last (L2 hints; a tuned choice, see row_config)."""
    pid = tl.program_id(0).to(tl.int64)  # int64: rows * stride can pass 2^31
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    rmask = rows < M
    cmask = cols < N
    mask = rmask[:, None] & cmask[None, :]
    if EVICT:
        x = tl.load(
            X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0, eviction_policy="evict_first"
        ).to(tl.float32)
        w = tl.load(W + cols, mask=cmask, other=0.0, eviction_policy="evict_last").to(tl.float32) + offset
    else:
        x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=cmask, other=0.0).to(tl.float32) + offset
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / N + eps)
    y = x * rstd[:, None] * w[None, :]
    tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
    if STORE_RSTD:
        tl.store(RSTD + rows, rstd, mask=rmask)


@triton.jit
def _bwd_rows(x, dy, rstd, w, DX, rows, cols, m, stride_dx, N, STORE_HINT: tl.constexpr):
    """dx of BLOCK_M rows (stored) and their dw contribution sum_rows(dy * xhat), [BLOCK_N] fp32."""
    x = x.to(tl.float32)
    dy = dy.to(tl.float32)
    xhat = x * rstd[:, None]
    wdy = w[None, :] * dy
    c = tl.sum(xhat * wdy, axis=1) / N
    dx = ((wdy - xhat * c[:, None]) * rstd[:, None]).to(DX.dtype.element_ty)
    ptr = DX + rows[:, None] * stride_dx + cols[None, :]
    if STORE_HINT == 1:
        tl.store(ptr, dx, mask=m, eviction_policy="evict_first")
    elif STORE_HINT == 2:
        tl.store(ptr, dx, mask=m, cache_modifier=".cs")
    else:
        tl.store(ptr, dx, mask=m)
    return tl.sum(dy * xhat, axis=0)


@triton.jit
def _rmsnorm_bwd(
    DY,
    X,
    W,
    RSTD,
    DX,
    DWP,
    stride_dy,
    stride_x,
    stride_dx,
    M,
    N,
    offset,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    STAGES: tl.constexpr,
    PREFETCH: tl.constexpr,
    STORE_HINT: tl.constexpr,
    PDL: tl.constexpr,
):
    """Program p of P takes the BLOCK_M-row steps p, p + P, p + 2P, ... (the grid sweeps the
    rows together); the next steps' dy and x are in flight while this one is reduced: STAGES > 1
    lets Triton's pipeliner keep them in shared memory (cp.async), PREFETCH loads the next step
    into registers by hand before the current one is used. dw: one fp32 partial row per program
    (DWP[p]), summed by _dw_reduce. PDL: let the reduce kernel launch now (it waits for this
    grid's end in gdc_wait): its launch latency hides under this kernel."""
    if PDL:
        gdc_launch_dependents()
    pid = tl.program_id(0).to(tl.int64)  # the row steps, and so the loop, in int64
    P = tl.num_programs(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    cmask = cols < N
    w = tl.load(W + cols, mask=cmask, other=0.0).to(tl.float32) + offset
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    n_steps = tl.cdiv(M, BLOCK_M).to(tl.int64)
    if PREFETCH:
        rows = tl.arange(0, BLOCK_M).to(tl.int64) + pid * BLOCK_M
        m = (rows < M)[:, None] & cmask[None, :]
        x_n = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=m, other=0.0, eviction_policy="evict_first")
        dy_n = tl.load(DY + rows[:, None] * stride_dy + cols[None, :], mask=m, other=0.0, eviction_policy="evict_first")
        r_n = tl.load(RSTD + rows, mask=rows < M, other=0.0)
        for s in range(pid, n_steps, P):
            rows = tl.arange(0, BLOCK_M).to(tl.int64) + s * BLOCK_M
            m = (rows < M)[:, None] & cmask[None, :]
            x, dy, rstd = x_n, dy_n, r_n
            nrows = rows + P * BLOCK_M  # the next step of this program (masked past M)
            nm = (nrows < M)[:, None] & cmask[None, :]
            x_n = tl.load(
                X + nrows[:, None] * stride_x + cols[None, :], mask=nm, other=0.0, eviction_policy="evict_first"
            )
            dy_n = tl.load(
                DY + nrows[:, None] * stride_dy + cols[None, :], mask=nm, other=0.0, eviction_policy="evict_first"
            )
            r_n = tl.load(RSTD + nrows, mask=nrows < M, other=0.0)
            dw += _bwd_rows(x, dy, rstd, w, DX, rows, cols, m, stride_dx, N, STORE_HINT)
    else:
        for s in tl.range(pid, n_steps, P, num_stages=STAGES):
            rows = tl.arange(0, BLOCK_M).to(tl.int64) + s * BLOCK_M
            rmask = rows < M
            m = rmask[:, None] & cmask[None, :]
            x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=m, other=0.0, eviction_policy="evict_first")
            dy = tl.load(
                DY + rows[:, None] * stride_dy + cols[None, :], mask=m, other=0.0, eviction_policy="evict_first"
            )
            rstd = tl.load(RSTD + rows, mask=rmask, other=0.0)
            dw += _bwd_rows(x, dy, rstd, w, DX, rows, cols, m, stride_dx, N, STORE_HINT)
    tl.store(DWP + pid * N + cols, dw, mask=cmask)


@triton.jit
def _dw_reduce(DWP, DW, P, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr, PDL: tl.constexpr = False):
    """DW[n] = sum_p DWP[p, n], cast to DW's dtype (stage 2 of the dw reduction). PDL: launched
    early (programmatic dependent launch): wait for the partials' kernel to finish first."""
    if PDL:
        gdc_wait()
    pid = tl.program_id(0).to(tl.int64)
    cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    cmask = cols < N
    acc = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    for p0 in range(0, P, BLOCK_P):
        r = p0 + tl.arange(0, BLOCK_P)
        acc += tl.load(DWP + r[:, None] * N + cols[None, :], mask=(r < P)[:, None] & cmask[None, :], other=0.0)
    tl.store(DW + cols, tl.sum(acc, axis=0).to(DW.dtype.element_ty), mask=cmask)


def _bwd_buffers(x, dy, w, dx):
    """The backward's row views and outputs: x and dy as rows, dx (given or new) and its rows,
    dw, the row count and length, and the power-of-2 block over a row."""
    import torch

    x2, dy2 = _rows(x), _rows(dy)
    M, N = x2.shape
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device) if dx is None else dx
    dw = torch.empty(N, dtype=w.dtype, device=w.device)
    return x2, dy2, dx, dx.view(M, N), dw, M, N, next_pow2(N)


def _rows(x):
    x2 = x.reshape(-1, x.shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    return x2


def fwd_config(N: int):
    """The default (BLOCK_M, BLOCK_N, num_warps) for hidden size N."""
    BLOCK_N = triton.next_power_of_2(N)
    BLOCK_M = max(1, min(16, 2048 // BLOCK_N))
    return BLOCK_M, BLOCK_N, warps_for(BLOCK_M * BLOCK_N)


TUNE_MIN_ELEMS = 1 << 22  # below ~4M elements a launch is too short for the config to matter...
DECODE_ROWS = 64  # ...except at decode: a few rows, where the launch is all there is (graph-timed)


@functools.cache
def row_candidates(N: int) -> tuple[tuple[int, int], ...]:
    """(BLOCK_M, num_warps) launch candidates of a row kernel over hidden size N, the default
    first: tiles of 2k-16k elements, 4-32 elements per thread."""
    BLOCK_N = triton.next_power_of_2(N)
    bm0, _, nw0 = fwd_config(N)
    out = [(bm0, nw0)]
    for bm in (1, 2, 4, 8, 16, 32, 64):
        elems = bm * BLOCK_N
        if not 2048 <= elems <= 16384:
            continue
        for nw in (4, 8, 16):
            if 4 <= elems // (32 * nw) <= 32 and (bm, nw) not in out:
                out.append((bm, nw))
    return tuple(out)


@functools.cache
def decode_candidates(N: int) -> tuple[tuple[int, int], ...]:
    """(BLOCK_M, num_warps) candidates of a row kernel at a few rows, the default first: one row
    per program (rows are few: a program each) over num_warps, 2-64 elements per thread."""
    BLOCK_N = triton.next_power_of_2(N)
    out = [row_candidates(N)[0]]
    for nw in (1, 2, 4, 8, 16, 32):
        if 2 <= BLOCK_N // (32 * nw) <= 64 and (1, nw) not in out:
            out.append((1, nw))
    return tuple(out)


def row_config(name: str, M: int, N: int, dtype, device, run, evict: tuple[bool, ...] = ()):
    """(BLOCK_M, num_warps) for a row kernel: the default for small problems, else the
    fastest candidate on this GPU (timing.tuned, once per (kernel, M bucket, N, dtype)).
    evict: the kernel's L2 eviction hints (EVICT) are a choice too, among these values:
    candidates become (BLOCK_M, num_warps, EVICT), the first value the default (on an H200
    without the hints the RMSNorm forward at 32768 x 4096 took 130 us instead of 135 by graph
    replay, same DRAM bytes). At most DECODE_ROWS rows (decode: 1 x 4096 took 1.70 us on an H100, Liger 1.62) the
    one-row launch's num_warps (decode_candidates) is timed too, by CUDA-graph replay (GPU time:
    do_bench would time the launcher's host time at this size)."""
    key = row_key(name, M, N, dtype, device, evict)
    if key is None:
        return (*row_candidates(N)[0], evict[0]) if evict else row_candidates(N)[0]
    hit = tuned_cached(key)  # before building the candidates: this runs on every launch
    if hit is not None:
        return hit
    cands: tuple[tuple[int, ...], ...] = decode_candidates(N) if key[1] == "decode" else row_candidates(N)
    if evict:
        cands = tuple((bm, nw, e) for e in evict for bm, nw in cands)
    return tuned(key, cands, run, device, graph=key[1] == "decode")


def row_key(name: str, M: int, N: int, dtype, device, evict: tuple[bool, ...] = ()):
    """row_config's tuned key for this launch, or None where it takes the default untimed (small
    problems that are not decode)."""
    small = M * N < TUNE_MIN_ELEMS
    if small and M > DECODE_ROWS:
        return None
    return (
        (name, "decode", next_pow2(M), N, dtype, device, evict)
        if small
        else (name, next_pow2(M), N, dtype, device, evict)
    )


def untuned_config(N: int) -> tuple[int, int, bool]:
    """The default (BLOCK_M, num_warps, EVICT) of a row kernel over hidden size N, no tuning."""
    return (*row_candidates(N)[0], True)


_FWD_PLANS = Plans()  # rmsnorm_fwd's launches by their inputs' key (kernels/_launch.py)


def rmsnorm_fwd(
    x,
    w,
    eps: float = 1e-6,
    gemma: bool = False,
    out=None,
    rstd=None,
    block_m: int | None = None,
    num_warps: int | None = None,
    evict: bool | None = None,
    config=None,
):
    """Forward launcher. out: optional preallocated y (shape of x); rstd: optional fp32 [rows]
    to keep for the backward. Returns y. config: (BLOCK_M, num_warps, EVICT), else block_m /
    num_warps / evict over the default, else picked per shape on the GPU (row_config). A call
    like an earlier one (same shape, strides, dtype, flags; no out or launch choice given) takes
    that call's launch plan."""
    import torch

    plannable = out is None and config is None and not block_m and not num_warps
    if plannable:
        pkey = (x.shape, x.stride(), x.dtype, x.device, eps, gemma, rstd is None, evict)
        plan = _FWD_PLANS.get(pkey)
        if plan is not None:
            y = torch.empty(pkey[0], dtype=pkey[2], device=pkey[3])
            plan.launch((x, w, y, x if rstd is None else rstd))
            return y
    x2 = _rows(x)
    M, N = x2.shape
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device) if out is None else out
    y2 = y.view(M, N)
    BLOCK_N = next_pow2(N)

    def parts(cfg):
        """(grid, the parameters after the tensors, the options) of launch `cfg`."""
        bm, nw, ev = cfg
        return (
            (cdiv(M, bm),),
            (x2.stride(0), y2.stride(0), M, N, eps, 1.0 if gemma else 0.0, bm, BLOCK_N, rstd is not None, ev),
            (("num_warps", nw),),
        )

    def launch(cfg):
        grid, rest, opts = parts(cfg)
        fast(_rmsnorm_fwd)[grid](x2, w, y2, rstd if rstd is not None else x2, *rest, **dict(opts))

    tkey = None
    if config is not None:
        cfg = tuple(config)
    elif block_m or num_warps:
        bm0, _, nw0 = fwd_config(N)
        cfg = (block_m or bm0, num_warps or nw0, True if evict is None else evict)
    else:
        ev = (True, False) if evict is None else (evict,)
        tkey = row_key("rmsnorm_fwd", M, N, x.dtype, x.device, ev)
        cfg = row_config("rmsnorm_fwd", M, N, x.dtype, x.device, launch, evict=ev)
    launch(cfg)
    # a plan where x's rows are x itself (no copy: the key then holds the call) and the pick stands
    check = pick_check(tkey, x.device)
    if plannable and check and x2.data_ptr() == x.data_ptr():
        _FWD_PLANS.put(pkey, fast(_rmsnorm_fwd).plan(*parts(cfg)), check)
    return y


@functools.cache
def bwd_candidates(N: int) -> tuple[tuple[int, int, int, int, int, int], ...]:
    """(programs per SM, BLOCK_M, num_warps, STAGES, PREFETCH, STORE_HINT) of the backward, the
    default first. Measured by graph replay (N = 4096 / 3584): one program per SM (two or more were slower on the H100 at every shape), a ~4K-element
    tile (one row), 8 warps; the winners differ by GPU and shape by 1-7 %: 4 stages with
    evict-first dx stores (H100, 4096 x 4096 and 32768 x 4096), 5 stages (H200 at 4096 tokens;
    7 % slower than the best at 32768 x 4096 there), 2-row tiles with 3 stages (H200 at 32768
    tokens), a 2-row register prefetch (H100 32768 x 4096, runner-up). 4 or 16 warps, 6-8
    stages, 2 programs per SM or a grid of equal row counts per program never won."""
    BLOCK_N = triton.next_power_of_2(N)
    bm = max(1, min(64, 4096 // BLOCK_N))
    nw = warps_for(bm * BLOCK_N)
    out = [
        (1, bm, nw, 4, 0, 1),
        (1, bm, nw, 5, 0, 0),
        (1, 2 * bm, nw, 3, 0, 0),
        (1, 2 * bm, nw, 1, 1, 1),
        (1, bm, nw, 4, 0, 0),
    ]
    return tuple(dict.fromkeys(out))


PDL = None  # programmatic dependent launch of the dw reduce: None = where supported (see pdl_supported)


def rmsnorm_bwd(dy, x, w, rstd, gemma: bool = False, dx=None, config=None, pdl=None, red=None, programs=None):
    """Fused backward: returns (dx, dw), dw in w's dtype. One program per SM sweeps the rows
    with the next rows' loads in flight (see _rmsnorm_bwd); dw partials (P x N fp32, in L2)
    summed by _dw_reduce. config: see bwd_candidates; default: its first for small problems,
    else the fastest candidate on this GPU, timed once by CUDA-graph replay over rotated input
    copies (timing.tuned graph=True, timing.rotated: by do_bench the launcher's host time decided at
    4096 tokens and the pick was noise, 39.9 us against 38.4 us for the best on the H100; the
    best differs per GPU and shape by 1-7 %). pdl: launch the reduce as a programmatic dependent
    (default: where supported). red: the reduce's (BLOCK_N, BLOCK_P cap, num_warps). programs: the
    grid size (sweeps; default per_sm x SMs). A call like an earlier one (same shapes, strides,
    dtypes, flags; no dx or launch choice given) takes that call's launch plans."""
    import torch

    plannable = dx is None and config is None and pdl is None and red is None and programs is None
    if plannable:
        pkey = (x.shape, x.stride(), dy.shape, dy.stride(), x.dtype, w.dtype, x.device, gemma, PDL)
        plans = _BWD_PLANS.get(pkey)
        if plans is not None:
            main, red_plan, dwp_shape = plans
            dx = torch.empty(pkey[0], dtype=pkey[4], device=pkey[6])
            dw = torch.empty(dwp_shape[1], dtype=pkey[5], device=pkey[6])
            dwp = torch.empty(dwp_shape, dtype=torch.float32, device=pkey[6])
            main.launch((dy, x, w, rstd, dx, dwp))
            red_plan.launch((dwp, dw))
            return dx, dw
    x2, dy2, dx, dx2, dw, M, N, BLOCK_N = _bwd_buffers(x, dy, w, dx)
    dev = x.device
    if pdl is None:
        pdl = PDL if PDL is not None else pdl_ok(dev)
    sms = num_sms(dev)
    off = 1.0 if gemma else 0.0

    def parts(cfg, xx=x2, dd=dy2):
        """The partials' rows P and the two launches' (grid, parameters after the tensors, options)."""
        per_sm, bm, nw, stages, pf, hint = cfg
        P, bp, bn, rnw = _bwd_grid(bm, per_sm, M, N, sms, red, programs)
        return (
            P,
            (
                (P,),
                (dd.stride(0), xx.stride(0), dx2.stride(0), M, N, off, bm, BLOCK_N, stages, pf, hint, pdl),
                (("num_warps", nw),),
            ),
            ((cdiv(N, bn),), (P, N, bp, bn, pdl), (("num_warps", rnw),) + ((("launch_pdl", True),) if pdl else ())),
        )

    def launch(cfg, xx=x2, dd=dy2, rr=rstd):
        P, (grid, rest, opts), (rgrid, rrest, ropts) = parts(cfg, xx, dd)
        dwp = torch.empty(P, N, dtype=torch.float32, device=dev)
        fast(_rmsnorm_bwd)[grid](dd, xx, w, rr, dx2, dwp, *rest, **dict(opts))
        fast(_dw_reduce)[rgrid](dwp, dw, *rrest, **dict(ropts))

    key = None
    if config is None:
        cands = bwd_candidates(N)
        if M * N >= TUNE_MIN_ELEMS:
            key = ("rmsnorm_bwd", next_pow2(M), N, x.dtype, dev, pdl)
        config = cands[0] if key is None else tuned_cached(key)
        if config is None:  # first call at this size: time the candidates as the benchmark does
            if not tuning_enabled(dev) or torch.cuda.is_current_stream_capturing():
                config = cands[0]
            else:
                config = tuned(
                    key, cands, rotated(lambda c, x_, dy_: launch(c, x_, dy_, rstd), (x2, dy2)), dev, graph=True
                )
    launch(config)
    # plans where x's and dy's rows are themselves (no copies: the key then holds the call) and
    # the pick stands; the dw partials' buffer is made per call, as here
    check = pick_check(key, dev) if plannable else None
    if check and x2.data_ptr() == x.data_ptr() and dy2.data_ptr() == dy.data_ptr():
        P, main, reduce = parts(config)
        _BWD_PLANS.put(pkey, (fast(_rmsnorm_bwd).plan(*main), fast(_dw_reduce).plan(*reduce), (P, N)), check)
    return dx, dw


_BWD_PLANS = Plans()  # rmsnorm_bwd's launches by their inputs' key (kernels/_launch.py)


@functools.cache
def _bwd_grid(bm, per_sm, M, N, sms, red, programs):
    """(P programs, the reduce's BLOCK_P, BLOCK_N, num_warps) of one backward launch, worked out
    once per shape (the launcher's host time counts at 4096 tokens)."""
    bn, bp_cap, rnw = red or (32, 256, 4)
    P = programs or max(1, min(cdiv(M, bm), per_sm * sms))
    return P, max(1, min(bp_cap, next_pow2(P))), min(bn, next_pow2(N)), rnw


def _autograd(bwd):
    import torch

    class RMSNormFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, eps, gemma, out):
            rstd = torch.empty(x.numel() // x.shape[-1], dtype=torch.float32, device=x.device)
            y = rmsnorm_fwd(x, w, eps, gemma, out=out, rstd=rstd)
            ctx.save_for_backward(x, w, rstd)
            ctx.gemma = gemma
            return y

        @staticmethod
        def backward(ctx, dy):
            x, w, rstd = ctx.saved_tensors
            dx, dw = bwd(dy, x, w, rstd, ctx.gemma)
            return dx, dw, None, None, None

    return RMSNormFunction


_FN: dict = {}


def rmsnorm(x, w, eps: float = 1e-6, gemma: bool = False, out=None, bwd=None):
    """Triton RMSNorm over the last dim; differentiable in x and w (bwd: the backward launcher,
    default the fused rmsnorm_bwd)."""
    import torch

    if torch.is_grad_enabled() and (x.requires_grad or w.requires_grad):
        bwd = bwd or rmsnorm_bwd
        fn = _FN.get(bwd)
        if fn is None:
            fn = _FN[bwd] = _autograd(bwd)
        return fn.apply(x, w, eps, gemma, out)
    return rmsnorm_fwd(x, w, eps, gemma, out=out)


def rmsnorm_eager(x, w, eps: float = 1e-6, gemma: bool = False):
    """As models write it: Llama's LlamaRMSNorm, or GemmaRMSNorm with gemma=True."""
    import torch

    dtype = x.dtype
    xf = x.to(torch.float32)
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if gemma:
        return (xf * (1.0 + w.float())).type_as(x)
    return w * xf.to(dtype)


def rmsnorm_bwd_eager(dy, x, w, eps: float = 1e-6):
    """The backward written out in PyTorch (fp32 math, rstd recomputed from x): what
    torch.compile's backward of rmsnorm_eager computes; compiled directly it is the peer whose
    kernels run on the calling thread (variant compile_direct of rmsnorm_bwd)."""
    import torch

    xf, dyf, wf = x.float(), dy.float(), w.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    xhat = xf * rstd
    wdy = dyf * wf
    dx = (wdy - xhat * (xhat * wdy).mean(-1, keepdim=True)) * rstd
    return dx.to(x.dtype), (dyf * xhat).sum(0).to(w.dtype)


def rmsnorm_reference(x, w, eps: float = 1e-6, gemma: bool = False):
    x64, w64 = x.double(), w.double()
    y = x64 * (x64.pow(2).mean(-1, keepdim=True) + eps).rsqrt()
    return y * ((1 + w64) if gemma else w64)


def _liger(x, w, eps=1e-6, gemma=False):  # Liger's defaults (its backward writes dx into dy: in_place=True)
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    return LigerRMSNormFunction.apply(x, w, eps, 1.0 if gemma else 0.0, "gemma" if gemma else "llama")


def _direct(bwd):
    """A backward state's gradients through launcher `bwd` called directly (rstd from a Triton
    forward, kept in the state)."""

    def call(s):
        import torch

        rstd = s.get("_rstd")
        if rstd is None:
            rstd = s["_rstd"] = torch.empty(s["x"].shape[0], dtype=torch.float32, device=s["x"].device)
            rmsnorm_fwd(s["x"], s["w"], rstd=rstd)
        return bwd(s["dy"], s["x"], s["w"], rstd)

    return call


def _setup(p: dict, dtype: str, device: str):
    import torch

    dt = torch_dtype(dtype)
    x = torch.randn(p["tokens"], p["hidden"], dtype=dt, device=device)
    w = 1 + 0.1 * torch.randn(p["hidden"], dtype=dt, device=device)
    return {"x": x, "w": w}


_VARIANTS = {
    "eager": lambda s: rmsnorm_eager(s["x"], s["w"]),
    "compile": lambda s: compiled("rmsnorm", rmsnorm_eager)(s["x"], s["w"]),
    "triton": lambda s: rmsnorm(s["x"], s["w"]),
    "cuda": lambda s: rmsnorm_cuda(s["x"], s["w"]),  # kernels/cuda/rmsnorm.cu
}
if has_module("liger_kernel"):
    _VARIANTS["liger"] = lambda s: _liger(s["x"], s["w"])

WORKLOAD = Workload(
    op="rmsnorm",
    setup=_setup,
    variants=_VARIANTS,
    shapes=RMSNORM_SHAPES,
    model=model,
    dtypes=("bf16", "fp16", "fp32"),
    description="RMSNorm forward (Llama / Qwen hidden sizes)",
    requires={"liger": "liger_kernel"},
    gpu_only=("cuda",),
    reference=lambda s, v: rmsnorm_reference(s["x"], s["w"]),
    quick=("llama8b-t1", "llama8b-t4096", "qwen7b-t32768"),
    selftest={"t-3x200": {"tokens": 3, "hidden": 200}},
    backward=Backward(
        inputs=("x", "w"),
        forward={
            "eager": rmsnorm_eager,
            "compile": lambda x, w: compiled("rmsnorm_bwd", rmsnorm_eager)(x, w),
            "triton": rmsnorm,
            "liger": _liger,
        },
        reference=rmsnorm_reference,
        model=model_bwd,
        shapes=RMSNORM_BWD_SHAPES,
        quick=("llama8b-t4096",),
        direct={
            "triton": _direct(rmsnorm_bwd),
            "compile": lambda s: compiled("rmsnorm_bwd_direct", rmsnorm_bwd_eager)(s["dy"], s["x"], s["w"]),
        },
    ),
    bench="kernels",
)
