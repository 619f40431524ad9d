#!/usr/bin/env bash
# Device calls, kernel lab round 6 (issue 21): fp8 split-K at decode shapes; the 1-token shapes of
# the memory-bound operators.
#   bash benchmarks/gpu/round6.sh fp8dec TAG   # fp8_decode.py + profkit capture pairs at llama8b-qkv-m16
#                                              # -> $OUT/fp8dec_TAG.tar.xz
#   bash benchmarks/gpu/round6.sh decode TAG   # decode_sweep.py -> $OUT/decode_TAG.tar.xz
#   bash benchmarks/gpu/round6.sh final TAG    # fp8_decode.py at llama8b-qkv-m16, profkit capture pairs (fp8
#                                              # split-K; the 1-token operators: old launch -> new, best peer -> new),
#                                              # then decode_sweep.py -> $OUT/final_TAG.tar.xz
set -u
MODE=$1 TAG=$2
source benchmarks/gpu/device_env.sh
# fp8 at the decode shape: v3 -> split-K and _scaled_mm -> split-K, both scale modes
fp8_pairs() {
  local run=fp8_gemm-llama8b-qkv-m16-r6-$TAG
  cap $run fp8_gemm --variant triton_promote_tensor --variant triton_splitk_tensor --variant scaled_mm_tensor \
      --variant triton_promote --variant triton_splitk --variant scaled_mm --shape llama8b-qkv-m16
  cmp $run:triton_promote_tensor $run:triton_splitk_tensor; cmp $run:scaled_mm_tensor $run:triton_splitk_tensor
  cmp $run:triton_promote $run:triton_splitk; cmp $run:scaled_mm $run:triton_splitk
}
# add+RMSNorm at one token: before round 6 (untuned launch; w after the reduction) -> now, and Liger
addnorm_pairs() {
  local run=add_rmsnorm-llama8b-t1-r6-$TAG
  cap $run add_rmsnorm --variant triton_untuned --variant triton_wlate --variant triton --variant liger --shape llama8b-t1
  cmp $run:triton_untuned $run:triton; cmp $run:triton_wlate $run:triton; cmp $run:liger $run:triton
}
# every add+RMSNorm shape by graph replay: w loaded first must not cost the large shapes
addnorm_rows() {
  timeout 150 python3 $R/benchmarks/kernels.py --graph --ops add_rmsnorm --no-backward --variants triton,triton_wlate,compile,liger --out $O > $O/kernels_addnorm.log 2>&1; echo "kernels rc=$?"
  grep -E "triton|liger|compile" $O/kernels_addnorm.log | cut -c1-160 | tail -20
}
case $MODE in
fp8dec)
  timeout 330 python3 $R/benchmarks/gpu/fp8_decode.py --rounds 5 --out $O ${FP8_SHAPES:+--shapes $FP8_SHAPES} > $O/fp8_decode.log 2>&1; echo "fp8_decode rc=$?"
  grep -v "^   " $O/fp8_decode.log | cut -c1-170
  fp8_pairs
  pack $OUT/fp8dec_$TAG.tar.xz
  ;;
decode)
  timeout 300 python3 $R/benchmarks/gpu/decode_sweep.py --rounds 5 --out $O > $O/decode_sweep.log 2>&1; echo "decode_sweep rc=$?"
  tail -40 $O/decode_sweep.log | cut -c1-170
  pack $OUT/decode_$TAG.tar.xz
  ;;
final)
  timeout 120 python3 $R/benchmarks/gpu/fp8_decode.py --rounds 5 --out $O --shapes llama8b-qkv-m16 > $O/fp8_decode.log 2>&1; echo "fp8_decode rc=$?"
  grep -v "^   " $O/fp8_decode.log | cut -c1-170
  fp8_pairs
  # op shape old-launch best-peer
  while read op shape old peer; do
    run=$op-$shape-r6-$TAG
    cap $run $op --variant $old --variant triton --variant $peer --shape $shape
    cmp $run:$old $run:triton
    cmp $run:$peer $run:triton
  done <<LIST
softmax llama3vocab-t1 triton_rowprog compile
swiglu llama8b-t1 triton_v1 compile
rope llama8b-t1 triton_tokenprog liger
rmsnorm llama8b-t1 triton_untuned liger
LIST
  addnorm_pairs
  timeout 240 python3 $R/benchmarks/gpu/decode_sweep.py --rounds 3 --out $O > $O/decode_sweep.log 2>&1; echo "decode_sweep rc=$?"
  tail -40 $O/decode_sweep.log | cut -c1-170
  addnorm_rows
  pack $OUT/final_$TAG.tar.xz
  ;;
addnorm)  # add+RMSNorm with w loaded first (round 6's change after the H100 final run)
  addnorm_pairs
  timeout 150 python3 $R/benchmarks/gpu/decode_sweep.py --rounds 3 --ops add_rmsnorm,rmsnorm --out $O > $O/decode_sweep.log 2>&1; echo "decode_sweep rc=$?"
  tail -24 $O/decode_sweep.log | cut -c1-170
  addnorm_rows
  pack $OUT/addnorm_$TAG.tar.xz
  ;;
esac
