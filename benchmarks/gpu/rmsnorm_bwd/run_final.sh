#!/usr/bin/env bash
# Device calls 3 (H100) and 4 (H200): sweep3 (the shipped launcher's candidates, PDL on/off, the floor),
# benchmarks/kernels.py --graph --ops rmsnorm_bwd (every variant, the lab's rows), and on the H100
# the before/after capture pair through profkit (ncu, lean metrics): triton_v2_direct, triton_direct,
# compile_direct at llama8b-t4096. Carry .carry-rmsbwd (kernel, scripts), .carry-capture-whl, .gpu-libs.
#   bash .carry-rmsbwd/run_final.sh h100|h200
set -u
MODE=${1:-h100}
W=.carry-capture-whl
source .gpu-libs/env.sh >/dev/null; unset NVTX_INJECTION64_PATH
NCU_PY=$(dirname "$(find /opt/nvidia /usr/local -name ncu_report.py -path '*extras/python*' 2>/dev/null | head -1)")
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $(ls $W/*.whl | grep -v -E "cupti_python|cuda_bindings|cuda_pathfinder|pyelftools") || exit 1
cp .carry-rmsbwd/rmsnorm.py kernels/rmsnorm.py; cp .carry-rmsbwd/timing.py kernels/timing.py
cp .carry-rmsbwd/kernels.py benchmarks/kernels.py 2>/dev/null
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site:$NCU_PY PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=16
R=$PWD; O=/tmp/r3; mkdir -p $O/prof; DB=$O/prof/r3.db
cd /tmp
nvidia-smi --query-gpu=name,driver_version --format=csv
[ "${SWEEP4:-0}" = 1 ] && { s=$(date +%s); timeout 200 python3 $R/.carry-rmsbwd/sweep4.py $O 2>&1 | grep -v Warning | grep -E "==|failed|floor|tuned|copy"; echo "sweep4 $(( $(date +%s) - s )) s"; cp $O/sweep4_*.json $OUT/; }
[ "${KBENCH:-1}" = 1 ] || exit 0
[ "${SWEEP:-1}" = 1 ] && { s=$(date +%s); timeout 200 python3 $R/.carry-rmsbwd/sweep3.py $O 2>&1 | grep -v Warning; echo "sweep3 $(( $(date +%s) - s )) s"; }
s=$(date +%s); timeout 240 python3 $R/benchmarks/kernels.py --graph --ops rmsnorm_bwd --out $O > $O/kernels.md 2> $O/kernels.log
echo "kernels.py rc=$? $(( $(date +%s) - s )) s"; grep -E "direct|copy" $O/kernels.md | head -20
if [ "$MODE" = h100 ]; then
  RUN=rmsnorm_bwd-llama8b-t4096-r3
  s=$(date +%s); timeout 200 python3 -m profkit capture --db $DB --out $O/prof --metrics lean --no-nsys --run $RUN rmsnorm_bwd \
    --variant triton_v2_direct --variant triton_direct --variant compile_direct --shape llama8b-t4096 > $O/cap.out 2> $O/cap.log
  echo "capture rc=$? $(( $(date +%s) - s )) s"; tail -3 $O/cap.log
  for pair in "triton_v2_direct triton_direct" "compile_direct triton_direct"; do
    set -- $pair
    python3 -m profkit compare --db $DB $RUN:$1 $RUN:$2 --json > $O/cmp-$1.json 2>&1
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); [print('  ', r.get('range', r.get('path')), r['verdict'], round(r['speedup'], 3), r.get('speedup_low'), r.get('label_before'), r.get('label_after'), r['before_detail'].get('dram_bytes_per_call'), r['after_detail'].get('dram_bytes_per_call')) for r in d]" $O/cmp-$1.json || tail -5 $O/cmp-$1.json
  done
  for f in $O/prof/*/*.ncu-rep; do [ -f "$f" ] && xz -9 -T0 "$f"; done
  rm -f $O/prof/*/*.nsys-rep $O/prof/*.db-*
  du -sh $O/prof/*
  tar -cJf $OUT/prof.tar.xz -C $O/prof --exclude=r3.db . 
fi
cp $O/sweep3_*.json $O/sweep4_*.json $O/kernels.json $O/kernels.md $OUT/ 2>/dev/null
tar -cJf $OUT/logs.tar.xz -C $O --exclude=prof . 2>/dev/null
ls -la $OUT
