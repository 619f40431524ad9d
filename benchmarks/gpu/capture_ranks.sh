#!/usr/bin/env bash
# Device call (kind nvidia-h200-x2): `profkit capture --ranks` of the DDP training step
# (profkit.kernels.ddp_step) on 2 GPUs under torchrun: a balanced run and one where rank 1
# straggles, one nsys report per rank; then ncu on rank 0 of the balanced run (step 1 only,
# NCCL kernels skipped). Prints the topology and versions; results packed into $OUT.
# The nsys part is packed before the ncu pass starts, so a hung ncu costs only itself.
#
# CPU dry run (fake nsys/ncu, gloo, tiny sizes), from the repo root:
#   DRY=1 NSYS=/path/fake-nsys NCU=/path/fake-ncu OUT=/tmp/out PATH=.venv/bin:$PATH bash benchmarks/gpu/capture_ranks.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # NVLink multicast stays off
if [ -z "${DRY:-}" ]; then
  source .gpu-libs/env.sh; unset NVTX_INJECTION64_PATH
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 1
  export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
  SIZE="--layers 4 --hidden 4096 --tokens 8192"
  cd /tmp
else
  SIZE="--layers 2 --hidden 64 --tokens 32 --backend gloo"
fi
PY=$(command -v python3)
O=/tmp/ranks; rm -rf $O; mkdir -p $O; DB=$O/ranks.db
STEPS="--steps 5 --warmup 3"
LAUNCH=("$PY" -m torch.distributed.run --standalone --nproc-per-node 2 -m profkit.kernels.ddp_step $STEPS $SIZE)

echo "== machine"; date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id,clocks.max.sm --format=csv,noheader
nvidia-smi topo -m | tee $O/topology.txt
"$PY" -c "
import torch, sys
n = torch.cuda.device_count()
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'devices', n,
      'nccl', '.'.join(map(str, torch.cuda.nccl.version())) if n else '-')
sys.exit(0 if n >= 2 or '${DRY:-}' else 1)" || { echo "need 2 GPUs"; exit 1; }
"$NSYS" --version; "$NCU" --version | tail -1

cap() {  # cap RUN [capture options] -- [ddp_step options]
  local run=$1; shift; local opts=(); while [ "$1" != "--" ]; do opts+=("$1"); shift; done; shift
  echo "== capture $run ${opts[*]} $*"; local s=$(date +%s)
  timeout -k 10 150 profkit capture --db $DB --out $O --ranks --run $run "${opts[@]}" -- "${LAUNCH[@]}" "$@" 2>&1 \
    | grep -v "^Processing\|^Generating\|\[.*%\|^Collecting\|^Generated:\|^ *$"
  local rc=${PIPESTATUS[0]}; echo "rc $rc wall_s $(( $(date +%s) - s ))"; return $rc
}
cap ddp-2gpu-slow -- --slow-rank 1 --slow-matmuls 8
cap ddp-2gpu --
for run in ddp-2gpu ddp-2gpu-slow; do
  profkit ranks --db $DB --run $run --html $O/$run/ranks.html
  profkit ranks --db $DB --run $run --json > $O/$run/ranks.json
done
profkit sql --db $DB "SELECT run, rank, count(*) AS kernels, sum(short_name LIKE 'nccl%') AS nccl, sum(duration_ns) AS gpu_ns FROM kernels GROUP BY 1, 2"
rm -f $O/*/*.nsys-rep
ls -la $O $O/*/
tar -cJf $OUT/ranks.tar.xz -C $O --exclude ranks.db . && ls -la $OUT

echo "== ncu on rank 0 of ddp-2gpu (step 1, NCCL kernels skipped)"
cp $DB $O/ranks_ncu.db; DB=$O/ranks_ncu.db
cap ddp-2gpu --no-nsys --ncu-ranks 0 --metrics lean --nvtx-include "step 1" -- && {
  profkit sql --db $DB "SELECT rank, count(DISTINCT kernel_id) AS kernels_with_counters FROM counters WHERE run = 'ddp-2gpu' GROUP BY 1"
  profkit sql --db $DB "SELECT count(*) AS unlinked FROM launch WHERE run = 'ddp-2gpu' AND source = 'ncu' AND timeline_id IS NULL"
  xz -9 -T0 $O/ddp-2gpu/ddp-2gpu.rank0.ncu-rep && ls -la $O/ddp-2gpu/
  tar -cJf $OUT/ncu.tar.xz -C $O ddp-2gpu/ddp-2gpu.rank0.ncu-rep.xz ddp-2gpu/capture.json
}
ls -la $OUT
