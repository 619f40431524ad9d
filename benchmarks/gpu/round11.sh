#!/usr/bin/env bash
# Device calls, kernel lab round 11 (issue 21):
#   bash benchmarks/gpu/round11.sh rp TAG   # RoPE: round 10's program (triton_r10), every load of a token before any
#                                           # store (triton_fp32tab), then bf16 tables (triton), against Liger and
#                                           # compile: round-robin GPU time (variants_rr.py), kernels.py's RoPE rows,
#                                           # and profkit capture (ncu lean) at 4096 and 32768 tokens with the pairs
#   bash benchmarks/gpu/round11.sh rp2 TAG  # the same after the tuner fix, the round-robin twice (two processes)
set -u
MODE=$1 TAG=$2
source benchmarks/gpu/device_env.sh
mkdir -p $O/r11
for M in ${MODE//,/ }; do
case $M in
rp)
  timeout 240 python3 $R/benchmarks/gpu/variants_rr.py --op rope --variants triton,triton_fp32tab,triton_r10,liger,compile \
    --shapes llama8b-t4096,qwen7b-t4096,llama8b-t32768,phi2partial-t4096 --rounds 5 --out $O/r11 2>&1 | grep -v -i warn | tee $O/r11/rope_rr.log
  timeout 200 python3 $R/benchmarks/kernels.py --graph --ops rope --variants compile,triton,triton_fp32tab,triton_r10,triton_inplace,liger --out $O/r11/rope_kernels > $O/r11/rope_kernels.log 2>&1
  echo "kernels.py rc=$?"; grep -E "^\| rope" $O/r11/rope_kernels.log | cut -c1-160
  for s in llama8b-t4096 llama8b-t32768; do
    run=rope-$s-r11-$TAG
    cap $run rope --variant triton_r10 --variant triton_fp32tab --variant triton --variant liger --variant compile --shape $s
    cmp $run:triton_r10 $run:triton_fp32tab; cmp $run:triton_fp32tab $run:triton; cmp $run:triton_r10 $run:triton; cmp $run:liger $run:triton; cmp $run:compile $run:triton
  done
  ;;
rp2)
  # after the tuner fix (graph replay over rotated copies, keyed by the table dtype): two processes, so
  # the picks' stability shows, then kernels.py's rows and the pairs of the final code at three shapes
  for i in 1 2; do
    timeout 200 python3 $R/benchmarks/gpu/variants_rr.py --op rope --variants triton,triton_fp32tab,triton_r10,liger,compile \
      --shapes llama8b-t4096,qwen7b-t4096,llama8b-t32768 --rounds 5 --out $O/r11/rr$i 2>&1 | grep -v -i "warn\|Backend impl" | tee $O/r11/rope_rr2_$i.log | grep -v "^tuned"
    grep "^tuned ('rope'" $O/r11/rope_rr2_$i.log | sed -E "s/device\(type='cuda', index=0\)//; s/torch\.//g" | cut -c1-200
  done
  timeout 200 python3 $R/benchmarks/kernels.py --graph --ops rope --variants compile,triton,triton_fp32tab,triton_r10,liger --out $O/r11/rope_kernels2 > $O/r11/rope_kernels2.log 2>&1
  echo "kernels.py rc=$?"; grep -E "^\| rope" $O/r11/rope_kernels2.log | cut -d'|' -f3,5,13-15
  for s in llama8b-t4096 qwen7b-t4096 llama8b-t32768; do
    run=rope-$s-r11-$TAG
    cap $run rope --variant triton_r10 --variant triton_fp32tab --variant triton --variant liger --variant compile --shape $s
    cmp $run:triton_r10 $run:triton_fp32tab; cmp $run:triton_fp32tab $run:triton; cmp $run:triton_r10 $run:triton; cmp $run:liger $run:triton; cmp $run:compile $run:triton
  done
  ;;
esac
done
if ls $O/prof/*/ >/dev/null 2>&1; then cp $O/cap-*.log $O/r11/ 2>/dev/null; pack $OUT/r11_prof_$TAG.tar.xz; fi
tar -cJf $OUT/r11_$TAG.tar.xz -C $O r11 && ls -la $OUT
