"""Known GPUs: datasheet peaks by name and compute capability, for reports that carry none.

profkit takes peaks from the report first (``*.peak_sustained`` x the clocks a launch ran at,
then the device attributes a report carries: memory clock and bus width, SM count and clock;
profkit.model.perf). This table is the last resort, for formats that carry neither: a details CSV
of a few metrics names only the compute capability, and the GPU's name only where the user
gives it (``profkit ingest --gpu NAME``) or another report of the run does. Every row names its
source; the evidence of a label says which row and ceiling it used. Values are the datasheet's
at boost clock, dense (no structured sparsity); a ceiling a source does not give is absent,
never guessed. Tensor rates are those with FP32 accumulate (what ncu's
``sm__ops_path_tensor_src_*_dst_fp32`` counts): GeForce cards run them at half the FP16-accumulate
rate their marketing quotes.

Add a GPU: one row, its source, the same units (byte/s, FLOP/s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

T = 1e12
G = 1e9


@dataclass(frozen=True)
class Gpu:
    name: str  # as CUDA reports it (device__attribute_display_name, nvidia-smi)
    cc: str  # compute capability, "8.6"
    sms: int  # 0: not published
    ceilings: dict = field(default_factory=dict)  # model key (dram, fp32, bf16_tensor, ...) -> byte/s or FLOP/s
    source: str = ""
    aliases: tuple[str, ...] = ()  # other spellings of the name seen in reports

    def describe(self) -> str:
        return f"{self.name} (CC {self.cc}, {self.source})"


_V100 = "NVIDIA V100 datasheet (images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf)"
_T4 = "NVIDIA T4 datasheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf)"
_TURING = "NVIDIA Turing architecture whitepaper, Appendix A, reference clocks (images.nvidia.com/aem-dam/en-zz/Solutions/design-visualization/technologies/turing-architecture/NVIDIA-Turing-Architecture-Whitepaper.pdf)"
_A100 = "NVIDIA A100 datasheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"
_A10 = "NVIDIA A10 datasheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/datasheet-new/nvidia-a10-datasheet.pdf)"
_A40 = "NVIDIA A40 datasheet (images.nvidia.com/content/Solutions/data-center/a40/nvidia-a40-datasheet.pdf)"
_GA102 = "NVIDIA Ampere GA102 whitepaper, Appendix A (nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf)"
_ADA = "NVIDIA Ada GPU architecture whitepaper, Appendix A (images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf)"
_L4 = "NVIDIA L4 datasheet (resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet); tensor: sparse / 2"
_L40S = "NVIDIA L40S datasheet (resources.nvidia.com/en-us-l40s/l40s-datasheet-28413); tensor: sparse / 2"
_H100 = "NVIDIA H100 datasheet (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet); tensor: sparse / 2"
_H200 = (
    "NVIDIA H200 datasheet (nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446); tensor: sparse / 2"
)
_B200 = (
    "NVIDIA HGX B200 datasheet, per GPU (resources.nvidia.com/en-us-dgx-systems/dgx-b200-datasheet); tensor: sparse / 2"
)

_MI300X = (
    "AMD Instinct MI300X data sheet (amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/"
    "amd-instinct-mi300x-data-sheet.pdf): dense matrix rates (no sparsity), FP32/FP64 vector; 304 CUs"
)
_MI200 = (
    "AMD Instinct MI200 series data sheet (amd.com/system/files/documents/amd-instinct-mi200-datasheet.pdf): "
    "per package of two GCDs, and ROCm shows each GCD as one device, so a row is half a package (the MI210 "
    "is one GCD of the MI250's rates); dense matrix rates, FP32/FP64 vector"
)


def _ampere_dc(dram: float) -> dict:
    return {
        "dram": dram,
        "fp32": 19.5 * T,
        "fp64": 9.7 * T,
        "tf32_tensor": 156 * T,
        "bf16_tensor": 312 * T,
        "fp16_tensor": 312 * T,
    }


def _hopper(dram: float, fp32: float, bf16: float) -> dict:
    return {
        "dram": dram,
        "fp32": fp32,
        "fp64": fp32 / 2,
        "tf32_tensor": bf16 / 2,
        "bf16_tensor": bf16,
        "fp16_tensor": bf16,
        "fp8_tensor": bf16 * 2,
    }


KNOWN: tuple[Gpu, ...] = (
    Gpu(
        "Tesla V100-SXM2-16GB",
        "7.0",
        80,
        {"dram": 900 * G, "fp32": 15.7 * T, "fp64": 7.8 * T, "fp16_tensor": 125 * T},
        _V100,
        ("Tesla V100-SXM2-32GB", "Tesla V100-SXM2", "V100-SXM2"),
    ),
    Gpu(
        "Tesla V100-PCIE-16GB",
        "7.0",
        80,
        {"dram": 900 * G, "fp32": 14 * T, "fp64": 7 * T, "fp16_tensor": 112 * T},
        _V100,
        ("Tesla V100-PCIE-32GB", "Tesla V100-PCIE", "V100-PCIE"),
    ),
    Gpu("Tesla T4", "7.5", 40, {"dram": 320 * G, "fp32": 8.1 * T, "fp16_tensor": 65 * T}, _T4, ("T4",)),
    Gpu("NVIDIA GeForce RTX 2080 Ti", "7.5", 68, {"dram": 616 * G, "fp32": 13.4 * T, "fp16_tensor": 53.8 * T}, _TURING),
    Gpu(
        "NVIDIA GeForce GTX 1660 SUPER",
        "7.5",
        22,
        {"dram": 336 * G, "fp32": 5.03 * T},
        "NVIDIA GTX 1660 SUPER specifications: 1408 CUDA cores x 2 x 1785 MHz boost; 14 Gbps x 192-bit "
        "(nvidia.com/en-us/geforce/graphics-cards/gtx-1660-super/)",
    ),
    Gpu("NVIDIA A100-SXM4-40GB", "8.0", 108, _ampere_dc(1555 * G), _A100),
    Gpu("NVIDIA A100-SXM4-80GB", "8.0", 108, _ampere_dc(2039 * G), _A100),
    Gpu("NVIDIA A100-PCIE-40GB", "8.0", 108, _ampere_dc(1555 * G), _A100),
    Gpu("NVIDIA A100 80GB PCIe", "8.0", 108, _ampere_dc(1935 * G), _A100),
    Gpu(
        "NVIDIA A10",
        "8.6",
        72,
        {"dram": 600 * G, "fp32": 31.2 * T, "tf32_tensor": 62.5 * T, "bf16_tensor": 125 * T, "fp16_tensor": 125 * T},
        _A10,
    ),
    # AWS's variant of the A10: no NVIDIA datasheet
    Gpu(
        "NVIDIA A10G",
        "8.6",
        0,
        {"dram": 600 * G, "fp32": 31.52 * T},
        "Baseten, 'NVIDIA A10 vs A10G for ML model inference', spec table: 600 GB/s, 31.52 TFLOP/s FP32 "
        "(baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/); its tensor rate is not given with "
        "FP32 accumulate",
    ),
    Gpu(
        "NVIDIA A40",
        "8.6",
        84,
        {
            "dram": 696 * G,
            "fp32": 37.4 * T,
            "tf32_tensor": 74.8 * T,
            "bf16_tensor": 149.7 * T,
            "fp16_tensor": 149.7 * T,
        },
        _A40,
    ),
    Gpu(
        "NVIDIA GeForce RTX 3070",
        "8.6",
        46,
        {"dram": 448 * G, "fp32": 20.3 * T, "tf32_tensor": 20.3 * T, "bf16_tensor": 40.6 * T, "fp16_tensor": 40.6 * T},
        _GA102,
    ),
    Gpu(
        "NVIDIA GeForce RTX 3080",
        "8.6",
        68,
        {"dram": 760 * G, "fp32": 29.8 * T, "tf32_tensor": 29.8 * T, "bf16_tensor": 59.5 * T, "fp16_tensor": 59.5 * T},
        _GA102,
    ),
    Gpu(
        "NVIDIA GeForce RTX 3090",
        "8.6",
        82,
        {"dram": 936 * G, "fp32": 35.6 * T, "tf32_tensor": 35.6 * T, "bf16_tensor": 71 * T, "fp16_tensor": 71 * T},
        _GA102,
    ),
    Gpu(
        "NVIDIA GeForce RTX 4090",
        "8.9",
        128,
        {
            "dram": 1008 * G,
            "fp32": 82.6 * T,
            "tf32_tensor": 82.6 * T,
            "bf16_tensor": 165.2 * T,
            "fp16_tensor": 165.2 * T,
            "fp8_tensor": 330.3 * T,
        },
        _ADA,
    ),
    Gpu(
        "NVIDIA L4",
        "8.9",
        58,
        {
            "dram": 300 * G,
            "fp32": 30.3 * T,
            "tf32_tensor": 60 * T,
            "bf16_tensor": 121 * T,
            "fp16_tensor": 121 * T,
            "fp8_tensor": 242.5 * T,
        },
        _L4,
    ),
    Gpu(
        "NVIDIA L40S",
        "8.9",
        142,
        {
            "dram": 864 * G,
            "fp32": 91.6 * T,
            "tf32_tensor": 183 * T,
            "bf16_tensor": 366 * T,
            "fp16_tensor": 366 * T,
            "fp8_tensor": 733 * T,
        },
        _L40S,
    ),
    Gpu("NVIDIA H100 80GB HBM3", "9.0", 132, _hopper(3.35e12, 67 * T, 989.4 * T), _H100, ("NVIDIA H100 SXM5 80GB",)),
    Gpu("NVIDIA H100 PCIe", "9.0", 114, _hopper(2.0e12, 51.2 * T, 756 * T), _H100),
    Gpu("NVIDIA H200", "9.0", 132, _hopper(4.8e12, 67 * T, 989.4 * T), _H200),
    Gpu(
        "NVIDIA B200",
        "10.0",
        148,
        {
            "dram": 8e12,
            "fp64": 40 * T,
            "tf32_tensor": 1.1e15,
            "bf16_tensor": 2.25e15,
            "fp16_tensor": 2.25e15,
            "fp8_tensor": 4.5e15,
        },
        _B200,
    ),
    Gpu(
        "AMD Instinct MI300X",
        "gfx942",
        304,
        {
            "dram": 5.3e12,
            "fp32": 163.4 * T,
            "fp64": 81.7 * T,
            "tf32_tensor": 653.7 * T,
            "bf16_tensor": 1307.4 * T,
            "fp16_tensor": 1307.4 * T,
            "fp8_tensor": 2614.9 * T,
        },
        _MI300X,
        ("MI300X",),
    ),
    # one GCD: 110 of the MI250X's 220 CUs, half its 3.2768 TB/s, 383 TFLOP/s bf16, 47.9 FP32/FP64
    Gpu(
        "AMD Instinct MI250X (one GCD)",
        "gfx90a",
        110,
        {"dram": 1638.4 * G, "fp32": 23.95 * T, "fp64": 23.95 * T, "bf16_tensor": 191.5 * T, "fp16_tensor": 191.5 * T},
        _MI200,
        ("AMD Instinct MI250X", "MI250X"),
    ),
    # one GCD: 104 of the MI250's 208 CUs, half its 3.2768 TB/s, 362.1 TFLOP/s bf16, 45.3 FP32/FP64
    Gpu(
        "AMD Instinct MI250 (one GCD)",
        "gfx90a",
        104,
        {
            "dram": 1638.4 * G,
            "fp32": 22.65 * T,
            "fp64": 22.65 * T,
            "bf16_tensor": 181.05 * T,
            "fp16_tensor": 181.05 * T,
        },
        _MI200,
        ("AMD Instinct MI250", "MI250", "AMD Instinct MI210", "MI210"),
    ),
    Gpu(
        "NVIDIA GeForce RTX 5090",
        "12.0",
        170,
        {"dram": 1792 * G, "fp32": 104.8 * T},
        "NVIDIA RTX 5090 specifications: 21760 CUDA cores x 2 x 2.41 GHz boost; 28 Gbps x 512-bit "
        "(nvidia.com/en-us/geforce/graphics-cards/50-series/rtx-5090/); no tensor rate with FP32 accumulate published",
    ),
)


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", name.lower().replace("nvidia", "").replace("geforce", "")).strip()


def by_name(name: str | None) -> Gpu | None:
    """The row for a GPU name as CUDA or a user spells it ('NVIDIA A10G', 'a10g', 'RTX 3070')."""
    if not name:
        return None
    k = _key(name)
    for g in KNOWN:
        if k in {_key(n) for n in (g.name,) + g.aliases}:
            return g
    return None


def by_cc(cc: str | None) -> list[Gpu]:
    """Every known GPU of a compute capability ('8.6'): a CSV that names no GPU may be any of them."""
    return [g for g in KNOWN if cc and g.cc == str(cc).strip()]


# HIP reports an AMD GPU's gfx target as a "compute capability" (gfx90a as 9.0, gfx942 as 9.4):
# the same numbers as NVIDIA's, so an AMD name is matched among the AMD rows only
_AMD = re.compile(r"\bAMD\b|Radeon|Instinct|\bgfx\d", re.I)
_GFX = {"9.0": "gfx90a", "9.4": "gfx942"}


def candidates(name: str | None, cc: str | None, sms: int | None = None) -> tuple[list[Gpu], str]:
    """(rows, how they were found) for a run: the GPU it names, else every known GPU of its
    compute capability (the table is not every GPU of that capability: the caller says so), those
    with the run's SM count first where it has one."""
    g = by_name(name)
    if g is not None:
        return [g], f"by name {name!r}"
    if name and _AMD.search(name):
        cc = _GFX.get(str(cc).strip(), cc) if cc else None
        rows = [r for r in by_cc(cc) if r.cc.startswith("gfx")]
    else:
        rows = [r for r in by_cc(cc) if not r.cc.startswith("gfx")]
    if rows and sms:
        rows = sorted(rows, key=lambda r: r.sms != sms)
    if rows:
        return rows, (
            f"by compute capability {cc} ({'GPU ' + repr(name) + ' not in the table; ' if name else ''}"
            f"the table's {cc} GPUs{', ' + str(sms) + ' SMs first' if sms else ''})"
        )
    return [], (f"GPU {name!r} not in the table" if name else "no GPU name") + (
        f", no known GPU of compute capability {cc}" if cc else ", no compute capability"
    )


# FP32 lanes per SM by compute capability (CUDA C++ Programming Guide, "Arithmetic
# Instructions": 32-bit floating-point add, multiply, multiply-add results per clock per SM).
# With a report's SM count and clock this gives the FP32 roof where the report has no peak.
FP32_LANES = {
    "7.0": 64,
    "7.2": 64,
    "7.5": 64,
    "8.0": 64,
    "8.6": 128,
    "8.7": 128,
    "8.9": 128,
    "9.0": 128,
    "10.0": 128,
    "10.3": 128,
    "12.0": 128,
    "12.1": 128,
}
FP32_LANES_SOURCE = "CUDA C++ Programming Guide, Arithmetic Instructions (32-bit FP add/mul/fma per clock per SM)"
