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


def forward(
    b: int, h: int, lq: int, lk: int, e: int, ev: int, esize: int, causal: bool = False, hk: int | None = None
) -> dict:
    hk = hk or h
    flops = 2 * b * h * lq * lk * e + 2 * b * h * lq * lk * ev
    if causal:
        flops //= 2
    byt = (b * h * lq * e + b * hk * lk * e + b * hk * lk * ev + b * h * lq * ev) * esize + 4 * b * h * lq
    return {"flops": flops, "bytes": byt}


def backward(
    b: int, h: int, lq: int, lk: int, e: int, ev: int, esize: int, causal: bool = False, hk: int | None = None
) -> dict:
    hk = hk or h
    flops = 2 * b * h * lq * lk * e * 3 + 2 * b * h * lq * lk * ev * 2
    if causal:
        flops //= 2
    q, k, v, o = b * h * lq * e, b * hk * lk * e, b * hk * lk * ev, b * h * lq * ev
    byt = (q + k + v + 2 * o + q + k + v) * esize + 4 * b * h * lq
    return {"flops": flops, "bytes": byt}
