#!/usr/bin/env bash
# Device calls, kernel lab round 15 (issue 21 item 3: the fp8 GEMM warp-specialized in Gluon):
#   bash benchmarks/gpu/round15.sh ws TAG    # fp8_ws15.py: edges + float64 check, then round-robin beside v3 and _scaled_mm
#   bash benchmarks/gpu/round15.sh cap TAG   # the pairs through profkit (ncu lean)
set -u
MODE=$1 TAG=$2
source benchmarks/gpu/device_env.sh
mkdir -p $O/r15
for M in ${MODE//,/ }; do
case $M in
ws)
  timeout ${WS_TIMEOUT:-420} python3 $R/benchmarks/gpu/fp8_ws15.py --rounds ${ROUNDS:-3} --out $O/r15 ${WS_ARGS:-} 2>&1 \
    | grep -v -i "warn" > $O/r15/ws.log
  echo "ws rc=$?"; cat $O/r15/ws.log | cut -c1-260
  ;;
cap) pairs r15 fp8_gemm "${CAP_VARIANTS}" "${CAP_PAIRS}" ;;
esac
done
finish r15 $TAG
