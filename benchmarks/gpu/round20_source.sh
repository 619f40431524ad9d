#!/usr/bin/env bash
# Device call, kernel lab round 20 (issue 21 item 3): where the CUDA fp8 GEMM's warps wait, per SASS
# instruction (ncu's source page: warp stall samples by reason), for SRC_NAMES (fp8_probe17.py's
# names; e.g. the no-load diagnostic _d2 beside the real kernel) at qwen7b-down-m1024 per-tensor.
#   SRC_NAMES=a,b bash benchmarks/gpu/round20_source.sh TAG     -> r20/src-TAG-<name>.csv.xz
set -u
TAG=$1
source benchmarks/gpu/device_env.sh
mkdir -p $O/r20
for n in ${SRC_NAMES//,/ }; do
  timeout 200 $NCU --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight \
    --import-source no --nvtx --nvtx-include "$n/" -o $O/r20/src-$n -f \
    python3 $R/benchmarks/gpu/fp8_probe17.py qwen7b-down-m1024 tensor $n > $O/r20/src-$TAG-$n.log 2>&1
  echo "== $n rc=$?"
  $NCU --import $O/r20/src-$n.ncu-rep --page source --csv --print-source sass > $O/r20/src-$TAG-$n.csv 2>/dev/null
  $NCU --import $O/r20/src-$n.ncu-rep --page details --csv > $O/r20/details-$TAG-$n.csv 2>/dev/null
  rm -f $O/r20/src-$n.ncu-rep; xz -9 $O/r20/src-$TAG-$n.csv
  ls -la $O/r20/src-$TAG-$n.csv.xz
done
finish r20 $TAG
