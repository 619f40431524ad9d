#!/usr/bin/env bash
# Device calls, kernel lab round 15 (issue 21 item 3: the fp8 GEMM warp-specialized in Gluon):
#   bash benchmarks/gpu/round15.sh ws TAG    # fp8_ws15.py: edges + float64 check, then round-robin beside v3 and _scaled_mm
#   bash benchmarks/gpu/round15.sh rr TAG    # variants_rr.py: gluon_ws, v3 and _scaled_mm, both scale modes (7 rounds)
#   bash benchmarks/gpu/round15.sh cap TAG   # the pairs through profkit (ncu lean): CAP_VARIANTS, CAP_PAIRS, SHAPES
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
rr)
  timeout 420 python3 $R/benchmarks/gpu/variants_rr.py --op fp8_gemm --dtype fp8 --rounds ${ROUNDS:-7} \
    --variants ${RR:-gluon_ws,triton_promote,scaled_mm,gluon_ws_tensor,triton_promote_tensor,scaled_mm_tensor} \
    --shapes ${RR_SHAPES:-llama8b-gateup-m1024,qwen7b-down-m1024,llama8b-qkv-m4096,llama8b-down-m4096,m8192-n8192-k8192} \
    --out $O/r15/rr 2>&1 | grep -v -i "warn" > $O/r15/rr.log
  echo "variants_rr rc=$?"; cat $O/r15/rr.log | cut -c1-220
  ;;
cap) pairs r15 fp8_gemm "${CAP_VARIANTS}" "${CAP_PAIRS}" ;;
esac
done
finish r15 $TAG
