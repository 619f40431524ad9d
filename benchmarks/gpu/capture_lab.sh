#!/usr/bin/env bash
# Device call: `profkit capture` of lab workloads (eager = before, triton = after), a CUPTI-tracer
# capture of the same workload, and an ncu CSV of another page (for the bad-input test).
set -u
source .gpu-libs/env.sh
CUPTI_INJ=$NVTX_INJECTION64_PATH; unset NVTX_INJECTION64_PATH
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
cd /tmp; O=/tmp/lab; mkdir -p $O; DB=$O/lab.db
cap() { echo "== capture $*"; s=$(date +%s); profkit capture --db $DB --out $O "$@" 2>&1 | grep -v "^Processing\|Generating\|\[.*%" ; echo "wall_s $(( $(date +%s) - s ))"; }
cap rmsnorm --variant eager --variant triton --shape llama8b-t32768 --run rmsnorm-llama8b-t32768 --metrics roofline
cap swiglu --variant eager --variant triton --shape llama8b-t4096 --run swiglu-llama8b-t4096 --metrics roofline
cap softmax --variant eager --variant triton --shape scores-r32768-n4096 --run softmax-r32768-n4096 --metrics roofline
cap matmul --variant cublas --variant tiled --variant autotuned --variant persistent_tma --shape llama8b-qkv-m4096 --run matmul-llama8b-qkv-m4096 --metrics roofline
echo "== lean vs full passes, rmsnorm triton"
for set in lean full; do s=$(date +%s); profkit capture --db $O/passes.db --out /tmp/passes --no-nsys rmsnorm --variant triton --shape llama8b-t4096 --run p-$set --metrics $set > /dev/null 2>&1; echo "$set wall_s $(( $(date +%s) - s ))"; done
echo "== cupti tracer"
NVTX_INJECTION64_PATH=$CUPTI_INJ profkit capture --db $DB --out $O --tracer cupti --no-ncu rmsnorm --variant eager --variant triton --shape llama8b-t4096 --run rmsnorm-cupti 2>&1 | tail -3
python3 -c "
import json,collections; c=collections.Counter(json.loads(l)['type'] for l in open('$O/rmsnorm-cupti/rmsnorm-cupti.cupti.jsonl')); print(dict(c))"
profkit capture --db $DB --out $O --no-ncu rmsnorm --variant eager --variant triton --shape llama8b-t4096 --run rmsnorm-nsys 2>&1 | tail -2
$NCU --import $O/rmsnorm-llama8b-t32768/rmsnorm-llama8b-t32768.ncu-rep --csv --page details > $O/details_page.csv 2>&1
profkit sql --db $DB "select run, source, nvtx_path, count(*) n, sum(duration_ns) t from kernels where nvtx_path is not null group by 1,2,3"
for f in $O/*/*.ncu-rep; do xz -9 -T0 $f; done
rm -f $O/*/*.nsys-rep
ls -laR $O | head -60
tar -cJf $OUT/lab.tar.xz -C $O --exclude lab.db . && ls -la $OUT
