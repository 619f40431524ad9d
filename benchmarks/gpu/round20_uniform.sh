#!/usr/bin/env bash
# Device call, kernel lab round 20 (issue 21 item 3): the CUDA fp8 GEMM's warpgroup index broadcast
# from lane 0 (kernels/cuda/fp8_gemm.cu), so that the wgmma descriptors live in uniform registers;
# before (.carry-old/fp8_gemm.cu, commit 1e84b99's source) and after, through fp8_edit_pair.sh.
#   bash benchmarks/gpu/round20_uniform.sh probe TAG   # ncu counters of PROBE_NAMES, each side
#   bash benchmarks/gpu/round20_uniform.sh cap TAG     # each side captured and timed, the runs compared
# (run with carry .gpu-libs .carry-r5-whl .carry-old)
PROBE_NCU_ARGS=${PROBE_NCU_ARGS:---cache-control none} PROBE_REPS=${PROBE_REPS:-2} \
PROBE_METRICS=${PROBE_METRICS:-gpu__time_duration.sum,lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum,lts__t_sectors_srcunit_tex_op_read.sum,sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.max.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max} \
AFTER_PAIRS="scaled_mm_tensor:cuda_ws112_g2_tensor scaled_mm:cuda_ws112_g2" \
  exec bash "$(dirname "$0")/fp8_edit_pair.sh" "$1" r20 "$2"
