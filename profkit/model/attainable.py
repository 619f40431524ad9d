"""What fraction of its roof the best known kernel of a family reaches: the attainable
efficiency that turns headroom to the roof (`roof_speedup`) into a gain one can expect
(`predicted_speedup`).

The rows for cuBLAS GEMMs (large and small shapes), fused attention, copies and elementwise
kernels, and reductions are measured on the GPU machine by benchmarks/programs/attainable_sweep.py
(attainable_measured.json beside this file names the GPU, versions and date): the best fraction
of its roof (the slower of its FLOPs at the bf16 tensor peak and its bytes at the DRAM bandwidth)
a library kernel of the class reached. Convolutions, NCCL and your own code keep published
estimates (one GPU cannot measure a collective's bus bandwidth), each naming its source. The
same file gives the math SDPA backend's time over the fused backends' by pass and sequence length
(attention_ratio), the price of attention computed in pieces.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

PROVENANCE = "estimate, to be calibrated"


@dataclass(frozen=True)
class Attainable:
    efficiency: float  # fraction of the roof (the slowest ceiling of the kernel's work) reachable
    of: str  # which roof it is a fraction of
    source: str  # where the estimate starts from
    provenance: str = PROVENANCE


# attain class (profkit.model.families.Family.attain) -> its attainable efficiency
TABLE: dict[str, Attainable] = {
    "gemm": Attainable(
        0.80,
        "the tensor (or FP32) peak of its precision, large shapes",
        "cuBLAS bf16 8192^3 at ~700-800 of 989 dense TFLOP/s on an H100 SXM (published; "
        "/work/shared/anchors.md): 75-85 %; measured here, cuBLAS nvjet 8192x4096x1024 bf16 at 755 "
        "TFLOP/s, 76 % (H100, 2026-12-05, tests/data/program-pairs: pair-compile-before-eager)",
    ),
    "gemm_small": Attainable(
        0.50,
        "the tensor peak, shapes under one wave of tiles or K < 512",
        "small/skinny GEMMs (decode, M <= 64) are bound by the operand bytes and one "
        "partial wave; no published cuBLAS figure at these shapes",
    ),
    "attention": Attainable(
        0.65,
        "the tensor peak of its precision",
        "FlashAttention-2/3 and cuDNN SDPA forward reach ~60-70 % of the dense bf16 peak at "
        "long sequences (FlashAttention-3 paper, H100); short ones far less: measured here, cuDNN's "
        "fused SDPA at B8 H12 S512 D64 causal at 165 (fwd) and 176 (bwd) TFLOP/s, 17 % (H100, "
        "2026-12-05, tests/data/program-pairs: pair-sdpa-after-cudnn)",
    ),
    "conv": Attainable(
        0.70,
        "the tensor peak of its precision",
        "cuDNN implicit-GEMM convolutions: below the GEMM figure by the im2col traffic",
    ),
    "copy": Attainable(
        0.90,
        "the DRAM bandwidth (datasheet)",
        "a device-to-device copy reaches ~88-90 % of the datasheet bandwidth (H200 here: "
        "4.2-4.3 of 4.8 TB/s; /work/shared/anchors.md)",
    ),
    "reduction": Attainable(
        0.85,
        "the DRAM bandwidth (datasheet)",
        "row reductions (RMSNorm, softmax) at ~87-90 % of DRAM peak in the best published "
        "kernels (QuACK on H100); most reach less",
    ),
    "nccl": Attainable(
        0.80,
        "the link's bus bandwidth",
        "nccl-tests all-reduce bus bandwidth on NVLink at large messages; small messages far less",
    ),
    "code": Attainable(
        0.90,
        "the roof of its own work (DRAM bytes or FLOPs)",
        "a kernel whose code is yours can approach its roof; the best kernels in the lab reach ~90 % of copy bandwidth",
    ),
}


def of(attain: str | None, small: bool = False) -> Attainable:
    """The attainable efficiency of an attain class (profkit.model.families): `small` picks the
    small-shape row where one exists."""
    key = attain or "code"
    if small and f"{key}_small" in TABLE:
        key = f"{key}_small"
    return TABLE.get(key, TABLE["code"])


# measured on the GPU machine by benchmarks/programs/attainable_sweep.py (its env names the GPU,
# driver stack and date); read once
MEASURED = Path(__file__).with_name("attainable_measured.json")


@functools.cache
def measured() -> dict:
    """The sweep's rows ({"env": ..., "rows": [...]}); empty where the file is not shipped."""
    try:
        return json.loads(MEASURED.read_text())
    except (OSError, ValueError):
        return {"env": {}, "rows": []}


@dataclass(frozen=True)
class AttentionRatio:
    """The math backend's time over the fastest fused backend's, one pass at one row length."""

    ratio: float
    backend: str  # the fused backend measured fastest there (fwd + bwd)
    seq: int  # the measured row length used
    head_dim: int  # the head size whose ratio is the smaller (the other's is named)
    other: float | None  # the ratio at the other measured head size
    where: str  # GPU and date of the measurement

    def describe(self) -> str:
        other = f", {self.other:.1f}x at the other head size" if self.other is not None else ""
        return f"math {self.ratio:.1f}x the time of {self.backend} at S {self.seq} D {self.head_dim}{other}"


def attention_ratio(pass_: str, seq: int | None) -> AttentionRatio | None:
    """How much faster the fastest fused SDPA backend ran than the math backend on the GPU
    machine, for `pass_` ('fwd', 'bwd': fwd+bwd less fwd) at the measured row length nearest at or
    above `seq` (None, or past the longest the math backend was measured at: the longest, a
    lower bound). The head size is not known from a timeline: the smaller ratio of those
    measured is taken."""
    m = measured()
    times: dict[tuple[int, int, str], dict[str, float]] = {}
    for r in m.get("rows", []):
        if r.get("family") != "attention" or "us" not in r:
            continue
        times.setdefault((r["seq"], r["head_dim"], r["backend"]), {})[r["pass"]] = r["us"]

    def t(key, p):
        got = times.get(key, {})
        if p == "fwd":
            return got.get("fwd")
        both, fwd = got.get("fwd+bwd"), got.get("fwd")
        return both - fwd if both and fwd and both > fwd else None

    seqs = sorted({s for s, _, b in times if b == "math"})
    if not seqs:
        return None
    row = next((s for s in seqs if seq is not None and s >= seq), seqs[-1])
    found = []
    for d in sorted({d for s, d, b in times if s == row and b == "math"}):
        fused = {b: (t((row, d, b), "fwd") or 0) + (t((row, d, b), "bwd") or 0) for s, dd, b in times}
        fused = {b: v for b, v in fused.items() if b != "math" and v > 0 and (row, d, b) in times}
        if not fused:
            continue
        best = min(fused, key=fused.__getitem__)
        mine, theirs = t((row, d, "math"), pass_), t((row, d, best), pass_)
        if mine and theirs:
            found.append((mine / theirs, d, best))
    if not found:
        return None
    found.sort()
    ratio, d, best = found[0]
    env = m.get("env", {})
    where = f"{env.get('gpu', '?')}, torch {env.get('torch', '?')}, {str(env.get('date', '?'))[:10]}"
    return AttentionRatio(ratio, best, row, d, found[1][0] if len(found) > 1 else None, where)


def roof_fraction(row: dict, ceilings: dict) -> float | None:
    """A measured row's time at the roof of its work (the slower of its FLOPs at the bf16 tensor
    peak and its bytes at the DRAM bandwidth) over its measured time."""
    us = row.get("us")
    if not us:
        return None
    t = 0.0
    if row.get("flops") and ceilings.get("bf16_tensor"):
        t = max(t, row["flops"] / ceilings["bf16_tensor"])
    if row.get("bytes") and ceilings.get("dram"):
        t = max(t, row["bytes"] / ceilings["dram"])
    return t / (us * 1e-6) if t else None


# attain class -> the measured rows it is the best of (family, classes; None: every class)
_MEASURED_CLASSES = {
    "gemm": ("gemm", ("large",)),
    "gemm_small": ("gemm", ("skinny", "k_small", "small")),
    "copy": (None, None),  # copy and elementwise rows
    "reduction": ("reduction", None),
}


def _measured_table() -> dict[str, Attainable]:
    """TABLE's rows the sweep measured, as the best fraction of the roof a library kernel of the
    class reached (attention: the fastest fused backend, fwd + bwd, at S >= 512, the least of
    those lengths: shorter ones reach far less, longer ones more)."""
    from profkit.model import gpus

    m = measured()
    env = m.get("env", {})
    gpu = gpus.by_name(env.get("gpu"))
    if gpu is None:
        return {}
    where = f"measured on {gpu.name}, torch {env.get('torch', '?')}, {str(env.get('date', '?'))[:10]}"
    rows = [r for r in m.get("rows", []) if "us" in r]
    out: dict[str, Attainable] = {}
    for key, (fam, classes) in _MEASURED_CLASSES.items():
        got = []
        for r in rows:
            if key == "copy" and r["family"] not in ("copy", "elementwise"):
                continue
            if fam and (r["family"] != fam or (classes and r.get("class") not in classes)):
                continue
            f = roof_fraction(r, gpu.ceilings)
            if f:
                got.append((f, r))
        if got:
            f, r = max(got, key=lambda x: x[0])
            out[key] = Attainable(
                min(1.0, f),
                "its roof: the slower of its FLOPs at the bf16 tensor peak and its bytes at the DRAM bandwidth",
                f"{r['family']} {r['shape']}: {f:.0%} of its roof ({where})",
                "measured",
            )
    best: dict[tuple, float] = {}
    for r in rows:
        if r["family"] == "attention" and r.get("pass") == "fwd+bwd" and r["backend"] != "math" and r["seq"] >= 512:
            f = roof_fraction(r, gpu.ceilings)
            if f:
                k = (r["seq"], r["head_dim"])
                best[k] = max(best.get(k, 0.0), f)
    if best:
        (s, d), f = min(best.items(), key=lambda kv: kv[1])
        top = max(best.values())
        out["attention"] = Attainable(
            f,
            TABLE["attention"].of,
            f"the fastest fused SDPA backend, causal fwd+bwd bf16: {f:.0%} at S {s} D {d}, up to {top:.0%} at "
            f"longer sequences ({where})",
            "measured",
        )
    return out


TABLE.update(_measured_table())
