#!/usr/bin/env bash
# Device call 1 (H100): the v3 sweep, then ncu of the v2 and v3 picks at 4096 x 4096.
# Run from the repository root of the device copy with .carry-rmsbwd and .carry-capture-whl carried.
set -u
W=.carry-capture-whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $(ls $W/*.whl | grep -v -E "cupti_python|cuda_bindings|cuda_pathfinder|pyelftools") || exit 1
cp .carry-rmsbwd/rmsnorm.py kernels/rmsnorm.py
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=16
R=$PWD; cd /tmp
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
timeout ${SWEEP_S:-420} python3 $R/.carry-rmsbwd/sweep.py $OUT ${SWEEP_ARGS:-} 2>&1 | grep -v Warning
NCU=$(command -v ncu)
for sh in ${NCU_SHAPES:-4096x4096}; do
  timeout 120 $NCU --clock-control none -k regex:"_rmsnorm_bwd|_dw_reduce" --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static \
    --csv python3 $R/.carry-rmsbwd/ncu_probe.py $OUT/best.json $sh > $OUT/ncu_$sh.csv 2> $OUT/ncu_$sh.log
  python3 - $OUT/ncu_$sh.csv <<'PY'
import csv, sys, collections
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"')))
by = collections.OrderedDict()
for r in rows:
    k = (r["ID"], r["Kernel Name"][:40])
    by.setdefault(k, {})[r["Metric Name"]] = r["Metric Value"]
for (i, n), m in by.items():
    print(i, n, " ".join(f"{k.split('__')[1][:28]}={v}" for k, v in m.items()))
PY
done
ls -la $OUT
