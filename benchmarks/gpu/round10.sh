#!/usr/bin/env bash
# Device calls, kernel lab round 10 (issue 21):
#   bash benchmarks/gpu/round10.sh fh TAG    # fp8: helper SMs at the one-wave shape (fp8_helped.py: round-robin
#                                            # beside v3 and _scaled_mm), then profkit capture WITH a timeline
#                                            # (nsys: the two grids overlap; ncu alone would replay them one
#                                            # after the other) and lean counters, and the pairs
#   bash benchmarks/gpu/round10.sh fhb TAG   # fp8_helped.py's set b only (helper tiles, each grid alone)
#   bash benchmarks/gpu/round10.sh fc TAG    # SM clock and power while v3, _scaled_mm and the helped grids run (fp8_helped_clocks.py)
#   bash benchmarks/gpu/round10.sh fcs TAG   # the same for v3 and _scaled_mm at 8192^3, llama8b-down-m4096 and llama8b-gateup-m1024
#   bash benchmarks/gpu/round10.sh sw TAG    # SwiGLU at one token: the lab's launch and compile's timed four ways (swiglu_t1.py)
#   bash benchmarks/gpu/round10.sh rf TAG    # RMSNorm backward: the fastest same-bytes kernel at 4096 tokens (rmsnorm_bwd/floor.py)
set -u
MODE=$1 TAG=$2
source benchmarks/gpu/device_env.sh
mkdir -p $O/r10
for M in ${MODE//,/ }; do
case $M in
fh)
  timeout 300 python3 $R/benchmarks/gpu/fp8_helped.py --rounds 5 --out $O/r10 --shapes qwen7b-down-m1024 2>&1 | grep -v -i warn | tee $O/r10/fp8_helped.log | tail -40
  run=fp8_gemm-qwen7b-down-m1024-r10-$TAG
  echo "== capture $run (nsys + ncu lean)"
  timeout 240 python3 -m profkit capture --db $DB --out $O/prof --metrics lean --run $run fp8_gemm \
    --variant triton_promote_tensor --variant triton_helped_tensor --variant scaled_mm_tensor \
    --variant triton_promote --variant triton_helped --variant scaled_mm --shape qwen7b-down-m1024 > $O/cap-$run.log 2>&1
  echo "   rc=$?"; tail -3 $O/cap-$run.log
  cmp $run:triton_promote_tensor $run:triton_helped_tensor; cmp $run:scaled_mm_tensor $run:triton_helped_tensor
  cmp $run:triton_promote $run:triton_helped; cmp $run:scaled_mm $run:triton_helped
  python3 -m profkit timeline --db $DB --run $run 2>&1 | head -24
  ;;
fhb)
  HELPED_SET=b timeout 300 python3 $R/benchmarks/gpu/fp8_helped.py --rounds 5 --out $O/r10 --shapes qwen7b-down-m1024 2>&1 | grep -v -i warn | tee $O/r10/fp8_helped_b.log | grep -v compiled | tail -24
  grep compiled $O/r10/fp8_helped_b.log | sort | uniq -c
  ;;
fc)
  timeout 120 python3 $R/benchmarks/gpu/fp8_helped_clocks.py --out $O/r10 2>&1 | grep -v -i warn | tee $O/r10/fp8_helped_clocks.log | tail -8
  ;;
fcs)
  timeout 200 python3 $R/benchmarks/gpu/fp8_helped_clocks.py --out $O/r10 --shapes m8192-n8192-k8192,llama8b-down-m4096,llama8b-gateup-m1024 2>&1 | grep -v -i warn | tee $O/r10/fp8_clocks_shapes.log | tail -14
  ;;
rf)
  timeout 300 python3 $R/benchmarks/gpu/rmsnorm_bwd/floor.py $O/r10 2>&1 | grep -v -i warn | tee $O/r10/rmsnorm_bwd_floor.log | grep -E "==|torch_add|compile|v3 |copy GB" 
  ;;
sw)
  timeout 200 python3 $R/benchmarks/gpu/swiglu_t1.py --rounds 5 --out $O/r10 2>&1 | grep -v -i warn | tee $O/r10/swiglu_t1.log | tail -24
  # and kernels.py's own rows for that shape, twice, each in a fresh process (round 9's full run had 0.88-0.90x)
  for i in 1 2; do
    timeout 150 python3 $R/benchmarks/kernels.py --graph --ops swiglu --no-backward --shapes llama8b-t1 --out $O/r10/swiglu_t1_kernels$i > $O/r10/swiglu_t1_kernels$i.log 2>&1
    echo "kernels.py run $i rc=$?"; grep -E "^\| swiglu" $O/r10/swiglu_t1_kernels$i.log | cut -c1-150
  done
  ;;
esac
done
if ls $O/prof/*/ >/dev/null 2>&1; then cp $O/cap-*.log $O/r10/ 2>/dev/null; pack $OUT/r10_prof_$TAG.tar.xz; fi
tar -cJf $OUT/r10_$TAG.tar.xz -C $O r10 && ls -la $OUT
