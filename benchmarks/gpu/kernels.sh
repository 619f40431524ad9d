#!/usr/bin/env bash
# Device call for the kernel lab, run from the repository root on the GPU host (with .gpu-libs and
# the wheels in .carry-r5-whl beside it; device_env.sh installs the checkout):
#   bash benchmarks/gpu/kernels.sh MODE[,MODE] TAG
# MODE check: every operator's variants once, each checked against its float64 reference.
# MODE bench: benchmarks/kernels.py --graph at the registered shapes (OPS, BENCH_SHAPES, BENCH_VARIANTS
#             narrow it).
# MODE rr:    OP's VARIANTS interleaved by CUDA-graph replay (variants_rr.py, ROUNDS rounds; ratios
#             to the first variant named): the way a 1-3 % difference is measured.
# MODE cap:   profkit capture (ncu lean) of OP's VARIANTS at each of SHAPES and `profkit compare` of
#             each PAIRS entry (BEFORE:AFTER), CALLS calls a side.
# Results come back packed in $OUT; a measured pair becomes a row of benchmarks/ledger.csv.
set -u
MODE=$1 TAG=$2
OP=${OP:-softmax} VARIANTS=${VARIANTS:-triton,compile} SHAPES=${SHAPES:-llama3vocab-t2048}
source benchmarks/gpu/device_env.sh
mkdir -p $O/kernels/$TAG
for M in ${MODE//,/ }; do
case $M in
check)
  for op in rope rmsnorm_rope rmsnorm add_rmsnorm swiglu softmax; do
    python3 -m profkit.kernels.run $op --iters 1 --check-out $O/kernels/$TAG/check-$op.json > /dev/null \
      2> $O/kernels/$TAG/check-$op.log || { echo "FAIL $op"; tail -3 $O/kernels/$TAG/check-$op.log; continue; }
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); [print(('ok  ' if v['ok'] else 'BAD ')+k, '%.2e' % v['rel_err']) for k, v in d.items()]" $O/kernels/$TAG/check-$op.json
  done ;;
bench)
  python3 $R/benchmarks/kernels.py --graph --out $O/kernels/$TAG ${OPS:+--ops $OPS} ${BENCH_SHAPES:+--shapes $BENCH_SHAPES} \
    ${BENCH_VARIANTS:+--variants $BENCH_VARIANTS} \
    2>&1 | grep -v -i "warn" | tail -40 ;;
rr)
  python3 $R/benchmarks/gpu/variants_rr.py --op $OP --variants $VARIANTS --shapes $SHAPES \
    --rounds ${ROUNDS:-7} --out $O/kernels/$TAG 2>&1 | grep -v -i "warn\|Backend impl" ;;
cap)
  CAP_ARGS="--calls ${CALLS:-12}" pairs kernels $OP "${VARIANTS//,/ }" "${PAIRS:-}" ;;
*) echo "kernels.sh: unknown mode $M"; exit 2 ;;
esac
done
finish kernels $TAG
