# Sourced by the device scripts (run from the repository root, with .gpu-libs and
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
# pairs LABEL OP "VARIANT ..." "BEFORE:AFTER ...": at each of $SHAPES, profkit capture (ncu lean) of
# OP's variants as run OP-SHAPE-LABEL-$TAG, then compare each pair
pairs() {
  for s in ${SHAPES//,/ }; do
    local run=$2-$s-$1-$TAG
    cap $run $2 $(printf -- '--variant %s ' $3) --shape $s
    for p in $4; do cmp $run:${p%%:*} $run:${p##*:}; done
  done
}
# the captures packed for the way back: ncu reports xz'd, nsys reports and WAL files left out
pack() { for f in $O/prof/*/*.ncu-rep; do [ -f "$f" ] && xz -9 -T0 "$f"; done; rm -f $O/prof/*/*.nsys-rep $O/prof/*.db-*; tar -cJf "$1" -C $O . && ls -la "$(dirname "$1")"; }
# the end of a call: its raw rows under $O/AREA (and the captures, if any) packed into $OUT
finish() { if ls $O/prof/*/ >/dev/null 2>&1; then cp $O/cap-*.log $O/$1/ 2>/dev/null; pack $OUT/$1_prof_$2.tar.xz; fi
  tar -cJf $OUT/$1_$2.tar.xz -C $O $1 && ls -la $OUT; }
