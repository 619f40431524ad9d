"""Rotary position embedding on q and k, one program per token (all q and k heads).

    q [tokens, n_q_heads, head_dim], k [tokens, n_kv_heads, head_dim] (any token/head
    strides, unit stride on head_dim: views into a fused qkv buffer work)
    cos, sin: precomputed tables [max_pos, rotary_dim // 2] (see rope_cache), fp32 or the model's
    dtype (as HF's and vLLM's caches are kept), math in fp32
    positions: int [tokens]; or None, with cos/sin already gathered per token: HF's
        cos_full / sin_full [tokens, rotary_dim], as HF computes them once per forward and as
        compile and Liger are given them, or half tables [tokens, rotary_dim // 2]

Layouts, on the first rotary_dim dims of each head (the rest pass through unchanged):
    NeoX (rotate_half, Llama/Qwen HF):  pairs (d, d + rotary_dim/2)
    GPT-J (interleaved):                pairs (2d, 2d + 1)
The cos/sin row of a token is loaded once and reused for every q and k head.

Launches. Many tokens: one program per token, all its q and k heads (``_rope_fwd``; at 96-98 %
of copy at 4096 tokens). Few tokens (decode, fewer tokens than SMs): that launch puts a
token's 40 heads (Llama 8B) on one program, 1.87 us by graph replay on an H100 against Liger's
1.46; ``_rope_fwd_heads`` splits the heads too, grid (tokens, head groups of BLOCK_H q or k
heads), and issues the heads' loads before the position's (the cos/sin loads wait on it, so the
two latency chains overlap). (BLOCK_H, num_warps) is picked per shape on the GPU by CUDA-graph
replay, the per-token launch among the candidates (BLOCK_H = 0).

The per-token program issues all its loads (q, k, the position) before any store: in program
order k would be read only after q was stored, and the compiler may not move a load above a
store to memory that could alias it.

With the position given, a program's cos/sin load waits on its position load, a second memory
wait in a row; tables already gathered per token (positions=None, ``HAS_POS=False``, variant
``triton_gathered``) load no position, 1.00-1.05x faster under ncu on an H100 and an H200.
"""

from __future__ import annotations

import functools
from typing import cast

import triton
import triton.language as tl

from profkit.model.ops.rope import ROPE_SHAPES
from profkit.model.ops.rope import rope_model as model

from . import Workload, torch_dtype
from ._cuda_ops import rope_cuda
from ._launch import Plans, cdiv, fast, next_pow2
from ._numerics import compiled, has_module, num_sms, warps_for
from .timing import pick_check, rotated, tuned, tuned_cached


@triton.jit
def _copy_heads(X, XO, sx_h, sxo_h, H, start, P, BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr):
    h = tl.arange(0, BLOCK_H)
    p = tl.arange(0, BLOCK_P)
    m = (h < H)[:, None] & (p < P)[None, :]
    x = tl.load(X + h[:, None] * sx_h + start + p[None, :], mask=m, other=0.0)
    tl.store(XO + h[:, None] * sxo_h + start + p[None, :], x, mask=m)


@triton.jit
def rope_angles(
    COS, SIN, POS, t, stride_cs, HALF, INTERLEAVED: tl.constexpr, BLOCK_HALF: tl.constexpr, HAS_POS: tl.constexpr = True
):
    """cos/sin of token t's position (HAS_POS=False: row t of tables gathered per token) and the two
    halves' lane indices (NeoX: d, d + HALF; GPT-J interleaved: 2d, 2d + 1). Shared with the fused
    RMSNorm + RoPE kernel."""
    d, ia, ib, dmask = rope_lanes(HALF, INTERLEAVED, BLOCK_HALF)
    cos, sin = _angles(COS, SIN, POS, t, stride_cs, d, dmask, HAS_POS)
    return cos, sin, ia, ib, dmask


@triton.jit
def _angles(COS, SIN, POS, t, stride_cs, d, dmask, HAS_POS: tl.constexpr = True):
    """Token t's position, then its cos/sin row (a load that waits on the first). HAS_POS=False:
    the tables are already gathered per token (row t), HF's way, and nothing waits."""
    if HAS_POS:
        pos = tl.load(POS + t).to(tl.int64)
    else:
        pos = t
    cos = tl.load(COS + pos * stride_cs + d, mask=dmask, other=0.0).to(tl.float32)
    sin = tl.load(SIN + pos * stride_cs + d, mask=dmask, other=0.0).to(tl.float32)
    return cos, sin


@triton.jit
def rope_lanes(HALF, INTERLEAVED: tl.constexpr, BLOCK_HALF: tl.constexpr):
    """(d, the two halves' lane indices, d's mask): NeoX d, d + HALF; GPT-J interleaved 2d, 2d + 1."""
    d = tl.arange(0, BLOCK_HALF)
    if INTERLEAVED:
        ia = 2 * d
        ib = 2 * d + 1
    else:
        ia = d
        ib = d + HALF
    return d, ia, ib, d < HALF


@triton.jit
def _load_heads(X, sx_h, H, ia, ib, dmask, BLOCK_H: tl.constexpr):
    """Heads [0, H) of one token, the two rotated halves, in the input dtype (and their mask)."""
    h = tl.arange(0, BLOCK_H)
    m = (h < H)[:, None] & dmask[None, :]
    xa = tl.load(X + h[:, None] * sx_h + ia[None, :], mask=m, other=0.0)
    xb = tl.load(X + h[:, None] * sx_h + ib[None, :], mask=m, other=0.0)
    return xa, xb, m


@triton.jit
def _store_rotated(XO, sxo_h, xa, xb, m, ia, ib, cos, sin, BLOCK_H: tl.constexpr):
    h = tl.arange(0, BLOCK_H)
    xa = xa.to(tl.float32)
    xb = xb.to(tl.float32)
    c = cos[None, :]
    s = sin[None, :]
    tl.store(XO + h[:, None] * sxo_h + ia[None, :], (xa * c - xb * s).to(XO.dtype.element_ty), mask=m)
    tl.store(XO + h[:, None] * sxo_h + ib[None, :], (xb * c + xa * s).to(XO.dtype.element_ty), mask=m)


@triton.jit
def _rope_fwd(
    Q,
    K,
    QO,
    KO,
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
    HALF,
    PASS,
    INTERLEAVED: tl.constexpr,
    COPY_PASS: tl.constexpr,
    BLOCK_HQ: tl.constexpr,
    BLOCK_HK: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_PASS: tl.constexpr,
    HAS_POS: tl.constexpr = True,
):
    t = tl.program_id(0).to(tl.int64)  # int64: tokens * stride can pass 2^31
    # every load of the token before any store. In program order the k loads would come after q's
    # stores, and the compiler keeps them there (q's output may alias k), so each program would
    # wait on memory three times in a row (position -> cos/sin, q, k); here the q and k loads and
    # the position are in flight together.
    d, ia, ib, dmask = rope_lanes(HALF, INTERLEAVED, BLOCK_HALF)
    qa, qb, qm = _load_heads(Q + t * sq_t, sq_h, HQ, ia, ib, dmask, BLOCK_HQ)
    ka, kb, km = _load_heads(K + t * sk_t, sk_h, HK, ia, ib, dmask, BLOCK_HK)
    cos, sin = _angles(COS, SIN, POS, t, stride_cs, d, dmask, HAS_POS)
    _store_rotated(QO + t * sqo_t, sqo_h, qa, qb, qm, ia, ib, cos, sin, BLOCK_HQ)
    _store_rotated(KO + t * sko_t, sko_h, ka, kb, km, ia, ib, cos, sin, BLOCK_HK)
    if COPY_PASS:
        _copy_heads(Q + t * sq_t, QO + t * sqo_t, sq_h, sqo_h, HQ, 2 * HALF, PASS, BLOCK_HQ, BLOCK_PASS)
        _copy_heads(K + t * sk_t, KO + t * sko_t, sk_h, sko_h, HK, 2 * HALF, PASS, BLOCK_HK, BLOCK_PASS)


@triton.jit
def _rotate_heads_late_pos(
    X,
    XO,
    sx_h,
    sxo_h,
    H,
    COS,
    SIN,
    POS,
    t,
    stride_cs,
    HALF,
    PASS,
    INTERLEAVED: tl.constexpr,
    COPY_PASS: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_PASS: tl.constexpr,
    HAS_POS: tl.constexpr,
):
    """Rotate heads [0, min(H, BLOCK_H)) of one token: the heads' loads first, then the
    position and its cos/sin (a dependent load), so the two wait on memory together."""
    d, ia, ib, dmask = rope_lanes(HALF, INTERLEAVED, BLOCK_HALF)
    xa, xb, m = _load_heads(X, sx_h, H, ia, ib, dmask, BLOCK_H)
    cos, sin = _angles(COS, SIN, POS, t, stride_cs, d, dmask, HAS_POS)
    _store_rotated(XO, sxo_h, xa, xb, m, ia, ib, cos, sin, BLOCK_H)
    if COPY_PASS:
        _copy_heads(X, XO, sx_h, sxo_h, H, 2 * HALF, PASS, BLOCK_H, BLOCK_PASS)


@triton.jit
def _rope_fwd_heads(
    Q,
    K,
    QO,
    KO,
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
    HALF,
    PASS,
    GQ,
    INTERLEAVED: tl.constexpr,
    COPY_PASS: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_PASS: tl.constexpr,
    HAS_POS: tl.constexpr = True,
):
    """Few tokens: program (t, g) rotates token t's q heads [g * BLOCK_H, ...) for g < GQ, else
    its k heads [(g - GQ) * BLOCK_H, ...): a token's heads spread over several programs."""
    t = tl.program_id(0).to(tl.int64)
    g = tl.program_id(1).to(tl.int64)
    if g < GQ:
        h0 = g * BLOCK_H
        _rotate_heads_late_pos(
            Q + t * sq_t + h0 * sq_h,
            QO + t * sqo_t + h0 * sqo_h,
            sq_h,
            sqo_h,
            HQ - h0,
            COS,
            SIN,
            POS,
            t,
            stride_cs,
            HALF,
            PASS,
            INTERLEAVED,
            COPY_PASS,
            BLOCK_H,
            BLOCK_HALF,
            BLOCK_PASS,
            HAS_POS,
        )
    else:
        h0 = (g - GQ) * BLOCK_H
        _rotate_heads_late_pos(
            K + t * sk_t + h0 * sk_h,
            KO + t * sko_t + h0 * sko_h,
            sk_h,
            sko_h,
            HK - h0,
            COS,
            SIN,
            POS,
            t,
            stride_cs,
            HALF,
            PASS,
            INTERLEAVED,
            COPY_PASS,
            BLOCK_H,
            BLOCK_HALF,
            BLOCK_PASS,
            HAS_POS,
        )


@functools.cache  # asked on every few-token call, before the tuned lookup
def head_candidates(HQ: int, HK: int, half: int) -> tuple[tuple[int, int], ...]:
    """(BLOCK_H, num_warps) launches of the few-token kernel, the default first: BLOCK_H q or k
    heads per program, 2-16 rotated pairs per thread; last, (0, num_warps): one program per
    token, the many-token launch (so the tuner can keep it)."""
    BH = triton.next_power_of_2(half)
    top = triton.next_power_of_2(max(HQ, HK))
    out = [(min(4, top), 2)]
    for bh in (1, 2, 4, 8, 16, 32, 64):
        if bh > top:
            break
        for nw in (1, 2, 4, 8):
            if 2 <= bh * BH // (32 * nw) <= 16 and (bh, nw) not in out:
                out.append((bh, nw))
    out.append((0, warps_for(triton.next_power_of_2(HQ) * BH)))
    return tuple(out)


TUNE_MIN_TOKENS = 1024  # below, the per-token launch takes warps_for's default untimed


def split_tokens(T: int, device) -> bool:
    """The head-split launch when one program per token would leave SMs idle."""
    return T < num_sms(device)


def rope_cache(max_pos: int, rotary_dim: int, base: float = 10000.0, device="cpu", dtype=None):
    """(cos, sin) tables [max_pos, rotary_dim // 2], computed in float64, stored as `dtype`
    (default fp32)."""
    import torch

    inv = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
    f = torch.outer(torch.arange(max_pos, dtype=torch.float64), inv)
    dtype = dtype or torch.float32
    return f.cos().to(dtype).to(device), f.sin().to(dtype).to(device)


def angle_tables(q, cos, sin, positions, rotary_dim, interleaved: bool):
    """(cos, sin, positions) as the kernels read them. positions None: cos/sin gathered
    per token, [tokens, rotary_dim // 2] or HF's full width [tokens, rotary_dim], whose duplicated
    half is never read (NeoX: the first half, a view; GPT-J: the even columns, copied by
    qk_inputs); positions then points at cos, never read (HAS_POS=False). Shared with the fused
    RMSNorm + RoPE."""
    if positions is not None:
        return cos, sin, positions
    rd = rotary_dim or q.shape[-1]
    if cos.dim() != 2 or cos.shape[0] != q.shape[0] or sin.shape != cos.shape:
        raise ValueError(
            f"gathered cos/sin must be [tokens, rotary_dim(/2)], got {tuple(cos.shape)} "
            f"and {tuple(sin.shape)} for {q.shape[0]} tokens"
        )
    if cos.shape[-1] == rd:
        cut = slice(None, None, 2) if interleaved else slice(0, rd // 2)
        cos, sin = cos[:, cut], sin[:, cut]
    return cos, sin, cos


def plannable_tables(given, cos, sin) -> bool:
    """The tables a call was given are the ones its kernel reads (a view's start and row stride),
    none copied: a launch plan handed the given tables launches the same kernel."""
    return all(
        a.data_ptr() == b.data_ptr() and a.dtype == b.dtype and a.stride(0) == b.stride(0)
        for a, b in zip(given, (cos, sin))
    )


def qk_plan_key(q, k, cos, sin, *flags):
    """The key a q/k launcher's plan holds (RoPE and the fused RMSNorm + RoPE): the inputs'
    shapes, strides and dtypes (the tables' too: they are tuned apart), the device, the flags."""
    return (
        q.shape,
        q.stride(),
        k.shape,
        k.stride(),
        cos.shape,
        cos.stride(),
        sin.shape,
        sin.stride(),
        q.dtype,
        k.dtype,
        cos.dtype,
        q.device,
        *flags,
    )


def qk_outputs(q, k):
    """New q/k outputs shaped and typed as the inputs."""
    import torch

    return (torch.empty(q.shape, dtype=q.dtype, device=q.device), torch.empty(k.shape, dtype=k.dtype, device=k.device))


def qk_inputs(q, k, cos, sin, rotary_dim, q_out, k_out):
    """Checked, last-dim-contiguous q/k/cos/sin, the outputs, and the rotary width: the launchers
    of RoPE and of the fused RMSNorm + RoPE take the same inputs."""
    import torch

    T, _, D = q.shape
    rd = rotary_dim or D
    assert rd % 2 == 0 and rd <= D and cos.shape[-1] == rd // 2 and k.shape[0] == T and k.shape[2] == D
    q, k, cos, sin = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, cos, sin))
    assert cos.stride(0) == sin.stride(0)
    qo = torch.empty(q.shape, dtype=q.dtype, device=q.device) if q_out is None else q_out
    ko = torch.empty(k.shape, dtype=k.dtype, device=k.device) if k_out is None else k_out
    return q, k, cos, sin, qo, ko, rd


_PLANS = Plans()  # the launches of calls with no outputs, split or config given, by their inputs' key


def rope(
    q,
    k,
    cos,
    sin,
    positions,
    rotary_dim: int | None = None,
    interleaved: bool = False,
    q_out=None,
    k_out=None,
    split: bool | None = None,
    config=None,
):
    """Triton RoPE; returns (q_out, k_out). Pass q_out=q, k_out=k to rotate in place.
    split: the head-split launch (True), one program per token (False), None: by the token
    count (split_tokens). config: (BLOCK_H, num_warps) of the head-split launch (BLOCK_H = 0:
    one program per token with num_warps), else picked per shape on the GPU.
    positions=None: cos/sin are already gathered per token, HF's way: [tokens,
    rotary_dim // 2], or HF's full-width [tokens, rotary_dim] (cos_full), whose first half (NeoX)
    or even columns (GPT-J: copied to a half table first) are the angles; no position is loaded.
    A call like an earlier one (same shapes, strides, dtypes, flags; no outputs, split or config
    given) takes that call's launch plan (_launch.Plans)."""
    has_pos = positions is not None
    plannable = q_out is None and k_out is None and split is None and config is None
    if plannable:
        pkey = qk_plan_key(q, k, cos, sin, rotary_dim, interleaved, has_pos)
        plan = _PLANS.get(pkey)
        if plan is not None:
            qo, ko = qk_outputs(q, k)
            # the full-width tables themselves: their first halves start where they do
            plan.launch((q, k, qo, ko, cos, sin, positions if has_pos else cos))
            return qo, ko
    given = (q, k, cos, sin)
    cos, sin, positions = angle_tables(q, cos, sin, positions, rotary_dim, interleaved)
    q, k, cos, sin, qo, ko, rd = qk_inputs(q, k, cos, sin, rotary_dim, q_out, k_out)
    T, HQ, D = q.shape
    HK = k.shape[1]
    half, P = rd // 2, D - rd
    copy_pass = P > 0 and not (qo.data_ptr() == q.data_ptr() and ko.data_ptr() == k.data_ptr())
    BHQ, BHK = next_pow2(HQ), next_pow2(HK)
    BH = next_pow2(half)
    bp = next_pow2(max(P, 1))
    if T == 0:
        return qo, ko

    def parts(cfg, q=q, k=k):
        """(kernel, grid, the parameters after the tensors, the options) of launch `cfg`:
        (BLOCK_H, num_warps), BLOCK_H = 0 the per-token program; (q, k): the tuner's rotated copies."""
        bh, nw = cfg
        strides = (
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
            half,
            P,
        )
        if bh == 0:
            return (
                _rope_fwd,
                (T,),
                strides + (interleaved, copy_pass, BHQ, BHK, BH, bp, has_pos),
                (("num_warps", nw),),
            )
        GQ = cdiv(HQ, bh)
        return (
            _rope_fwd_heads,
            (T, GQ + cdiv(HK, bh)),
            strides + (GQ, interleaved, copy_pass, bh, BH, bp, has_pos),
            (("num_warps", nw),),
        )

    def launch_cfg(cfg, q=q, k=k):
        kern, grid, rest, opts = parts(cfg, q, k)
        fast(kern)[grid](q, k, qo, ko, cos, sin, positions, *rest, **dict(opts))

    in_place = qo.data_ptr() == q.data_ptr() or ko.data_ptr() == k.data_ptr()
    if split is None:
        split = config is not None or split_tokens(T, q.device)
    key = None
    if split:
        if config is None:
            cands = head_candidates(HQ, HK, half)
            key = ("rope_heads", next_pow2(T), HQ, HK, D, rd, interleaved, q.dtype, cos.dtype, q.device) + (
                () if has_pos else ("gathered",)
            )
            # timing launches would rotate an in-place q/k again and again: take an out-of-place
            # call's choice if there was one, else the default
            config = (
                (tuned_cached(key) or cands[0]) if in_place else tuned(key, cands, launch_cfg, q.device, graph=True)
            )
    else:
        nw = warps_for(BHQ * BH)
        if T >= TUNE_MIN_TOKENS:
            key = ("rope", triton.next_power_of_2(T), HQ, HK, D, rd, interleaved, q.dtype, cos.dtype, q.device) + (
                () if has_pos else ("gathered",)
            )
            # timing launches would rotate an in-place q/k again and again: an out-of-place call's choice.
            # Timed by graph replay over q/k copies rotated past the L2: by do_bench the
            # launcher's host time outlasts a 20-30 us kernel and the pick moved between processes
            nw = (
                (tuned_cached(key) or nw)
                if in_place
                else tuned(
                    key,
                    tuple(dict.fromkeys((nw, 2, 4, 8))),
                    rotated(lambda n, q, k: launch_cfg((0, n), q, k), (q, k)),
                    q.device,
                    graph=True,
                )
            )
        config = (0, nw)
    launch_cfg(config)
    # a plan when no input was copied (the key then holds the call: a full-width table's first half
    # starts where the table does) and the pick stands
    check = pick_check(key, q.device)
    if plannable and check and given[0] is q and given[1] is k and plannable_tables(given[2:], cos, sin):
        kern, grid, rest, opts = parts(config)
        _PLANS.put(pkey, fast(kern).plan(grid, rest, opts), check)
    return qo, ko


# --- eager, as HF writes it: cos/sin [tokens, rotary_dim] gathered once per forward ---------


def full_cos_sin(cos, sin, positions, interleaved: bool = False, dtype=None):
    """Expand the half tables to HF's [tokens, rotary_dim] cos/sin (shared by all layers)."""
    import torch

    c, s = cos[positions], sin[positions]
    if interleaved:
        c, s = c.repeat_interleave(2, -1), s.repeat_interleave(2, -1)
    else:
        c, s = torch.cat((c, c), -1), torch.cat((s, s), -1)
    return (c.to(dtype), s.to(dtype)) if dtype is not None else (c, s)


def rotate_half(x):
    import torch

    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x):
    import torch

    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def rope_eager(q, k, cos_full, sin_full, interleaved: bool = False):
    """HF apply_rotary_pos_emb (partial rotary as in GPT-NeoX/Phi); q, k [T, H, D]."""
    import torch

    rd = cos_full.shape[-1]
    c, s = cos_full.unsqueeze(1), sin_full.unsqueeze(1)
    rot = rotate_every_two if interleaved else rotate_half

    def one(x):
        if rd == x.shape[-1]:
            return x * c + rot(x) * s
        xr, xp = x[..., :rd], x[..., rd:]
        return torch.cat((xr * c + rot(xr) * s, xp), dim=-1)

    return one(q), one(k)


def rope_reference(q, k, cos, sin, positions, rotary_dim: int | None = None, interleaved: bool = False):
    c, s = full_cos_sin(cos.double(), sin.double(), positions, interleaved)
    return rope_eager(q.double(), k.double(), c, s, interleaved)


def _setup(p: dict, dtype: str, device: str):
    import torch

    dt = torch_dtype(dtype)
    t, hq, hk, d = p["tokens"], p["q_heads"], p["kv_heads"], p["head_dim"]
    rd = p.get("rotary_dim", d)
    inter = p.get("interleaved", False)
    q = torch.randn(t, hq, d, dtype=dt, device=device)
    k = torch.randn(t, hk, d, dtype=dt, device=device)
    # the tables in the model's dtype, as the peers get cos/sin and as HF and vLLM keep
    # them: at 32768 tokens fp32 tables are 17 MB of a 690 MB call; fp32 ones kept for triton_r10
    cos32, sin32 = rope_cache(max(t, 4096), rd, p.get("base", 500000.0), device)
    cos, sin = cos32.to(dt), sin32.to(dt)
    pos = torch.arange(t, device=device)
    cf, sf = full_cos_sin(cos, sin, pos, inter, dt)
    s = {
        "q": q,
        "k": k,
        "cos": cos,
        "sin": sin,
        "cos32": cos32,
        "sin32": sin32,
        "pos": pos,
        "cos_full": cf,
        "sin_full": sf,
        "rotary_dim": rd,
        "interleaved": inter,
    }
    return s


def _liger(s):
    from liger_kernel.transformers.rope import liger_rotary_pos_emb

    T, HQ, D = s["q"].shape
    if s["interleaved"] or s["rotary_dim"] != D:
        raise NotImplementedError("liger RoPE: NeoX layout, full rotary only")
    # liger wants [batch, heads, seq, head_dim] and rotates in place (fresh copies each call
    # would add traffic; rotation keeps values bounded, so repeated calls are harmless)
    qb = s["q"].view(1, T, HQ, D).transpose(1, 2)
    kb = s["k"].view(1, T, -1, D).transpose(1, 2)
    qo, ko = liger_rotary_pos_emb(qb, kb, s["cos_full"].unsqueeze(0), s["sin_full"].unsqueeze(0))
    return qo.transpose(1, 2).reshape(T, HQ, D), ko.transpose(1, 2).reshape(T, -1, D)


_VARIANTS = {
    "eager": lambda s: rope_eager(s["q"], s["k"], s["cos_full"], s["sin_full"], s["interleaved"]),
    "compile": lambda s: compiled("rope", rope_eager)(s["q"], s["k"], s["cos_full"], s["sin_full"], s["interleaved"]),
    "triton": lambda s: rope(s["q"], s["k"], s["cos"], s["sin"], s["pos"], s["rotary_dim"], s["interleaved"]),
    # in place, as Liger's and vLLM's RoPE work (the same DRAM bytes; half the lines in the L2)
    "triton_inplace": lambda s: rope(
        s["q"], s["k"], s["cos"], s["sin"], s["pos"], s["rotary_dim"], s["interleaved"], q_out=s["q"], k_out=s["k"]
    ),
    # the tables gathered per token as the peers get them (HF's cos_full / sin_full,
    # computed once per forward), so no program waits on a position before its cos/sin load
    "triton_gathered": lambda s: rope(
        s["q"], s["k"], s["cos_full"], s["sin_full"], None, s["rotary_dim"], s["interleaved"]
    ),
    # ... and in place, as Liger rotates: the like-for-like call against Liger (at 4096 tokens the
    # outputs then share the inputs' lines in the L2, and fewer are written back during the call)
    "triton_gathered_inplace": lambda s: rope(
        s["q"],
        s["k"],
        s["cos_full"],
        s["sin_full"],
        None,
        s["rotary_dim"],
        s["interleaved"],
        q_out=s["q"],
        k_out=s["k"],
    ),
    "cuda": lambda s: rope_cuda(
        s["q"],
        s["k"],
        s["cos32"],
        s["sin32"],
        s["pos"],
        s["rotary_dim"],  # kernels/cuda/rope.cu
        s["interleaved"],
    ),
}
if has_module("liger_kernel"):
    _VARIANTS["liger"] = _liger

WORKLOAD = Workload(
    op="rope",
    setup=_setup,
    variants=_VARIANTS,
    shapes=cast(dict[str, dict], ROPE_SHAPES),  # (its values mix ints and floats: inferred as object)
    model=model,
    dtypes=("bf16", "fp16", "fp32"),
    description="RoPE on q and k (NeoX / GPT-J, partial rotary), cos/sin tables + positions",
    requires={"liger": "liger_kernel"},
    gpu_only=("cuda",),
    reference=lambda s, v: rope_reference(
        s["q"], s["k"], s["cos"], s["sin"], s["pos"], s["rotary_dim"], s["interleaved"]
    ),
    quick=("llama8b-t4096", "qwen7b-t4096"),
    selftest={
        "t-3-gqa": {"tokens": 3, "q_heads": 4, "kv_heads": 2, "head_dim": 16},
        "t-3-partial": {"tokens": 3, "q_heads": 3, "kv_heads": 3, "head_dim": 20, "rotary_dim": 8},
    },
    bench="kernels",
)
