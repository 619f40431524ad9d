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
SHAPES=llama3vocab-t2048,qwen7bvocab-t1024
# sweep KINDS RR_GROUP RR_VARIANTS SUFFIX TIMEOUT: the row-group launches whose kind holds one of KINDS,
# each checked and timed alone, then the variants round-robin (softmax_group.py, RR_GROUP), then
# variants_rr.py over RR_VARIANTS (graph replay, 7 rounds)
sweep() {
  SOFTMAX_GROUPS_ONLY=1 SOFTMAX_KINDS=$1 SOFTMAX_RR=$2 timeout 300 python3 $R/benchmarks/gpu/softmax_group.py \
    --shapes $SHAPES --rounds 5 --out $O/r13 2>&1 | grep -v -i "warn" > $O/r13/softmax_group$4.log
  echo "softmax_group rc=$?"; grep -E '^[a-z0-9]+vocab|graph:|check' $O/r13/softmax_group$4.log | cut -c1-400
  python3 $R/benchmarks/gpu/softmax_group.py --summary $O/r13/softmax_group.json
  timeout $5 python3 $R/benchmarks/gpu/variants_rr.py --op softmax --variants $3 --shapes $SHAPES --rounds 7 \
    --out $O/r13/rr$4 2>&1 | grep -v -i "warn\|Backend impl" > $O/r13/softmax_rr$4.log
  echo "variants_rr rc=$?"; grep -v "^tuned" $O/r13/softmax_rr$4.log; grep "^tuned ('softmax_online" $O/r13/softmax_rr$4.log | cut -c1-160
}
for M in ${MODE//,/ }; do
case $M in
probe)
  for p in full nowait stream; do
    timeout 150 python3 $R/benchmarks/gpu/softmax_probe13.py $p --out $O/r13 2>&1 | grep -v -i "warn" | tail -3
  done
  ;;
sm) sweep "${SOFTMAX_KINDS:-_loc,_h2,_ff,_cap,group_lag_pf1}" triton,triton_r12,triton_h2,compile \
      triton,triton_r12,triton_h2,triton_ff,compile "" 240 ;;
cap) pairs r13 softmax "triton_r12 triton triton_h2 triton_ff compile" \
       "triton_r12:triton triton:triton_h2 triton:triton_ff compile:triton" ;;
sp) sweep _s,group_lag_pf1,group_lag_loc_pf1 triton,triton_loc,triton_h2,compile triton,triton_loc,triton_r12,triton_h2,compile \
      _sp 240 ;;
cap2) pairs r13 softmax "triton_loc triton triton_h2 compile" "triton_loc:triton triton:triton_h2 compile:triton" ;;
h2)
  sweep _h2,group_lag_pf1 triton,triton_h2,compile triton_h2,triton,compile _h2 200
  pairs r13 softmax "triton triton_h2 compile" "triton:triton_h2 compile:triton_h2"
  ;;
esac
done
finish r13 $TAG
