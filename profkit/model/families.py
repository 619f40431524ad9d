"""Kernel families: who wrote a kernel, so what the user can change about it.

A family is recognised from the kernel's name (the demangled full name where the report has
one, else the short name) and, for unmangled names, the call that launched it. Each family
says whether its code is a library's (the user cannot edit it), and the levers the user holds
for it: a library kernel's shape, dtype, layout, backend, fusion with its neighbours, graphs;
a user kernel's own code. Warp-specialised kernels (Hopper/Blackwell wgmma/tcgen05 GEMM and
attention) run one CTA per SM by design: their theoretical occupancy names no bottleneck.

Pure Python. The recognition from names is profkit.core.families (the store fills
`launch_name.family` from it at ingest); the classifier and advise read the family from the
`kernels` view.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from profkit.core.families import LAB_CUDA, LAB_TRITON, TRITON_CALLS, explain, family_of, is_bare, warp_specialised  # noqa: F401

# levers, named once (the next steps quote them)
SHAPE = "the problem shape (multiples of 64/128 in M, N, K; fewer, larger calls)"
DTYPE = "the dtype (bf16/fp16, fp8 where accuracy allows)"
LAYOUT = "layout and alignment (contiguous, 16-byte aligned operands)"
BATCH = "a larger batch per call"
FUSE = "fusing it with its neighbours (torch.compile)"
COMPILE = "torch.compile"
GRAPHS = "CUDA graphs (torch.compile mode='reduce-overhead')"
SDPA = "the attention backend (torch.nn.attention.sdpa_kernel: FLASH_ATTENTION, CUDNN_ATTENTION, EFFICIENT_ATTENTION)"
HEAD = "head size and sequence length (multiples of 64; packed or padded batches)"
CHANNELS_LAST = "channels_last memory format for convolutions"
CUDNN_BENCH = "torch.backends.cudnn.benchmark = True (lets cuDNN pick its fastest algorithm)"
CODE = "the kernel's code (block sizes, num_warps, num_stages, memory access pattern)"
TRITON_CODE = "the kernel's code (BLOCK sizes, num_warps, num_stages, masks, tl.dot shapes)"
INDUCTOR = (
    "Inductor's choices (torch._inductor.config: max_autotune, coordinate_descent_tuning) or the "
    "Python that produced it"
)
OVERLAP = "overlap with compute (bucket sizes, DDP/FSDP prefetch), fewer or larger collectives"
NCCL_ENV = "NCCL settings (NCCL_ALGO, NCCL_PROTO, channels) and the interconnect"
COPY = "fewer copies (pinned host memory, non_blocking=True, no .to()/.cpu() in the loop)"


@dataclass(frozen=True)
class Family:
    key: str
    title: str
    is_library: bool | None  # None: not known (an unrecognised name)
    levers: tuple[str, ...]
    # attainable-efficiency class (profkit.model.attainable): what fraction of which roof
    # the best known kernel of this family reaches
    attain: str


FAMILIES: dict[str, Family] = {
    f.key: f
    for f in (
        Family("cublas", "cuBLAS/cuBLASLt GEMM", True, (SHAPE, DTYPE, LAYOUT, BATCH, FUSE, GRAPHS), "gemm"),
        Family(
            "cutlass",
            "CUTLASS GEMM",
            True,
            (SHAPE, DTYPE, LAYOUT, "its template parameters (tile, stages, schedule) where you build it", GRAPHS),
            "gemm",
        ),
        Family(
            "grouped_gemm",
            "grouped GEMM (mixture of experts)",
            True,
            ("the number of tokens per expert (batch)", DTYPE, "the kernel's tuned configs for this shape", GRAPHS),
            "gemm",
        ),
        Family("rocblas", "rocBLAS/hipBLASLt GEMM (ROCm)", True, (SHAPE, DTYPE, LAYOUT, BATCH, FUSE, GRAPHS), "gemm"),
        Family(
            "cudnn_conv",
            "cuDNN convolution",
            True,
            (CHANNELS_LAST, DTYPE, CUDNN_BENCH, SHAPE, BATCH, COMPILE, GRAPHS),
            "conv",
        ),
        Family("cudnn_attention", "cuDNN attention (SDPA)", True, (SDPA, HEAD, DTYPE, BATCH, GRAPHS), "attention"),
        Family("cudnn", "cuDNN (normalisation, layout, other)", True, (CHANNELS_LAST, DTYPE, FUSE, GRAPHS), "copy"),
        Family("flash_attention", "FlashAttention / FlashInfer", True, (SDPA, HEAD, DTYPE, BATCH, GRAPHS), "attention"),
        Family(
            "efficient_attention",
            "memory-efficient attention (xFormers/CUTLASS fmha)",
            True,
            (SDPA, HEAD, DTYPE, BATCH, GRAPHS),
            "attention",
        ),
        Family("nccl", "NCCL collective", True, (OVERLAP, NCCL_ENV, "bf16 gradients (half the bytes)"), "nccl"),
        Family(
            "collective",
            "custom all-reduce (symmetric memory)",
            True,
            (OVERLAP, "the all-reduce backend (NCCL, symmetric memory) for this message size"),
            "nccl",
        ),
        Family("inductor_pointwise", "Inductor Triton, pointwise", False, (INDUCTOR, FUSE, GRAPHS), "copy"),
        Family("inductor_reduction", "Inductor Triton, reduction", False, (INDUCTOR, FUSE, GRAPHS), "reduction"),
        Family(
            "inductor_persistent", "Inductor Triton, persistent reduction", False, (INDUCTOR, FUSE, GRAPHS), "reduction"
        ),
        Family(
            "inductor_template",
            "Inductor Triton, template (GEMM/conv)",
            False,
            (INDUCTOR, SHAPE, DTYPE, "max_autotune to compare with cuBLAS"),
            "gemm",
        ),
        Family("inductor", "Inductor Triton", False, (INDUCTOR, FUSE, GRAPHS), "copy"),
        Family("triton_user", "Triton (user kernel)", False, (TRITON_CODE, "profkit tune", GRAPHS), "code"),
        Family("lab", "profkit lab kernel", False, (TRITON_CODE, "profkit tune", "profkit bench"), "code"),
        Family(
            "serving_ops",
            "LLM-serving kernel (norm, activation, rotary, KV cache, quantisation)",
            True,
            (FUSE, "the serving engine's fused variants (fused add+norm+quant)", GRAPHS),
            "copy",
        ),
        Family("aten_elementwise", "ATen elementwise", True, (FUSE, DTYPE, LAYOUT, GRAPHS), "copy"),
        Family("aten_reduce", "ATen reduction", True, (FUSE, LAYOUT, DTYPE, GRAPHS), "reduction"),
        Family(
            "aten_copy",
            "ATen copy/cat/index",
            True,
            ("fewer copies (views instead of .contiguous(), preallocated outputs instead of cat)", FUSE, GRAPHS),
            "copy",
        ),
        Family("aten_other", "ATen native kernel", True, (FUSE, DTYPE, SHAPE, GRAPHS), "copy"),
        Family("cub", "CUB/Thrust", True, ("fewer sorts/scans (sort once, reuse)", SHAPE, GRAPHS), "copy"),
        Family(
            "cufft", "cuFFT", True, ("FFT sizes with small prime factors (powers of 2, 3, 5, 7)", BATCH, DTYPE), "copy"
        ),
        Family("curand", "cuRAND / random", True, ("fewer random draws (generate once, reuse)", FUSE), "copy"),
        Family("fbgemm", "FBGEMM GPU", True, (SHAPE, DTYPE, BATCH), "copy"),
        Family(
            "cuda_graph",
            "CUDA graph replay (its kernels untraced)",
            True,
            ("capture with nsys --cuda-graph-trace=node to see the graph's kernels", FUSE, BATCH),
            "code",
        ),
        Family("memcpy", "memory copy", True, (COPY,), "copy"),
        Family(
            "memset", "memory set", True, ("fewer zero-fills (torch.empty where the values are overwritten)",), "copy"
        ),
        Family(
            "other",
            "not recognised",
            None,
            (CODE, "if it is a library's: its shape, dtype and the call", GRAPHS),
            "code",
        ),
    )
}


def get(key: str | None) -> Family:
    return FAMILIES.get(key or "other", FAMILIES["other"])


def levers(key: str | None, limit: int = 3) -> str:
    """The first `limit` levers of a family, as one phrase for a next step."""
    return "; ".join(get(key).levers[:limit])


# What bounds a family's kernels where neither counters nor an operator's shapes say (issue 52):
# a guess from who wrote the kernel, never a measurement. The rules were checked against the
# counters of our own H100/H200 captures (benchmarks/results/shape_labels.md): memory-bound
# families agree with their counters; GEMM and attention kernels are tensor-core bound only when
# they run long: shorter ones reached under 60 % of the tensor roof.
# under these, the measured kernels were latency-bound (under 60 % of every roof): cuBLAS/CUTLASS
# GEMMs at 20 us and more reached the tensor roof, cuDNN convolutions and attention up to 47 us did not
GEMM_LONG_NS = 20_000
CONV_LONG_NS = 50_000
_MEMORY = {
    "inductor_pointwise": "Inductor pointwise (triton_poi_*): elementwise, memory-bound by construction",
    "inductor_reduction": "Inductor reduction (triton_red_*): each input read once, memory-bound by construction",
    "inductor_persistent": "Inductor persistent reduction (triton_per_*): each input read once, memory-bound by "
    "construction",
    "inductor": "Inductor fused kernel (triton_..._fused): a pointwise/reduction fusion, memory-bound by construction",
    "aten_elementwise": "ATen elementwise (and multi_tensor_apply optimizer steps): a few FLOPs per element, "
    "memory-bound by construction",
    "aten_copy": "ATen copy/cat/index: moves bytes, no arithmetic",
    "aten_reduce": "ATen reduction: each input read once, memory-bound by construction",
    "aten_other": "ATen native kernel (norms, softmax, pooling, embedding backward): a few FLOPs per byte",
    "cudnn": "cuDNN normalisation/layout kernel: a few FLOPs per byte",
    "serving_ops": "LLM-serving kernel (norm, activation, rotary, KV-cache write, quantisation): a few FLOPs "
    "per byte, memory-bound by construction",
    "fbgemm": "FBGEMM embedding kernel (split_embedding_*, permute, bucketize): row gathers, memory-bound by "
    "construction",
}
_TENSOR = ("cublas", "cutlass", "cudnn_conv", "inductor_template", "grouped_gemm", "rocblas")
_ATTENTION = ("flash_attention", "cudnn_attention", "efficient_attention")
_SPLITK = re.compile(r"splitKreduce|ReduceSplitK|reduction::\w*Reduce|\bfinalize\w*Kernel")
_GEMV = re.compile(r"gemv|\bwvSplitK|\bLLGemm1", re.I)
# FP32 SIMT kernels (no tensor cores): cuBLAS sgemm/dgemm, CUTLASS simt, cuDNN's scudnn and float engines
_SIMT = re.compile(r"sgemm|dgemm|_simt_|scudnn|(dgrad|wgrad)\w*engine<float|implicit_convolve_sgemm")
_DECODE = re.compile(r"paged_attention|BatchDecode|decode_attention|flash_decoding|\bdecode\w*kernel", re.I)
# the architecture a library kernel was built for, from its name (cutlass_75_*, sm80_*, volta_*)
_ARCH = re.compile(r"cutlass_(\d{2,3})_|\bsm_?(\d{2,3})[a_]|\b(volta|turing|ampere)_")
_ARCH_CC = {"volta": 70, "turing": 75, "ampere": 80}
# the mma.sync shapes of Volta to Ampere tensor-core kernels (s1688, h16816, wmma): not wgmma
# (CUTLASS 2.x Multistage mainloops are Ampere's cp.async + mma.sync)
_MMA_SYNC = re.compile(r"[shi](884|1688|16816|8816)(gemm|fprop|dgrad|wgrad|conv|_)|_wmma_|161616|\w*Multistage<")


def _arch(name: str) -> int | None:
    m = _ARCH.search(name[:SCAN_HEAD])
    if not m:
        return None
    return int(m.group(1) or m.group(2)) if (m.group(1) or m.group(2)) else _ARCH_CC[m.group(3)]


SCAN_HEAD = 4096  # library markers lie near the start of a name

# a GEMM tile in the name: nvjet's tst_MxN, TensorRT-LLM's bmm _tMxNxK, Tensile's MT MxNxK
_TILE = re.compile(r"_tst_(\d+)x(\d+)_|_t(\d+)x(\d+)x\d+|_MT(\d+)x(\d+)x\d+")
SKINNY = 16  # a tile side this narrow is picked for a handful of tokens (decode)


def _skinny(name: str) -> int | None:
    """The narrow side of a GEMM's tile where one side is at most SKINNY (None: not skinny, or
    no tile in the name)."""
    m = _TILE.search(name)
    if not m:
        return None
    sides = [int(x) for x in m.groups() if x is not None]
    return min(sides) if min(sides) <= SKINNY else None


@lru_cache(maxsize=4096)
def _traits(key: str | None, name: str) -> tuple:
    """What a kernel's name says of it, read once per name (a timeline repeats its names):
    (split-K/finalize reduction, gemv, decode attention, FP32 SIMT, skinny tile side, arch,
    mma.sync)."""
    n = name[:SCAN_HEAD]
    return (
        bool(_SPLITK.search(n)),
        bool(_GEMV.search(n)),
        key in _ATTENTION and bool(_DECODE.search(n)),
        bool(_SIMT.search(n)),
        _skinny(n),
        _arch(n),
        bool(_MMA_SYNC.search(n)),
    )


def bound(
    key: str | None, name: str | None, duration_ns: float | None, cc: str | None = None
) -> tuple[str | None, str]:
    """(label, why) a kernel's family gives where nothing was measured: its name says who wrote
    it, so what its arithmetic intensity is by construction; its duration (the timeline's) says
    whether a GEMM ran long enough to near its roof. None: the family gives no honest label."""
    fam = get(key)
    n = name or ""
    if key in ("nccl", "collective"):
        return "communication", f"{fam.title}: communication, its time set by the other ranks and the links"
    if key == "fbgemm" and "gemm" in n[:SCAN_HEAD].replace("fbgemm", ""):
        key = "cutlass"  # FBGEMM's own GEMMs (f8f8bf16, ...) are GEMMs, not embedding gathers
    if key in _MEMORY:
        return "dram", _MEMORY[key]
    if key not in _TENSOR and key not in _ATTENTION:
        return None, f"{fam.title}: the family says nothing of what bounds it"
    splitk, gemv, decode, simt, side, arch, mma_sync = _traits(key, n)
    if splitk:
        return (
            "dram",
            f"{fam.title}, a reduction of partial results (split-K, MoE finalize): memory-bound by construction",
        )
    if gemv:
        return "dram", f"{fam.title}, matrix-vector (gemv): each weight read once for 2 FLOPs, memory-bound"
    if decode:
        return "dram", f"{fam.title}, decode: one query row per sequence reads the whole KV cache, memory-bound"
    kind = "FP32 SIMT (no tensor cores)" if simt else "tensor-core"
    what = "attention" if key in _ATTENTION else "convolution" if key == "cudnn_conv" else "GEMM"
    dur = duration_ns or 0
    long_ns = CONV_LONG_NS if key in _ATTENTION or key == "cudnn_conv" else GEMM_LONG_NS
    if dur < long_ns:
        return "latency", (
            f"{fam.title}: a {kind} {what} of {dur / 1e3:.1f} us, under {long_ns / 1e3:.0f} us: such "
            "kernels measured under 60 % of their roof (too few tiles to fill the GPU)"
        )
    if side is not None:
        return "dram", (
            f"{fam.title}: a GEMM of {dur / 1e3:,.0f} us over tiles {side} wide (a decode-sized batch): about "
            f"2 x {side} FLOPs per weight element read, far below every tensor ridge: memory-bound"
        )
    gpu_cc = _cc(cc)
    old = arch is not None and arch < 90 or mma_sync
    if kind == "tensor-core" and old and (gpu_cc or 0) >= 90:
        built = f"built for sm{arch}" if arch is not None else "of mma.sync tiles"
        return "latency", (
            f"{fam.title}: a tensor-core {what} {built} on a CC {cc} GPU: it cannot issue wgmma, and such "
            "kernels measured mostly under 60 % of the tensor roof"
        )
    label = "compute" if kind.startswith("FP32") else "tensor_core"
    pipes = "FP32 pipes" if label == "compute" else "tensor cores"
    return label, f"{fam.title}: a {kind} {what} of {dur / 1e3:,.0f} us: bound by its {pipes}"


def _cc(cc: str | None) -> int | None:
    try:
        major, _, minor = str(cc).partition(".")
        return int(major) * 10 + int(minor or 0)
    except ValueError:
        return None
