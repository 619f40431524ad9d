#!/usr/bin/env bash
# Device call: one training workload (benchmarks/gpu/kineto_workload.py) under nsys and under
# torch.profiler, the same measured steps in both windows, for the Kineto <-> nsys agreement
# test; then a long torch.profiler capture (with_stack) to measure the Kineto parser's time and
# peak memory (benchmarks/kineto.py) against json.load.
# Run from the repo root with .gpu-libs (nsys) and $K carried; $K holds this script, the
# workload, benchmarks/kineto.py and src/ (profkit/ and parsers/ of the branch under test).
# Small results land in $OUT; the long trace stays on the machine. BIG_ONLY=1: the long capture alone.
set -u
K=${K:-.carry-kineto}
source .gpu-libs/env.sh > /dev/null
unset NVTX_INJECTION64_PATH
export PYTHONUNBUFFERED=1
mkdir -p /tmp/pk/profkit && cp -r $K/src/profkit/* /tmp/pk/profkit/ && cp -r $K/src/parsers /tmp/pk/profkit/parsers
export PYTHONPATH=/tmp/pk
K=$PWD/$K; cd /tmp  # the repo root's own profkit/ (no parsers/ inside) would shadow /tmp/pk
C=/tmp/kin; mkdir -p $C
W="python3 $K/kineto_workload.py"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; $NSYS --version
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } | tee $C/versions.txt
t() { local s=$SECONDS; "$@"; echo "rc=$? $((SECONDS - s)) s: $*" | tee -a $C/timings.txt; }
if [ -z "${BIG_ONLY:-}" ]; then
t $NSYS profile -t cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=node --capture-range=cudaProfilerApi \
  --capture-range-end=stop -f true -o $C/tf $W --window cuda --steps 3 > $C/nsys.log 2>&1
t $NSYS export --type sqlite -f true -o $C/tf.nsys.sqlite $C/tf.nsys-rep >> $C/nsys.log 2>&1
t $W --window kineto --steps 3 --kineto $C/tf.kineto.json.gz
python3 - <<'PY' | tee $C/agree.txt
from collections import Counter
from profkit.parsers import kineto, nsys_sqlite
k, n = kineto.parse("/tmp/kin/tf.kineto.json.gz"), nsys_sqlite.parse("/tmp/kin/tf.nsys.sqlite")
per = lambda r: Counter((x[4], x[2]) for x in r.kernels)
a, b = per(k), per(n)
print("kineto", len(k.kernels), "nsys", len(n.kernels), "paths", len({p for p, _ in a}), len({p for p, _ in b}))
for key in sorted(set(a) | set(b), key=str):
    if a[key] != b[key]:
        print("DIFF", key, a[key], b[key])
PY
fi
t $W --window kineto --steps ${BIG_STEPS:-200} --with-stack --kineto $C/big.kineto.json
gzip -k -1 $C/big.kineto.json
python3 $K/kineto_bench.py $C/big.kineto.json $C/big.kineto.json.gz $C/tf.kineto.json.gz --json $C/bench.json 2>&1 | tee $C/bench.txt
ls -la $C
xz -T0 -k -6 $C/tf.nsys.sqlite
cp $C/tf.nsys.sqlite.xz $C/tf.kineto.json.gz $C/versions.txt $C/timings.txt $C/agree.txt $C/bench.txt $C/bench.json $C/nsys.log $OUT/ 2>/dev/null
ls -la $OUT
