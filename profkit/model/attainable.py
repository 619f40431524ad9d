"""What fraction of its roof the best known kernel of a family reaches: the attainable
efficiency that turns headroom to the roof (`roof_speedup`) into a gain one can expect
(`predicted_speedup`).

Every figure below is an ESTIMATE, TO BE CALIBRATED on the GPU machine (issue 50 item 3:
cuBLAS GEMM by shape class, attention by sequence length and head size, copy-bound
elementwise and reductions, NCCL bus bandwidth). None is a measurement of profkit's: each row
names the public figure it starts from. Until calibrated, a prediction bounded by this table
says so in its `how`.
"""

from __future__ import annotations

from dataclasses import dataclass

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
        "TFLOP/s, 76 % (H100, 2026-12-05, tests/data/program-pairs/pair-compile-before-eager)",
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
        "2026-12-05, tests/data/program-pairs/pair-sdpa-after-cudnn)",
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
