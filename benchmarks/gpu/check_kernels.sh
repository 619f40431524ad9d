#!/usr/bin/env bash
# Device call: every lab operator's Triton (and CUDA) variants run once on the GPU and are checked
# against their float64 references (the lab runner's --check-out). Use after kernel refactors.
set -u
source .gpu-libs/env.sh; unset NVTX_INJECTION64_PATH
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
cd /tmp
fail=0
chk() { python3 -m profkit.kernels.run "$@" --iters 1 --check-out /tmp/c.json > /dev/null 2>/tmp/err.txt || { echo "FAIL $*"; tail -3 /tmp/err.txt; fail=1; return; }
        python3 -c "import json; d=json.load(open('/tmp/c.json')); [print(('ok  ' if v['ok'] else 'BAD ')+k, '%.2e' % v['rel_err']) for k, v in d.items()]"; }
chk rope --variant triton --variant cuda --shape llama8b-t4096 --shape phi2partial-t4096
chk rmsnorm_rope --variant triton --shape qwen3-8b-t4096 --shape qwen3-8b-t1
chk rmsnorm --variant triton --variant cuda --shape llama8b-t4096
chk add_rmsnorm --variant triton --shape llama8b-t4096
chk swiglu --variant triton --variant cuda --shape llama8b-t4096
chk softmax --variant triton --shape scores-r32768-n4096
chk softmax --variant liger --shape llama3vocab-t2048
echo "fail=$fail"
