"""Attention: softmax(Q K^T / sqrt(d)) V, as scaled_dot_product_attention and its flash,
memory-efficient and cuDNN kernels, forward and backward, causal and variable-length.

FLOPs: the two products, 2*B*H*L*S*E (Q K^T) + 2*B*H*L*S*Ev (P V); the softmax is left out (as
torch.utils.flop_counter does). Causal: the kernels skip the masked half, so half of that (the
flop counter counts the full square). Backward: five products of the same size (recomputed
Q K^T, dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q): 2.5x the forward.
Bytes: Q, K, V read once and O written once, plus the fp32 log-sum-exp per row (B*H*L*4) that
the backward reads; backward: Q, K, V, O, dO and LSE read, dQ, dK, dV written.
"""

from __future__ import annotations

CAUSAL_TILE = 128  # query rows per tile of the causal kernels


def causal_share(lq: int, lk: int) -> float:
    """The share of the lq x lk score square a tiled causal kernel computes (top-left aligned,
    as scaled_dot_product_attention's is_causal): each 128-row query tile runs up to the end of
    its last row's keys."""
    if lq <= 0 or lk <= 0:
        return 0.0
    t = CAUSAL_TILE
    done = sum(min(t, lq - i) * min(i + t, lk) for i in range(0, lq, t))
    return done / (lq * lk)


def forward(
    b: int,
    h: int,
    lq: int,
    lk: int,
    e: int,
    ev: int,
    esize: int,
    causal: bool = False,
    hk: int | None = None,
    share: float | None = None,
) -> dict:
    """share: the causal share where lq x lk is not one square (varlen: the caller's)."""
    hk = hk or h
    flops = 2 * b * h * lq * lk * e + 2 * b * h * lq * lk * ev
    if causal:
        flops = round(flops * (share if share is not None else causal_share(lq, lk)))
    byt = (b * h * lq * e + b * hk * lk * e + b * hk * lk * ev + b * h * lq * ev) * esize + 4 * b * h * lq
    return {"flops": flops, "bytes": byt}


def backward(
    b: int,
    h: int,
    lq: int,
    lk: int,
    e: int,
    ev: int,
    esize: int,
    causal: bool = False,
    hk: int | None = None,
    share: float | None = None,
) -> dict:
    """share: the causal share where lq x lk is not one square (varlen: the caller's)."""
    hk = hk or h
    flops = 2 * b * h * lq * lk * e * 3 + 2 * b * h * lq * lk * ev * 2
    if causal:
        flops = round(flops * (share if share is not None else causal_share(lq, lk)))
    q, k, v, o = b * h * lq * e, b * hk * lk * e, b * hk * lk * ev, b * h * lq * ev
    byt = (q + k + v + 2 * o + q + k + v) * esize + 4 * b * h * lq
    return {"flops": flops, "bytes": byt}
