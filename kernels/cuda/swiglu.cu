// SwiGLU forward y = silu(gate) * up = gate * sigmoid(gate) * up, elementwise, fp32 math.
// One 16-byte pack of gate and of up per thread (8 bf16/fp16, 4 fp32); the tail that does
// not fill a pack, and inputs not 16-byte aligned, go element by element.
// sigmoid(g) = 1 / (1 + exp(-g)): for g -> -inf exp overflows to inf and the result is 0,
// as in the Triton kernel.
#include "common.cuh"

namespace profkit {

__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.f + expf(-g)) * u; }

template <typename T, int V>
__global__ void swiglu_fwd(const T* __restrict__ g, const T* __restrict__ u, T* __restrict__ y, int64_t n) {
  using P = pk::Pack<T, V>;
  const int64_t nvec = n / V;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += stride) {
    float gf[V], uf[V], o[V];
    pk::unpack(reinterpret_cast<const P*>(g)[i], gf);
    pk::unpack(reinterpret_cast<const P*>(u)[i], uf);
#pragma unroll
    for (int k = 0; k < V; ++k) o[k] = silu_mul(gf[k], uf[k]);
    P out;
    pk::pack(o, out);
    reinterpret_cast<P*>(y)[i] = out;
  }
  if (V > 1 && blockIdx.x == 0) {
    for (int64_t i = nvec * V + threadIdx.x; i < n; i += blockDim.x)
      y[i] = pk::from_float<T>(silu_mul(pk::to_float(g[i]), pk::to_float(u[i])));
  }
}

constexpr int THREADS = 256;
constexpr int64_t MAX_BLOCKS = 1 << 30;  // grid-stride past that (2^38 packs: never in practice)

template <typename T>
cudaError_t launch(const void* g, const void* u, void* y, int64_t n, cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  const bool vec = reinterpret_cast<uintptr_t>(g) % 16 == 0 && reinterpret_cast<uintptr_t>(u) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const T* gt = static_cast<const T*>(g);
  const T* ut = static_cast<const T*>(u);
  T* yt = static_cast<T*>(y);
  const int64_t work = vec ? n / V : n;
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((work + THREADS - 1) / THREADS, MAX_BLOCKS));
  if (vec)
    pk::launch(swiglu_fwd<T, V>, dim3((unsigned)blocks), dim3(THREADS), s, gt, ut, yt, n);
  else
    pk::launch(swiglu_fwd<T, 1>, dim3((unsigned)blocks), dim3(THREADS), s, gt, ut, yt, n);
  return cudaGetLastError();
}

}  // namespace profkit

using namespace profkit;

// gate, up, y: n contiguous elements each. Returns a cudaError_t (0: launched).
PROFKIT_EXPORT int profkit_swiglu_fwd(const void* gate, const void* up, void* y, long long n, int dtype,
                                      void* stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case PK_FP32: return launch<float>(gate, up, y, n, s);
    case PK_FP16: return launch<__half>(gate, up, y, n, s);
    case PK_BF16: return launch<__nv_bfloat16>(gate, up, y, n, s);
    default: return cudaErrorInvalidValue;
  }
}
