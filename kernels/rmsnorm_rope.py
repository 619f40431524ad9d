"""Fused per-head q/k RMSNorm + RoPE (Qwen3 / Gemma3 qk-norm), one pass over q and k.

    q [tokens, n_q_heads, head_dim], k [tokens, n_kv_heads, head_dim]
    q_w, k_w [head_dim]: q_norm / k_norm weights (gemma=True: scale by 1 + w)
    cos, sin: fp32 tables [max_pos, rotary_dim // 2] (rope.rope_cache), positions [tokens]

Each head row is loaded once as its two rotary halves (plus the pass-through tail), the
sum of squares over the whole head_dim is formed in fp32, and the normalised values are
rotated and stored: 1 read + 1 write of q and k instead of 2 + 2 unfused.
"""

from __future__ import annotations

import triton
import triton.language as tl

from profkit.model.ops.rope import RMSNORM_ROPE_SHAPES
from profkit.model.ops.rope import rmsnorm_rope_model as model

from . import Workload, torch_dtype
from ._launch import Plans, cdiv, fast, next_pow2
from ._numerics import compiled, warps_for
from .rmsnorm import rmsnorm_eager, rmsnorm_reference
from .rope import (
    angle_tables,
    full_cos_sin,
    head_candidates,
    plannable_tables,
    qk_inputs,
    qk_outputs,
    qk_plan_key,
    rope_angles,
    rope_cache,
    rope_eager,
)
from .timing import pick_check, tuned, tuned_cached


@triton.jit
def _norm_rotate_heads(
    X,
    XO,
    W,
    sx_h,
    sxo_h,
    H,
    D,
    eps,
    offset,
    ia,
    ib,
    dmask,
    cos,
    sin,
    start,
    P,
    BLOCK_H: tl.constexpr,
    BLOCK_P: tl.constexpr,
):
    h = tl.arange(0, BLOCK_H)
    hm = h < H
    m = hm[:, None] & dmask[None, :]
    xa = tl.load(X + h[:, None] * sx_h + ia[None, :], mask=m, other=0.0).to(tl.float32)
    xb = tl.load(X + h[:, None] * sx_h + ib[None, :], mask=m, other=0.0).to(tl.float32)
    p = tl.arange(0, BLOCK_P)
    pm = p < P
    mp = hm[:, None] & pm[None, :]
    xp = tl.load(X + h[:, None] * sx_h + start + p[None, :], mask=mp, other=0.0).to(tl.float32)
    ss = tl.sum(xa * xa, axis=1) + tl.sum(xb * xb, axis=1) + tl.sum(xp * xp, axis=1)
    rstd = (1.0 / tl.sqrt(ss / D + eps))[:, None]
    wa = tl.load(W + ia, mask=dmask, other=0.0).to(tl.float32) + offset
    wb = tl.load(W + ib, mask=dmask, other=0.0).to(tl.float32) + offset
    wp = tl.load(W + start + p, mask=pm, other=0.0).to(tl.float32) + offset
    ya = xa * rstd * wa[None, :]
    yb = xb * rstd * wb[None, :]
    c = cos[None, :]
    s = sin[None, :]
    tl.store(XO + h[:, None] * sxo_h + ia[None, :], (ya * c - yb * s).to(XO.dtype.element_ty), mask=m)
    tl.store(XO + h[:, None] * sxo_h + ib[None, :], (yb * c + ya * s).to(XO.dtype.element_ty), mask=m)
    yp = xp * rstd * wp[None, :]
    tl.store(XO + h[:, None] * sxo_h + start + p[None, :], yp.to(XO.dtype.element_ty), mask=mp)


@triton.jit
def _rmsnorm_rope_fwd(
    Q,
    K,
    QO,
    KO,
    QW,
    KW,
    COS,
    SIN,
    POS,
    sq_t,
    sq_h,
    sk_t,
    sk_h,
    sqo_t,
    sqo_h,
    sko_t,
    sko_h,
    stride_cs,
    HQ,
    HK,
    D,
    HALF,
    PASS,
    eps,
    offset,
    INTERLEAVED: tl.constexpr,
    BLOCK_HQ: tl.constexpr,
    BLOCK_HK: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_PASS: tl.constexpr,
    HAS_POS: tl.constexpr = True,
):
    t = tl.program_id(0).to(tl.int64)
    cos, sin, ia, ib, dmask = rope_angles(COS, SIN, POS, t, stride_cs, HALF, INTERLEAVED, BLOCK_HALF, HAS_POS)
    _norm_rotate_heads(
        Q + t * sq_t,
        QO + t * sqo_t,
        QW,
        sq_h,
        sqo_h,
        HQ,
        D,
        eps,
        offset,
        ia,
        ib,
        dmask,
        cos,
        sin,
        2 * HALF,
        PASS,
        BLOCK_HQ,
        BLOCK_PASS,
    )
    _norm_rotate_heads(
        K + t * sk_t,
        KO + t * sko_t,
        KW,
        sk_h,
        sko_h,
        HK,
        D,
        eps,
        offset,
        ia,
        ib,
        dmask,
        cos,
        sin,
        2 * HALF,
        PASS,
        BLOCK_HK,
        BLOCK_PASS,
    )


@triton.jit
def _rmsnorm_rope_heads(
    Q,
    K,
    QO,
    KO,
    QW,
    KW,
    COS,
    SIN,
    POS,
    sq_t,
    sq_h,
    sk_t,
    sk_h,
    sqo_t,
    sqo_h,
    sko_t,
    sko_h,
    stride_cs,
    HQ,
    HK,
    D,
    HALF,
    PASS,
    eps,
    offset,
    GQ,
    G,
    INTERLEAVED: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_PASS: tl.constexpr,
    HAS_POS: tl.constexpr = True,
):
    """Program t * G + g: token t's q heads [g * BLOCK_H, ...) for g < GQ, else its k heads
    [(g - GQ) * BLOCK_H, ...): q's and k's loads in different programs instead of one after the
    other in one. A token's G programs are consecutive, so its cos/sin row is read from DRAM once
    and hit in the L2 by the others (with the token on the grid's first axis, as the first build
    had it, the groups of a token ran a whole sweep apart: ncu counted the 16.8 MB of tables read
    G times, H100 and H200)."""
    pid = tl.program_id(0).to(tl.int64)
    t = pid // G
    g = pid - t * G
    cos, sin, ia, ib, dmask = rope_angles(COS, SIN, POS, t, stride_cs, HALF, INTERLEAVED, BLOCK_HALF, HAS_POS)
    if g < GQ:
        h0 = g * BLOCK_H
        _norm_rotate_heads(
            Q + t * sq_t + h0 * sq_h,
            QO + t * sqo_t + h0 * sqo_h,
            QW,
            sq_h,
            sqo_h,
            HQ - h0,
            D,
            eps,
            offset,
            ia,
            ib,
            dmask,
            cos,
            sin,
            2 * HALF,
            PASS,
            BLOCK_H,
            BLOCK_PASS,
        )
    else:
        h0 = (g - GQ) * BLOCK_H
        _norm_rotate_heads(
            K + t * sk_t + h0 * sk_h,
            KO + t * sko_t + h0 * sko_h,
            KW,
            sk_h,
            sko_h,
            HK - h0,
            D,
            eps,
            offset,
            ia,
            ib,
            dmask,
            cos,
            sin,
            2 * HALF,
            PASS,
            BLOCK_H,
            BLOCK_PASS,
        )


_PLANS = Plans()  # the launches of calls without outputs or config given, by their inputs' key
# registers a thread for a one-warp program so that 32 programs (the SM's block limit) fit its 64 K
# registers: 65536 / (32 x 32)
REG_CAP = 64


def rmsnorm_rope(
    q,
    k,
    q_w,
    k_w,
    cos,
    sin,
    positions,
    eps: float = 1e-6,
    rotary_dim: int | None = None,
    interleaved: bool = False,
    gemma: bool = False,
    q_out=None,
    k_out=None,
    config=None,
):
    """Triton fused q/k RMSNorm + RoPE; returns (q_out, k_out) (q_out=q rotates in place).
    config: (BLOCK_H, num_warps[, maxnreg]) of the head-split launch (BLOCK_H = 0: one program per
    token with num_warps, or its default warps for None); else picked per shape on the GPU by graph
    replay among rope.head_candidates (at 32768 tokens one program per token kept the H200 at 75-77 %
    of copy), and the one-warp launches with their registers capped so that the block limit, not
    the register file, bounds the programs an SM (71 registers held a one-warp program of 8 heads
    to 28 an SM on an H200). A call like an earlier one (same shapes, strides, dtypes, flags; no
    outputs or config given) takes that call's launch plan (_launch.Plans).
    positions=None: cos/sin already gathered per token, as rope() takes them; measured slower than
    the position form here (0.90x at 32768 tokens on an H200: its early table loads hold more
    registers), for callers holding HF's tables."""
    has_pos = positions is not None
    plannable = q_out is None and k_out is None and config is None
    if plannable:
        pkey = qk_plan_key(q, k, cos, sin, eps, rotary_dim, interleaved, gemma, has_pos)
        plan = _PLANS.get(pkey)
        if plan is not None:
            qo, ko = qk_outputs(q, k)
            plan.launch((q, k, qo, ko, q_w, k_w, cos, sin, positions if has_pos else cos))
            return qo, ko
    inputs = (q, k, cos, sin)
    cos, sin, positions = angle_tables(q, cos, sin, positions, rotary_dim, interleaved)
    q, k, cos, sin, qo, ko, rd = qk_inputs(q, k, cos, sin, rotary_dim, q_out, k_out)
    T, HQ, D = q.shape
    HK = k.shape[1]
    if T == 0:
        return qo, ko
    half, P = rd // 2, D - rd
    BHQ, BHK, BH = next_pow2(HQ), next_pow2(HK), next_pow2(half)
    tensors = (q, k, qo, ko, q_w, k_w, cos, sin, positions)
    scalars = (
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        qo.stride(0),
        qo.stride(1),
        ko.stride(0),
        ko.stride(1),
        cos.stride(0),
        HQ,
        HK,
        D,
        half,
        P,
        eps,
        1.0 if gemma else 0.0,
    )
    bp = next_pow2(max(P, 1))

    token = (0, warps_for(2 * BHQ * BH))  # one program per token: the default, and the pick in place

    def parts(cfg):
        """(kernel, grid, the parameters after the tensors, the options) of launch `cfg`."""
        bh, nw, *cap = cfg  # cap: a register cap a thread (maxnreg), where a launch names one
        cap = (("maxnreg", cap[0]),) if cap and cap[0] else ()
        if bh == 0:
            return (
                _rmsnorm_rope_fwd,
                (T,),
                scalars + (interleaved, BHQ, BHK, BH, bp, has_pos),
                (("num_warps", nw or token[1]),) + cap,
            )
        GQ = cdiv(HQ, bh)
        G = GQ + cdiv(HK, bh)
        return (
            _rmsnorm_rope_heads,
            (T * G,),
            scalars + (GQ, G, interleaved, bh, BH, bp, has_pos),
            (("num_warps", nw),) + cap,
        )

    def launch(cfg):
        kern, grid, rest, opts = parts(cfg)
        fast(kern)[grid](*tensors, *rest, **dict(opts))

    tkey = None
    if config is None:
        tkey = ("rmsnorm_rope", next_pow2(T), HQ, HK, D, rd, interleaved, gemma, q.dtype, q.device) + (
            () if has_pos else ("gathered",)
        )
        config = tuned_cached(tkey)  # first: a call's host time is the whole call at 4096 tokens under do_bench
        if config is None:
            cands: tuple[tuple[int, ...], ...] = (token,) + tuple(c for c in head_candidates(HQ, HK, half) if c[0])
            cands += tuple((bh, 1, REG_CAP) for bh, nw in cands[1:] if nw == 1)  # see the docstring
            # timing launches would normalise an in-place q/k again and again
            in_place = qo.data_ptr() == q.data_ptr() or ko.data_ptr() == k.data_ptr()
            config = token if in_place else tuned(tkey, cands, launch, q.device, graph=True)
    launch(config)
    # a plan when no input was made contiguous (the key then holds the call) and the pick stands
    check = pick_check(tkey, q.device)
    if plannable and check and inputs[0] is q and inputs[1] is k and plannable_tables(inputs[2:], cos, sin):
        kern, grid, rest, opts = parts(config)
        _PLANS.put(pkey, fast(kern).plan(grid, rest, opts), check)
    return qo, ko


def rmsnorm_rope_eager(
    q, k, q_w, k_w, cos_full, sin_full, eps: float = 1e-6, interleaved: bool = False, gemma: bool = False
):
    """As Qwen3Attention writes it: q_norm / k_norm on [.., heads, head_dim], then apply_rotary_pos_emb."""
    return rope_eager(
        rmsnorm_eager(q, q_w, eps, gemma), rmsnorm_eager(k, k_w, eps, gemma), cos_full, sin_full, interleaved
    )


def rmsnorm_rope_reference(
    q,
    k,
    q_w,
    k_w,
    cos,
    sin,
    positions,
    eps: float = 1e-6,
    rotary_dim: int | None = None,
    interleaved: bool = False,
    gemma: bool = False,
):
    c, s = full_cos_sin(cos.double(), sin.double(), positions, interleaved)
    return rope_eager(rmsnorm_reference(q, q_w, eps, gemma), rmsnorm_reference(k, k_w, eps, gemma), c, s, interleaved)


def _setup(p: dict, dtype: str, device: str):
    import torch

    dt = torch_dtype(dtype)
    t, hq, hk, d = p["tokens"], p["q_heads"], p["kv_heads"], p["head_dim"]
    rd = p.get("rotary_dim", d)
    q = torch.randn(t, hq, d, dtype=dt, device=device)
    k = torch.randn(t, hk, d, dtype=dt, device=device)
    qw = 1 + 0.1 * torch.randn(d, dtype=dt, device=device)
    kw = 1 + 0.1 * torch.randn(d, dtype=dt, device=device)
    cos, sin = rope_cache(max(t, 4096), rd, p.get("base", 1e6), device)
    pos = torch.arange(t, device=device)
    cf, sf = full_cos_sin(cos, sin, pos, False, dt)
    return {
        "q": q,
        "k": k,
        "qw": qw,
        "kw": kw,
        "cos": cos,
        "sin": sin,
        "pos": pos,
        "cos_full": cf,
        "sin_full": sf,
        "rotary_dim": rd,
    }


WORKLOAD = Workload(
    op="rmsnorm_rope",
    setup=_setup,
    variants={
        "eager": lambda s: rmsnorm_rope_eager(s["q"], s["k"], s["qw"], s["kw"], s["cos_full"], s["sin_full"]),
        "compile": lambda s: compiled("rmsnorm_rope", rmsnorm_rope_eager)(
            s["q"], s["k"], s["qw"], s["kw"], s["cos_full"], s["sin_full"]
        ),
        "triton": lambda s: rmsnorm_rope(
            s["q"], s["k"], s["qw"], s["kw"], s["cos"], s["sin"], s["pos"], rotary_dim=s["rotary_dim"]
        ),
    },
    shapes=RMSNORM_ROPE_SHAPES,
    model=model,
    dtypes=("bf16", "fp16", "fp32"),
    description="Fused per-head q/k RMSNorm + RoPE (Qwen3 qk-norm)",
    reference=lambda s, v: rmsnorm_rope_reference(
        s["q"], s["k"], s["qw"], s["kw"], s["cos"], s["sin"], s["pos"], rotary_dim=s["rotary_dim"]
    ),
    quick=("qwen3-8b-t4096", "qwen3-8b-t32768"),
    selftest={"t-3-gqa": {"tokens": 3, "q_heads": 4, "kv_heads": 2, "head_dim": 16}},
    bench="kernels",
)
