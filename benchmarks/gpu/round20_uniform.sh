#!/usr/bin/env bash
# Device call, kernel lab round 20 (issue 21 item 3): the CUDA fp8 GEMM's warpgroup index broadcast
# from lane 0 (kernels/cuda/fp8_gemm.cu), so that the wgmma descriptors live in uniform registers.
# The before is the source as committed before the edit, carried in .carry-old/fp8_gemm.cu (git show
# <commit>:kernels/cuda/fp8_gemm.cu); each side is built in turn into the installed copy.
#   bash benchmarks/gpu/round20_uniform.sh probe TAG   # ncu counters of PROBE_NAMES, each side
#   bash benchmarks/gpu/round20_uniform.sh cap TAG     # each side captured through profkit (ncu lean) and
#                                                      # timed round-robin, then the runs compared
# (run with carry .gpu-libs .carry-r5-whl .carry-old)
set -u
MODE=$1 TAG=$2
source benchmarks/gpu/device_env.sh
SITE=/tmp/site/profkit/kernels/cuda/fp8_gemm.cu
cp $SITE /tmp/after.cu
mkdir -p $O/r20
RUN=fp8_gemm-qwen7b-down-m1024-r20-$TAG
MET=gpu__time_duration.sum,lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum,lts__t_sectors_srcunit_tex_op_read.sum,sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.max.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max
for side in before after; do
  if [ $side = before ]; then cp $R/.carry-old/fp8_gemm.cu $SITE; else cp /tmp/after.cu $SITE; fi
  if [ $MODE = probe ]; then
    INC=(); for n in ${PROBE_NAMES//,/ }; do INC+=(--nvtx-include "$n/"); done
    PROBE_REPS=2 timeout 200 $NCU --clock-control none --cache-control none --nvtx "${INC[@]}" --metrics "$MET" --csv \
      python3 $R/benchmarks/gpu/fp8_probe17.py ${PROBE_SHAPE:-qwen7b-down-m1024} ${PROBE_MODE:-tensor} $PROBE_NAMES \
      > $O/r20/probe-$TAG-$side.csv 2> $O/r20/probe-$TAG-$side.log
    echo "== $side rc=$?"
    grep '^"' $O/r20/probe-$TAG-$side.csv | python3 -c '
import csv, sys
rows, order = {}, []
for r in csv.DictReader(sys.stdin):
    k = r["ID"]
    if k not in rows:
        order.append(k)
        rows[k] = [r["thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"].split(":")[1]]
    rows[k].append(r["Metric Name"].split("__")[1][:24] + "=" + r["Metric Value"])
for k in order:
    print(" ".join(rows[k]))'
  else
    cap $RUN-$side fp8_gemm --variant cuda_ws112_g2 --variant cuda_ws112_g2_tensor --variant gluon_ws --variant scaled_mm \
      --variant scaled_mm_tensor --shape qwen7b-down-m1024
    timeout 300 python3 $R/benchmarks/gpu/variants_rr.py --op fp8_gemm --dtype fp8 --rounds ${ROUNDS:-5} \
      --variants cuda_ws112_g2,cuda_ws112_g2_tensor,gluon_ws,scaled_mm,scaled_mm_tensor \
      --shapes ${RR_SHAPES:-qwen7b-down-m1024,m8192-n8192-k8192} --out $O/r20/rr-$TAG-$side 2>&1 | grep -v -i warn > $O/r20/rr-$TAG-$side.log
    echo "== rr $side"; cut -c1-200 $O/r20/rr-$TAG-$side.log
  fi
done
if [ $MODE = cap ]; then
  cmp $RUN-before:cuda_ws112_g2_tensor $RUN-after:cuda_ws112_g2_tensor
  cmp $RUN-before:cuda_ws112_g2 $RUN-after:cuda_ws112_g2
  cmp $RUN-after:scaled_mm_tensor $RUN-after:cuda_ws112_g2_tensor
  cmp $RUN-after:scaled_mm $RUN-after:cuda_ws112_g2
fi
finish r20 $TAG
