#!/usr/bin/env bash
# Device calls, kernel lab round 15 (issue 21 item 3: the fp8 GEMM warp-specialized in Gluon):
#   bash benchmarks/gpu/round15.sh ws TAG    # fp8_ws15.py: edges + float64 check, then round-robin beside v3 and _scaled_mm
#   bash benchmarks/gpu/round15.sh rr TAG    # variants_rr.py: gluon_ws, v3 and _scaled_mm, both scale modes (7 rounds)
#   bash benchmarks/gpu/round15.sh cap TAG   # the pairs through profkit (ncu lean): CAP_VARIANTS, CAP_PAIRS, SHAPES
#   bash benchmarks/gpu/round15.sh script TAG # SCRIPT=name.py of this folder, run with --out and SCRIPT_ARGS (round 20 on)
#   bash benchmarks/gpu/round15.sh probe TAG # ncu metrics (PROBE_METRICS) of one launch each of PROBE_NAMES
#                                            # (fp8_probe17.py's names) at PROBE_SHAPE, PROBE_MODE (round 18 on);
#                                            # PROBE_NCU_ARGS, PROBE_REPS (e.g. --cache-control none, 3: as a replay finds the L2)
# Later fp8 rounds call it with ROUND (the raw rows' folder), WS_SCRIPT and RR_DEFAULT set
# (round16.sh).
set -u
MODE=$1 TAG=$2
ROUND=${ROUND:-r15} WS_SCRIPT=${WS_SCRIPT:-fp8_ws15.py}
RR_DEFAULT=${RR_DEFAULT:-gluon_ws,triton_promote,scaled_mm,gluon_ws_tensor,triton_promote_tensor,scaled_mm_tensor}
source benchmarks/gpu/device_env.sh
mkdir -p $O/$ROUND
for M in ${MODE//,/ }; do
case $M in
ws)
  timeout ${WS_TIMEOUT:-420} python3 $R/benchmarks/gpu/$WS_SCRIPT --rounds ${ROUNDS:-3} --out $O/$ROUND ${WS_ARGS:-} 2>&1 \
    | grep -v -i "warn" > $O/$ROUND/ws.log
  echo "ws rc=$?"; cat $O/$ROUND/ws.log | cut -c1-260
  ;;
rr)
  timeout 420 python3 $R/benchmarks/gpu/variants_rr.py --op fp8_gemm --dtype fp8 --rounds ${ROUNDS:-7} \
    --variants ${RR:-$RR_DEFAULT} \
    --shapes ${RR_SHAPES:-llama8b-gateup-m1024,qwen7b-down-m1024,llama8b-qkv-m4096,llama8b-down-m4096,m8192-n8192-k8192} \
    --out $O/$ROUND/rr 2>&1 | grep -v -i "warn" > $O/$ROUND/rr.log
  echo "variants_rr rc=$?"; cat $O/$ROUND/rr.log | cut -c1-220
  ;;
cap) pairs $ROUND fp8_gemm "${CAP_VARIANTS}" "${CAP_PAIRS}" ;;
script)  # SCRIPT (a file of benchmarks/gpu/) --out the round's folder, its log beside its rows (round 20 on)
  timeout ${SCRIPT_TIMEOUT:-420} python3 $R/benchmarks/gpu/$SCRIPT --out $O/$ROUND ${SCRIPT_ARGS:-} 2>&1 | grep -v -i "warn" > $O/$ROUND/${SCRIPT%.py}.log
  echo "$SCRIPT rc=$?"; cut -c1-220 $O/$ROUND/${SCRIPT%.py}.log
  ;;
probe) probe $O/$ROUND/probe-$TAG ;;
esac
done
finish $ROUND $TAG
