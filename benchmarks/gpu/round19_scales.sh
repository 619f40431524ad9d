#!/usr/bin/env bash
# Device call, kernel lab round 19, change 2 (issue 21): the CUDA fp8 GEMM's per-row scales loaded
# when a tile starts, not one dependent load a column pair in the epilogue (kernels/cuda/fp8_gemm.cu).
# The before is the source as committed before the change, carried in .carry-old/fp8_gemm.cu (git
# show <commit>:kernels/cuda/fp8_gemm.cu); each side is captured through profkit (ncu lean) and
# timed round-robin (variants_rr.py), and the runs compared: the one change, re-profiled.
#   bash benchmarks/gpu/round19_scales.sh TAG      (run with carry .gpu-libs .carry-r5-whl .carry-old)
set -u
TAG=$1
source benchmarks/gpu/device_env.sh
SITE=/tmp/site/profkit/kernels/cuda/fp8_gemm.cu
cp $SITE /tmp/after.cu
mkdir -p $O/r19
RUN=fp8_gemm-qwen7b-down-m1024-r19-$TAG
for side in before after; do
  if [ $side = before ]; then cp $R/.carry-old/fp8_gemm.cu $SITE; else cp /tmp/after.cu $SITE; fi
  cap $RUN-$side fp8_gemm --variant cuda_ws112_g2 --variant cuda_ws112_g2_tensor --variant gluon_ws --variant scaled_mm \
    --variant scaled_mm_tensor --shape qwen7b-down-m1024
  timeout 300 python3 $R/benchmarks/gpu/variants_rr.py --op fp8_gemm --dtype fp8 --rounds ${ROUNDS:-5} \
    --variants cuda_ws112_g2,cuda_ws112_g2_tensor,gluon_ws,scaled_mm,scaled_mm_tensor \
    --shapes ${RR_SHAPES:-qwen7b-down-m1024,m8192-n8192-k8192} --out $O/r19/rr-$side 2>&1 | grep -v -i warn > $O/r19/rr-$side.log
  echo "== rr $side"; cut -c1-200 $O/r19/rr-$side.log
done
cmp $RUN-before:cuda_ws112_g2 $RUN-after:cuda_ws112_g2
cmp $RUN-before:cuda_ws112_g2_tensor $RUN-after:cuda_ws112_g2_tensor
cmp $RUN-after:scaled_mm $RUN-after:cuda_ws112_g2
cmp $RUN-after:gluon_ws $RUN-after:cuda_ws112_g2
finish r19 $TAG
