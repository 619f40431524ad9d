#!/usr/bin/env bash
# Device call (kernel lab IV), everything in one go:
#   1. benchmarks/cuda_lab.py: build the CUDA C++ kernels with nvcc (sm_90), check every CUDA
#      variant against float64, time Triton vs CUDA C++ and the SGEMM ladder vs cuBLAS
#      -> $OUT/cuda.json (written as it goes)
#   2. profkit capture of the SGEMM ladder at 4096^3 (8 steps + cuBLAS, nsys + ncu roofline set)
#      -> $OUT/sgemm-ladder-4096.tar.xz
#   3. profkit capture of CUDA vs Triton for RMSNorm, RoPE and SwiGLU at llama8b-t4096
#      -> $OUT/cuda-vs-triton.tar.xz
#   and the labels from profkit classify, the kernels' register / shared-memory use, the log.
# `--no-capture`: step 1 only.
set -u
CAPTURE=1; [ "${1:-}" = "--no-capture" ] && CAPTURE=0
T0=$(date +%s)
REPO=$PWD
exec > >(tee "$OUT/log.txt") 2>&1
source .gpu-libs/env.sh; unset NVTX_INJECTION64_PATH
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 PROFKIT_CACHE=/tmp/profkit-cache
cd /tmp   # leave the repo: its profkit/ folder would shadow the installed package
O=/tmp/lab4; mkdir -p $O; DB=$O/lab4.db
ls /tmp/site/profkit/kernels/cuda/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
nvcc --version | tail -2
el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }

el "== 1. build, check, time"
python3 "$REPO/benchmarks/cuda_lab.py" --graph --out "$OUT" > $O/cuda_tables.md; echo "cuda_lab rc=$?"
cat $O/cuda_tables.md
for f in $PROFKIT_CACHE/cuda/*.so; do echo "## $(basename $f)"; cuobjdump --dump-resource-usage "$f" | grep -E "Function|REG"; done > $O/resource_usage.txt 2>&1
cat $PROFKIT_CACHE/cuda/autotune.json > $O/autotune.json 2>/dev/null
if [ $CAPTURE = 0 ]; then tar -cJf "$OUT/extras.tar.xz" -C $O resource_usage.txt autotune.json cuda_tables.md; el "done"; exit 0; fi

cap() {  # profkit capture, its tail, and the folder tarred into $OUT at once (a timeout keeps it)
  local run=$1; shift
  el "== capture $run"
  profkit capture --db $DB --out $O --run "$run" --metrics roofline "$@" 2>&1 | grep -v "^Processing\|Generating\|\[.*%"
  el "captured $run"
  profkit classify --db $DB --run "$run" --json > $O/$run/classify.json 2>&1
  for f in $O/$run/*.ncu-rep; do [ -f "$f" ] && xz -9 -T0 "$f"; done
  rm -f $O/$run/*.nsys-rep
  tar -cJf "$OUT/$run.tar.xz" -C $O "$run" && ls -la $O/$run
}

el "== 2. SGEMM ladder"
cap sgemm-ladder-4096 sgemm --shape 4096 --variant naive --variant coalesced --variant smem --variant blocktile_1d \
  --variant blocktile_2d --variant vectorized --variant tuned --variant warptile --variant cublas

el "== 3. CUDA vs Triton"
S=llama8b-t4096
INC=(); for op in rmsnorm rope swiglu; do for v in triton cuda; do INC+=(--nvtx-include "$op/$v/$S/"); done; done
cap cuda-vs-triton-$S "${INC[@]}" -- python3 -c "
from profkit.kernels.run import run
for op in ('rmsnorm', 'rope', 'swiglu'):
    run(op, ['triton', 'cuda'], ['$S'])"

el "== summary"
profkit sql --db $DB "select run, nvtx_path, count(*) n, sum(duration_ns) ns from kernels where nvtx_path is not null and source = 'nsys' group by 1, 2 order by 1, 2"
profkit sql --db $DB "select k.run, k.nvtx_path, c.label, count(*) n from classifications c join kernels k using (kernel_id) where k.nvtx_path is not null group by 1, 2, 3 order by 1, 2"
tar -cJf "$OUT/extras.tar.xz" -C $O resource_usage.txt autotune.json cuda_tables.md
ls -la "$OUT"; el "done"
