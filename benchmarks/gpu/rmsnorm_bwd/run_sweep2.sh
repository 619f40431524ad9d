#!/usr/bin/env bash
# Device call 2 (H100) / H200: a fused-barrier smoke test (a hang would stop here, in 60 s), sweep2, ncu.
set -u
W=.carry-capture-whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $(ls $W/*.whl | grep -v -E "cupti_python|cuda_bindings|cuda_pathfinder|pyelftools") || exit 1
cp .carry-rmsbwd/rmsnorm.py kernels/rmsnorm.py
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=16
R=$PWD; cd /tmp
nvidia-smi --query-gpu=name,driver_version --format=csv
timeout 60 python3 - <<'PY' || { echo "fused smoke failed"; exit 1; }
import torch
from profkit.kernels import rmsnorm as K
for M, N in [(4096, 4096), (37, 200), (4096, 3584)]:
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16); dy = torch.randn_like(x); w = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    rstd = torch.empty(M, device="cuda"); K.rmsnorm_fwd(x, w, rstd=rstd)
    a = K.rmsnorm_bwd_v3(dy, x, w, rstd, config=(1, 1, 8, 4, 0))
    for i in range(20):
        b = K.rmsnorm_bwd_v3(dy, x, w, rstd, config=(1, 1, 8, 4, 0), fuse_dw=True)
    torch.cuda.synchronize()
    print("fused smoke", M, N, (a[0] == b[0]).all().item(), (a[1] == b[1]).all().item(), K._BARRIERS)
PY
timeout ${SWEEP_S:-400} python3 $R/.carry-rmsbwd/sweep2.py $OUT ${SWEEP_ARGS:-} 2>&1 | grep -v Warning
for sh in ${NCU_SHAPES:-4096x4096}; do
  timeout 100 ncu --clock-control none -k regex:"_rmsnorm_bwd|_dw_reduce|elementwise" --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active,launch__shared_mem_per_block_dynamic \
    --csv python3 $R/.carry-rmsbwd/ncu_probe2.py $OUT/best2.json $sh > $OUT/ncu2_$sh.csv 2> $OUT/ncu2_$sh.log
  python3 - $OUT/ncu2_$sh.csv <<'PY'
import csv, sys, collections
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"')))
by = collections.OrderedDict()
for r in rows:
    by.setdefault((r["ID"], r["Kernel Name"][:40]), {})[r["Metric Name"]] = r["Metric Value"]
for (i, n), m in by.items():
    print(i, n, " ".join(f"{k.split('__')[1][:24]}={v}" for k, v in m.items()))
PY
done
ls -la $OUT
