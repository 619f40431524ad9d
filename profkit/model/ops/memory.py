"""Data movement without arithmetic: copy / to / clone / contiguous, cat / stack, index /
gather / scatter / index_select / embedding-like reads. A copy reads its source and writes its
destination (dtypes may differ); cat reads every input and writes their sum; a gather reads the
index and the gathered elements and writes as many; a scatter reads index and source and writes
into the destination (read-modify-write for an add)."""

from __future__ import annotations


def copy(numel: int, src_e: int, dst_e: int) -> dict:
    return {"flops": 0, "bytes": numel * (src_e + dst_e)}


def cat(in_bytes: int) -> dict:
    return {"flops": 0, "bytes": 2 * in_bytes}


def gather(out_numel: int, e: int, idx_numel: int, idx_e: int = 8) -> dict:
    return {"flops": 0, "bytes": idx_numel * idx_e + 2 * out_numel * e}


def scatter(src_numel: int, e: int, idx_numel: int, idx_e: int = 8, accumulate: bool = False) -> dict:
    return {
        "flops": src_numel if accumulate else 0,
        "bytes": idx_numel * idx_e + src_numel * e * (3 if accumulate else 2),
    }
