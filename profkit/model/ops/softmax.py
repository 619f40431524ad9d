"""Softmax, log-softmax and cross-entropy over rows.

Softmax: each row read once and written once (a kernel keeps the row on chip for its max and
sum); 5 FLOPs per element (max, subtract, exp, sum, divide). Log-softmax the same. Cross-entropy
on logits: log-softmax plus the gather of one target per row: logits and int64 targets read,
one loss per row written (or one scalar when reduced).

The stock CUDA kernel moves more than that minimum where a row outgrows a block's default
shared memory (aten/src/ATen/native/cuda/SoftMax.cu: rows up to 48 KB are held in registers or
shared memory; longer ones run cunn_SoftMaxForward, which reads the row once for its max, once
for the sum of exponentials and once to write the result): `stock_cuda_reads`. H100 ncu on a
[4096, 50257] fp32 log_softmax: 2.7x the one read (L2 catches some of the re-reads).
"""

from __future__ import annotations

from .dtypes import ESIZE


def softmax_model(p: dict, dtype: str) -> dict:
    e = ESIZE[dtype]
    n = p["rows"] * p["n"]
    return {"bytes": 2 * n * e, "flops": 5 * n}


SOFTMAX_SHAPES = {
    "scores-r65536-n1024": {"rows": 65536, "n": 1024},
    "scores-r32768-n4096": {"rows": 32768, "n": 4096},
    "llama3vocab-t1": {"rows": 1, "n": 128256},
    "llama3vocab-t2048": {"rows": 2048, "n": 128256},
    "qwen7bvocab-t1024": {"rows": 1024, "n": 152064},
}


def rowwise(numel: int, e: int, out_e: int | None = None, flops_per: int = 5) -> dict:
    """Softmax / log-softmax forward: read and write every element once."""
    return {"bytes": numel * e + numel * (out_e or e), "flops": flops_per * numel}


def rowwise_backward(numel: int, e: int) -> dict:
    """Softmax backward dx = y * (dy - sum(dy * y)): dy and y read, dx written; 4 per element."""
    return {"bytes": 3 * numel * e, "flops": 4 * numel}


def nll_loss_backward(rows: int, e: int, go_bytes: int, idx_e: int = 8, weighted: bool = False) -> dict:
    """grad_input of nll_loss: -grad_output * weight[target] / total_weight at each row's target.
    aten zeroes grad_input first (nll_loss_backward_out_cuda: grad_input.zero_(), a fill_ of its
    own in a trace); the kernel then reads the targets, grad_output (a scalar when reduced),
    total_weight and the targets' class weights, and writes one element per row."""
    return {"bytes": rows * idx_e + go_bytes + e + (rows * e if weighted else 0) + rows * e, "flops": rows}


def cross_entropy(rows: int, classes: int, e: int, reduced: bool = True) -> dict:
    """Logits [rows, classes] and int64 targets read, a loss per row (or one) written."""
    n = rows * classes
    return {"bytes": n * e + 8 * rows + (4 if reduced else rows * e), "flops": 5 * n + rows}


SMEM_PER_BLOCK = 48 * 1024  # the default shared memory of a block, which SoftMax.cu sizes rows by


def stock_cuda_reads(row_bytes: int) -> int:
    """How many times PyTorch's CUDA softmax / log-softmax forward reads each input row."""
    return 1 if row_bytes <= SMEM_PER_BLOCK else 3


def stock_cuda_backward_grad_reads(row_bytes: int) -> int:
    """How many times PyTorch's CUDA softmax / log-softmax backward reads each row of the output's
    gradient: rows that fit a block's shared memory are cached there (cunn_SoftMaxBackwardSmem);
    longer ones run cunn_SoftMaxBackward, which reads dy for the row's sum, then dy and the
    output again for dx (SoftMax.cu host_softmax_backward). The output is read once either way."""
    return 1 if row_bytes <= SMEM_PER_BLOCK else 2
