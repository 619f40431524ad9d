"""Kernel families by name: who wrote a kernel, from its (demangled or short) name and, for an
unmangled name, the call that launched it. The lowest layer, so that the store can keep each
name's family as it inserts the name; what a family means for its user (library or not, its
levers) is profkit.model.families.
"""

from __future__ import annotations

import re

# profkit's lab kernels: the @triton.jit functions of kernels/*.py and the CUDA kernels of
# kernels/cuda/*.cu (tests/test_families.py checks this list against those files)
LAB_TRITON = frozenset(
    """
_add_rmsnorm_fwd _fp8_gemm_kernel _fp8_gemm_splitk _gated_mlp_kernel _matmul_kernel _matmul_splitk
_matmul_tma_persistent _rmsnorm_bwd _rmsnorm_bwd_fused _rmsnorm_bwd_v3 _rmsnorm_fwd _rmsnorm_linear_kernel
_rmsnorm_rope_fwd _rope_fwd _softmax_l2hold _softmax_online _softmax_online_persistent _softmax_rowgroup
_softmax_single _softmax_split_apply _softmax_split_partials _splitk_reduce _swiglu_bwd _swiglu_fwd _dw_reduce
_sk_finish _fp8_gemm_sktail _fp8_gemm_pchunk _fp8_gemm_head _streamk_tail
""".split()
)
LAB_CUDA = frozenset(
    "rmsnorm_fwd_regs rmsnorm_fwd_loop swiglu_fwd rope_fwd fp8_gemm_ws where_probe softmax_cluster "
    "sgemm_naive sgemm_coalesced sgemm_smem sgemm_blocktile_1d sgemm_blocktile_2d sgemm_vectorized sgemm_warptile "
    "occupancy_limited_copy".split()
)

_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# the calls Triton launches through (the driver API); PyTorch's own kernels go through the runtime
TRITON_CALLS = ("cuLaunchKernel", "cuLaunchKernelEx")

# (family, pattern over the full name, reason); first match wins; order matters where names overlap
_RULES: tuple[tuple[str, re.Pattern, str], ...] = tuple(
    (f, re.compile(p), why)
    for f, p, why in (
        (
            "cuda_graph",
            r"^CUDA graph \d+",
            "a CUDA graph replay (nsys traced the graph whole: --cuda-graph-trace=node shows its kernels)",
        ),
        ("memcpy", r"^(\[?CUDA )?[Mm]emcpy|^cudaMemcpy", "a memory copy"),
        ("memset", r"^(\[?CUDA )?[Mm]emset|^cudaMemset", "a memory set"),
        (
            "nccl",
            r"\bnccl[A-Z]?\w*Kernel|^ncclDevKernel|^ncclKernel|\bnccl::",
            "an NCCL kernel (ncclDevKernel*/ncclKernel*)",
        ),
        (
            "collective",
            r"multimem_all_reduce|one_shot_all_reduce|two_shot_all_reduce|cross_device_reduce|"
            r"custom_all_reduce|allreduce_fusion_kernel|\blamport\w*all_?reduce",
            "a custom all-reduce kernel (symmetric memory, vLLM/TensorRT-LLM custom all-reduce)",
        ),
        ("inductor_pointwise", r"^triton_poi_", "Inductor's prefix triton_poi_ (pointwise)"),
        ("inductor_reduction", r"^triton_red_", "Inductor's prefix triton_red_ (reduction)"),
        ("inductor_persistent", r"^triton_per_", "Inductor's prefix triton_per_ (persistent reduction)"),
        ("inductor_template", r"^triton_(tem|mm|bmm)_", "Inductor's prefix triton_tem_ (template)"),
        ("inductor", r"^triton_\w*fused|^triton__\d", "an Inductor kernel name (triton_..._fused)"),
        (
            "cudnn_attention",
            r"cudnn_generated_fort_native_sdpa|cudnn\w*_sdpa|cudnn\w*flash_(fprop|bprop)",
            "cuDNN's generated SDPA kernel (cudnn_generated_fort_native_sdpa_*)",
        ),
        (
            "flash_attention",
            r"(^|::|\s)(pytorch_)?flash::|flash_fwd|flash_bwd|flashinfer|FlashAttn|flash_attn",
            "a FlashAttention/FlashInfer kernel (flash_fwd*, flash::, pytorch_flash::)",
        ),
        (
            "efficient_attention",
            r"fmha|Fmha\w*(Kernel|Fwd|Bwd)|mem_efficient|efficient_attention|attention_kernel_backward|AttentionKernel",
            "a memory-efficient attention kernel (fmha*, mem_efficient)",
        ),
        (
            "cudnn_conv",
            r"implicit_gemm|implicit_convolve|\bsm\d+_\w*conv|conv\w*_sm\d+|xmma_(fprop|dgrad|wgrad)|"
            r"scudnn|cudnn_(infer|train)|winograd|wgrad_alg\d|dgrad_(alg|engine)|dgrad2d|fft2d_|"
            r"cask_cudnn|cudnn::(detail::)?(convolve|implicit|dgrad|wgrad)|computeOffsetsKernel",
            "a cuDNN convolution kernel (implicit GEMM, winograd, xmma fprop/dgrad/wgrad, scudnn)",
        ),
        ("cudnn", r"\bcudnn|nchwToNhwc|nhwcToNchw", "a cuDNN kernel (namespace cudnn::)"),
        (
            "cublas",
            r"^nvjet_|\bnvjet_|\bsm\d+_xmma_gemm|_xmma_gemm|\b(ampere|volta|turing|maxwell|hopper|sm\d+)_[sdhz]?"
            r"(gemm|sgemm|hgemm|dgemm)|cublasLt|cublas|\bgemv|gemmk1_kernel|gemmSN_|splitKreduce_kernel|"
            r"\bscal_kernel|\bdot_kernel|\baxpy_kernel|\bKernel2?<cutlass_\d+|^cutlass_\d+_tensorop|"
            r"cutlass::Kernel2?<cutlass_\d+|epilogue::impl::globalKernel|gemmk\d|\bgemm_kernel\w*cublas|"
            r"\bsgemm_largek|\bgemv2[NT]_kernel",
            "a cuBLAS/cuBLASLt kernel (nvjet_*, *_xmma_gemm_*, *_sgemm_*, gemv, cuBLAS's CUTLASS builds)",
        ),
        (
            "grouped_gemm",
            r"^fused_moe_kernel|\bfused_moe\w*kernel|^bmm_\w*(E4m3|E2m1|Bfloat16|Fp16)\w*_t\d+x\d+|"
            r"\bMoeFCGemm|grouped_gemm|GroupedGemm",
            "a grouped (mixture-of-experts) GEMM kernel (vLLM fused_moe_kernel, TensorRT-LLM bmm_*, grouped_gemm)",
        ),
        ("cutlass", r"\bcutlass|cute::|cutlass3x_", "a CUTLASS kernel (cutlass::, cutlass3x_)"),
        (
            "rocblas",
            r"^Cijk_|\bCijk_|^rocblas_|\brocblas_\w*gemm|hipblaslt|\bgemm_xdl|ck::\w*[Gg]emm|"
            r"\bwvSplitK|\bkernel_gemm_xdl",
            "a ROCm GEMM kernel (rocBLAS/hipBLASLt Tensile Cijk_*, Composable Kernel gemm_xdl)",
        ),
        ("cufft", r"\bcufft|\bregular_fft|\bvector_fft|fft_?\w*kernel|\bdpRadix", "a cuFFT kernel"),
        (
            "curand",
            r"curand|distribution_elementwise|philox|random_from_to|normal_and_transform|uniform_and_transform",
            "a random-number kernel (cuRAND, ATen's distribution kernels)",
        ),
        (
            "cub",
            r"\bcub::|\bthrust::|at_cuda_detail::cub|DeviceRadixSort|DeviceScan|DeviceReduce|DeviceSelect|"
            r"DeviceSegmented|DeviceUnique|DeviceCompact|DeviceHistogram",
            "a CUB/Thrust kernel (cub::, thrust::)",
        ),
        (
            "fbgemm",
            r"fbgemm|^(void )?split_embedding_|permute_pooled_embs|bounds_check_indices",
            "an FBGEMM GPU kernel",
        ),
        (
            "serving_ops",
            r"rms_?norm\w*kernel|act_and_mul|silu_and_mul|gelu\w*_and_mul|rotary_embedding\w*kernel|"
            r"reshape_and_cache|store_kvcache|per_token\w*quant|scaled_fp8_quant|dynamic\w*quant\w*kernel",
            "an LLM-serving kernel (vLLM/SGLang/aiter norm, activation, rotary, KV-cache write, quantisation)",
        ),
        (
            "aten_copy",
            r"CatArrayBatchedCopy|\bindex\w*_kernel|indexSelect|index_elementwise|gather_kernel|"
            r"scatter_gather|direct_copy_kernel|copy_kernel|\bcopy_device|index_put|indexFuncLargeIndex|"
            r"\btake_kernel|\bput_kernel|masked_scatter",
            "an ATen copy/cat/index kernel (CatArrayBatchedCopy, index*, copy)",
        ),
        (
            "aten_reduce",
            r"at::native::\w*reduce_kernel|\breduce_kernel<|^reduce_kernel$|ReduceOp<",
            "ATen's reduce_kernel",
        ),
        (
            "aten_elementwise",
            r"at::native::\w*elementwise_kernel|vectorized_elementwise_kernel|unrolled_elementwise|"
            r"^elementwise_kernel|elementwise_kernel_with_index|multi_tensor_apply_kernel|"
            r"at::native::\w*(Functor|_kernel_cuda)",
            "ATen's elementwise kernel (vectorized/unrolled_elementwise_kernel)",
        ),
        (
            "aten_other",
            r"at::native::|\bat::|\bc10::|^cunn_|softmax_warp_(forward|backward)|layer_norm|"
            r"LayerNorm|GammaBeta|RowwiseMoments|nll_loss|max_pool|avg_pool|batch_norm|embedding_backward",
            "an ATen native kernel (at::native::)",
        ),
    )
)

# short names with no namespace, as torch.profiler and nsys's short names show ATen's kernels
_ATEN_SHORT = {
    "elementwise_kernel": "aten_elementwise",
    "vectorized_elementwise_kernel": "aten_elementwise",
    "unrolled_elementwise_kernel": "aten_elementwise",
    "reduce_kernel": "aten_reduce",
    "index_elementwise_kernel": "aten_copy",
}


# characters of a name the patterns search: every library marker lies well inside it (real names
# are under ~10 K), and a hostile name of megabytes costs one bounded search per pattern
SCAN = 1 << 16


def _strip(name: str) -> str:
    n = name.strip()
    if n.startswith("void "):
        n = n[5:]
    return n


def explain(name: str | None, api_name: str | None = None) -> tuple[str, str]:
    """(family key, why) of one kernel from its name and the call that launched it."""
    if not name:
        return "other", "no kernel name"
    n = _strip(name)
    head = n.split("(")[0].split("<")[0].strip()
    base = head.rsplit("::", 1)[-1]
    if head.startswith("profkit::") or (base in LAB_CUDA and head == base):
        return "lab", f"profkit's lab CUDA kernel {base} (kernels/cuda)"
    if _BARE.match(n) and n in LAB_TRITON:
        return "lab", f"profkit's lab Triton kernel {n} (kernels/)"
    if n in _ATEN_SHORT:
        return _ATEN_SHORT[n], f"ATen's {n} (short name)"
    scan = n[:SCAN]
    for fam, pat, why in _RULES:
        if pat.search(scan):
            return fam, why
    if _BARE.match(n):
        if api_name and api_name.split("_v")[0] in TRITON_CALLS:
            return "triton_user", (
                f"an unmangled name launched through {api_name}, as Triton launches its kernels (not an Inductor name)"
            )
        how = f"launched through {api_name}" if api_name else "no launch call recorded"
        return "other", (
            f'an unmangled name ({how}): a Triton or extern "C" CUDA kernel that is not a known library\'s'
        )
    return "other", "no known library, Triton, Inductor or lab name pattern matches"


def family_of(name: str | None, api_name: str | None = None) -> str:
    return explain(name, api_name)[0]


def is_bare(name: str | None) -> bool:
    """An unmangled identifier (Triton kernels and extern "C" CUDA kernels have such names)."""
    if not name:
        return False
    return bool(_BARE.match(name.strip()))


_WS = re.compile(
    r"^nvjet_|\bnvjet_|sm(90|100|101|103|120)a?_\w*(gmma|wgmma|tma|warpspecialized)|"
    r"warp_?specialized|WarpSpecialized|tcgen05|_sm(90|100)\w*(gmma|wgmma)|"
    r"cudnn_generated_fort_native_sdpa_sm(90|100)|flash\w*_sm(90|100)|Sm(90|100)\b|"
    r"FlashAttn\w*Sm(90|100)|cutlass3x_sm(90|100)|\bsm(90|100)_xmma_\w*(gmma|warpgroup)"
)


def warp_specialised(name: str | None) -> bool:
    """A Hopper/Blackwell warp-specialised kernel (wgmma/tcgen05, TMA producer and consumer
    warp groups): one CTA per SM by design, so low theoretical occupancy is not its limit."""
    if not name:
        return False
    return bool(_WS.search(_strip(name)[:SCAN]))
