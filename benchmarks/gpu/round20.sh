#!/usr/bin/env bash
# Device calls, kernel lab round 20 (issue 21 item 3: the CUDA C++ fp8 GEMM's k order flipped on
# every other tile, kernels/cuda/fp8_gemm.cu Params::kflip): round15.sh's modes with fp8_ws20.py, raw rows in r20/.
#   bash benchmarks/gpu/round20.sh ws TAG    # fp8_ws20.py: edges + float64 check, then round-robin beside gluon_ws, v3 and _scaled_mm
#   bash benchmarks/gpu/round20.sh rr TAG    # variants_rr.py (RR: the variants)
#   bash benchmarks/gpu/round20.sh cap TAG   # the pairs through profkit (ncu lean): CAP_VARIANTS, CAP_PAIRS, SHAPES
#   bash benchmarks/gpu/round20.sh probe TAG # ncu counters of PROBE_NAMES (fp8_probe17.py; _r: flipped), DRAM bytes among them
#   SCRIPT=fp8_kslope20.py bash benchmarks/gpu/round20.sh script TAG   # a tile's fixed cost: time against K
ROUND=r20 WS_SCRIPT=fp8_ws20.py \
RR_DEFAULT=cuda_ws112_g2,gluon_ws,scaled_mm,cuda_ws112_g2_tensor,gluon_ws_tensor,scaled_mm_tensor \
  exec bash "$(dirname "$0")/round15.sh" "$@"
