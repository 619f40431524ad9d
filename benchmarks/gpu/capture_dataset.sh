#!/usr/bin/env bash
# Device call (issue 6, shipped dataset): `profkit capture` of the lab workloads not yet in
# profiles/ (baseline and optimized variants; roofline metric set), each variant's output
# checked against its float64 reference (run meta `correctness`); and the passes of the
# final lean set (lean + the FP32 peak) on one kernel.
set -u
REPO=$PWD
source .gpu-libs/env.sh; unset NVTX_INJECTION64_PATH
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
cd /tmp; O=/tmp/ds; mkdir -p $O; DB=$O/ds.db
echo "== passes of the lean set"
cat > /tmp/k.cu <<'CU'
__global__ void k(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = x[i] * 1.5f + 0.5f; }
int main() { int n = 1 << 22; float *x; cudaMalloc(&x, n * 4); k<<<(n + 255) / 256, 256>>>(x, n); cudaDeviceSynchronize(); return 0; }
CU
nvcc -O2 -arch=sm_90 -o /tmp/k /tmp/k.cu && $NCU --clock-control none --launch-count 1 -f -o /tmp/kp --metrics "$(python3 -m profkit.core.metrics lean)" /tmp/k 2>&1 | grep -o "[0-9]* passes"
cap() { echo "== capture $*"; s=$(date +%s); timeout 150 profkit capture --db $DB --out $O --metrics roofline "$@" 2>&1 | grep -v "^Processing\|Generating\|\[.*%" | tail -4; echo "wall_s $(( $(date +%s) - s ))"; }
cap add_rmsnorm --variant eager --variant triton --shape llama8b-t4096 --run add_rmsnorm-llama8b-t4096
cap rope --variant eager --variant triton --shape llama8b-t4096 --run rope-llama8b-t4096
cap rmsnorm_rope --variant eager --variant triton --shape qwen3-8b-t4096 --run rmsnorm_rope-qwen3-8b-t4096
cap fp8_gemm --variant scaled_mm --variant triton --shape llama8b-qkv-m4096 --run fp8_gemm-llama8b-qkv-m4096
cap rmsnorm_linear --variant eager --variant triton --shape llama8b-qkv-m16 --run rmsnorm_linear-llama8b-qkv-m16
cap softmax --variant eager --variant triton --variant liger --shape llama3vocab-t2048 --run softmax-llama3vocab-t2048
cap rmsnorm --variant eager --variant triton --variant liger --shape qwen7b-t4096 --run rmsnorm-qwen7b-t4096
cap swiglu --variant eager --variant triton --variant liger --shape llama8b-t32768 --run swiglu-llama8b-t32768
profkit sql --db $DB "select run, nvtx_path, count(*) n, round(avg(duration_ns)/1e3,1) us from kernels where nvtx_path is not null group by 1,2"
profkit classify --db $DB --run rope-llama8b-t4096 --table 2>&1 | tail -8
for f in $O/*/*.ncu-rep; do xz -9 -T0 $f; done
rm -f $O/*/*.nsys-rep
du -sh $O/*
tar -cJf $OUT/ds.tar.xz -C $O --exclude ds.db --exclude 'ds.db-*' . && ls -la $OUT
