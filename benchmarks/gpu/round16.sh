#!/usr/bin/env bash
# Device calls, kernel lab round 16 (issue 21 item 3: the fp8 GEMM's 128 x 112 tile, fp8_gemm_ws112):
# round15.sh's modes (ws, rr, cap; the same environment) with fp8_ws16.py and the raw rows in r16/.
#   bash benchmarks/gpu/round16.sh ws TAG    # fp8_ws16.py: edges + float64 check, then round-robin beside gluon_ws, v3 and _scaled_mm
#   bash benchmarks/gpu/round16.sh rr TAG    # variants_rr.py: gluon_ws112, gluon_ws, v3 and _scaled_mm, both scale modes
#   bash benchmarks/gpu/round16.sh cap TAG   # the pairs through profkit (ncu lean): CAP_VARIANTS, CAP_PAIRS, SHAPES
ROUND=r16 WS_SCRIPT=fp8_ws16.py \
RR_DEFAULT=gluon_ws112,gluon_ws,triton_promote,scaled_mm,gluon_ws112_tensor,gluon_ws_tensor,triton_promote_tensor,scaled_mm_tensor \
  exec bash "$(dirname "$0")/round15.sh" "$@"
