#!/usr/bin/env bash
# Device call: capture the known-answers workload with nsys, ncu (lean and roofline sets,
# plus --set full on two kernels for the pass count), and the CUPTI tracer.
# Run from the repo root on the GPU host; everything lands in $OUT/foundation.tar.xz.
set -u
source .gpu-libs/env.sh
R=$PWD
CUPTI_INJ=$NVTX_INJECTION64_PATH
unset NVTX_INJECTION64_PATH   # nsys and ncu inject their own
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
cd /tmp  # the repo's own profkit/ would shadow the installed package (kernels/ and parsers/ map into it)
C=/tmp/cap; mkdir -p $C
{
  date -u +%FT%TZ; nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem --format=csv
  $NCU --version | tail -1; $NSYS --version
  python3 -c "import torch, triton, sys; print('python', sys.version.split()[0]); print('torch', torch.__version__, 'cuda', torch.version.cuda); print('triton', triton.__version__)"
  python3 -m pip list 2>/dev/null | grep -iE "cupy|cupti|nvtx|ncu"
} > $C/versions.txt 2>&1
cat $C/versions.txt
$NCU --query-metrics --chip gh100 --csv > $C/query_metrics_gh100.csv 2>&1
for set in lean roofline; do
  python3 - $set > $C/metrics_$set.txt <<'PY'
import csv, sys
from profkit.core.metrics import metric_names
known = {r[0] for r in csv.reader(open("/tmp/cap/query_metrics_gh100.csv")) if r}
keep, drop = [], []
for m in dict.fromkeys(metric_names(sys.argv[1])):
    base = m.split(".")[0]
    (keep if base in known or m.startswith(("launch__", "device__")) else drop).append(m)
print(",".join(keep)); print("dropped:", drop, file=sys.stderr)
PY
done
W="python3 -m profkit.kernels.run known"
echo "== nsys"; time $NSYS profile -t cuda,nvtx --sample=none --cpuctxsw=none --force-overwrite true -o $C/known $W
$NSYS export --type sqlite --force-overwrite true -o $C/known.nsys.sqlite $C/known.nsys-rep
$NSYS stats --report nvtx_kern_sum --report cuda_gpu_kern_sum --report nvtx_sum --format csv --force-export false -o $C/known_stats $C/known.nsys.sqlite > /dev/null
for set in lean roofline; do
  echo "== ncu $set"; /usr/bin/time -v $NCU --clock-control none --nvtx --nvtx-include "known/" --metrics "$(head -1 $C/metrics_$set.txt)" \
     -f -o $C/known_$set $W > $C/ncu_$set.log 2> $C/ncu_${set}_time.txt
  tail -3 $C/ncu_$set.log; grep -E "Elapsed|Maximum resident" $C/ncu_${set}_time.txt
  $NCU --import $C/known_$set.ncu-rep --csv --page raw > $C/known_$set.raw.csv
done
for r in rmsnorm_triton gemm_cublas/bf16_4096; do
  tag=$(echo $r | tr / _)
  for set in full lean; do
    if [ $set = full ]; then M="--set full"; else M="--metrics $(head -1 $C/metrics_lean.txt)"; fi
    echo "== passes $set $r"; s=$(date +%s)
    $NCU --clock-control none --nvtx --nvtx-include "known/$r/" -c 1 $M -f -o /tmp/p_${set}_$tag $W > $C/passes_${set}_$tag.log 2>&1
    e=$(date +%s); echo "wall_s $((e - s))" >> $C/passes_${set}_$tag.log
    grep -E "passes|wall_s" $C/passes_${set}_$tag.log; ls -la /tmp/p_${set}_$tag.ncu-rep
  done
  $NCU --import /tmp/p_full_$tag.ncu-rep --csv --page raw > $C/full_$tag.raw.csv
done
echo "== cupti"; NVTX_INJECTION64_PATH=$CUPTI_INJ python3 -m profkit.capture.cupti_tracer -o $C/known.cupti.jsonl -- -m profkit.kernels.run known
python3 - <<'PY'
import json, collections
c = collections.Counter(json.loads(l)["type"] for l in open("/tmp/cap/known.cupti.jsonl"))
print("cupti records", dict(c))
PY
ls -la $C; xz -9 -k $C/known_*.ncu-rep 2>/dev/null; ls -la $C/*.xz
tar -cJf $OUT/foundation.tar.xz -C $C . && ls -la $OUT
