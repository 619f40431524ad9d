#!/usr/bin/env bash
# Device call: capture our own equivalents of the reports users have (benchmarks/gpu/field_workload.py):
# nsys export, torch.profiler (Kineto) trace of the same workload, .ncu-rep without and with NVTX,
# every ncu CSV page (raw, details, details with rule results, --metrics to stdout with the program's
# output in front), nsys exports without kernels, and a .qdrep exported through nsys.
# Run from the repo root with .gpu-libs and .carry (holding a .qdrep) carried; all lands in $OUT/field.tar.xz.
set -u
source .gpu-libs/env.sh
unset NVTX_INJECTION64_PATH   # nsys and ncu inject their own
export PYTHONUNBUFFERED=1
R=$PWD; C=/tmp/field; mkdir -p $C
W="python3 $R/benchmarks/gpu/field_workload.py"
{
  date -u +%FT%TZ; nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem --format=csv
  $NCU --version | tail -1; $NSYS --version
  python3 -c "import torch, triton, sys; print('python', sys.version.split()[0]); print('torch', torch.__version__, 'cuda', torch.version.cuda); print('triton', triton.__version__)"
} > $C/versions.txt 2>&1
cat $C/versions.txt
$NCU --help > $C/ncu_help.txt 2>&1
LEAN=$(cd $R && python3 -m profkit.core.metrics lean)
t() { local s=$(date +%s.%N); "$@"; local rc=$?; echo "[$(date +%s.%N) - $s] rc=$rc: $*" | awk '{printf "%.1f s %s\n", $2-$4, substr($0, index($0,"]")+2)}' >> $C/timings.txt; return $rc; }

echo "== plain"; t $W --ranges both
echo "== nsys"; t $NSYS profile -t cuda,nvtx --sample=none --cpuctxsw=none -f true -o $C/ws $W --ranges both > $C/nsys.log 2>&1
t $NSYS export --type sqlite -f true -o $C/ws.nsys.sqlite $C/ws.nsys-rep >> $C/nsys.log 2>&1
$NSYS stats --report nvtx_kern_sum --format csv -o $C/ws_stats $C/ws.nsys.sqlite > /dev/null 2>&1
echo "== kineto"; t $W --ranges both --kineto $C/ws.kineto.json; t $W --ranges both --kineto $C/ws2.kineto.json.gz
echo "== ncu without nvtx"; t $NCU --clock-control none --metrics "$LEAN" -f -o $C/ws_nonvtx $W --ranges none --steps 2 > $C/ncu_nonvtx.log 2>&1; tail -2 $C/ncu_nonvtx.log
echo "== ncu with nvtx"; t $NCU --clock-control none --nvtx --metrics "$LEAN" -f -o $C/ws_nvtx $W --ranges both --steps 2 > $C/ncu_nvtx.log 2>&1; tail -2 $C/ncu_nvtx.log
for page in raw details; do
  $NCU --import $C/ws_nvtx.ncu-rep --csv --page $page > $C/ws_nvtx.$page.csv 2>>$C/export.log
  $NCU --import $C/ws_nonvtx.ncu-rep --csv --page $page > $C/ws_nonvtx.$page.csv 2>>$C/export.log
done
$NCU --import $C/ws_nvtx.ncu-rep --csv --page details --print-units base > $C/ws_nvtx.details_base.csv 2>>$C/export.log
echo "== ncu sections with rules"
t $NCU --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
   --section ComputeWorkloadAnalysis -c 8 -f -o $C/ws_rules $W --ranges none --steps 1 > $C/ncu_rules.log 2>&1; tail -2 $C/ncu_rules.log
$NCU --import $C/ws_rules.ncu-rep --csv --page details > $C/ws_rules.details.csv 2>>$C/export.log
$NCU --import $C/ws_rules.ncu-rep --csv --page details --print-rule-details yes > $C/ws_rules.details_rules.csv 2>>$C/export.log
$NCU --import $C/ws_rules.ncu-rep --csv --page details --print-details all > $C/ws_rules.details_all.csv 2>>$C/export.log
$NCU --import $C/ws_rules.ncu-rep --csv --page raw > $C/ws_rules.raw.csv 2>>$C/export.log
echo "== ncu --metrics to stdout, program output in front"
t $NCU --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size \
   -c 6 $W --ranges none --steps 1 > $C/ws_metrics_stdout.csv 2>&1
t $NCU --clock-control none --csv --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum -c 6 $W --ranges none --steps 1 > $C/ws_raw_stdout.csv 2>&1
echo "== ncu sampling filters (for capture of ordinary programs)"
t $NCU --clock-control none --nvtx --filter-mode per-launch-config --launch-count 1 --metrics gpu__time_duration.sum \
   -f -o $C/ws_perconfig $W --ranges both --steps 3 > $C/ncu_perconfig.log 2>&1; grep -c "==PROF== Profiling" $C/ncu_perconfig.log
t $NCU --clock-control none --nvtx --kernel-id ::regex:elementwise:2 --metrics gpu__time_duration.sum \
   -f -o $C/ws_kernelid $W --ranges both --steps 3 > $C/ncu_kernelid.log 2>&1; grep -c "==PROF== Profiling" $C/ncu_kernelid.log
echo "== nsys without kernels"
t $NSYS profile -t nvtx --sample=none --cpuctxsw=none -f true -o $C/nvtx_only $W --ranges nvtx --steps 1 >> $C/nsys.log 2>&1
t $NSYS profile -t cuda,nvtx --sample=none --cpuctxsw=none -f true -o $C/no_gpu python3 -c "print('no gpu work')" >> $C/nsys.log 2>&1
t $NSYS profile -t cuda,nvtx --sample=none --cpuctxsw=none -f true -o $C/memcpy_only python3 -c "import torch; y = torch.ones(4).to('cuda'); print('copied')" >> $C/nsys.log 2>&1
for r in nvtx_only no_gpu memcpy_only; do $NSYS export --type sqlite -f true -o $C/$r.nsys.sqlite $C/$r.nsys-rep >> $C/nsys.log 2>&1; done
echo "== qdrep through nsys"
t $NSYS export --type sqlite -f true -o $C/kmeans_from_qdrep.sqlite $R/.carry/report2.qdrep >> $C/qdrep.log 2>&1; tail -3 $C/qdrep.log
rm -f $C/*.nsys-rep.bak
cat $C/timings.txt
ls -la $C
tar -cJf $OUT/field.tar.xz -C $C . && ls -la $OUT
