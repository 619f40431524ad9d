"""Kernel families (issue 50 item 2): every kernel's family from its name and launch call, on
names copied from the real reports in profiles/ and tests/data/, stored once per name and shown
by the kernels view."""
import re
import sqlite3

import pytest
from profdata import DATA, ROOT

from profkit.model import families as F
from profkit.store.ingest import ingest

# (full name as the report holds it, launch call or None, family): each from a real report
REAL = [
    # profiles/hf-llama-decode (nsys + ncu, H100)
    ("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", "cuLaunchKernelEx", "cublas"),
    ("cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_35_16x128x64_1x4x1_cga1x1x1_kernel0_0",
     "cuLaunchKernelEx", "cudnn_attention"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0",
     "cudaGraphLaunch_v10000", "cudnn_attention"),
    ("void at::native::vectorized_elementwise_kernel<(int)8, at::native::CUDAFunctor_add<c10::BFloat16>, "
     "std::array<char *, (unsigned long)3>>(int, T2, T3)", "cudaLaunchKernel", "aten_elementwise"),
    ("void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<c10::BFloat16, at::native::ArgMaxOps"
     "<float>, unsigned int, long, (int)4, (int)4>>(T3)", "cudaLaunchKernel", "aten_reduce"),
    ("void at::native::<unnamed>::CatArrayBatchedCopy_vectorized<at::native::<unnamed>::OpaqueType<(unsigned int)2>, "
     "unsigned int, (int)1, (int)128, (int)1, (int)16, (int)8>(char *, at::native::<unnamed>::CatArrInputTensorMeta)",
     "cudaLaunchKernel", "aten_copy"),
    ("void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<float, (int)4, void at::native::"
     "templates::cuda::normal_and_transform<float, float, at::CUDAGeneratorImpl *>", "cudaLaunchKernel", "curand"),
    ("void at::native::<unnamed>::indexSelectSmallIndex<c10::BFloat16, long, unsigned int, (int)2, (int)2, (int)-2>"
     "(at::cuda::detail::TensorInfo<T1, T3>)", "cudaLaunchKernel", "aten_copy"),
    ("void cublasLt::splitKreduce_kernel<(int)32, (int)16, int, float, __nv_bfloat16, float, __nv_bfloat16>"
     "(cublasLt::cublasSplitKParams<float>)", "cudaLaunchKernel", "cublas"),
    # profiles/ddp-2gpu
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)", "cuLaunchKernelEx",
     "nccl"),
    ("sm90_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize128x64x16_stage3_warpsize2x2x1_tensor16x8x8_execute_kernel__5x_"
     "cublas", "cudaLaunchKernelExC_v11060", "cublas"),
    # tests/data/kineto-h100 (torch.compile'd program)
    ("triton_poi_fused_add_cos_sin_0", "cuLaunchKernel", "inductor_pointwise"),
    ("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0", "cuLaunchKernel", "inductor_persistent"),
    # tests/data/kineto-hta (HolisticTraceAnalysis's traces: V100, A100, 128-rank NCCL)
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "cudaLaunchKernel", "nccl"),
    ("volta_sgemm_64x64_nn", "cudaLaunchKernel", "cublas"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>(cutlass_80_tensorop_s1688gemm_"
     "128x128_16x4_nn_align4::Params)", "cudaLaunchKernel", "cublas"),
    ("cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1", "cudaLaunchKernel", "cudnn_conv"),
    ("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::WinogradDataParams"
     "<float, float>)", "cudaLaunchKernel", "cudnn_conv"),
    ("void wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>(int, int, int, float const*, int, float*)",
     "cudaLaunchKernel", "cudnn_conv"),
    ("void cask_cudnn_infer::computeOffsetsKernel<false, false>(cask_cudnn_infer::ComputeOffsetsParams)",
     "cudaLaunchKernel", "cudnn_conv"),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 128, true, 1, true>(cudnnTensorStruct, float const*)",
     "cudaLaunchKernel", "cudnn"),
    ("void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800, false, long, int, "
     "int, int>(int*, int*)", "cudaLaunchKernel", "cub"),
    ("void at_cuda_detail::cub::DeviceScanKernel<at_cuda_detail::cub::AgentScanPolicy<128, 15, long>>",
     "cudaLaunchKernel", "cub"),
    ("void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int const*, int*)", "cudaLaunchKernel",
     "fbgemm"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForwardReg<float, float, float, at::native::(anonymous "
     "namespace)::LogSoftMaxForwardEpilogue, long, 8>(float*, float const*, long)", "cudaLaunchKernel", "aten_other"),
    ("void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<float, float>(float const*, float const*)",
     "cudaLaunchKernel", "aten_other"),
    ("void gemvNSP_kernel<float, float, float, float, 1, 16, 4, 1024, cublasGemvParams<cublasGemvTensorStridedBatched"
     "<float const>>>", "cudaLaunchKernel", "cublas"),
    ("void sgemm_largek_lds64<true, true, 6, 3, 4, 5, 2, 66>(float*, float const*, float const*, int, int, int)",
     "cudaLaunchKernel", "cublas"),
    # profkit's lab (profiles/known, profiles/sgemm-ladder-4096, the lab rounds)
    ("_rmsnorm_fwd", "cuLaunchKernelEx", "lab"),
    ("_matmul_tma_persistent", "cuLaunchKernelEx", "lab"),
    ("void profkit::sgemm_warptile<(int)128, (int)128, (int)8, (int)64, (int)32, (int)2, (int)4, (int)4, (int)256, "
     "(int)2>(int, int, int, const float *, const float *, float *)", "cudaLaunchKernel_v7000", "lab"),
    ("occupancy_limited_copy", None, "lab"),
    # nsys/torch.profiler short names (no namespace)
    ("vectorized_elementwise_kernel", None, "aten_elementwise"),
    ("reduce_kernel", None, "aten_reduce"),
    # public reports (../shared/field-reports): CUDA C++ and extern "C" kernels nobody ships
    ("VecAdd_kernel", None, "other"),
    ("vec_add(float *, float *, float *, int)", None, "other"),
    ("void Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>(Params)", "cuLaunchKernel",
     "cublas"),
]

# names of kernels these families cover that no shipped report holds, as the libraries name them
PUBLISHED = [
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>"
     ", false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)", "flash_attention"),
    ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<64, 64, 128, 4>>(flash::Flash_fwd_params)",
     "flash_attention"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t>::Params)",
     "efficient_attention"),
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1",
     "cudnn_conv"),
    ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
     "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<4>>>>",
     "cutlass"),
    ("triton_red_fused__log_softmax_0", "inductor_reduction"),
    ("triton_tem_fused_mm_0", "inductor_template"),
    ("void regular_fft<512u, EPT<8u>, 128u, 8u, 0u, 0u>(unsigned int, unsigned int, float2*)", "cufft"),
    ("void thrust::cuda_cub::core::_kernel_agent<thrust::cuda_cub::__parallel_for::ParallelForAgent>", "cub"),
    # public traces read from snapshots (TraceLens tests/traces: b200/eager_trace, the MI300X sglang one)
    (B200_MOE := "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_"
     "schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f", "grouped_gemm"),
    ("fused_moe_kernel", "grouped_gemm"),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, "
     "unsigned int**, unsigned long, unsigned long)", "collective"),
    (MI300X_GEMM := "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x256x32_MI16x16x1_SN_LDSB1_AFC1_AFEM1_ISA942",
     "rocblas"),
    ("_ZN7ck_tile6kentryILi2ENS_38FmhaBatchPrefillWithPagedKVCacheKernelINS_40BlockFmhaBatchPrefillPipelineQRKSVS",
     "efficient_attention"),
    ("_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib",
     "serving_ops"),
    ("_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_EEEEvPS3_PS4_i",
     "serving_ops"),
]

# (name, duration ns, compute capability, the label its family gives without counters or shapes)
BOUND = [
    ("triton_poi_fused_add_0", 80_000, "9.0", "dram"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 900_000, "9.0",
     "communication"),
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", 99_000, "9.0", "tensor_core"),  # 79 % tensor pipe (ncu)
    ("nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT", 7_500, "9.0", "latency"),  # short: latency by its counters too
    # a Turing mma.sync GEMM on an H100: 12.5 % occupancy, under 60 % of the tensor roof (ncu)
    ("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_32x1_nn_align8>(Params)", 2_151_000,
     "9.0", "latency"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align4>(Params)", 300_000, "8.0",
     "tensor_core"),
    ("volta_sgemm_128x32_nt", 300_000, "7.0", "compute"),  # FP32 SIMT: no tensor cores
    (B200_MOE, 75_000, "10.0", "dram"),  # 16-wide tiles: a decode batch, ~32 FLOP per weight element
    (MI300X_GEMM, 6_700_000, None, "tensor_core"),
    ("void gemvNSP_kernel<float, float, float, float, 1, 16, 4, 1024>", 50_000, "9.0", "dram"),
    ("void thrust::cuda_cub::core::_kernel_agent<thrust::cuda_cub::__parallel_for::ParallelForAgent>", 90_000, "9.0",
     None),  # a sort or a scan: the family says nothing
]


@pytest.mark.parametrize("name,ns,cc,label", BOUND)
def test_a_family_gives_a_label_only_where_it_can(name, ns, cc, label):
    got, why = F.bound(F.family_of(name), name, ns, cc)
    assert got == label, why
    assert why


@pytest.mark.parametrize("name,api,family", REAL)
def test_real_kernel_names_get_their_family(name, api, family):
    got, why = F.explain(name, api)
    assert got == family, why
    assert why


@pytest.mark.parametrize("name,family", PUBLISHED)
def test_published_library_kernel_names_get_their_family(name, family):
    assert F.family_of(name) == family


def test_an_unknown_name_is_other_with_a_reason():
    fam, why = F.explain("my_kernel(float *, int)")
    assert fam == "other" and "no known library" in why
    fam, why = F.explain("attn_fwd_inner")  # unmangled, no launch call: Triton or extern "C"
    assert fam == "other" and "no launch call" in why
    assert F.get("other").is_library is None


def test_an_unmangled_name_launched_through_the_driver_api_is_user_triton():
    # tests/data/kineto-hta/triton_example: a user Triton kernel launched through cuLaunchKernel
    assert F.explain("add_kernel", "cuLaunchKernel")[0] == "triton_user"
    assert F.explain("add_kernel", "cuLaunchKernelEx")[0] == "triton_user"
    assert F.explain("add_kernel", "cudaLaunchKernel")[0] == "other"  # the runtime API: PyTorch, CUDA C++


def test_the_patterns_search_a_bounded_head_of_a_huge_name():
    """A hostile name of megabytes (the fuzzer's 24 MB kernel name: 23 s in the patterns) is
    searched over its first SCAN characters only, once per pattern: a marker there counts, one
    past it does not, and the name's length changes nothing else."""
    from profkit.core import families

    SCAN = 1 << 16  # families.SCAN
    pad = "x" * (2 << 20)
    assert F.family_of("cublasLt_" + pad) == "cublas"
    assert F.family_of("void at::native::reduce_kernel<512>(" + pad) == "aten_reduce"
    assert F.family_of("k" * SCAN + "_cublas_" + pad) == "other"
    assert F.family_of("k" * (SCAN - 10) + "_cublas_" + pad) == "cublas"
    assert F.warp_specialised("nvjet_" + pad) and not F.warp_specialised("k" * SCAN + "tcgen05" + pad)
    assert families.SCAN == SCAN


WARP_SPECIALISED = [
    "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
    "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1_cga1x1x1_kernel0_0",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_"
    "cublas",
    "void flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, cute::tuple<_1, _1, _1>>>(Params)",
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<KernelTmaWarpSpecializedCooperative>>",
]
NOT_WARP_SPECIALISED = [
    "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_35_16x128x64_1x4x1_cga1x1x1_kernel0_0",
    "sm90_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize128x64x16_stage3_warpsize2x2x1_tensor16x8x8_execute_kernel__5x_"
    "cublas",
    "ampere_sgemm_128x64_nn", "_matmul_tma_persistent", "triton_poi_fused_add_cos_sin_0",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)",
]


@pytest.mark.parametrize("name", WARP_SPECIALISED)
def test_warp_specialised_kernels_are_recognised(name):
    assert F.warp_specialised(name)


@pytest.mark.parametrize("name", NOT_WARP_SPECIALISED)
def test_other_kernels_are_not_warp_specialised(name):
    assert not F.warp_specialised(name)


def test_every_family_says_who_owns_the_code_and_names_levers():
    for f in F.FAMILIES.values():
        assert f.levers and all(f.levers)
        assert f.is_library in (True, False, None)
    lib = [f for f in F.FAMILIES.values() if f.is_library]
    assert all("kernel's code" not in " ".join(f.levers) for f in lib)  # a library's code is not the user's
    assert any("sdpa_kernel" in lv for lv in F.get("cudnn_attention").levers)
    assert any("channels_last" in lv for lv in F.get("cudnn_conv").levers)


def test_the_lab_list_is_the_lab_s_kernels():
    """Every @triton.jit kernel launched from kernels/*.py and every CUDA __global__ of
    kernels/cuda is in the lab list (helpers called from kernels are not launched)."""
    jit = set()
    for p in (ROOT / "kernels").glob("*.py"):
        src = p.read_text()
        for m in re.finditer(r"@triton\.jit[^\n]*\n(?:@[^\n]*\n)*def (\w+)", src):
            name = m.group(1)
            if re.search(rf"\b{name}\[", src):  # launched: name[grid](...)
                jit.add(name)
    assert jit and jit <= F.LAB_TRITON, sorted(jit - F.LAB_TRITON)
    cuda = set()
    for p in (ROOT / "kernels" / "cuda").glob("*.cu"):
        cuda |= set(re.findall(r"__global__\s+void\s+(?:__launch_bounds__\((?:[^()]|\([^()]*\))*\)\s*)?(\w+)",
                               p.read_text()))
    assert "sgemm_warptile" in cuda and cuda <= F.LAB_CUDA, sorted(cuda - F.LAB_CUDA)


def test_the_store_keeps_each_name_s_family_and_the_view_shows_it(db):
    # HolisticTraceAnalysis's triton example: an Inductor kernel launched through cuLaunchKernel
    ingest(db, [DATA / "kineto-hta" / "triton_example" / "triton_example.json.gz"])
    c = sqlite3.connect(db)
    try:
        fam = dict(c.execute("SELECT name, family FROM launch_name"))
        rows = c.execute("SELECT kernel_name, api_name, family FROM kernels").fetchall()
    finally:
        c.close()
    assert rows and all(r[2] == F.family_of(r[0], r[1]) for r in rows), rows
    assert {r[2] for r in rows} == {"inductor_pointwise"}
    assert all(v is not None for v in fam.values())
