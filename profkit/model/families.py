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

from dataclasses import dataclass

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
