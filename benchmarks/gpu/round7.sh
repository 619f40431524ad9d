#!/usr/bin/env bash
# Device calls, kernel lab round 7 (issue 21):
#   bash benchmarks/gpu/round7.sh fp8dec TAG   # fp8_decode.py at llama8b-qkv-m16 + its profkit capture pairs
#                                              # (round 6's fp8dec), then bf16_rr.py -> $OUT/r7_TAG.tar.xz
#   bash benchmarks/gpu/round7.sh bf16 TAG     # bf16_rr.py alone -> $OUT/r7_TAG.tar.xz
#   bash benchmarks/gpu/round7.sh sk TAG       # fp8_streamk.py (SK_SHAPES: some shapes) + the pairs at
#                                              # qwen7b-down-m1024, then bf16_rr.py (BF16=0: not) -> $OUT/r7_TAG.tar.xz
#   bash benchmarks/gpu/round7.sh qk TAG       # fused q/k RMSNorm + RoPE, head-split launch: every shape by graph
#                                              # replay, pairs at 32768 and 4096 tokens; the stream-K pair
#                                              # (per-tensor) at qwen7b-down-m1024 -> $OUT/r7_TAG.tar.xz
set -u
MODE=$1 TAG=$2
source benchmarks/gpu/device_env.sh
bf16() {
  timeout 300 python3 $R/benchmarks/gpu/bf16_rr.py --rounds 7 --out $O ${BF16_SHAPES:+--shapes $BF16_SHAPES} > $O/bf16_rr.log 2>&1; echo "bf16_rr rc=$?"
  cut -c1-170 $O/bf16_rr.log | grep -v "^{" | tail -60
}
case $MODE in
fp8dec)
  timeout 150 python3 $R/benchmarks/gpu/fp8_decode.py --rounds 5 --out $O --shapes llama8b-qkv-m16 > $O/fp8_decode.log 2>&1; echo "fp8_decode rc=$?"
  grep -v "^   " $O/fp8_decode.log | cut -c1-170
  run=fp8_gemm-llama8b-qkv-m16-r7-$TAG
  cap $run fp8_gemm --variant triton_promote_tensor --variant triton_splitk_tensor --variant scaled_mm_tensor \
      --variant triton_promote --variant triton_splitk --variant scaled_mm --shape llama8b-qkv-m16
  cmp $run:triton_promote_tensor $run:triton_splitk_tensor; cmp $run:scaled_mm_tensor $run:triton_splitk_tensor
  cmp $run:triton_promote $run:triton_splitk; cmp $run:scaled_mm $run:triton_splitk
  bf16
  ;;
bf16) bf16 ;;
sk)
  timeout 300 python3 $R/benchmarks/gpu/fp8_streamk.py --rounds 5 --out $O ${SK_SHAPES:+--shapes $SK_SHAPES} > $O/fp8_streamk.log 2>&1; echo "fp8_streamk rc=$?"
  grep -v "^   [^i]" $O/fp8_streamk.log | cut -c1-230 | tail -40
  run=fp8_gemm-qwen7b-down-m1024-r7-$TAG
  if [ "${CAP:-1}" = 1 ]; then
    cap $run fp8_gemm --variant triton_promote_tensor --variant triton_streamk_tensor --variant scaled_mm_tensor \
        --variant triton_promote --variant triton_streamk --variant scaled_mm --shape qwen7b-down-m1024
    cmp $run:triton_promote_tensor $run:triton_streamk_tensor; cmp $run:scaled_mm_tensor $run:triton_streamk_tensor
    cmp $run:triton_promote $run:triton_streamk; cmp $run:scaled_mm $run:triton_streamk
  fi
  [ "${BF16:-1}" = 1 ] && bf16
  ;;
qk)
  timeout 240 python3 $R/benchmarks/kernels.py --graph --ops rmsnorm_rope --no-backward --variants triton,triton_tokenprog,compile --out $O > $O/kernels_qk.log 2>&1; echo "kernels rc=$?"
  grep -E "triton|compile|copy" $O/kernels_qk.log | cut -c1-170 | tail -16
  for shape in qwen3-8b-t32768 qwen3-8b-t4096; do
    run=rmsnorm_rope-$shape-r7-$TAG
    cap $run rmsnorm_rope --variant triton_tokenprog --variant triton --variant compile --shape $shape
    cmp $run:triton_tokenprog $run:triton; cmp $run:compile $run:triton
  done
  if [ "${SKCAP:-0}" = 1 ]; then  # (run with SKCAP=1 in h100q / h200q)
    run=fp8_gemm-qwen7b-down-m1024-r7-$TAG
    cap $run fp8_gemm --variant triton_promote_tensor --variant triton_streamk_tensor --variant scaled_mm_tensor --shape qwen7b-down-m1024
    cmp $run:triton_promote_tensor $run:triton_streamk_tensor; cmp $run:scaled_mm_tensor $run:triton_streamk_tensor
  fi
  ;;
esac
pack $OUT/r7_$TAG.tar.xz
