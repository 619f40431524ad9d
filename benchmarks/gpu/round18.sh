#!/usr/bin/env bash
# Device calls, kernel lab round 18 (issue 21 item 3: the CUDA C++ fp8 GEMM's clusters along N and
# its CTAs' placement, kernels/cuda/fp8_gemm.cu): round15.sh's modes with fp8_ws18.py, raw rows in r18/.
#   bash benchmarks/gpu/round18.sh ws TAG    # fp8_ws18.py: edges + float64 check, then round-robin beside gluon_ws, v3 and _scaled_mm
#   bash benchmarks/gpu/round18.sh rr TAG    # variants_rr.py: both CUDA pairings, gluon_ws, v3 and _scaled_mm, both scale modes
#   bash benchmarks/gpu/round18.sh cap TAG   # the pairs through profkit (ncu lean): CAP_VARIANTS, CAP_PAIRS, SHAPES
#   bash benchmarks/gpu/round18.sh probe TAG # ncu counters of PROBE_NAMES (fp8_probe17.py), e.g. the L2 request coalescer's
ROUND=r18 WS_SCRIPT=fp8_ws18.py \
RR_DEFAULT=cuda_ws112_g2,cuda_ws112,gluon_ws,scaled_mm,cuda_ws112_g2_tensor,cuda_ws112_tensor,gluon_ws_tensor,scaled_mm_tensor \
  exec bash "$(dirname "$0")/round15.sh" "$@"
