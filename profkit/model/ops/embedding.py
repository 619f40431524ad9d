"""Embedding lookup and its backward. Forward: each index (int64) read, its row of D elements
read from the table and written to the output; no arithmetic. Backward (dense): grad_out and the
indices read, each row added into the [V, D] gradient, which is zeroed and written whole."""

from __future__ import annotations


def forward(n_idx: int, d: int, e: int, idx_e: int = 8) -> dict:
    return {"flops": 0, "bytes": n_idx * idx_e + 2 * n_idx * d * e}


def backward(n_idx: int, d: int, vocab: int, e: int, idx_e: int = 8) -> dict:
    return {"flops": n_idx * d, "bytes": n_idx * idx_e + n_idx * d * e + vocab * d * e}
