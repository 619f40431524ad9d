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
  achieved/peak ratio times two equals ncu's tensor-pipe utilisation on every GEMM shipped).
  Where a report has no peak metric for DRAM or FP32, its device attributes give one (memory
  clock × bus width; SMs × FP32 lanes per SM of the compute capability × SM clock); where it
  gives no peak at all, a row of profkit.model.gpus (datasheet peaks of a known GPU) passed in by
  the caller.
  Each rate says where it came from;
- roof time: the slowest of each level's bytes at its peak and each precision's FLOPs at its
  peak; ridge: peak FLOP/s of a precision over peak DRAM byte/s.
docs/roofline.md says which metric gives what.
"""

from __future__ import annotations

import statistics

from profkit.core.metrics import BY_SHORT, lookup
from profkit.model.gpus import FP32_LANES, FP32_LANES_SOURCE, Gpu

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
# fp16 and bf16 inputs (FP32 accumulate) run at one tensor rate on every GPU with a bf16 path
# (Ampere on, datasheets in profkit.model.gpus); used only when the fp16 path's own peak is absent
PEAK_FALLBACK = {"fp16_tensor": "tensor_ops_bf16_peak"}
# where a rate came from, other than the report's own peak metrics (the start of its `how`)
FROM_ATTRIBUTES = "device attributes"
FROM_TABLE = "known GPU table"


def _clock(c: dict[str, float], short: str, fallback: str | None) -> float | None:
    return lookup(c, short) or (lookup(c, fallback) if fallback else None)


def work(c: dict[str, float]) -> dict[str, float]:
    """FLOPs per precision of one launch ({metric: value}); precisions with none left out.
    Remembered on a Counters mapping."""
    if not c:
        return {}
    memo = getattr(c, "memo", None)
    if memo is None:
        return _work(c)
    hit = memo.get("work")  # (not a short name: the metric table has no "work")
    if hit is None:
        hit = memo["work"] = _work(c)
    return dict(hit)


def _work(c: dict[str, float]) -> dict[str, float]:
    out = {}
    for key, (_, counters, _, _) in PRECISIONS.items():
        n = sum((lookup(c, short) or 0) * per for short, per in counters)
        if n:
            out[key] = n
    return out


def traffic(c: dict[str, float]) -> dict[str, float]:
    """Bytes per memory level of one launch; a level the report did not collect is absent."""
    return {key: v for key, _, b, *_ in LEVELS if (v := lookup(c, b)) is not None}


def compute_capability(c: dict[str, float]) -> str | None:
    major, minor = lookup(c, "cc_major"), lookup(c, "cc_minor")
    return f"{major:.0f}.{minor:.0f}" if major is not None and minor is not None else None


def attribute_rates(c: dict[str, float]) -> dict[str, tuple[float, str]]:
    """DRAM and FP32 peaks from the device attributes every .ncu-rep and raw page carries:
    2 × memory clock × bus width (double data rate: the CUDA samples' bandwidth formula), and
    SMs × FP32 lanes per SM of the compute capability × 2 FLOPs × SM clock (the clock the launch
    ran at, else the device's maximum)."""
    out: dict[str, tuple[float, str]] = {}
    mem, bus = lookup(c, "mem_clock_max"), lookup(c, "mem_bus_width")
    if mem and bus:
        out["dram"] = (
            2 * mem * 1e3 * bus / 8,
            f"{FROM_ATTRIBUTES}: 2 x memory clock {mem / 1e6:.3f} GHz x {bus:.0f}-bit bus",
        )
    sms, cc = lookup(c, "sm_count"), compute_capability(c)
    lanes = FP32_LANES.get(cc or "")
    hz, which = lookup(c, "sm_clock"), "SM clock"
    if not hz and (hz_max := lookup(c, "sm_clock_max")):
        hz, which = hz_max * 1e3, "maximum SM clock"
    if sms and lanes and hz:
        out["fp32"] = (
            sms * lanes * 2 * hz,
            f"{FROM_ATTRIBUTES}: {sms:.0f} SMs x {lanes} FP32 lanes (CC {cc}: "
            f"{FP32_LANES_SOURCE}) x 2 x {which} {hz / 1e9:.3f} GHz",
        )
    return out


def rates(c: dict[str, float], gpu: Gpu | None = None) -> dict[str, tuple[float, str]]:
    """Peak FLOP/s per precision and byte/s per level at this launch's clocks, with how: the
    report's peak metrics, else its device attributes (DRAM, FP32); for a launch whose report
    gives no peak at all, `gpu`'s datasheet row (profkit.model.gpus). Remembered on a Counters
    mapping, per GPU row (classify, advise and the roofline each ask several times a launch)."""
    memo = getattr(c, "memo", None)
    if memo is None:
        return _rates(c, gpu)
    key = ("rates", id(gpu))  # (a tuple: never a short name)
    hit = memo.get(key)
    if hit is None or hit[0] is not gpu:
        hit = memo[key] = (gpu, _rates(c, gpu))
    return dict(hit[1])


def _rates(c: dict[str, float], gpu: Gpu | None) -> dict[str, tuple[float, str]]:
    out: dict[str, tuple[float, str]] = {}
    sm = lookup(c, "sm_clock")
    for key, (label, _, peak, per) in PRECISIONS.items():
        p = lookup(c, peak)
        name = BY_SHORT[peak].names[0]
        if p is None and key in PEAK_FALLBACK:
            p, name = (
                lookup(c, PEAK_FALLBACK[key]),
                BY_SHORT[PEAK_FALLBACK[key]].names[0] + " (fp16 path not collected)",
            )
        if p and sm:
            out[key] = (p * per * sm, f"{name} {p:g}/cycle x {per:g} x SM clock {sm / 1e9:.3f} GHz")
    for key, label, _, peak, clock, fallback in LEVELS:
        p, hz = lookup(c, peak), _clock(c, clock, fallback)
        if p and hz:
            how = BY_SHORT[clock].names[0] if lookup(c, clock) else f"SM clock (no {BY_SHORT[clock].names[0]})"
            out[key] = (p * hz, f"{BY_SHORT[peak].names[0]} {p:g} B/cycle x {how} {hz / 1e9:.3f} GHz")
    if "fp32" not in out and sm and (p := lookup(c, "ffma_thread_peak")):
        # ncu's default roofline chart collects the thread-level FMA peak: 2 FLOPs per thread instruction
        out["fp32"] = (
            p * 2 * sm,
            f"{BY_SHORT['ffma_thread_peak'].names[0]} {p:g}/cycle x 2 x SM clock {sm / 1e9:.3f} GHz",
        )
    for key, v in attribute_rates(c).items():
        out.setdefault(key, v)
    # datasheet peaks only for a launch whose report gives none at all: never mixed with a
    # report's own (measured-clock) peaks
    if gpu is not None and not out:
        out = {key: (v, f"{FROM_TABLE}: {gpu.describe()}") for key, v in gpu.ceilings.items()}
    return out


def roof_time_ns(c: dict[str, float], gpu: Gpu | None = None) -> tuple[float, str] | None:
    """(lower-bound time in ns, binding ceiling key) of one launch from its counters and peaks.

    The slowest of: each level's bytes at that level's peak bandwidth, each precision's FLOPs
    at its peak (pipes overlap, so the max, not the sum, is a true lower bound). None when the
    report has no peak for some work or traffic the kernel did.
    """
    r = rates(c, gpu)
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
    key = max(bounds, key=lambda k: bounds[k])
    return bounds[key], key


def precision(c: dict[str, float]) -> str | None:
    """The precision a launch does most of its FLOPs in (None: no FLOPs counted)."""
    w = work(c)
    return max(w, key=lambda k: w[k]) if w else None


def run_ridge(counters, gpu: Gpu | None = None) -> float | None:
    """Dense bf16 tensor peak FLOP/s over DRAM peak byte/s, the median over launches (an
    iterable of counter dicts) that carry both peaks."""
    ratios = []
    for c in counters:
        r = rates(c, gpu)
        if "bf16_tensor" in r and "dram" in r:
            ratios.append(r["bf16_tensor"][0] / r["dram"][0])
    return statistics.median(ratios) if ratios else None


def kernel_ridge(c: dict[str, float], fallback: float | None, gpu: Gpu | None = None) -> tuple[float | None, str]:
    """(ridge in FLOP/B, precision) of the precision a launch computes in (an FP32 kernel meets
    the FP32 roof at ~14 FLOP/B on the H200, a bf16 tensor kernel at ~221), from the report's
    peaks; else `fallback` (the run's bf16 tensor ridge)."""
    prec, r = precision(c), rates(c, gpu)
    if prec and prec in r and "dram" in r:
        return r[prec][0] / r["dram"][0], prec
    return fallback, "bf16_tensor"
