#!/usr/bin/env bash
# Device calls, kernel lab round 5 (issue 21): the fp8 launcher's host time, and profiles of the
# copy-ceiling ties against Liger.
#   bash benchmarks/gpu/round5.sh fp8 TAG    # benchmarks/gpu/fp8_launch.py -> $OUT/fp8_launch_TAG.json
#   bash benchmarks/gpu/round5.sh norms TAG  # benchmarks/gpu/norm_occupancy.py -> $OUT/norm_occupancy_TAG.json
#   bash benchmarks/gpu/round5.sh ties TAG   # kernels.py rows + profkit capture pairs (lab vs Liger; fp8 v3 scales
#                                            # early vs late, vs _scaled_mm) -> $OUT/ties_TAG.tar.xz
# Run from the repository root with .gpu-libs and the wheels (profkit's pure-Python dependencies and
# liger-kernel) in .carry-r5-whl beside it.
set -u
MODE=$1 TAG=$2
source benchmarks/gpu/device_env.sh  # (round 6 took this preamble out of here into device_env.sh)
O=/tmp/r5; mkdir -p $O/prof; DB=$O/prof/r5.db
case $MODE in
fp8)
  timeout 540 python3 $R/benchmarks/gpu/fp8_launch.py --rounds 7 --out $O
  cp $O/fp8_launch.json $OUT/fp8_launch_$TAG.json
  ;;
norms)
  timeout 540 python3 $R/benchmarks/gpu/norm_occupancy.py --rounds 5 --out $O
  cp $O/norm_occupancy.json $OUT/norm_occupancy_$TAG.json
  ;;
ties)
  timeout 200 python3 $R/benchmarks/kernels.py --graph --ops rmsnorm,add_rmsnorm --no-backward --variants triton,triton_evict,compile,liger --out $O > $O/kernels.log 2>&1; echo "kernels rc=$?"; grep -E "t32768|t4096" $O/kernels.log | grep -E "triton|liger" | cut -c1-150
  for op in rmsnorm add_rmsnorm; do
    cap $op-llama8b-t32768-$TAG $op --variant triton_evict --variant triton --variant liger --shape llama8b-t32768
    cmp $op-llama8b-t32768-$TAG:triton_evict $op-llama8b-t32768-$TAG:triton
    cmp $op-llama8b-t32768-$TAG:liger $op-llama8b-t32768-$TAG:triton
  done
  cap fp8_gemm-llama8b-qkv-m4096-r5-$TAG fp8_gemm --variant triton_promote_early --variant triton_promote --variant scaled_mm --shape llama8b-qkv-m4096
  cmp fp8_gemm-llama8b-qkv-m4096-r5-$TAG:triton_promote_early fp8_gemm-llama8b-qkv-m4096-r5-$TAG:triton_promote
  cmp fp8_gemm-llama8b-qkv-m4096-r5-$TAG:scaled_mm fp8_gemm-llama8b-qkv-m4096-r5-$TAG:triton_promote
  pack $OUT/ties_$TAG.tar.xz
  ;;
esac
