#!/usr/bin/env bash
# Device calls, kernel lab round 27 (issue 21 item 1: the vocabulary softmax on the H200, 83-86 % of
# copy against the 93 % target). Written in a session without a GPU (none was lent): not yet run.
#   bash benchmarks/gpu/round27.sh MODE[,MODE] TAG   (carry .gpu-libs .carry-r5-whl)
# MODE sweep: every L2-held launch (L2_CANDIDATES, kinds "l2*") beside round 13's strongest row-group
#    kinds, each checked in float64 and timed alone (do_bench and graph replay, with its registers:
#    softmax_group.py); then the variants round-robin by graph replay (variants_rr.py, 7 rounds):
#    triton (the lab as shipped), triton_l2 (the tuner with the L2-held launches too), triton_h2,
#    compile, and a copy of the same bytes.
# MODE cap: the pairs through profkit (ncu lean, 12 calls a side): triton -> triton_l2 (the change),
#    compile -> triton_l2; DRAM bytes a call in the profiles say whether the second read hit the L2.
# Prediction (kernels.md, "Round 27"): 6-8 programs an SM where v4 fits 4, so ~2x the bytes in flight;
# against it, a second read of every element from the L2 and a second exponential. Supported if
# triton_l2 picks an l2 launch and is >= 1.03x triton on the H200 with DRAM bytes at the minimum.
set -u
MODE=$1 TAG=$2
source benchmarks/gpu/device_env.sh
mkdir -p $O/r27/$TAG
SHAPES=${SHAPES:-llama3vocab-t2048,qwen7bvocab-t1024}
for M in ${MODE//,/ }; do
case $M in
sweep)
  SOFTMAX_GROUPS_ONLY=1 SOFTMAX_KINDS=${SOFTMAX_KINDS:-l2,group_lag_loc_pf1,group_lag_h2_cap} \
    SOFTMAX_RR=triton,triton_l2,triton_h2,compile timeout ${SWEEP_TIMEOUT:-300} \
    python3 $R/benchmarks/gpu/softmax_group.py --shapes $SHAPES --rounds 5 --out $O/r27/$TAG 2>&1 \
    | grep -v -i "warn" > $O/r27/$TAG/softmax_group.log
  echo "softmax_group rc=$?"; grep -E '^[a-z0-9]+vocab|graph:|check' $O/r27/$TAG/softmax_group.log | cut -c1-400
  python3 $R/benchmarks/gpu/softmax_group.py --summary $O/r27/$TAG/softmax_group.json
  timeout ${RR_TIMEOUT:-200} python3 $R/benchmarks/gpu/variants_rr.py --op softmax --variants triton,triton_l2,triton_h2,compile \
    --shapes $SHAPES --rounds 7 --out $O/r27/$TAG/rr 2>&1 | grep -v -i "warn\|Backend impl" > $O/r27/$TAG/softmax_rr.log
  echo "variants_rr rc=$?"; grep -v "^tuned" $O/r27/$TAG/softmax_rr.log; grep "^tuned ('softmax_online" $O/r27/$TAG/softmax_rr.log | cut -c1-160
  ;;
cap) CAP_ARGS="--calls ${CALLS:-12}" pairs r27 softmax "triton triton_l2 compile" "triton:triton_l2 compile:triton_l2" ;;
*) echo "round27.sh: unknown mode $M"; exit 2 ;;
esac
done
finish r27 $TAG
