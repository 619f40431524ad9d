#!/usr/bin/env bash
# Device call (rounds 19-20, issue 21 item 3): the CUDA fp8 GEMM before and after one edit of its
# source (kernels/cuda/fp8_gemm.cu), in one call. The before is the source as committed before the
# edit, carried in .carry-old/fp8_gemm.cu (git show <commit>:kernels/cuda/fp8_gemm.cu); each side is
# built in turn into the installed copy (the build is cached by source).
#   bash benchmarks/gpu/fp8_edit_pair.sh probe ROUND TAG  # device_env.sh's probe of PROBE_NAMES, each side
#   bash benchmarks/gpu/fp8_edit_pair.sh script ROUND TAG # SCRIPT (of this folder) --out r<ROUND>/script-TAG-side
#        SCRIPT_ARGS, each side (round 22: fp8_trace21.py's stamps)
#   bash benchmarks/gpu/fp8_edit_pair.sh cap ROUND TAG    # each side captured through profkit (ncu lean) and timed
#        round-robin (ROUNDS, RR_SHAPES); then each of CMP_VARIANTS compared before -> after across the two runs,
#        and AFTER_PAIRS ("BEFORE:AFTER ...") within the after run
# MODE may list several (script,cap: each side built once). VARIANTS: those captured (default below).
# (run with carry .gpu-libs .carry-r5-whl .carry-old). Raw rows under r<ROUND>/; runs
# fp8_gemm-qwen7b-down-m1024-ROUND-TAG-{before,after}.
set -u
MODE=$1 ROUND=$2 TAG=$3
VARIANTS=${VARIANTS:-"cuda_ws112_g2 cuda_ws112_g2_tensor gluon_ws scaled_mm scaled_mm_tensor"}
CMP_VARIANTS=${CMP_VARIANTS:-"cuda_ws112_g2_tensor cuda_ws112_g2"}
source benchmarks/gpu/device_env.sh
SITE=/tmp/site/profkit/kernels/cuda/fp8_gemm.cu
cp $SITE /tmp/after.cu
mkdir -p $O/$ROUND
RUN=fp8_gemm-qwen7b-down-m1024-$ROUND-$TAG
for side in before after; do
  if [ $side = before ]; then cp $R/.carry-old/fp8_gemm.cu $SITE; else cp /tmp/after.cu $SITE; fi
  echo "== $side"
  case ,$MODE, in *,probe,*) probe $O/$ROUND/probe-$TAG-$side ;; esac
  case ,$MODE, in *,script,*)
    timeout ${SCRIPT_TIMEOUT:-300} python3 $R/benchmarks/gpu/$SCRIPT --out $O/$ROUND/script-$TAG-$side ${SCRIPT_ARGS:-} 2>&1 \
      | grep -v -i warn > $O/$ROUND/script-$TAG-$side.log
    echo "== $SCRIPT $side"; cut -c1-330 $O/$ROUND/script-$TAG-$side.log ;;
  esac
  case ,$MODE, in *,cap,*)
    cap $RUN-$side fp8_gemm $(printf -- '--variant %s ' $VARIANTS) --shape qwen7b-down-m1024
    timeout 300 python3 $R/benchmarks/gpu/variants_rr.py --op fp8_gemm --dtype fp8 --rounds ${ROUNDS:-5} \
      --variants ${VARIANTS// /,} --shapes ${RR_SHAPES:-qwen7b-down-m1024,m8192-n8192-k8192} \
      --out $O/$ROUND/rr-$TAG-$side 2>&1 | grep -v -i warn > $O/$ROUND/rr-$TAG-$side.log
    echo "== rr $side"; cut -c1-200 $O/$ROUND/rr-$TAG-$side.log ;;
  esac
done
case ,$MODE, in *,cap,*)
  for v in $CMP_VARIANTS; do cmp $RUN-before:$v $RUN-after:$v; done
  for p in ${AFTER_PAIRS:-}; do cmp $RUN-after:${p%%:*} $RUN-after:${p##*:}; done ;;
esac
finish $ROUND $TAG
