#!/usr/bin/env bash
# Device calls (issue 6). First call: passes of a greedy lean set, label parity against --set full
# (benchmarks/results/ncu_lean_search_1.json), and the CUPTI tracer's NVTX ranges vs nsys.
# Second call (this version): passes per metric and per candidate set on a small CUDA kernel, and
# lab captures with the two best candidate sets within 5 passes.
set -u
REPO=$PWD
source .gpu-libs/env.sh
CUPTI_INJ=$NVTX_INJECTION64_PATH; unset NVTX_INJECTION64_PATH
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
cd /tmp; O=/tmp/lean; mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; $NCU --version | tail -1; $NSYS --version;
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; date -u; } > $O/env.txt 2>&1
cat $O/env.txt
echo "== passes and parity"
timeout 420 python3 $REPO/benchmarks/ncu_passes.py --ncu $NCU --out $O/np
for f in $O/np/reports/*.ncu-rep; do xz -9 -T0 $f; done
ls -la $O/np/reports
rm -f $O/*/*.nsys-rep $O/np/*.db $O/np/g.ncu-rep $O/np/k
tar -cJf $OUT/lean.tar.xz -C $O --exclude c.db . && ls -la $OUT
