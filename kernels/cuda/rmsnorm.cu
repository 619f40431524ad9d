// RMSNorm forward, y = x * rsqrt(mean(x^2) + eps) * (w + offset), one block per row.
// Each thread keeps its part of the row in registers (VPT packs of V elements, 16-byte loads
// where the row allows), so x is read from memory once; the sum of squares is taken in fp32,
// reduced by warp shuffles and one shared-memory step (pk::block_sum). Rows too long for
// 1024 threads x 8 packs take a loop kernel that reads x twice.
#include "common.cuh"

namespace profkit {

template <typename T, int V, int VPT>
__global__ void rmsnorm_fwd_regs(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                 float* __restrict__ rstd, int64_t sx, int64_t sy, int N, float eps,
                                 float offset) {
  using P = pk::Pack<T, V>;
  const int64_t row = blockIdx.x;
  const int nvec = N / V;
  const P* xr = reinterpret_cast<const P*>(x + row * sx);
  const P* wp = reinterpret_cast<const P*>(w);
  P* yr = reinterpret_cast<P*>(y + row * sy);
  float xf[VPT][V];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {  // all loads issued before the reduction needs them
    const int j = threadIdx.x + i * blockDim.x;
    if (j < nvec) {
      pk::unpack(xr[j], xf[i]);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) xf[i][k] = 0.f;
    }
  }
#pragma unroll
  for (int i = 0; i < VPT; ++i)
#pragma unroll
    for (int k = 0; k < V; ++k) ss += xf[i][k] * xf[i][k];
  const float r = rsqrtf(pk::block_sum(ss) / N + eps);
  if (rstd != nullptr && threadIdx.x == 0) rstd[row] = r;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int j = threadIdx.x + i * blockDim.x;
    if (j < nvec) {
      float wf[V], o[V];
      pk::unpack(wp[j], wf);
#pragma unroll
      for (int k = 0; k < V; ++k) o[k] = xf[i][k] * r * (wf[k] + offset);
      P out;
      pk::pack(o, out);
      yr[j] = out;
    }
  }
}

template <typename T, int V>
__global__ void rmsnorm_fwd_loop(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                 float* __restrict__ rstd, int64_t sx, int64_t sy, int N, float eps,
                                 float offset) {
  using P = pk::Pack<T, V>;
  const int64_t row = blockIdx.x;
  const int nvec = N / V;
  const P* xr = reinterpret_cast<const P*>(x + row * sx);
  const P* wp = reinterpret_cast<const P*>(w);
  P* yr = reinterpret_cast<P*>(y + row * sy);
  float ss = 0.f;
  for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
    float f[V];
    pk::unpack(xr[j], f);
#pragma unroll
    for (int k = 0; k < V; ++k) ss += f[k] * f[k];
  }
  const float r = rsqrtf(pk::block_sum(ss) / N + eps);
  if (rstd != nullptr && threadIdx.x == 0) rstd[row] = r;
  for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
    float f[V], wf[V];
    pk::unpack(xr[j], f);
    pk::unpack(wp[j], wf);
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = f[k] * r * (wf[k] + offset);
    P out;
    pk::pack(f, out);
    yr[j] = out;
  }
}

constexpr int MAX_THREADS = 1024;
constexpr int TARGET_THREADS = 256;  // a block of 8 warps per row, more packs per thread before more threads

inline int round_up32(int n) { return (n + 31) / 32 * 32; }

template <typename T, int V>
cudaError_t launch_v(const T* x, const T* w, T* y, float* rstd, int64_t sx, int64_t sy, int M, int N,
                     float eps, float offset, cudaStream_t s) {
  const int nvec = N / V;
  int vpt = 0;
  for (int limit : {TARGET_THREADS, MAX_THREADS}) {
    for (int c : {1, 2, 4, 8}) {
      if ((nvec + c - 1) / c <= limit) { vpt = c; break; }
    }
    if (vpt) break;
  }
  const dim3 grid(M);
  if (vpt == 0) {
    pk::launch(rmsnorm_fwd_loop<T, V>, grid, dim3(MAX_THREADS), s, x, w, y, rstd, sx, sy, N, eps, offset);
    return cudaGetLastError();
  }
  const int threads = max(32, round_up32((nvec + vpt - 1) / vpt));
  switch (vpt) {
    case 1: pk::launch(rmsnorm_fwd_regs<T, V, 1>, grid, dim3(threads), s, x, w, y, rstd, sx, sy, N, eps, offset); break;
    case 2: pk::launch(rmsnorm_fwd_regs<T, V, 2>, grid, dim3(threads), s, x, w, y, rstd, sx, sy, N, eps, offset); break;
    case 4: pk::launch(rmsnorm_fwd_regs<T, V, 4>, grid, dim3(threads), s, x, w, y, rstd, sx, sy, N, eps, offset); break;
    default: pk::launch(rmsnorm_fwd_regs<T, V, 8>, grid, dim3(threads), s, x, w, y, rstd, sx, sy, N, eps, offset); break;
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch(const void* x, const void* w, void* y, float* rstd, int64_t sx, int64_t sy, int M, int N,
                   float eps, float offset, cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  const bool vec = N % V == 0 && sx % V == 0 && sy % V == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(w) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const T* xt = static_cast<const T*>(x);
  const T* wt = static_cast<const T*>(w);
  T* yt = static_cast<T*>(y);
  return vec ? launch_v<T, V>(xt, wt, yt, rstd, sx, sy, M, N, eps, offset, s)
             : launch_v<T, 1>(xt, wt, yt, rstd, sx, sy, M, N, eps, offset, s);
}

}  // namespace profkit

using namespace profkit;

// x [M, N] with row stride sx (elements), unit stride along N; y likewise with sy; w [N];
// rstd: optional fp32 [M] (nullptr: not stored). Returns a cudaError_t (0: launched).
PROFKIT_EXPORT int profkit_rmsnorm_fwd(const void* x, const void* w, void* y, float* rstd, long long sx,
                                       long long sy, int M, int N, float eps, float offset, int dtype,
                                       void* stream) {
  if (M < 0 || N <= 0) return cudaErrorInvalidValue;
  if (M == 0) return cudaSuccess;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case PK_FP32: return launch<float>(x, w, y, rstd, sx, sy, M, N, eps, offset, s);
    case PK_FP16: return launch<__half>(x, w, y, rstd, sx, sy, M, N, eps, offset, s);
    case PK_BF16: return launch<__nv_bfloat16>(x, w, y, rstd, sx, sy, M, N, eps, offset, s);
    default: return cudaErrorInvalidValue;
  }
}
