#!/usr/bin/env bash
# Device call, kernel lab round 22 (issue 21 items 1 and 3): the cells the summary calls ties
# (0.99-1.00x of the better peer), each captured through profkit with 12 calls a side
# (profkit capture --calls; CALLS overrides), so that profkit compare's band is a bootstrap
# interval instead of a 3-call range. The set follows the GPU the cell is short on:
#   bash benchmarks/gpu/round22_ties.sh h100 TAG  # softmax 65536 x 1024, fp8 8192^3 per-tensor
#   bash benchmarks/gpu/round22_ties.sh h200 TAG  # RMSNorm, softmax 32768 x 4096, RoPE at 32768 tokens, fp8 8192^3
# (run with carry .gpu-libs .carry-r5-whl). Runs OP-SHAPE-r22-TAG; compare rows cmp-*.json.
set -u
GPU=$1 TAG=$2
source benchmarks/gpu/device_env.sh
export CAP_ARGS="--calls ${CALLS:-12}"
mkdir -p $O/r22
FP8="scaled_mm_tensor triton_promote_tensor gluon_ws_tensor"
FP8_PAIRS="scaled_mm_tensor:triton_promote_tensor scaled_mm_tensor:gluon_ws_tensor"
PEERS="liger:triton compile:triton"
if [ "$GPU" = h100 ]; then
  SHAPES=scores-r65536-n1024 pairs r22 softmax "triton compile liger" "$PEERS"
  SHAPES=m8192-n8192-k8192 pairs r22 fp8_gemm "$FP8" "$FP8_PAIRS"
else
  SHAPES=llama8b-t32768 pairs r22 rmsnorm "triton compile liger" "$PEERS"
  SHAPES=scores-r32768-n4096 pairs r22 softmax "triton compile liger" "$PEERS"
  SHAPES=llama8b-t32768 pairs r22 rope "triton compile liger" "$PEERS"
  SHAPES=m8192-n8192-k8192 pairs r22 fp8_gemm "$FP8" "$FP8_PAIRS"
fi
finish r22 $TAG
