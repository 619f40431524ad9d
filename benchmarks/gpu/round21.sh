#!/usr/bin/env bash
# Device calls, kernel lab round 21 (issue 21 item 3: where the CUDA C++ fp8 GEMM's consumer cycles
# go, and its epilogue through TMA stores, kernels/cuda/fp8_gemm.cu Params::epi): round15.sh's
# modes, raw rows in r21/.
#   SCRIPT=fp8_trace21.py bash benchmarks/gpu/round21.sh script TAG  # clock64 stamps: k loops, epilogues
#   bash benchmarks/gpu/round21.sh ws TAG     # fp8_ws21.py: edges + float64, round-robin of the epilogues
#   bash benchmarks/gpu/round21.sh rr TAG     # variants_rr.py of RR_DEFAULT below
#   bash benchmarks/gpu/round21.sh cap TAG    # the pairs through profkit (ncu lean): CAP_VARIANTS, CAP_PAIRS, SHAPES
#   bash benchmarks/gpu/round21.sh probe TAG  # ncu counters of PROBE_NAMES (fp8_probe17.py; _e: the TMA epilogue)
ROUND=r21 WS_SCRIPT=fp8_ws21.py \
RR_DEFAULT=cuda_ws112_tma,cuda_ws112_tma8,gluon_ws,triton_promote,scaled_mm,cuda_ws112_tma_tensor,cuda_ws112_tma8_tensor,gluon_ws_tensor,triton_promote_tensor,scaled_mm_tensor \
  exec bash "$(dirname "$0")/round15.sh" "$@"
