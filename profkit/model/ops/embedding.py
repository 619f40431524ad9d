"""Embedding lookup and its backward. Forward: each index (int64) read, its row of D elements
read from the table and written to the output; no arithmetic.

Backward (dense): grad_out and the indices read, each index's row of grad_out added into the
[V, D] gradient. aten zeroes that gradient first (at::zeros in embedding_dense_backward_cuda: a
fill_ of its own in a trace), so the operator's kernels write only the rows the indices touch:
at most min(n, V) rows (which indices repeat is not in the shapes: an upper bound).

PyTorch's CUDA kernels move more than that minimum (aten/src/ATen/native/cuda/Embedding.cu,
EmbeddingBackwardKernel.cu), `backward_kernels`: up to 3,072 indices (and no scale_grad_by_freq)
embedding_backward_feature_kernel adds into the zeroed rows (`grad_weight[row] += ...`: each
touched row read too); more indices are sorted (cub radix sort), compute_grad_weight sums grad_out
into one fp32 row per partial segment (at most one per index) and sum_and_scatter reads those
partial sums back to write the rows."""

from __future__ import annotations

FEATURE_KERNEL_MAX = 3072  # Embedding.cu: num_indices <= 3072 && !scale_grad_by_freq


def forward(n_idx: int, d: int, e: int, idx_e: int = 8) -> dict:
    return {"flops": 0, "bytes": n_idx * idx_e + 2 * n_idx * d * e}


def backward(n_idx: int, d: int, vocab: int, e: int, idx_e: int = 8) -> dict:
    rows = min(n_idx, vocab)
    return {"flops": n_idx * d, "bytes": n_idx * idx_e + n_idx * d * e + rows * d * e, "written": rows * d * e}


def backward_kernels(n_idx: int, d: int, vocab: int, e: int, idx_e: int = 8) -> dict:
    """The stock CUDA kernels' reads and writes: the minimum's, plus the touched rows read back
    (the feature kernel's +=), or the fp32 partial sums written and read back (the sort path; its
    sort passes over the indices are not counted)."""
    rows = min(n_idx, vocab)
    reads, writes = n_idx * idx_e + n_idx * d * e, rows * d * e
    if n_idx <= FEATURE_KERNEL_MAX:
        return {"reads": reads + rows * d * e, "writes": writes, "path": "the feature kernel adds into the rows"}
    partials = n_idx * d * 4
    return {"reads": reads + partials, "writes": writes + partials, "path": "sorted: fp32 partial sums per segment"}
