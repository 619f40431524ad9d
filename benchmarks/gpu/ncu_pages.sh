#!/usr/bin/env bash
# Device call: one ncu report of benchmarks/gpu/ncu_pages_workload.py with NVTX, sections (so it
# carries ncu's rule results) and the lean metric set, exported to every CSV page users keep: raw,
# details, details in base units, details with --print-details all; plus the same program under
# `ncu --csv --metrics` writing to stdout after the program's own output. For parsers/ncu_csv*.py
# tests (tests/data/ncu-pages/). Run from the repo root; everything lands in $OUT.
set -u
export PYTHONUNBUFFERED=1
unset NVTX_INJECTION64_PATH
NCU=$(command -v ncu)
R=$PWD; C=$OUT; W="python3 $R/benchmarks/gpu/ncu_pages_workload.py"
{
  date -u +%FT%TZ; nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader
  $NCU --version | tail -1
  python3 -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
} > $C/versions.txt 2>&1
cat $C/versions.txt
LEAN=$(python3 -m profkit.core.metrics lean)
SECTIONS="--section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats"
$W > /dev/null 2>&1  # Triton compiles once, outside the profile
$NCU --nvtx --clock-control none $SECTIONS --metrics "$LEAN" -f -o /tmp/pages $W > $C/ncu.log 2>&1; echo "ncu rc=$?"; tail -3 $C/ncu.log
$NCU --import /tmp/pages.ncu-rep --csv --page raw > $C/pages.raw.csv 2>> $C/ncu.log
$NCU --import /tmp/pages.ncu-rep --csv --page details > $C/pages.details.csv 2>> $C/ncu.log
$NCU --import /tmp/pages.ncu-rep --csv --page details --print-units base > $C/pages.details_base.csv 2>> $C/ncu.log
$NCU --import /tmp/pages.ncu-rep --csv --page details --print-details all > $C/pages.details_all.csv 2>> $C/ncu.log
xz -9 -T4 -c /tmp/pages.ncu-rep > $C/pages.ncu-rep.xz
# ncu writing its CSV to stdout after the program's output (the file users keep); one section and a few metrics
$NCU --nvtx --clock-control none --csv --section SpeedOfLight \
     --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size \
     $W > $C/pages_stdout.details.csv 2>&1; echo "stdout run rc=$?"
ls -la $C; wc -l $C/*.csv
