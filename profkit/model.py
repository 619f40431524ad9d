"""The performance model every analysis shares: what a launch computed and moved, how fast
the GPU could have done it, and the lower-bound time that follows.

Everything is a pure function of one launch's counters ({ncu metric: value}, as the store's
counters reader returns them); nothing here reads a file or the database.

- work: tensor FLOPs from ``sm__ops_path_tensor_src_*`` (they count FLOPs: a cuBLAS GEMM
  reads exactly 2·M·N·K), CUDA-core FLOPs from the SASS thread-instruction counters
  (add + mul + 2·fma, FP32 and FP64);
- traffic per memory level: DRAM, L2 and L1 bytes;
- peak rates: ``*.peak_sustained`` (per cycle) × the clock the kernel ran at. The tensor
  ``ops_path`` peak is the structured-sparsity rate: the dense pipe does half of it (the
  achieved/peak ratio times two equals ncu's tensor-pipe utilisation on every GEMM shipped);
- roof time: the slowest of each level's bytes at its peak and each precision's FLOPs at its
  peak; ridge: peak FLOP/s of a precision over peak DRAM byte/s.
docs/roofline.md says which metric gives what.
"""
from __future__ import annotations

import statistics

from .metrics import BY_SHORT, lookup

# memory levels, outermost first: (key, label, bytes, bytes per cycle at peak, clock, clock fallback)
LEVELS = (
    ("dram", "DRAM", "dram_bytes", "dram_bytes_peak", "dram_clock", None),
    ("l2", "L2", "l2_bytes", "l2_bytes_peak", "l2_clock", None),
    # L1/TEX sits in the SM: without its own clock metric it runs at the SM clock
    ("l1", "L1", "l1_bytes", "l1_bytes_peak", "l1_clock", "sm_clock"),
)
LEVEL_LABEL = {k: lab for k, lab, *_ in LEVELS}

# precisions: key -> (label, [(counter short name, FLOPs per count)], peak short name, FLOPs per
# peak unit per cycle). Tensor peaks are halved: ncu's ops_path peak is the 2:4-sparse rate.
# FP32 peak: FMA-pipe warp instructions x 32 threads x 2 FLOPs.
PRECISIONS = {
    "bf16_tensor": ("BF16 tensor", [("tensor_ops_bf16", 1)], "tensor_ops_bf16_peak", 0.5),
    "fp16_tensor": ("FP16 tensor", [("tensor_ops_fp16", 1), ("tensor_ops_fp16_fp16", 1)], "tensor_ops_fp16_peak", 0.5),
    "fp8_tensor": ("FP8 tensor", [("tensor_ops_fp8", 1)], "tensor_ops_fp8_peak", 0.5),
    "tf32_tensor": ("TF32 tensor", [("tensor_ops_tf32", 1)], "tensor_ops_tf32_peak", 0.5),
    "fp32": ("FP32", [("fadd", 1), ("fmul", 1), ("ffma", 2)], "ffma_peak", 64),
    "fp64": ("FP64", [("dadd", 1), ("dmul", 1), ("dfma", 2)], "dfma_peak", 2),
}
# the fp16 tensor path runs at the bf16 rate on Hopper; used only when its own peak is absent
PEAK_FALLBACK = {"fp16_tensor": "tensor_ops_bf16_peak"}


def _clock(c: dict[str, float], short: str, fallback: str | None) -> float | None:
    return lookup(c, short) or (lookup(c, fallback) if fallback else None)


def work(c: dict[str, float]) -> dict[str, float]:
    """FLOPs per precision of one launch ({metric: value}); precisions with none left out."""
    out = {}
    for key, (_, counters, _, _) in PRECISIONS.items():
        n = sum((lookup(c, short) or 0) * per for short, per in counters)
        if n:
            out[key] = n
    return out


def traffic(c: dict[str, float]) -> dict[str, float]:
    """Bytes per memory level of one launch; a level the report did not collect is absent."""
    return {key: v for key, _, b, *_ in LEVELS if (v := lookup(c, b)) is not None}


def rates(c: dict[str, float]) -> dict[str, tuple[float, str]]:
    """Peak FLOP/s per precision and byte/s per level at this launch's clocks, with how."""
    out: dict[str, tuple[float, str]] = {}
    sm = lookup(c, "sm_clock")
    for key, (label, _, peak, per) in PRECISIONS.items():
        p = lookup(c, peak)
        name = BY_SHORT[peak].names[0]
        if p is None and key in PEAK_FALLBACK:
            p, name = lookup(c, PEAK_FALLBACK[key]), BY_SHORT[PEAK_FALLBACK[key]].names[0] + " (fp16 path not collected)"
        if p and sm:
            out[key] = (p * per * sm, f"{name} {p:g}/cycle x {per:g} x SM clock {sm / 1e9:.3f} GHz")
    for key, label, _, peak, clock, fallback in LEVELS:
        p, hz = lookup(c, peak), _clock(c, clock, fallback)
        if p and hz:
            how = BY_SHORT[clock].names[0] if lookup(c, clock) else f"SM clock (no {BY_SHORT[clock].names[0]})"
            out[key] = (p * hz, f"{BY_SHORT[peak].names[0]} {p:g} B/cycle x {how} {hz / 1e9:.3f} GHz")
    return out


def roof_time_ns(c: dict[str, float]) -> tuple[float, str] | None:
    """(lower-bound time in ns, binding ceiling key) of one launch from its counters and peaks.

    The slowest of: each level's bytes at that level's peak bandwidth, each precision's FLOPs
    at its peak (pipes overlap, so the max, not the sum, is a true lower bound). None when the
    report has no peak for some work or traffic the kernel did.
    """
    r = rates(c)
    bounds = {}
    for key, n in work(c).items():
        if key not in r:
            return None
        bounds[key] = n / r[key][0] * 1e9
    for key, b in traffic(c).items():
        if key in r:
            bounds[key] = b / r[key][0] * 1e9
        elif key == "dram":
            return None  # DRAM is the one level every roofline needs
    if not bounds:
        return None
    key = max(bounds, key=bounds.get)
    return bounds[key], key


def precision(c: dict[str, float]) -> str | None:
    """The precision a launch does most of its FLOPs in (None: no FLOPs counted)."""
    w = work(c)
    return max(w, key=w.get) if w else None


def run_ridge(counters) -> float | None:
    """Dense bf16 tensor peak FLOP/s over DRAM peak byte/s, the median over launches (an
    iterable of counter dicts) that carry both peaks."""
    ratios = []
    for c in counters:
        r = rates(c)
        if "bf16_tensor" in r and "dram" in r:
            ratios.append(r["bf16_tensor"][0] / r["dram"][0])
    return statistics.median(ratios) if ratios else None


def kernel_ridge(c: dict[str, float], fallback: float | None) -> tuple[float | None, str]:
    """(ridge in FLOP/B, precision) of the precision a launch computes in (an FP32 kernel meets
    the FP32 roof at ~14 FLOP/B on the H200, a bf16 tensor kernel at ~221), from the report's
    peaks; else `fallback` (the run's bf16 tensor ridge)."""
    prec, r = precision(c), rates(c)
    if prec and prec in r and "dram" in r:
        return r[prec][0] / r["dram"][0], prec
    return fallback, "bf16_tensor"
