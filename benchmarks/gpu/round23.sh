#!/usr/bin/env bash
# Device calls, kernel lab rounds 23-24 (issue 21 item 1: the host-bound rows, kernels/_launch.py's
# short launch path off and on); raw rows in r23/TAG/.
#   (MODE may be a comma list: host,bench)
#   bash benchmarks/gpu/round23.sh host TAG     # host23.py: host and GPU time a call, off/on/off/on
#   bash benchmarks/gpu/round23.sh bench TAG    # benchmarks/kernels.py --graph over OPS / SHAPES,
#                                               # PROFKIT_FAST_LAUNCH=0 then 1 (same process order)
#   bash benchmarks/gpu/round23.sh inproc TAG   # round 24: one capture, before and after variants in
#                                               # one process (PAIR_OP, PAIR_SHAPE, PAIR_VARIANTS, PAIR_CMP)
#   bash benchmarks/gpu/round23.sh pair TAG     # profkit capture (nsys, --calls 12) off then on, and
#                                               # profkit compare --by host / gpu (PAIR_OP, PAIR_SHAPE,
#                                               # PAIR_VARIANTS; several ops: mode pair once per call)
# Round 24 (the launch plans): SWITCH=plans toggles PROFKIT_LAUNCH_PLANS instead of
# PROFKIT_FAST_LAUNCH (host: host23.py --switch plans --pieces; pair: runs ...-r24-TAG-slow/fast),
# raw rows in r24/TAG/. Round 25 (plans in the RoPE launcher): RD=r25 PIECES= (no pieces).
set -u
mode=$1 TAG=$2
source benchmarks/gpu/device_env.sh
if [ "${SWITCH:-fast}" = plans ]; then RD=${RD:-r24} VAR=PROFKIT_LAUNCH_PLANS HOSTARGS="--switch plans ${PIECES---pieces}"
else RD=${RD:-r23} VAR=PROFKIT_FAST_LAUNCH HOSTARGS=""; fi
mkdir -p $O/$RD/$TAG
# cmpby BEFORE AFTER NAME: profkit compare by host and by GPU time, the JSON kept as cmp-NAME-BY.json
cmpby() {
  for by in host gpu; do
    echo "== compare $1 -> $2 by $by"
    python3 -m profkit compare --db $DB $1 $2 --by $by --json > $O/$RD/$TAG/cmp-$3-$by.json 2>&1
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[0]; print(r['verdict'], round(r['speedup'],3), \
      [round(r['speedup_low'],3), round(r['speedup_high'],3)], 'us', round(r['before_us'],1), '->', round(r['after_us'],1), r['notes'])" \
      $O/$RD/$TAG/cmp-$3-$by.json || tail -3 $O/$RD/$TAG/cmp-$3-$by.json
  done
}
for m in ${mode//,/ }; do
case $m in
  host) timeout ${HOST_TIMEOUT:-520} python3 $R/benchmarks/gpu/host23.py --out $O/$RD/$TAG $HOSTARGS ${HOST_ROWS:+--rows $HOST_ROWS} ${PROFILE:+--profile $PROFILE} \
          2>&1 | grep -v Warning | tee $O/$RD/$TAG/host23.log | tail -80 ;;
  bench) for side in 0 1; do
           echo "== $VAR=$side"
           env $VAR=$side timeout ${BENCH_TIMEOUT:-250} python3 $R/benchmarks/kernels.py --graph \
             --ops ${OPS:-rmsnorm,rope,rmsnorm_rope,add_rmsnorm} --shapes ${SHAPES:-t1,t4096} \
             --variants ${VARIANTS:-triton,compile,liger,triton_direct,compile_direct} \
             --out $O/$RD/$TAG/fast$side > $O/$RD/$TAG/kernels_fast$side.log 2>&1
           echo "   rc=$?"; tail -${BENCH_TAIL:-25} $O/$RD/$TAG/kernels_fast$side.log
         done ;;
  pair) # profkit capture, timeline only, PAIR_CALLS (12) calls a variant, of PAIR_OP's PAIR_VARIANTS at
        # PAIR_SHAPE with the short launch path off (run ...-slow) then on (...-fast); compare by host
        # and by GPU time per call
        for side in slow fast; do
          run=$PAIR_OP-$PAIR_SHAPE-$RD-$TAG-$side
          echo "== capture $run"
          env $VAR=$([ $side = fast ] && echo 1 || echo 0) timeout 200 python3 -m profkit capture \
            --db $DB --out $O/prof --no-ncu --run $run --calls ${PAIR_CALLS:-12} $PAIR_OP \
            $(printf -- '--variant %s ' ${PAIR_VARIANTS//,/ }) --shape $PAIR_SHAPE > $O/cap-$run.log 2>&1
          echo "   rc=$?"; tail -2 $O/cap-$run.log
        done
        for v in ${PAIR_VARIANTS//,/ }; do
          cmpby $PAIR_OP-$PAIR_SHAPE-$RD-$TAG-slow:$v $PAIR_OP-$PAIR_SHAPE-$RD-$TAG-fast:$v $PAIR_OP-$PAIR_SHAPE-$v
        done ;;
  inproc) # round 24: one capture (timeline only, PAIR_CALLS calls a variant) of PAIR_OP's PAIR_VARIANTS at
          # PAIR_SHAPE, before and after in one process; compare each of PAIR_CMP ("before:after ...")
          run=$PAIR_OP-$PAIR_SHAPE-$RD-$TAG
          echo "== capture $run"
          timeout 240 python3 -m profkit capture --db $DB --out $O/prof --no-ncu --run $run --calls ${PAIR_CALLS:-12} \
            $PAIR_OP $(printf -- '--variant %s ' ${PAIR_VARIANTS//,/ }) --shape $PAIR_SHAPE > $O/cap-$run.log 2>&1
          echo "   rc=$?"; tail -2 $O/cap-$run.log
          for p in $PAIR_CMP; do cmpby $run:${p%%:*} $run:${p##*:} $PAIR_OP-$PAIR_SHAPE-${p/:/-}; done ;;
esac
done
finish $RD $TAG
