set -u
source ../.gpu-libs/env.sh > /dev/null; unset NVTX_INJECTION64_PATH
R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site ../.carry-capture-whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 1
NCUPY=$(dirname "$(find /opt/nvidia /usr/local/cuda* -name ncu_report.py -path '*extras/python*' 2>/dev/null | head -1)")
export PYTHONPATH=/tmp/site:$NCUPY PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
O=/tmp/demo; mkdir -p $O; cd $O; DB=$O/demo.db; PK="python3 -m profkit.cli"
date -u +%FT%TZ
( time $PK tune $R/docs/examples/vector_add.py:add_kernel --shape n=16777216 --shape n=1048576 --db $DB --budget 90 ) 2>&1 | tail -12
( time $PK tune $R/docs/examples/vector_add.py:add_kernel --shape n=16777216 --shape n=1048576 --db $DB ) 2>&1 | tail -6
$PK sql --db $DB "SELECT shape, config, round(ms*1000,1) AS us, ok, chosen FROM tuning WHERE ok = 1 ORDER BY shape, ms LIMIT 6"
$PK sql --db $DB "SELECT shape, count(*) trials, sum(ok = 1) correct, min(ms)*1000 best_us, max(ms)*1000 worst_us FROM tuning GROUP BY shape"
( time $PK bench $R/docs/examples/scale_workload.py:WORKLOAD --db $DB --md $O/scale.md ) 2>&1 | tail -12
( time $PK bench rmsnorm --shape llama8b-t4096 --shape qwen7b-t32768 --variant eager --variant triton --variant compile --db $DB --md $O/rmsnorm.md --capture ) 2>&1 | grep -v "Processing\|%\]" | tail -25
$PK sql --db $DB "SELECT op, variant, shape, round(ms*1000,1) us, round(gbps) gbps, round(pct_of_copy) pct_copy, speedups FROM bench"
$PK compare --db $DB rmsnorm:eager rmsnorm:triton 2>&1 | tail -8
cp $O/*.md $OUT/ 2>/dev/null; xz -k $DB; cp $DB.xz $OUT/
