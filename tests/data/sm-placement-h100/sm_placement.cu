// Round 18 probe: where the CTAs of a persistent one-CTA-an-SM grid land (%smid), launched plainly
// and with a cluster attribute (1, 2), and which SMs share a GPC (the SMs of one cluster of 8 or
// 16 CTAs always do). Why: the L2 request coalescer merges identical reads of SMs of one GPC, so
// which tiles share a GPC decides how much of the fp8 GEMM's traffic reaches the L2. Round 19: whether
// launches of another block size and shared memory land alike (the GEMM's steer() relies on it).
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

static std::vector<int> run(const char* what, int grid, int cluster, int* d, size_t smem, int threads = 128) {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = cluster, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3(grid), cfg.blockDim = dim3(threads), cfg.dynamicSmemBytes = smem;
  cfg.attrs = at, cfg.numAttrs = cluster ? 1 : 0;
  cudaError_t e = cudaLaunchKernelEx(&cfg, record, d);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  std::vector<int> h(grid, -1);
  cudaMemcpy(h.data(), d, grid * sizeof(int), cudaMemcpyDeviceToHost);
  printf("%s (grid %d, cluster %d): %s\n", what, grid, cluster, cudaGetErrorString(e));
  for (int i = 0; i < grid; ++i) printf("%d%c", h[i], i + 1 == grid ? '\n' : ' ');
  return h;
}

int main() {
  int* d;
  cudaMalloc(&d, 4096 * sizeof(int));
  const size_t smem = 200 * 1024;
  cudaFuncSetAttribute(record, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024);
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
  // round 19: does a launch land where a probe of the same grid and cluster, but other threads and
  // shared memory, lands? (the fp8 GEMM's steer() numbers clusters from such a probe: 32 threads,
  // 227 KB; the GEMM: 384 threads, 216,176 bytes at 7 stages of 128 x 112)
  for (int c : {1, 2}) {
    const int grid = c == 1 ? sms : sms / 2 * 2;
    auto probe = run("probe-like", grid, c == 1 ? 0 : c, d, 227 * 1024, 32);
    auto gemm = run("gemm-like", grid, c == 1 ? 0 : c, d, 216176, 384);
    auto again = run("gemm-like again", grid, c == 1 ? 0 : c, d, 216176, 384);
    printf("cluster %d: gemm-like %s the probe, %s itself again\n", c, gemm == probe ? "lands as" : "does NOT land as",
           gemm == again ? "as" : "NOT as");
  }
  return 0;
}
