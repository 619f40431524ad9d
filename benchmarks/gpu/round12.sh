#!/usr/bin/env bash
# Device calls, kernel lab round 12 (issue 21):
#   bash benchmarks/gpu/round12.sh sm TAG   # vocabulary softmax: the row-group launches with an L2 bulk prefetch
#                                           # 1-2 rows ahead (kinds *_pf1/_pf2) against round 11's (triton_r11):
#                                           # every row-group candidate (softmax_group.py), round-robin GPU time
#                                           # (variants_rr.py) beside compile, and profkit capture (ncu lean) pairs
#   bash benchmarks/gpu/round12.sh sm2 TAG  # the same after the second change (exp2 with the scale fused, triton;
#                                           # the prefetch alone is triton_pf), kernels.py's softmax rows
#   bash benchmarks/gpu/round12.sh sm3 TAG  # the same with the third change (chunks inside the row loaded unmasked,
#                                           # triton_full), one round-robin process. Rejected (0.82-0.88x); in its one
#                                           # run (r12-h200c) the names were triton_exp2 (the first two changes, now
#                                           # triton) and triton (the third, now triton_full)
#   bash benchmarks/gpu/round12.sh rp TAG   # RoPE probe: q/k read evict-first, outputs stored .cs (triton_stream)
set -u
MODE=$1 TAG=$2
source benchmarks/gpu/device_env.sh
mkdir -p $O/r12
for M in ${MODE//,/ }; do
case $M in
sm)
  SOFTMAX_GROUPS_ONLY=1 timeout 200 python3 $R/benchmarks/gpu/softmax_group.py --shapes llama3vocab-t2048,qwen7bvocab-t1024 \
    --rounds 5 --out $O/r12 2>&1 | grep -v -i "warn" > $O/r12/softmax_group.log
  echo "softmax_group rc=$?"; grep -E '^[a-z0-9]+vocab|graph:|check' $O/r12/softmax_group.log | cut -c1-400
  python3 $R/benchmarks/gpu/softmax_group.py --summary $O/r12/softmax_group.json
  timeout 200 python3 $R/benchmarks/gpu/variants_rr.py --op softmax --variants triton,triton_r11,compile \
    --shapes llama3vocab-t2048,qwen7bvocab-t1024 --rounds 7 --out $O/r12/rr 2>&1 | grep -v -i "warn\|Backend impl" > $O/r12/softmax_rr.log
  echo "variants_rr rc=$?"; grep -v "^tuned" $O/r12/softmax_rr.log; grep "^tuned ('softmax_online" $O/r12/softmax_rr.log | cut -c1-160
  for s in llama3vocab-t2048 qwen7bvocab-t1024; do
    run=softmax-$s-r12-$TAG
    cap $run softmax --variant triton_r11 --variant triton --variant compile --shape $s
    cmp $run:triton_r11 $run:triton; cmp $run:compile $run:triton
  done
  ;;
sm2|sm3)
  V=triton,triton_pf,triton_r11,compile; NRR="1 2"; CV="--variant triton_r11 --variant triton_pf --variant triton --variant compile"
  [ $M = sm3 ] && V=triton,triton_full,triton_pf,triton_r11,compile NRR=1 CV="--variant triton_r11 --variant triton_pf --variant triton --variant triton_full --variant compile"
  for i in $NRR; do
    timeout 200 python3 $R/benchmarks/gpu/variants_rr.py --op softmax --variants $V \
      --shapes llama3vocab-t2048,qwen7bvocab-t1024 --rounds 7 --out $O/r12/rr2_$i 2>&1 | grep -v -i "warn\|Backend impl" > $O/r12/softmax_rr2_$i.log
    echo "variants_rr rc=$?"; grep -v "^tuned" $O/r12/softmax_rr2_$i.log; grep "^tuned ('softmax_online" $O/r12/softmax_rr2_$i.log | cut -c1-130
  done
  timeout 200 python3 $R/benchmarks/kernels.py --graph --ops softmax --out $O/r12/softmax_kernels > $O/r12/softmax_kernels.log 2>&1
  echo "kernels.py rc=$?"; grep -E "^\| softmax" $O/r12/softmax_kernels.log | grep -E "vocab" | cut -d'|' -f3,4,5,13-15
  for s in llama3vocab-t2048 qwen7bvocab-t1024; do
    run=softmax-$s-r12-$TAG
    cap $run softmax $CV --shape $s
    if [ $M = sm3 ]; then
      cmp $run:triton_r11 $run:triton_pf; cmp $run:triton_pf $run:triton; cmp $run:triton $run:triton_full
    else
      cmp $run:triton_r11 $run:triton_pf; cmp $run:triton_pf $run:triton
    fi
    cmp $run:triton_r11 $run:triton; cmp $run:compile $run:triton
  done
  ;;
rp)
  for i in 1 2; do
    timeout 200 python3 $R/benchmarks/gpu/variants_rr.py --op rope --variants triton,triton_stream,compile,liger \
      --shapes llama8b-t32768,llama8b-t4096 --rounds 7 --out $O/r12/rope_rr_$i 2>&1 | grep -v -i "warn\|Backend impl" > $O/r12/rope_rr_$i.log
    echo "variants_rr rc=$?"; grep -v "^tuned" $O/r12/rope_rr_$i.log
  done
  ;;
esac
done
if ls $O/prof/*/ >/dev/null 2>&1; then cp $O/cap-*.log $O/r12/ 2>/dev/null; pack $OUT/r12_prof_$TAG.tar.xz; fi
tar -cJf $OUT/r12_$TAG.tar.xz -C $O r12 && ls -la $OUT
