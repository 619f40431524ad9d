#!/usr/bin/env bash
# Device call, kernel lab round 2 (issues 21, 22.1): benchmarks, before/after captures, e2e decode.
#   bash benchmarks/gpu/kernels_round2.sh rehearsal   # quick shapes + one capture pair (first GPU call)
#   bash benchmarks/gpu/kernels_round2.sh h100        # registered shapes + graph timing, before/after captures, GEMMs
#   bash benchmarks/gpu/kernels_round2.sh h200        # registered shapes + graph timing, GEMMs, e2e decode
# Run from a copy of the worktree (.carry-kernels) beside the checkout's .gpu-libs; wheels (liger-kernel and
# profkit's pure-Python dependencies) in ../.carry-kernels-whl. ncu's own Python reader (extras/python) stands
# in for the ncu-report wheel. Everything lands in $OUT/round2.tar.xz; a short table is printed last.
set -u
MODE=${1:-final}
R=$PWD
T0=$(date +%s)
left() { echo $(( ${BUDGET:-560} - ($(date +%s) - T0) )); }  # seconds left of this call's budget
source ../.gpu-libs/env.sh >/dev/null; unset NVTX_INJECTION64_PATH
NCU_PY=$(dirname "$(find /opt/nvidia /usr/local -name ncu_report.py -path '*extras/python*' 2>/dev/null | head -1)")
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ../.carry-kernels-whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site:$NCU_PY PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=16
O=/tmp/r2; mkdir -p $O/prof; DB=$O/prof/r2.db
cd /tmp  # the copy's own profkit/ would shadow the installed package
{
  date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,memory.total --format=csv
  python3 -c "import torch, triton, liger_kernel, ncu_report, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'liger ok, ncu_report ok')"
  $NCU --version | tail -1; $NSYS --version
} > $O/env.txt 2>&1
cat $O/env.txt
step() { local name=$1 lim=$2; shift 2; local l; l=$(left); [ "$l" -lt 30 ] && { echo "== $name: skipped (budget)"; return; }
         [ "$lim" -gt "$((l - 20))" ] && lim=$((l - 20)); echo "== $name (limit ${lim}s)"; s=$(date +%s)
         timeout "$lim" "$@" > $O/$name.out 2> $O/$name.log; echo "   rc=$? wall_s=$(( $(date +%s) - s ))"; }
cap() { local run=$1; shift; step cap-$run 60 profkit capture --db $DB --out $O/prof --metrics lean --no-nsys --run $run "$@"; }
GEMM_VARIANTS=autotuned,persistent_tma,splitk,cublas,triton,triton_tensor,triton_v2,triton_fastacc,scaled_mm,scaled_mm_tensor,cublas_swiglu,eager,compile,liger
cmp() { profkit compare --db $DB "$@" --json > $O/cmp-$(echo "$1" | tr ':/' '__').json 2>&1
        python3 -c "import json,sys; d=json.load(open(sys.argv[1])); [print('  ', r.get('range', r.get('path')), r['verdict'], round(r['speedup'], 3), r.get('label_before'), r.get('label_after')) for r in d]" $O/cmp-$(echo "$1" | tr ':/' '__').json 2>/dev/null || tail -3 $O/cmp-$(echo "$1" | tr ':/' '__').json; }

case $MODE in
rehearsal)
  step kernels 230 python3 $R/benchmarks/kernels.py --quick --graph --out $O
  step gemm 230 python3 $R/benchmarks/gemm.py --quick --graph --out $O
  cap rmsnorm_bwd-llama8b-t4096 rmsnorm_bwd --variant triton_v1_direct --variant triton_direct --shape llama8b-t4096
  cmp rmsnorm_bwd-llama8b-t4096:triton_v1_direct rmsnorm_bwd-llama8b-t4096:triton_direct
  ;;
h100)
  step kernels 250 python3 $R/benchmarks/kernels.py --graph --out $O
  cap rmsnorm_bwd-llama8b-t4096 rmsnorm_bwd --variant triton_v1_direct --variant triton_direct --variant compile_direct --shape llama8b-t4096
  cap softmax-llama3vocab-t2048 softmax --variant triton_v1 --variant triton --shape llama3vocab-t2048
  cap gated_mlp-llama8b-m16 gated_mlp --variant cublas_swiglu --variant triton --shape llama8b-m16
  cap fp8_gemm-llama8b-qkv-m4096-r2 fp8_gemm --variant scaled_mm --variant triton --variant triton_v2 --shape llama8b-qkv-m4096
  cmp rmsnorm_bwd-llama8b-t4096:triton_v1_direct rmsnorm_bwd-llama8b-t4096:triton_direct
  cmp rmsnorm_bwd-llama8b-t4096:compile_direct rmsnorm_bwd-llama8b-t4096:triton_direct
  cmp softmax-llama3vocab-t2048:triton_v1 softmax-llama3vocab-t2048:triton
  cmp gated_mlp-llama8b-m16:cublas_swiglu gated_mlp-llama8b-m16:triton
  cmp fp8_gemm-llama8b-qkv-m4096-r2:triton fp8_gemm-llama8b-qkv-m4096-r2:triton_v2
  cmp fp8_gemm-llama8b-qkv-m4096-r2:scaled_mm fp8_gemm-llama8b-qkv-m4096-r2:triton
  step gemm 600 python3 $R/benchmarks/gemm.py --graph --only matmul --only fp8_gemm --only gated_mlp --variants $GEMM_VARIANTS --out $O
  ;;
h200)
  step kernels 250 python3 $R/benchmarks/kernels.py --graph --out $O
  step e2e 70 python3 $R/benchmarks/e2e.py --out $O/e2e --models llama3-8b,qwen2.5-7b --layers 4 --tokens "" \
       --steps 100 --rounds 2 --variants lab,lab_gated_mlp,graph_lab,graph_lab_gated_mlp
  step gemm 600 python3 $R/benchmarks/gemm.py --graph --only matmul --only fp8_gemm --only gated_mlp --variants $GEMM_VARIANTS --out $O
  ;;
esac

for f in $O/prof/*/*.ncu-rep; do [ -f "$f" ] && xz -9 -T0 "$f"; done
rm -f $O/prof/*/*.nsys-rep $O/prof/*.db-*
du -sh $O/prof/* 2>/dev/null
tar -cJf $OUT/round2.tar.xz -C $O . && ls -la $OUT
echo "== summary (wall $(( $(date +%s) - T0 )) s)"
python3 - $O <<'PY'
import json, os, sys
o = sys.argv[1]
def load(p):
    try:
        return json.load(open(os.path.join(o, p)))
    except Exception as e:
        print(p, "missing:", e); return None
k = load("kernels.json")
if k:
    print("copy GB/s", round(k["copy"]["gbps"]))
    for r in k["rows"]:
        if r.get("own") and "ms" in r:
            print(f"{r['op'][:12]:12} {r['shape'][:18]:18} {r['variant'][:16]:16} ok={str(r['ok'])[0]} "
                  f"copy%={r['pct_copy']:.0f} g%={r.get('graph_pct_copy', 0):.0f} "
                  f"xpeer={r.get('speedup_vs_best_peer', 0):.2f} gxpeer={r.get('graph_speedup_vs_best_peer', 0):.2f}")
        elif "error" in r:
            print("ERR", r["op"], r["shape"], r["variant"], r["error"][:80])
g = load("gemm.json")
if g:
    for r in g["rows"]:
        if r.get("own") and r.get("ms"):
            print(f"{r['op'][:10]:10} {r['shape'][:20]:20} {r['variant'][:14]:14} ok={str(r['ok'])[0]} "
                  f"%base={r.get('pct_baseline') or 0:.0f} xbest={r.get('speedup_vs_best') or 0:.2f} "
                  f"gxbest={r.get('graph_speedup_vs_best') or 0:.2f} maxrel={r.get('max_rel') or 0:.1e}")
        elif r.get("error") and "skipped" not in r["error"]:
            print("ERR", r["op"], r["shape"], r["variant"], r["error"][:80])
PY
