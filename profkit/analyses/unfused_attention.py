"""Attention computed in pieces: a batched GEMM (Q K^T), a softmax over its rows and a batched
GEMM (P V) in the forward; two batched GEMMs, the softmax's backward and two more in the
backward. SDPA's math backend runs it so, and so does attention written by hand. A fused kernel
(cuDNN, FlashAttention, memory-efficient) does each pass in one launch without writing the S x S
scores: the lever is the SDPA backend, or calling SDPA at all.

The gain is measured, not modelled: the pieces' time over the math backend's time at the same
sequence length times the best fused backend's (profkit.model.attainable's attention rows,
measured on the GPU machine). The sequence length is read from the softmax kernel's template
(ATen's warp softmax is instantiated per power of two of the row length); a longer row takes the
block softmax, whose length the name does not give: the longest measured row is used, a lower
bound on the gain (it grows with the length).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from profkit.model import attainable, families

FORWARD = re.compile(r"softmax_warp_forward|SoftMaxForward")
BACKWARD = re.compile(r"softmax_warp_backward|SoftMaxBackward")
LOG2_ELEMENTS = re.compile(r"softmax_warp_(?:forward|backward)<[^<>]*?\(int\)(\d+)")
# launches on each side of the softmax searched for its GEMMs (masks, scaling, dropout between)
WINDOW = 6
# the math backend's own prologue and epilogue around the GEMMs: upcasts of q, k, v and the
# gradients, the scaling, the causal mask (ATen copies, elementwise kernels, triu); a fused
# kernel does without them. At most this many launches on each side, never past a kernel of
# another family (the model's own GEMMs, norms, rotary tables of its own family stay).
EDGE = 10
EDGE_FAMILIES = ("aten_copy", "aten_elementwise")
EDGE_NAME = re.compile(r"triu_tril")


@dataclass
class Block:
    """One pass of one attention call in pieces: launch positions first..last (inclusive) on
    one stream."""

    pass_: str  # fwd | bwd
    ix: np.ndarray  # positions in the launch columns
    seq: int | None  # row length bound (a power of two), None: longer than the warp softmax's
    batch: int  # the batched GEMMs' batch (B x H)
    ns: float


def seq_bound(kernel_name: str) -> int | None:
    """The row length bound of ATen's warp softmax (2**log2_elements), None for other softmaxes."""
    m = LOG2_ELEMENTS.search(kernel_name)
    return 2 ** int(m.group(1)) if m else None


def find(
    names: list[str],
    kname: np.ndarray,
    family: np.ndarray,
    families_: list[str],
    stream: np.ndarray,
    dur: np.ndarray,
    grid_z,
) -> list[Block]:
    """The attention blocks among launches in launch order. `grid_z(positions)` -> the z
    dimension of those launches' grids (batched GEMMs carry the batch there)."""
    gemm_codes = {i for i, f in enumerate(families_) if families.get(f).attain == "gemm"}
    is_gemm = np.isin(family, list(gemm_codes)) if gemm_codes else np.zeros(len(family), bool)
    text = np.array(names, dtype=object)
    fwd = np.array([bool(FORWARD.search(n)) for n in names] + [False], dtype=bool)
    bwd = np.array([bool(BACKWARD.search(n)) for n in names] + [False], dtype=bool)
    out: list[Block] = []
    for pos in np.flatnonzero(fwd[kname] | bwd[kname]).tolist():
        pass_ = "fwd" if fwd[kname[pos]] else "bwd"
        need = 1 if pass_ == "fwd" else 2  # Q K^T | P V;  dO V^T, P^T dO | dS K, dS^T Q
        same = np.flatnonzero(stream == stream[pos])
        at = int(np.searchsorted(same, pos))
        before = [int(i) for i in same[max(0, at - WINDOW) : at][::-1] if is_gemm[i]][:need]
        after = [int(i) for i in same[at + 1 : at + 1 + WINDOW] if is_gemm[i]][:need]
        if len(before) < need or len(after) < need:
            continue
        gemms = before + after
        z = [int(v) for v in grid_z(gemms)]
        if min(z) <= 1 or len(set(z)) > 1:
            continue  # not one batch of heads: a softmax between unrelated GEMMs
        lo, hi = min(before), max(after)
        ix = same[(same >= lo) & (same <= hi)]
        out.append(Block(pass_, ix, seq_bound(str(text[kname[pos]])), z[0], float(dur[ix].sum())))
    blocks = _disjoint(out)
    edge_codes = {i for i, f in enumerate(families_) if f in EDGE_FAMILIES}
    edge_kernel = (
        np.isin(family, list(edge_codes))
        | np.array([bool(EDGE_NAME.search(n)) for n in names] + [False], dtype=bool)[kname]
    )
    return _with_edges(blocks, edge_kernel, stream, dur)


def _with_edges(blocks: list[Block], edge: np.ndarray, stream: np.ndarray, dur: np.ndarray) -> list[Block]:
    """Each block grown over the math backend's prologue and epilogue (`edge` launches next to it
    on its stream, up to EDGE a side), never into another block: every block's prologue first (a
    pass's upcasts and mask are its own), then the epilogues."""
    taken = np.zeros(len(edge), dtype=bool)
    for b in blocks:
        taken[b.ix] = True
    for back in (True, False):
        for b in blocks:
            same = np.flatnonzero(stream == stream[b.ix[0]])
            if back:
                at = int(np.searchsorted(same, b.ix[0]))
                side = same[max(0, at - EDGE) : at][::-1]
            else:
                at = int(np.searchsorted(same, b.ix[-1]))
                side = same[at + 1 : at + 1 + EDGE]
            grown = []
            for i in side.tolist():
                if taken[i] or not edge[i]:
                    break
                taken[i] = True
                grown.append(i)
            if grown:
                b.ix = np.sort(np.concatenate([b.ix, np.array(grown, dtype=b.ix.dtype)]))
                b.ns = float(dur[b.ix].sum())
    return blocks


def _disjoint(blocks: list[Block]) -> list[Block]:
    """Blocks sharing a launch (two softmaxes between the same GEMMs) count once: the first."""
    taken: set[int] = set()
    out = []
    for b in blocks:
        s = set(b.ix.tolist())
        if s & taken:
            continue
        taken |= s
        out.append(b)
    return out


@dataclass
class Switch:
    """What a fused backend would take for the blocks of one scope."""

    fused_ns: float  # all blocks' time after the switch
    pieces_ns: float  # their time now
    backend: str  # the fastest fused backend measured at that length
    how: str


def predict(blocks: list[Block]) -> Switch | None:
    """The blocks' time after the switch, from the measured math/fused ratio per pass and row
    length (attainable.attention_ratio). None: no measured row."""
    fused = 0.0
    backends: dict[str, float] = {}
    parts, where = [], ""
    for pass_ in ("fwd", "bwd"):
        mine = [b for b in blocks if b.pass_ == pass_]
        if not mine:
            continue
        for seq in sorted({b.seq or 0 for b in mine}):
            at = [b for b in mine if (b.seq or 0) == seq]
            r = attainable.attention_ratio(pass_, seq or None)
            if r is None:
                return None
            ns = sum(b.ns for b in at)
            fused += ns / r.ratio
            backends[r.backend] = backends.get(r.backend, 0.0) + ns
            parts.append(f"{pass_} {r.describe()}")
            where = r.where
    if not parts:
        return None
    best = max(backends, key=lambda k: backends[k])
    pieces = sum(b.ns for b in blocks)
    return Switch(fused, pieces, best, f"{'; '.join(parts)} (measured, {where})")
