# Sourced by the device scripts from round 6 on (run from the repository root, with .gpu-libs and
# the wheels - profkit's pure-Python dependencies and liger-kernel - in .carry-r5-whl beside it):
# installs the checkout into /tmp/site, sets R (the checkout), O (scratch), DB, and moves to /tmp
# (the checkout's own profkit/ would shadow the installed package).
R=$PWD
source .gpu-libs/env.sh >/dev/null; unset NVTX_INJECTION64_PATH
NCU_PY=$(dirname "$(find /opt/nvidia /usr/local -name ncu_report.py -path '*extras/python*' 2>/dev/null | head -1)")
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .carry-r5-whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site:$NCU_PY PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=16
O=/tmp/dev; mkdir -p $O/prof; DB=$O/prof/lab.db
cd /tmp
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
# profkit capture of one op's variants at one shape (ncu lean, no nsys; CAP_ARGS added, e.g.
# "--calls 12"), and compare of two runs
cap() { local run=$1; shift; echo "== capture $run"; timeout 150 python3 -m profkit capture --db $DB --out $O/prof --metrics lean --no-nsys --run $run ${CAP_ARGS:-} "$@" > $O/cap-$run.log 2>&1; echo "   rc=$?"; tail -2 $O/cap-$run.log; }
cmp() { echo "== compare $1 -> $2"; python3 -m profkit compare --db $DB "$1" "$2" 2>&1 | tail -6; python3 -m profkit compare --db $DB "$1" "$2" --json > $O/cmp-$(echo "$1-$2" | tr ':/' '__').json 2>&1; }
# pairs ROUND OP "VARIANT ..." "BEFORE:AFTER ...": at each of $SHAPES, profkit capture (ncu lean) of
# OP's variants as run OP-SHAPE-ROUND-$TAG, then compare each pair
pairs() {
  for s in ${SHAPES//,/ }; do
    local run=$2-$s-$1-$TAG
    cap $run $2 $(printf -- '--variant %s ' $3) --shape $s
    for p in $4; do cmp $run:${p%%:*} $run:${p##*:}; done
  done
}
# probe OUT: ncu counters (PROBE_METRICS: by default time, DRAM and L2 bytes, the tensor pipe's mean
# and busiest SM, the SM clock, instructions) of one launch each of PROBE_NAMES (fp8_probe17.py's
# names) at PROBE_SHAPE, PROBE_MODE, with PROBE_NCU_ARGS and PROBE_REPS (e.g. --cache-control none
# and 2: the last launch finds the L2 as a replay leaves it), into OUT.csv / OUT.log; a line a launch
probe() {
  local met=${PROBE_METRICS:-gpu__time_duration.sum,dram__bytes_read.sum,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.max.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second,smsp__cycles_active.avg,smsp__inst_executed.sum}
  local inc=(); for n in ${PROBE_NAMES//,/ }; do inc+=(--nvtx-include "$n/"); done
  timeout 300 $NCU --clock-control none ${PROBE_NCU_ARGS:-} --nvtx "${inc[@]}" --metrics "$met" --csv \
    python3 $R/benchmarks/gpu/fp8_probe17.py ${PROBE_SHAPE:-qwen7b-down-m1024} ${PROBE_MODE:-tensor} $PROBE_NAMES \
    > $1.csv 2> $1.log
  echo "probe rc=$?"; grep -v "^==PROF==" $1.log | tail -8
  python3 $R/benchmarks/gpu/probe_table.py $1.csv
}
# the captures packed for the way back: ncu reports xz'd, nsys reports and WAL files left out
pack() { for f in $O/prof/*/*.ncu-rep; do [ -f "$f" ] && xz -9 -T0 "$f"; done; rm -f $O/prof/*/*.nsys-rep $O/prof/*.db-*; tar -cJf "$1" -C $O . && ls -la "$(dirname "$1")"; }
# the end of a round's call: its raw rows under $O/ROUND (and the captures, if any) packed into $OUT
finish() { if ls $O/prof/*/ >/dev/null 2>&1; then cp $O/cap-*.log $O/$1/ 2>/dev/null; pack $OUT/$1_prof_$2.tar.xz; fi
  tar -cJf $OUT/$1_$2.tar.xz -C $O $1 && ls -la $OUT; }
