#!/usr/bin/env bash
# Device calls, kernel lab round 16 (issue 21 item 3: the fp8 GEMM's 128 x 112 tile, fp8_gemm_ws112):
#   bash benchmarks/gpu/round16.sh ws TAG    # fp8_ws16.py: edges + float64 check, then round-robin beside v3 and _scaled_mm
#   bash benchmarks/gpu/round16.sh rr TAG    # variants_rr.py: gluon_ws112, gluon_ws, v3 and _scaled_mm, both scale modes (7 rounds)
#   bash benchmarks/gpu/round16.sh cap TAG   # the pairs through profkit (ncu lean): CAP_VARIANTS, CAP_PAIRS, SHAPES
set -u
MODE=$1 TAG=$2
source benchmarks/gpu/device_env.sh
mkdir -p $O/r16
for M in ${MODE//,/ }; do
case $M in
ws)
  timeout ${WS_TIMEOUT:-420} python3 $R/benchmarks/gpu/fp8_ws16.py --rounds ${ROUNDS:-3} --out $O/r16 ${WS_ARGS:-} 2>&1 \
    | grep -v -i "warn" > $O/r16/ws.log
  echo "ws rc=$?"; cat $O/r16/ws.log | cut -c1-260
  ;;
rr)
  timeout 420 python3 $R/benchmarks/gpu/variants_rr.py --op fp8_gemm --dtype fp8 --rounds ${ROUNDS:-7} \
    --variants ${RR:-gluon_ws112,gluon_ws,triton_promote,scaled_mm,gluon_ws112_tensor,gluon_ws_tensor,triton_promote_tensor,scaled_mm_tensor} \
    --shapes ${RR_SHAPES:-llama8b-gateup-m1024,qwen7b-down-m1024,llama8b-qkv-m4096,llama8b-down-m4096,m8192-n8192-k8192} \
    --out $O/r16/rr 2>&1 | grep -v -i "warn" > $O/r16/rr.log
  echo "variants_rr rc=$?"; cat $O/r16/rr.log | cut -c1-220
  ;;
cap) pairs r16 fp8_gemm "${CAP_VARIANTS}" "${CAP_PAIRS}" ;;
esac
done
finish r16 $TAG
