#!/usr/bin/env bash
# Device calls, kernel lab round 14 (issue 21 item 1: the vocabulary softmax on the H200, CUDA C++):
#   bash benchmarks/gpu/round14.sh check TAG   # the cluster kernel against float64 (softmax_cluster14.py check)
#   bash benchmarks/gpu/round14.sh sweep TAG   # its (cluster, stages) and grids beside triton by graph replay
#   bash benchmarks/gpu/round14.sh rr TAG      # variants_rr.py: cuda, triton, triton_h2, compile (7 rounds)
#   bash benchmarks/gpu/round14.sh cap TAG     # the pairs through profkit (ncu lean): triton -> cuda, compile -> cuda
set -u
MODE=$1 TAG=$2
source benchmarks/gpu/device_env.sh
mkdir -p $O/r14
SHAPES=llama3vocab-t2048,qwen7bvocab-t1024
for M in ${MODE//,/ }; do
case $M in
check)
  timeout 240 python3 $R/benchmarks/gpu/softmax_cluster14.py check --out $O/r14 2>&1 | grep -v -i warn > $O/r14/check.log
  echo "check rc=$?"; tail -40 $O/r14/check.log
  ;;
sweep)
  timeout 300 python3 $R/benchmarks/gpu/softmax_cluster14.py sweep --rounds ${ROUNDS:-5} --out $O/r14 2>&1 \
    | grep -v -i warn > $O/r14/sweep.log
  echo "sweep rc=$?"; cat $O/r14/sweep.log
  ;;
rr)
  timeout 300 python3 $R/benchmarks/gpu/variants_rr.py --op softmax --variants ${RR:-cuda,triton,triton_h2,compile} \
    --shapes $SHAPES --rounds 7 --out $O/r14/rr 2>&1 | grep -v -i "warn\|Backend impl" > $O/r14/rr.log
  echo "variants_rr rc=$?"; grep -v "^tuned" $O/r14/rr.log; grep "^tuned ('softmax_cluster" $O/r14/rr.log | cut -c1-400
  ;;
cap) pairs r14 softmax "triton cuda compile" "triton:cuda compile:cuda" ;;
esac
done
finish r14 $TAG
