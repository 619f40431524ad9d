#!/usr/bin/env bash
# Device call (issue 21 item 4): the registered fp8 v3 (triton_promote, promotion every <= 2048 K
# elements) through profkit's own loop, on one H100 call:
#   1. float64 check of triton_promote / triton_promote_tensor at every registered fp8 shape
#   2. profkit capture of v1 `triton` (before), `triton_promote` (after) and `scaled_mm` beside
#      them at llama8b-qkv-m4096 (ncu lean, 3 calls per variant, reference check recorded)
#   3. profkit compare RUN:triton RUN:triton_promote (and RUN:scaled_mm RUN:triton_promote)
#   4. benchmarks/gemm.py --only fp8_gemm: v1, v3 and _scaled_mm rows of the same run
# Run from a copy of the worktree (.carry-fp8b: profkit, kernels, parsers, benchmarks/gemm.py,
# this script) beside .carry-capture-whl (profkit's pure-Python dependencies) and .gpu-libs:
#   cd .carry-fp8b && bash benchmarks/gpu/fp8_promote_r3.sh
# Everything lands in $OUT/r3.tar.xz (run folder with the xz-compressed ncu report, compare JSON,
# gemm.json, logs); a summary is printed last.
set -u
R=$PWD
T0=$(date +%s)
BUDGET=${BUDGET:-540}
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
source ../.gpu-libs/env.sh > /dev/null; unset NVTX_INJECTION64_PATH  # ncu injects its own
W=../.carry-capture-whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  $(ls $W/*.whl | grep -v -E "cupti_python|cuda_bindings|cuda_pathfinder|pyelftools") || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 1
NCU_PY=$(dirname "$(find /opt/nvidia /usr/local -name ncu_report.py -path '*extras/python*' 2>/dev/null | head -1)")
export PYTHONPATH=/tmp/site:$NCU_PY PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
RUN=fp8_gemm-llama8b-qkv-m4096-r3
O=/tmp/r3; mkdir -p $O/prof; DB=$O/prof/r3.db
cd /tmp  # the copy's own profkit/ would shadow the installed package
{
  date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,memory.total --format=csv
  python3 -c "import torch, triton, ncu_report, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'ncu_report ok')"
  $NCU --version | tail -1
} > $O/env.txt 2>&1
cat $O/env.txt
python3 -c "import profkit.cli, profkit.kernels.fp8_gemm as F; assert 'triton_promote' in F.VARIANTS; print('profkit', profkit.cli.__file__)" || exit 1
step() { local name=$1 lim=$2; shift 2; local l; l=$(left); [ "$l" -lt 30 ] && { echo "== $name: skipped (budget)"; return; }
         [ "$lim" -gt "$((l - 25))" ] && lim=$((l - 25)); echo "== $name (limit ${lim}s)"; s=$(date +%s)
         timeout "$lim" "$@" > $O/$name.out 2> $O/$name.log; echo "   rc=$? wall_s=$(( $(date +%s) - s ))"; }

cat > $O/check.py <<'PY'
import json, sys, time
import torch
from profkit.kernels import get
w = get("fp8_gemm")
rows = []
for shape, p in w.shapes.items():
    state = w.setup(p, "fp8", "cuda")
    for v in ("triton_promote", "triton_promote_tensor"):
        t = time.time()
        out = w.variants[v](state)
        torch.cuda.synchronize()
        r = w.check(state, v, out, "fp8")
        rows.append(dict(shape=shape, variant=v, ok=bool(r.ok), rel_fro=float(r.rel_err), max_rel=float(r.max_rel),
                         first_call_s=round(time.time() - t, 1)))
        print(json.dumps(rows[-1]), flush=True)
    del state
    torch.cuda.empty_cache()
# the registered kernel (descriptors made in the kernel, autotuned) against round 3's experiment
# kernel (host descriptors, fixed 128x256x128 w8 s3, every <= 2048) at two shapes, same process
sys.path.insert(0, sys.argv[2])
import bench_fp8 as B  # noqa: E402
from triton.testing import do_bench  # noqa: E402
B.NSM = torch.cuda.get_device_properties(0).multi_processor_count
c = B.cfg("pch", 128, 256, 9, 16, 8, 3, early=True)
for shape in ("llama8b-qkv-m4096", "m8192-n8192-k8192"):
    state = w.setup(w.shapes[shape], "fp8", "cuda")
    for v, mode in (("triton_promote", "row"), ("triton_promote_tensor", "tensor")):
        aq, bq, sa, sb = state[mode]
        out = torch.empty(aq.shape[0], bq.shape[0], device="cuda", dtype=torch.bfloat16)
        exp = B.launch_fn(c, aq, bq, sa, sb, out, mode == "row")
        fns = {"lab": lambda: w.variants[v](state), "round3": exp, "scaled_mm": B.scaled_mm_fn(aq, bq, sa, sb, mode == "row")}
        ts = {k: [] for k in fns}
        for _ in range(3):
            for k, fn in fns.items():
                ts[k].append(float(do_bench(fn, warmup=10, rep=60, return_mode="median")))
        med = {k: sorted(x)[1] for k, x in ts.items()}
        rows.append(dict(shape=shape, variant=v, vs_round3=med, pct_scaled_mm={k: 100 * med["scaled_mm"] / m for k, m in med.items()}))
        print(json.dumps(rows[-1]), flush=True)
from profkit.kernels.fp8_gemm import autotune_choices
json.dump(dict(rows=rows, tuned=autotune_choices()), open(sys.argv[1], "w"), indent=1)
PY
step check 170 python3 $O/check.py $O/check.json $R/benchmarks/gpu/fp8_promotion
cat $O/check.out; tail -3 $O/check.log
step capture 200 profkit capture fp8_gemm --db $DB --out $O/prof --metrics lean --no-nsys --run $RUN \
     --variant triton --variant triton_promote --variant scaled_mm --shape llama8b-qkv-m4096
tail -5 $O/capture.out; tail -5 $O/capture.log
cmp() { local tag=$1; shift; profkit compare --db $DB "$@" > $O/cmp-$tag.txt 2>&1; profkit compare --db $DB "$@" --json > $O/cmp-$tag.json 2>&1
        cat $O/cmp-$tag.txt; }
cmp v1-promote $RUN:triton $RUN:triton_promote
cmp scaledmm-promote $RUN:scaled_mm $RUN:triton_promote
step gemm 400 python3 $R/benchmarks/gemm.py --graph --only fp8_gemm \
     --variants triton,triton_tensor,triton_promote,triton_promote_tensor,scaled_mm,scaled_mm_tensor --out $O
tail -3 $O/gemm.log

for f in $O/prof/*/*.ncu-rep; do [ -f "$f" ] && xz -9 -T0 "$f"; done
rm -f $O/prof/*.db-*
du -sh $O/prof/* 2>/dev/null
tar -cJf $OUT/r3.tar.xz -C $O . && ls -la $OUT
echo "== summary (wall $(( $(date +%s) - T0 )) s)"
python3 - $O <<'PY'
import json, os, sys
o = sys.argv[1]
try:
    g = json.load(open(os.path.join(o, "gemm.json")))
    print(json.dumps(g.get("autotune_configs", {}).get("fp8_gemm.promote")))
except Exception as e:
    print("gemm.json missing:", e); g = None
if g:
    print(g.get("env"), g.get("peaks"))
    for r in g["rows"]:
        if r.get("ms"):
            print(f"{r['shape'][:20]:20} {r['variant'][:22]:22} ok={str(r.get('ok'))[0]} ms={r['ms']:.4f} "
                  f"%base={r.get('pct_baseline') or 0:.0f} gms={r.get('graph_ms') or 0:.4f} maxrel={r.get('max_rel') or 0:.1e}")
        elif r.get("error"):
            print("ERR", r["shape"], r["variant"], r["error"][:100])
PY
