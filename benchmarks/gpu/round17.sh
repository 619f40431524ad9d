#!/usr/bin/env bash
# Device calls, kernel lab round 17 (issue 21 item 3: the fp8 GEMM's 128 x 112 tile in CUDA C++
# with wgmma m64n112k32, kernels/cuda/fp8_gemm.cu): round15.sh's modes with fp8_ws17.py, raw rows in r17/.
#   bash benchmarks/gpu/round17.sh ws TAG    # fp8_ws17.py: edges + float64 check, then round-robin beside gluon_ws, v3 and _scaled_mm
#   bash benchmarks/gpu/round17.sh rr TAG    # variants_rr.py: cuda_ws112, gluon_ws, v3 and _scaled_mm, both scale modes
#   bash benchmarks/gpu/round17.sh cap TAG   # the pairs through profkit (ncu lean): CAP_VARIANTS, CAP_PAIRS, SHAPES
ROUND=r17 WS_SCRIPT=fp8_ws17.py \
RR_DEFAULT=cuda_ws112,gluon_ws,triton_promote,scaled_mm,cuda_ws112_tensor,gluon_ws_tensor,triton_promote_tensor,scaled_mm_tensor \
  exec bash "$(dirname "$0")/round15.sh" "$@"
