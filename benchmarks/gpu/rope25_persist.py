#!/usr/bin/env python3
"""Round 25 probe (issue 21 item 1): RoPE at 4096 tokens, a persistent program sweeping tokens.

At 4096 tokens the per-token launch reaches 89-92 % of copy (graph replay): each program loads a
token, rotates it and stores it, and nothing of its next token is in flight meanwhile; 4,096
programs make 6-8 waves of 5 an SM. Here P programs an SM take the tokens p, p + G, p + 2G, ...
with the next tokens' q, k and cos/sin in flight while the current one is rotated, either by
Triton's pipeliner (STAGES > 1: cp.async into shared memory, RMSNorm backward v3's way) or by a
hand-written register prefetch. The gathered tables (HAS_POS=False) throughout. Each launch is
checked against float64, then timed round-robin by graph replay beside the lab's per-token launch,
compile and Liger (variants_rr.py's loop).

    python3 benchmarks/gpu/rope25_persist.py --shapes qwen7b-t4096,llama8b-t4096 [--rounds 5] --out DIR
"""
import os
import sys

import triton
import triton.language as tl

from profkit.kernels._numerics import num_sms


@triton.jit
def _token(Q, K, COS, SIN, t, T, sq_t, sk_t, stride_cs, oq, ok, d, mq, mk, dm, hq, hk, HALF):
    """Token t's q and k halves and its cos/sin row, nothing past the last token (the token mask
    as vectors: a scalar bool in a mask is refused by the interpreter)."""
    vq = mq & ((hq * 0 + t) < T)[:, None]
    vk = mk & ((hk * 0 + t) < T)[:, None]
    vd = dm & ((d * 0 + t) < T)
    qa = tl.load(Q + t * sq_t + oq, mask=vq, other=0.0)
    qb = tl.load(Q + t * sq_t + oq + HALF, mask=vq, other=0.0)
    ka = tl.load(K + t * sk_t + ok, mask=vk, other=0.0)
    kb = tl.load(K + t * sk_t + ok + HALF, mask=vk, other=0.0)
    c = tl.load(COS + t * stride_cs + d, mask=vd, other=0.0)
    s = tl.load(SIN + t * stride_cs + d, mask=vd, other=0.0)
    return qa, qb, ka, kb, c, s


@triton.jit
def _rope_persist(Q, K, QO, KO, COS, SIN, sq_t, sq_h, sk_t, sk_h, sqo_t, sqo_h, sko_t, sko_h, stride_cs,
                  T, HQ, HK, HALF, BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, BLOCK_HALF: tl.constexpr,
                  STAGES: tl.constexpr, PREFETCH: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    G = tl.num_programs(0).to(tl.int64)
    d = tl.arange(0, BLOCK_HALF)
    dm = d < HALF
    hq = tl.arange(0, BLOCK_HQ)
    hk = tl.arange(0, BLOCK_HK)
    mq = (hq < HQ)[:, None] & dm[None, :]
    mk = (hk < HK)[:, None] & dm[None, :]
    oq = hq[:, None] * sq_h + d[None, :]
    ok = hk[:, None] * sk_h + d[None, :]
    oqo = hq[:, None] * sqo_h + d[None, :]
    oko = hk[:, None] * sko_h + d[None, :]
    if PREFETCH:
        qa_n, qb_n, ka_n, kb_n, c_n, s_n = _token(Q, K, COS, SIN, pid, T, sq_t, sk_t, stride_cs, oq, ok, d, mq, mk,
                                                  dm, hq, hk, HALF)
        for t in range(pid, T, G):
            qa, qb, ka, kb, c, s = qa_n, qb_n, ka_n, kb_n, c_n, s_n
            qa_n, qb_n, ka_n, kb_n, c_n, s_n = _token(Q, K, COS, SIN, t + G, T, sq_t, sk_t, stride_cs, oq, ok, d, mq,
                                                      mk, dm, hq, hk, HALF)
            c = c.to(tl.float32)[None, :]
            s = s.to(tl.float32)[None, :]
            qa, qb, ka, kb = qa.to(tl.float32), qb.to(tl.float32), ka.to(tl.float32), kb.to(tl.float32)
            tl.store(QO + t * sqo_t + oqo, (qa * c - qb * s).to(QO.dtype.element_ty), mask=mq)
            tl.store(QO + t * sqo_t + oqo + HALF, (qb * c + qa * s).to(QO.dtype.element_ty), mask=mq)
            tl.store(KO + t * sko_t + oko, (ka * c - kb * s).to(KO.dtype.element_ty), mask=mk)
            tl.store(KO + t * sko_t + oko + HALF, (kb * c + ka * s).to(KO.dtype.element_ty), mask=mk)
    else:
        for t in tl.range(pid, T, G, num_stages=STAGES):
            qa = tl.load(Q + t * sq_t + oq, mask=mq, other=0.0).to(tl.float32)
            qb = tl.load(Q + t * sq_t + oq + HALF, mask=mq, other=0.0).to(tl.float32)
            ka = tl.load(K + t * sk_t + ok, mask=mk, other=0.0).to(tl.float32)
            kb = tl.load(K + t * sk_t + ok + HALF, mask=mk, other=0.0).to(tl.float32)
            c = tl.load(COS + t * stride_cs + d, mask=dm, other=0.0).to(tl.float32)[None, :]
            s = tl.load(SIN + t * stride_cs + d, mask=dm, other=0.0).to(tl.float32)[None, :]
            tl.store(QO + t * sqo_t + oqo, (qa * c - qb * s).to(QO.dtype.element_ty), mask=mq)
            tl.store(QO + t * sqo_t + oqo + HALF, (qb * c + qa * s).to(QO.dtype.element_ty), mask=mq)
            tl.store(KO + t * sko_t + oko, (ka * c - kb * s).to(KO.dtype.element_ty), mask=mk)
            tl.store(KO + t * sko_t + oko + HALF, (kb * c + ka * s).to(KO.dtype.element_ty), mask=mk)


def rope_persist(q, k, cos_full, sin_full, per_sm, nw, stages, prefetch):
    """NeoX, full rotary, HF's full-width gathered tables (the first half of each row read)."""
    import torch

    T, HQ, D = q.shape
    HK = k.shape[1]
    half = D // 2
    assert cos_full.shape == (T, D) and cos_full.stride() == sin_full.stride()
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    G = min(T, per_sm * num_sms(q.device))
    _rope_persist[(G,)](q, k, qo, ko, cos_full, sin_full, q.stride(0), q.stride(1), k.stride(0), k.stride(1),
                        qo.stride(0), qo.stride(1), ko.stride(0), ko.stride(1), cos_full.stride(0), T, HQ, HK, half,
                        BLOCK_HQ=triton.next_power_of_2(HQ), BLOCK_HK=triton.next_power_of_2(HK),
                        BLOCK_HALF=triton.next_power_of_2(half), STAGES=stages, PREFETCH=prefetch, num_warps=nw)
    return qo, ko


# (programs an SM, num_warps, STAGES, PREFETCH)
CONFIGS = tuple(tuple(int(v) for v in c.split("x")) for c in os.environ.get(
    "PERSIST_CONFIGS", "1x8x1x1,2x8x1x1,4x4x1x1,2x8x2x0,2x8x3x0,1x16x3x0,4x4x2x0,2x4x3x0").split(","))


def main():
    sys.path.insert(0, os.path.dirname(__file__))
    from variants_rr import run_with

    extra = {"persist_" + "x".join(map(str, c)): (lambda c: lambda s: rope_persist(s["q"], s["k"], s["cos_full"],
                                                                                 s["sin_full"], *c))(c)
             for c in CONFIGS}
    run_with("rope", extra, first=("triton_gathered",), last=("compile", "liger"))


if __name__ == "__main__":
    main()
