#!/usr/bin/env bash
# Device calls, kernel lab round 22 (issue 21 item 3: the CUDA C++ fp8 GEMM between its tiles, and
# at 8192^3 its operands' TMA L2 promotion): round15.sh's modes, raw rows in r22/.
#   bash benchmarks/gpu/round22.sh probe TAG  # ncu counters of PROBE_NAMES (fp8_probe17.py) at PROBE_SHAPE
#   bash benchmarks/gpu/round22.sh rr TAG     # variants_rr.py of RR (default below), RR_SHAPES
#   bash benchmarks/gpu/round22.sh cap TAG    # the pairs through profkit (ncu lean): CAP_VARIANTS, CAP_PAIRS, SHAPES
# The before / after of a source edit: fp8_edit_pair.sh (script|cap ... r22 TAG).
ROUND=r22 WS_SCRIPT=fp8_ws21.py \
RR_DEFAULT=cuda_ws112_tma,cuda_ws112_tma8,gluon_ws,triton_promote,scaled_mm,cuda_ws112_tma_tensor,cuda_ws112_tma8_tensor,gluon_ws_tensor,triton_promote_tensor,scaled_mm_tensor \
  exec bash "$(dirname "$0")/round15.sh" "$@"
