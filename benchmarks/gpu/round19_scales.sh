#!/usr/bin/env bash
# Device call, kernel lab round 19, change 2 (issue 21): the CUDA fp8 GEMM's per-row scales loaded
# when a tile starts, not one dependent load a column pair in the epilogue (kernels/cuda/fp8_gemm.cu);
# before (.carry-old/fp8_gemm.cu, commit 86bb10a's source) and after, each captured through profkit
# (ncu lean) and timed round-robin, the runs compared: fp8_edit_pair.sh (round 19's own call, before
# that script, wrote its round-robin rows as r19/rr-before/ and rr-after/).
#   bash benchmarks/gpu/round19_scales.sh TAG      (run with carry .gpu-libs .carry-r5-whl .carry-old)
AFTER_PAIRS="scaled_mm:cuda_ws112_g2 gluon_ws:cuda_ws112_g2" \
  exec bash "$(dirname "$0")/fp8_edit_pair.sh" cap r19 "$1"
