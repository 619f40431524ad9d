#!/usr/bin/env bash
# Device call, kernel lab round 26 (issue 21 item 1).
#   bash benchmarks/gpu/round26.sh MODE[,MODE] TAG   (carry .gpu-libs .carry-r5-whl)
# MODE swiglu: SwiGLU at one token, fresh and after the full run's earlier rows, with one
#    intervention at a time (benchmarks/gpu/swiglu26.py), then the same without the rows (control).
# MODE l2: SwiGLU at one token right after a kernel that leaves the L2 full of evict_last lines,
#    of plain lines, or after the vocabulary softmax; the tuned launch with and without its
#    evict_first hint, beside compile (benchmarks/gpu/swiglu26_l2.py).
# MODE pairs: profkit capture (nsys + ncu lean) of SwiGLU at one token with 8 input copies and
#    the L2 filled before each range (--rotate 8 --l2-fill), CALLS (40) calls a side: run
#    swiglu-llama8b-t1-r26-TAG, pairs triton_hint -> triton, compile -> triton, compile -> triton_hint.
# MODE table: a fresh run of every registered shape (benchmarks/kernels.py --graph), the lab as
#    shipped (and triton_hint, round 6's small SwiGLU launch), into r26/TAG/table/kernels.json.
set -u
MODE=$1 TAG=$2
source benchmarks/gpu/device_env.sh
mkdir -p $O/r26/$TAG
for M in ${MODE//,/ }; do
case $M in
swiglu)
  timeout ${SW_TIMEOUT:-420} python3 $R/benchmarks/gpu/swiglu26.py --rounds ${ROUNDS:-3} --out $O/r26/$TAG/swiglu \
    2>&1 | grep -v -i "warn\|Backend impl" | tee $O/r26/$TAG/swiglu26.log | grep -v "^tuned\|^ *[a-z_]*/.*: [0-9.]* ms\|^  [a-z_]*/.*s$"
  timeout 120 python3 $R/benchmarks/gpu/swiglu26.py --rounds ${ROUNDS:-3} --skip-run --out $O/r26/$TAG/swiglu_control \
    2>&1 | grep -v -i "warn\|Backend impl" | tee $O/r26/$TAG/swiglu26_control.log | grep -v "^tuned" ;;
l2)
  timeout ${L2_TIMEOUT:-300} python3 $R/benchmarks/gpu/swiglu26_l2.py --rounds ${ROUNDS:-3} --out $O/r26/$TAG/l2 \
    2>&1 | grep -v -i "warn\|Backend impl" | tee $O/r26/$TAG/swiglu26_l2.log | grep -v "^tuned" ;;
pairs)
  # profkit capture in the context the table meets: 8 input copies, the L2 filled before each range
  export CAP_ARGS="--calls ${CALLS:-40} --rotate 8 --l2-fill"
  run=swiglu-llama8b-t1-r26-$TAG
  echo "== capture $run (nsys + ncu lean)"
  timeout 200 python3 -m profkit capture --db $DB --out $O/prof --metrics lean --run $run $CAP_ARGS swiglu \
    --variant triton_hint --variant triton --variant compile --shape llama8b-t1 > $O/cap-$run.log 2>&1
  echo "   rc=$?"; tail -2 $O/cap-$run.log
  for p in triton_hint:triton compile:triton compile:triton_hint; do cmp $run:${p%%:*} $run:${p##*:}; done ;;
table)
  timeout ${TABLE_TIMEOUT:-420} python3 $R/benchmarks/kernels.py --graph --budget-s ${TABLE_BUDGET:-380} \
    --variants ${TABLE_VARIANTS:-triton,triton_hint,triton_gathered,triton_h2,triton_direct,compile,compile_direct,liger} \
    --out $O/r26/$TAG/table > $O/r26/$TAG/kernels_table.log 2>&1; echo "kernels rc=$?"
  tail -3 $O/r26/$TAG/kernels_table.log | cut -c1-200
  python3 - $O/r26/$TAG/table/kernels.json <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
for r in rows:
    if r["op"] == "swiglu" and r["shape"].endswith("t1") and "graph_ms" in r:
        print(f'   swiglu t1 {r["variant"]:12} {r["graph_ms"] * 1e3:.3f} us (graph)')
PY
  ;;
*) echo "round26.sh: unknown mode $M"; exit 2 ;;
esac
done
finish r26 $TAG
