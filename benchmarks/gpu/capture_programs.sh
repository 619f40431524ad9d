#!/usr/bin/env bash
# Device call (issue 16): `profkit capture -- COMMAND` on ordinary programs profkit never saw
# (benchmarks/programs/: a torchvision ResNet-18 training loop, a Hugging Face Llama-style decoder
# from a config, a plain CUDA C program built with nvcc), each end to end, with the program's wall
# time alone, under nsys, under the CUPTI tracer and under the whole capture; and probes of what
# ncu's filters do (per-launch-config keys, --launch-skip per configuration, nested and regex NVTX
# includes) on the field workload whose per-launch-config report tests/data holds.
#
#   cd .carry-capture && bash benchmarks/gpu/capture_programs.sh probes|programs
# (carry .carry-capture = this checkout, .carry-capture-whl = wheels, .gpu-libs)
# probes: ncu's filters on the field workload (first call, with tracer timings of the programs)
# programs: the programs alone and captured end to end, windows, --torch-ranges, metric sets
# Writes $OUT/results.tar.xz (logs, timings, database) and $OUT/r-RUN.tar (each run's reports, xz).
set -u
MODE=${1:-programs}
R=$PWD
T0=$(date +%s)
BUDGET=${BUDGET:-540}
source ../.gpu-libs/env.sh > /dev/null
CUPTI_INJ=$NVTX_INJECTION64_PATH; unset NVTX_INJECTION64_PATH   # nsys and ncu inject their own
W=../.carry-capture-whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  $(ls $W/*.whl | grep -v -E "cupti_python|cuda_bindings|cuda_pathfinder|pyelftools") || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site-cupti \
  $W/cupti_python*.whl $W/cuda_bindings*.whl $W/cuda_pathfinder*.whl $W/pyelftools*.whl || echo "cupti wheels: not installed"
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 1
NCUPY=$(dirname "$(find /opt/nvidia /usr/local/cuda* -name ncu_report.py -path '*extras/python*' 2>/dev/null | head -1)")
export PYTHONPATH=/tmp/site:$NCUPY PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
O=/tmp/cap; mkdir -p $O; cd $O          # never import the checkout's profkit/ (no parsers/ there)
P=$R/benchmarks/programs; DB=$O/cap.db
python3 -c "import ncu_report; print('ncu_report from', ncu_report.__file__)" || echo "NO ncu_report"
# the installed profkit must import whole before any GPU time is spent on it
python3 -m profkit.cli --version && python3 -c "import profkit.cli, profkit.outputs.tables, profkit.sampling" || exit 1
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
# t NAME CMD...: run with a time limit (what is left of the budget), log, record wall seconds and exit code
t() {
  local name=$1; shift
  local lim=$(left); [ $lim -lt 20 ] && { echo "== $name: skipped (budget)"; echo "$name 0 -1" >> $O/timings.txt; return; }
  local s=$(date +%s.%N)
  timeout $lim "$@" > $O/$name.log 2>&1; local rc=$?
  local e=$(python3 -c "print(f'{$(date +%s.%N) - $s:.1f}')")
  echo "$name $e $rc" >> $O/timings.txt
  echo "== $name: ${e} s, exit $rc"; grep -v -E "^==PROF==|^Collecting|^Processing|Generating|\[[0-9 ]+%\]|^\s*$" $O/$name.log | tail -4
}
probe() {  # probe NAME NCU-ARGS...: ncu on the field workload (3 steps, its NVTX ranges), launches profiled
  t $1 $NCU --clock-control none --metrics gpu__time_duration.sum -f -o $O/$1 "${@:2}" \
    python3 $R/benchmarks/gpu/field_workload.py --ranges nvtx --steps 3
  echo "$1 profiled $(grep -c '==PROF== Profiling' $O/$1.log)" | tee -a $O/probes.txt
}

PK="python3 -m profkit.cli"
CAP="$PK capture --db $DB --out $O/profiles"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  $NCU --version | tail -1; $NSYS --version; nvcc --version | tail -1
  python3 -c "import sys, torch, torchvision, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'torchvision', torchvision.__version__, 'transformers', transformers.__version__)"
} > $O/versions.txt 2>&1; cat $O/versions.txt
t build nvcc -O2 -arch=sm_90 -o $O/vector_ops $P/vector_ops.cu
if [ "$MODE" = probes ]; then  # what ncu's filters do (H200, 2026-11-23: 12, 14, 11, 6, 6 = profkit.sampling's picks)
  probe probe_function --nvtx --filter-mode per-launch-config --launch-count 1
  probe probe_mangled --nvtx --filter-mode per-launch-config --launch-count 1 --kernel-name-base mangled
  probe probe_skip1 --nvtx --filter-mode per-launch-config --launch-count 1 --launch-skip 1
  probe probe_nested --nvtx --nvtx-include "norm/" --filter-mode per-launch-config --launch-count 1
  probe probe_regex --nvtx --nvtx-include "regex:^no.m/" --filter-mode per-launch-config --launch-count 1
else
  # the programs alone (a first run of each warms the disk cache: not counted), then captured end to end
  t resnet_cold python3 $P/resnet_train.py
  t resnet_alone python3 $P/resnet_train.py
  t hf_cold python3 $P/hf_decode.py
  t hf_alone python3 $P/hf_decode.py
  t cuda_alone $O/vector_ops
  t capture_resnet $CAP --run resnet18-train -- python3 $P/resnet_train.py
  t capture_hf $CAP --run hf-llama-decode -- python3 $P/hf_decode.py
  t capture_cuda $CAP --run cuda-vector-ops -- $O/vector_ops
  for run in resnet18-train hf-llama-decode cuda-vector-ops; do
    t classify_$run $PK classify --db $DB --run $run --table
    t advise_$run $PK advise --db $DB --run $run --top 5
  done
  # windows and operator ranges: step 3 of the loop with PyTorch's operators as NVTX ranges;
  # cudaProfilerStart/Stop around iteration 3 of the CUDA program
  t capture_resnet_ops_step3 $CAP --run resnet18-ops-step3 --torch-ranges --step 3 \
    -- python3 $P/resnet_train.py --nvtx-steps
  t capture_cuda_profiler_api $CAP --run cuda-profiler-api -- $O/vector_ops 50 3
  t classify_resnet18-ops-step3 $PK classify --db $DB --run resnet18-ops-step3 --table
  for set in lean roofline full; do
    t cuda_ncu_$set $PK capture --db $O/sets.db --out $O/sets --run cuda-$set --metrics $set -- $O/vector_ops 5
  done
  t resnet_torch_ranges_alone python3 $R/profkit/torch_ranges.py $P/resnet_train.py --nvtx-steps
  t resnet_nsys $NSYS profile -t cuda,nvtx --sample=none --cpuctxsw=none -f true -o $O/resnet_nsys python3 $P/resnet_train.py
  t resnet_cupti env PYTHONPATH=/tmp/site-cupti:$PYTHONPATH NVTX_INJECTION64_PATH=$CUPTI_INJ \
    python3 -m profkit.cupti_tracer -o $O/resnet.cupti.jsonl -- $P/resnet_train.py
fi
python3 $R/benchmarks/capture_programs.py --db $DB --timings $O/timings.txt --json $O/capture.json > $O/table.txt 2>&1
[ -f $O/sets.db ] && python3 $R/benchmarks/capture_programs.py --db $O/sets.db --timings /dev/null > $O/sets_table.txt 2>&1
for f in $O/profiles/*/*.ncu-rep; do [ -f "$f" ] && xz -6 -T0 "$f"; done
for f in $O/profiles/*/*.nsys.sqlite; do [ -f "$f" ] && xz -6 -T0 "$f"; done
rm -f $O/profiles/*/*.nsys-rep $O/*.nsys-rep $O/probe_*.ncu-rep
xz -6 -T0 -k $DB
for d in $O/profiles/*/; do [ -d "$d" ] && tar -cf $OUT/r-$(basename $d).tar -C $O/profiles $(basename $d); done
tar -cJf $OUT/results.tar.xz -C $O --exclude profiles --exclude cap.db --exclude sets.db --exclude '*.jsonl' \
  --exclude vector_ops --exclude sets . 2>/dev/null
ls -la $OUT; du -sh $O/profiles/* 2>/dev/null
echo "== $(( $(date +%s) - T0 )) s"
cat $O/probes.txt 2>/dev/null
cat $O/table.txt
