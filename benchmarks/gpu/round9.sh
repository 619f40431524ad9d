#!/usr/bin/env bash
# Device calls, kernel lab round 9 (issue 21):
#   bash benchmarks/gpu/round9.sh fp8n TAG [SHAPES]   # fp8: v3 with tiles 224 / 192 / 160 wide (fp8_ntile.py)
#                                                      # beside v3 and both _scaled_mm modes -> $OUT/r9_TAG.tar.xz
#   bash benchmarks/gpu/round9.sh sx TAG               # softmax rows held whole: the L2 hint as a tuned choice;
#                                                      # kernels.py --graph for softmax, the pairs triton_evict ->
#                                                      # triton and the better peer -> triton at both score shapes,
#                                                      # and (PROF_ROPE=1) RoPE 32768 tokens, triton vs compile
#   bash benchmarks/gpu/round9.sh rp TAG               # RoPE (measured at 1ffb7fa, reverted): many tokens weigh the head-split launch; kernels.py
#                                                      # --graph for rope, pairs triton_tokenprog -> triton and
#                                                      # compile -> triton at 32768 and 4096 tokens
#   bash benchmarks/gpu/round9.sh sx,rp TAG            # both, one machine
#   bash benchmarks/gpu/round9.sh all TAG              # kernels.py --graph, every op and shape: the tables' fresh run
set -u
MODE=$1 TAG=$2 SHAPES=${3:-}
source benchmarks/gpu/device_env.sh
mkdir -p $O/r9
for M in ${MODE//,/ }; do
case $M in
fp8n)
  timeout 420 python3 $R/benchmarks/gpu/fp8_ntile.py --rounds 5 --out $O/r9 ${SHAPES:+--shapes $SHAPES} 2>&1 | grep -v -i warn | tee $O/r9/fp8_ntile.log | tail -80
  ;;
sx)
  timeout 240 python3 $R/benchmarks/kernels.py --graph --ops softmax --no-backward --variants triton,triton_evict,liger,compile --shapes scores --out $O/r9/softmax > $O/r9/kernels_sx.log 2>&1; echo "kernels rc=$?"
  grep -E "triton|compile|liger|copy" $O/r9/kernels_sx.log | grep -v vocab | cut -c1-170 | tail -16
  for shape in scores-r32768-n4096 scores-r65536-n1024; do
    run=softmax-$shape-r9-$TAG
    cap $run softmax --variant triton_evict --variant triton --variant liger --variant compile --shape $shape
    cmp $run:triton_evict $run:triton; cmp $run:liger $run:triton; cmp $run:compile $run:triton
  done
  if [ "${PROF_ROPE:-0}" = 1 ]; then
    run=rope-llama8b-t32768-r9-$TAG
    cap $run rope --variant compile --variant triton --shape llama8b-t32768
    cmp $run:compile $run:triton
  fi
  ;;
all)
  timeout 560 python3 $R/benchmarks/kernels.py --graph --budget-s 500 --out $O/r9/all > $O/r9/kernels_all.log 2>&1; echo "kernels rc=$?"
  tail -5 $O/r9/kernels_all.log | cut -c1-200
  ;;
rp)
  timeout 300 python3 $R/benchmarks/kernels.py --graph --ops rope --no-backward --variants triton,triton_tokenprog,liger,compile --out $O/r9/rope > $O/r9/kernels_rp.log 2>&1; echo "kernels rc=$?"
  grep -E "^\| rope" $O/r9/kernels_rp.log | cut -c1-200
  for shape in llama8b-t32768 qwen7b-t4096; do
    run=rope-$shape-r9-$TAG
    cap $run rope --variant triton_tokenprog --variant triton --variant compile --shape $shape
    cmp $run:triton_tokenprog $run:triton; cmp $run:compile $run:triton
  done
  ;;
esac
done
if ls $O/prof/*/ >/dev/null 2>&1; then cp $O/cap-*.log $O/r9/ 2>/dev/null; pack $OUT/r9_prof_$TAG.tar.xz; fi
tar -cJf $OUT/r9_$TAG.tar.xz -C $O r9 && ls -la $OUT
