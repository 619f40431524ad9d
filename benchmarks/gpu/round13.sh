#!/usr/bin/env bash
# Device calls, kernel lab round 13 (issue 21 item 1: the vocabulary softmax on the H200):
#   bash benchmarks/gpu/round13.sh probe TAG  # where the time goes: the kernel as shipped, without the partners'
#                                             # wait, and its data movement alone (softmax_probe13.py), each
#                                             # beside a copy of the same bytes by graph replay
#   bash benchmarks/gpu/round13.sh sm TAG     # the thread-local exponentials (_loc), the late finish first with the
#                                             # registers capped (_ff, _cap) and the 16-bit held exponentials (_h2):
#                                             # every new row-group candidate checked and timed (softmax_group.py),
#                                             # then the variants round-robin by graph replay
#   bash benchmarks/gpu/round13.sh cap TAG    # the pairs through profkit (ncu lean): triton_r12 -> triton, triton ->
#                                             # triton_h2, triton -> triton_ff (rejected), compile -> triton
#   bash benchmarks/gpu/round13.sh sp TAG     # (run at commit 1b63e57, where the kinds live; refuted and removed) the
#                                             # rows' chunks through shared memory (Triton's pipeliner, _s<n>), registers
#                                             # capped: the sweep, then triton against triton_loc (without them)
#   bash benchmarks/gpu/round13.sh cap2 TAG   # (not run: nothing to pair) triton_loc -> triton, triton -> h2, compile
#   bash benchmarks/gpu/round13.sh h2 TAG     # the bf16 hold with registers capped (_h2_cap): sweep, round-robin,
#                                             # pairs triton -> triton_h2 and compile -> triton_h2
set -u
MODE=$1 TAG=$2
source benchmarks/gpu/device_env.sh
mkdir -p $O/r13
for M in ${MODE//,/ }; do
case $M in
probe)
  for p in full nowait stream; do
    timeout 150 python3 $R/benchmarks/gpu/softmax_probe13.py $p --out $O/r13 2>&1 | grep -v -i "warn" | tail -3
  done
  ;;
sm)
  SOFTMAX_GROUPS_ONLY=1 SOFTMAX_KINDS=${SOFTMAX_KINDS:-_loc,_h2,_ff,_cap,group_lag_pf1} timeout 300 python3 $R/benchmarks/gpu/softmax_group.py \
    --shapes llama3vocab-t2048,qwen7bvocab-t1024 --rounds 5 --out $O/r13 2>&1 | grep -v -i "warn" > $O/r13/softmax_group.log
  echo "softmax_group rc=$?"; grep -E '^[a-z0-9]+vocab|graph:|check' $O/r13/softmax_group.log | cut -c1-400
  python3 $R/benchmarks/gpu/softmax_group.py --summary $O/r13/softmax_group.json
  timeout 240 python3 $R/benchmarks/gpu/variants_rr.py --op softmax --variants triton,triton_r12,triton_h2,triton_ff,compile \
    --shapes llama3vocab-t2048,qwen7bvocab-t1024 --rounds 7 --out $O/r13/rr 2>&1 | grep -v -i "warn\|Backend impl" > $O/r13/softmax_rr.log
  echo "variants_rr rc=$?"; grep -v "^tuned" $O/r13/softmax_rr.log; grep "^tuned ('softmax_online" $O/r13/softmax_rr.log | cut -c1-160
  ;;
cap)
  for s in llama3vocab-t2048 qwen7bvocab-t1024; do
    run=softmax-$s-r13-$TAG
    cap $run softmax --variant triton_r12 --variant triton --variant triton_h2 --variant triton_ff --variant compile --shape $s
    cmp $run:triton_r12 $run:triton; cmp $run:triton $run:triton_h2; cmp $run:triton $run:triton_ff; cmp $run:compile $run:triton
  done
  ;;
sp)
  SOFTMAX_GROUPS_ONLY=1 SOFTMAX_KINDS=_s,group_lag_pf1,group_lag_loc_pf1 SOFTMAX_RR=triton,triton_loc,triton_h2,compile \
    timeout 300 python3 $R/benchmarks/gpu/softmax_group.py --shapes llama3vocab-t2048,qwen7bvocab-t1024 --rounds 5 \
    --out $O/r13 2>&1 | grep -v -i "warn" > $O/r13/softmax_group_sp.log
  echo "softmax_group rc=$?"; grep -E '^[a-z0-9]+vocab|check' $O/r13/softmax_group_sp.log | cut -c1-400
  python3 $R/benchmarks/gpu/softmax_group.py --summary $O/r13/softmax_group.json | grep -v "^regs"
  timeout 240 python3 $R/benchmarks/gpu/variants_rr.py --op softmax --variants triton,triton_loc,triton_r12,triton_h2,compile \
    --shapes llama3vocab-t2048,qwen7bvocab-t1024 --rounds 7 --out $O/r13/rr_sp 2>&1 | grep -v -i "warn\|Backend impl" > $O/r13/softmax_rr_sp.log
  echo "variants_rr rc=$?"; grep -v "^tuned" $O/r13/softmax_rr_sp.log; grep "^tuned ('softmax_online" $O/r13/softmax_rr_sp.log | cut -c1-160
  ;;
cap2)
  for s in llama3vocab-t2048 qwen7bvocab-t1024; do
    run=softmax-$s-r13-$TAG
    cap $run softmax --variant triton_loc --variant triton --variant triton_h2 --variant compile --shape $s
    cmp $run:triton_loc $run:triton; cmp $run:triton $run:triton_h2; cmp $run:compile $run:triton
  done
  ;;
h2)
  SOFTMAX_GROUPS_ONLY=1 SOFTMAX_KINDS=_h2,group_lag_pf1 SOFTMAX_RR=triton,triton_h2,compile \
    timeout 300 python3 $R/benchmarks/gpu/softmax_group.py --shapes llama3vocab-t2048,qwen7bvocab-t1024 --rounds 5 \
    --out $O/r13 2>&1 | grep -v -i "warn" > $O/r13/softmax_group_h2.log
  echo "softmax_group rc=$?"; grep -E '^[a-z0-9]+vocab|check' $O/r13/softmax_group_h2.log | cut -c1-400
  python3 $R/benchmarks/gpu/softmax_group.py --summary $O/r13/softmax_group.json | grep -v "^regs"
  timeout 200 python3 $R/benchmarks/gpu/variants_rr.py --op softmax --variants triton_h2,triton,compile \
    --shapes llama3vocab-t2048,qwen7bvocab-t1024 --rounds 7 --out $O/r13/rr_h2 2>&1 | grep -v -i "warn\|Backend impl" > $O/r13/softmax_rr_h2.log
  echo "variants_rr rc=$?"; grep -v "^tuned" $O/r13/softmax_rr_h2.log; grep "^tuned ('softmax_online" $O/r13/softmax_rr_h2.log | cut -c1-160
  for s in llama3vocab-t2048 qwen7bvocab-t1024; do
    run=softmax-$s-r13-$TAG
    cap $run softmax --variant triton --variant triton_h2 --variant compile --shape $s
    cmp $run:triton $run:triton_h2; cmp $run:compile $run:triton_h2
  done
  ;;
esac
done
if ls $O/prof/*/ >/dev/null 2>&1; then cp $O/cap-*.log $O/r13/ 2>/dev/null; pack $OUT/r13_prof_$TAG.tar.xz; fi
tar -cJf $OUT/r13_$TAG.tar.xz -C $O r13 && ls -la $OUT
