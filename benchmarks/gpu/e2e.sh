#!/usr/bin/env bash
# Device call (issue 5, kernel lab III): the end-to-end benchmark of the decoder stack, then
# nsys timelines of a prefill and of decode steps (eager, lab, graph replay), exported to
# SQLite, loaded with profkit and analysed with profkit.analyses.timeline. Everything lands in one tar.
#   E2E_ARGS: extra arguments for benchmarks/e2e.py (default: --full-depth --budget-s 130)
set -u
REPO=$(pwd)
source .gpu-libs/env.sh; unset NVTX_INJECTION64_PATH
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
cd /tmp   # leave the repo: its profkit/ folder would shadow the installed package
O=/tmp/e2e; mkdir -p $O
T0=$(date +%s)
stamp() { echo "== $* (t=$(( $(date +%s) - T0 )) s)"; }

{ date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,uuid,driver_version,clocks.current.sm,clocks.current.memory,clocks.max.sm,clocks.max.memory --format=csv
  $NSYS --version
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0]); print('torch', torch.__version__, 'cuda', torch.version.cuda); print('triton', triton.__version__)"
} > $O/CAPTURE.txt 2>&1
cat $O/CAPTURE.txt

stamp "benchmark"
timeout 280 python3 $REPO/benchmarks/e2e.py --out $O ${E2E_ARGS:---full-depth --budget-s 130} > $O/bench.log 2>&1
echo "benchmark rc=$?"; grep -v "^|" $O/bench.log | tail -40

# nsys: CUDA + NVTX only; graph kernels traced one by one (node) so replays show their kernels
GT=""; $NSYS profile --help 2>&1 | grep -q -- "--cuda-graph-trace" && GT="--cuda-graph-trace=node"
NS=($NSYS profile -t cuda,nvtx --sample=none --cpuctxsw=none --force-overwrite true)
PRE=(python3 -m profkit.kernels.run e2e/prefill --variant eager --variant lab --shape llama3-8b-l4-t1024 --shape qwen2.5-7b-l4-t1024 --shape llama3-8b-l4-t4096 --iters 3 --warmup 2)
DEC=(python3 -m profkit.kernels.run e2e/decode --variant eager --variant lab --variant graph --variant graph_lab --shape llama3-8b-l4-ctx448 --iters 12 --warmup 2)
{ echo; echo "captured with benchmarks/gpu/e2e.sh"
  echo "prefill: ${NS[*]} -o e2e-prefill ${PRE[*]}"
  echo "decode : ${NS[*]} $GT -o e2e-decode ${DEC[*]}"; } >> $O/CAPTURE.txt
stamp "nsys prefill"
timeout 100 "${NS[@]}" -o $O/e2e-prefill "${PRE[@]}" 2>&1 | grep -v "^Collecting\|^Processing\|\[.*%" | tail -5
stamp "nsys decode"
timeout 100 "${NS[@]}" $GT -o $O/e2e-decode "${DEC[@]}" 2>&1 | grep -v "^Collecting\|^Processing\|\[.*%" | tail -5
for r in e2e-prefill e2e-decode; do
  stamp "export $r"
  timeout 90 $NSYS export --type sqlite --force-overwrite true -o $O/$r.nsys.sqlite $O/$r.nsys-rep > /dev/null 2>&1
  profkit ingest --db $O/e2e.db --run $r $O/$r.nsys.sqlite
done
stamp "timeline"
python3 $REPO/benchmarks/e2e.py --timeline $O/e2e.db --out $O
profkit timeline --db $O/e2e.db --run e2e-decode --range e2e/decode --ops e2e/decode/eager/llama3-8b-l4-ctx448 --ops e2e/decode/graph/llama3-8b-l4-ctx448 2>&1 | cut -c1-190
profkit timeline --db $O/e2e.db --run e2e-prefill --range e2e/prefill --ops e2e/prefill/eager/llama3-8b-l4-t1024 --ops e2e/prefill/lab/llama3-8b-l4-t1024 2>&1 | cut -c1-190
profkit sql --db $O/e2e.db "select run, nvtx_range, short_name, count(*) n, sum(duration_ns)/1000 us from kernels where nvtx_path like 'e2e/%' and nvtx_range = 'attn' group by 1, 2, 3 order by 1, 5 desc" 2>&1 | cut -c1-190
ls -la $O
rm -f $O/*.nsys-rep $O/e2e.db*
stamp "pack"
tar -cJf $OUT/e2e.tar.xz -C $O . && ls -la $OUT
