// Round 18 probe: where the CTAs of a persistent one-CTA-an-SM grid land (%smid), launched plainly
// and with a cluster attribute (1, 2), and which SMs share a GPC (the SMs of one cluster of 8 or
// 16 CTAs always do). Why: the L2 request coalescer merges identical reads of SMs of one GPC, so
// which tiles share a GPC decides how much of the fp8 GEMM's traffic reaches the L2.
//   nvcc -O2 -arch=sm_90 -o /tmp/sm_placement benchmarks/gpu/sm_placement.cu && /tmp/sm_placement
#include <cstdio>
#include <vector>

__global__ void record(int* out) {
  extern __shared__ char pad[];  // one CTA an SM
  int smid;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  if (threadIdx.x == 0) out[blockIdx.x] = smid;
  pad[threadIdx.x] = 0;
}

static void run(const char* what, int grid, int cluster, int* d, size_t smem) {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = cluster, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3(grid), cfg.blockDim = dim3(128), cfg.dynamicSmemBytes = smem;
  cfg.attrs = at, cfg.numAttrs = cluster ? 1 : 0;
  cudaError_t e = cudaLaunchKernelEx(&cfg, record, d);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  std::vector<int> h(grid, -1);
  cudaMemcpy(h.data(), d, grid * sizeof(int), cudaMemcpyDeviceToHost);
  printf("%s (grid %d, cluster %d): %s\n", what, grid, cluster, cudaGetErrorString(e));
  for (int i = 0; i < grid; ++i) printf("%d%c", h[i], i + 1 == grid ? '\n' : ' ');
}

int main() {
  int* d;
  cudaMalloc(&d, 4096 * sizeof(int));
  const size_t smem = 200 * 1024;
  cudaFuncSetAttribute(record, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  cudaFuncSetAttribute(record, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  run("plain", sms, 0, d, smem);
  run("cluster attribute 1", sms, 1, d, smem);
  run("clusters of 2", sms, 2, d, smem);
  for (int c : {16, 8}) {  // the SMs of a cluster share a GPC: as many clusters as fit, each row one GPC's part
    cudaLaunchConfig_t q = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = c, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    q.gridDim = dim3(c * 64), q.blockDim = dim3(128), q.dynamicSmemBytes = smem, q.attrs = at, q.numAttrs = 1;
    int n = 0;
    cudaOccupancyMaxActiveClusters(&n, record, &q);
    printf("clusters of %d that fit: %d\n", c, n);
    if (n > 0) run(c == 16 ? "clusters of 16" : "clusters of 8", n * c, c, d, smem);
  }
  return 0;
}
