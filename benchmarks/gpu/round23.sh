#!/usr/bin/env bash
# Device calls, kernel lab round 23 (issue 21 item 1: the host-bound rows, kernels/_launch.py's
# short launch path off and on); raw rows in r23/TAG/.
#   (MODE may be a comma list: host,bench)
#   bash benchmarks/gpu/round23.sh host TAG     # host23.py: host and GPU time a call, off/on/off/on
#   bash benchmarks/gpu/round23.sh bench TAG    # benchmarks/kernels.py --graph over OPS / SHAPES,
#                                               # PROFKIT_FAST_LAUNCH=0 then 1 (same process order)
#   bash benchmarks/gpu/round23.sh pair TAG     # profkit capture (nsys, --calls 12) off then on, and
#                                               # profkit compare --by host / gpu (PAIR_OP, PAIR_SHAPE,
#                                               # PAIR_VARIANTS; several ops: mode pair once per call)
set -u
mode=$1 TAG=$2
source benchmarks/gpu/device_env.sh
mkdir -p $O/r23/$TAG
for m in ${mode//,/ }; do
case $m in
  host) timeout ${HOST_TIMEOUT:-520} python3 $R/benchmarks/gpu/host23.py --out $O/r23/$TAG ${HOST_ROWS:+--rows $HOST_ROWS} ${PROFILE:+--profile $PROFILE} \
          2>&1 | grep -v Warning | tee $O/r23/$TAG/host23.log | tail -80 ;;
  bench) for side in 0 1; do
           echo "== PROFKIT_FAST_LAUNCH=$side"
           PROFKIT_FAST_LAUNCH=$side timeout ${BENCH_TIMEOUT:-250} python3 $R/benchmarks/kernels.py --graph \
             --ops ${OPS:-rmsnorm,rope,rmsnorm_rope,add_rmsnorm} --shapes ${SHAPES:-t1,t4096} \
             --variants ${VARIANTS:-triton,compile,liger,triton_direct,compile_direct} \
             --out $O/r23/$TAG/fast$side > $O/r23/$TAG/kernels_fast$side.log 2>&1
           echo "   rc=$?"; tail -${BENCH_TAIL:-25} $O/r23/$TAG/kernels_fast$side.log
         done ;;
  pair) # profkit capture, timeline only, PAIR_CALLS (12) calls a variant, of PAIR_OP's PAIR_VARIANTS at
        # PAIR_SHAPE with the short launch path off (run ...-slow) then on (...-fast); compare by host
        # and by GPU time per call
        for side in slow fast; do
          run=$PAIR_OP-$PAIR_SHAPE-r23-$TAG-$side
          echo "== capture $run"
          PROFKIT_FAST_LAUNCH=$([ $side = fast ] && echo 1 || echo 0) timeout 200 python3 -m profkit capture \
            --db $DB --out $O/prof --no-ncu --run $run --calls ${PAIR_CALLS:-12} $PAIR_OP \
            $(printf -- '--variant %s ' ${PAIR_VARIANTS//,/ }) --shape $PAIR_SHAPE > $O/cap-$run.log 2>&1
          echo "   rc=$?"; tail -2 $O/cap-$run.log
        done
        for v in ${PAIR_VARIANTS//,/ }; do
          for by in host gpu; do
            echo "== compare $v by $by"
            python3 -m profkit compare --db $DB $PAIR_OP-$PAIR_SHAPE-r23-$TAG-slow:$v $PAIR_OP-$PAIR_SHAPE-r23-$TAG-fast:$v \
              --by $by --json > $O/r23/$TAG/cmp-$PAIR_OP-$PAIR_SHAPE-$v-$by.json 2>&1
            python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[0]; print(r['verdict'], round(r['speedup'],3), \
              [round(r['speedup_low'],3), round(r['speedup_high'],3)], 'us', round(r['before_us'],1), '->', round(r['after_us'],1), r['notes'])" \
              $O/r23/$TAG/cmp-$PAIR_OP-$PAIR_SHAPE-$v-$by.json || tail -3 $O/r23/$TAG/cmp-$PAIR_OP-$PAIR_SHAPE-$v-$by.json
          done
        done ;;
esac
done
finish r23 $TAG
