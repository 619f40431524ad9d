#!/usr/bin/env bash
# Device calls, kernel lab round 19 (issue 21 item 3: the CUDA C++ fp8 GEMM's clusters numbered by
# the GPC they land on, kernels/cuda/fp8_gemm.cu steer()): round15.sh's modes with fp8_ws19.py, raw rows in r19/.
#   bash benchmarks/gpu/round19.sh ws TAG    # fp8_ws19.py: edges + float64 check, then round-robin beside gluon_ws, v3 and _scaled_mm
#   bash benchmarks/gpu/round19.sh rr TAG    # variants_rr.py (RR: the variants)
#   bash benchmarks/gpu/round19.sh cap TAG   # the pairs through profkit (ncu lean): CAP_VARIANTS, CAP_PAIRS, SHAPES
#   bash benchmarks/gpu/round19.sh probe TAG # ncu counters of PROBE_NAMES (fp8_probe17.py), e.g. the L2 request coalescer's
ROUND=r19 WS_SCRIPT=fp8_ws19.py \
RR_DEFAULT=cuda_ws112_g2,gluon_ws,scaled_mm,cuda_ws112_g2_tensor,gluon_ws_tensor,scaled_mm_tensor \
  exec bash "$(dirname "$0")/round15.sh" "$@"
