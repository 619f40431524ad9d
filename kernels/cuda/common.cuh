// Shared by the lab's CUDA C++ sources: dtype codes (the Python launchers pass the same
// numbers), packed 16-byte vectors, half2/bfloat162 <-> float2 conversions, block reduction.
// Plain CUDA C++: no torch headers, so every .cu compiles alone with nvcc (CPU CI does that).
#pragma once

#ifndef PROFKIT_CPU_EMULATION  // tests/kernels/cuda_emu.h stands in for the runtime on a CPU
#include <cuda_runtime.h>
#endif
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <algorithm>

#define PROFKIT_EXPORT extern "C" __attribute__((visibility("default")))

// dtype codes, as kernels/_cuda_ops.py DTYPE_CODES
enum { PK_FP32 = 0, PK_FP16 = 1, PK_BF16 = 2 };

namespace pk {

// Every launch goes through here rather than <<<>>> at the call site, so that the CPU tests can
// swap in a launcher that runs each block's threads on host threads (tests/kernels/cuda_emu.h).
#ifndef PROFKIT_CPU_EMULATION
template <typename... P, typename... A>
inline void launch(void (*kernel)(P...), dim3 grid, dim3 block, cudaStream_t stream, A... args) {
  kernel<<<grid, block, 0, stream>>>(args...);
}
#endif

// V elements of T in one aligned access (16 bytes when V * sizeof(T) == 16: LDG.128 / STG.128)
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// A pack of V elements to V floats; half and bfloat16 pairs go through half2 / bfloat162
// (one cvt per two elements).
template <typename T, int V>
__device__ __forceinline__ void unpack(const Pack<T, V>& p, float (&f)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) f[i] = to_float(p.v[i]);
}
template <int V>
__device__ __forceinline__ void unpack(const Pack<__half, V>& p, float (&f)[V]) {
  if constexpr (V % 2 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 2) {
      float2 t = __half22float2(*reinterpret_cast<const __half2*>(&p.v[i]));
      f[i] = t.x;
      f[i + 1] = t.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) f[i] = __half2float(p.v[i]);
  }
}
template <int V>
__device__ __forceinline__ void unpack(const Pack<__nv_bfloat16, V>& p, float (&f)[V]) {
  if constexpr (V % 2 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 2) {
      float2 t = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&p.v[i]));
      f[i] = t.x;
      f[i + 1] = t.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) f[i] = __bfloat162float(p.v[i]);
  }
}

template <typename T, int V>
__device__ __forceinline__ void pack(const float (&f)[V], Pack<T, V>& p) {
#pragma unroll
  for (int i = 0; i < V; ++i) p.v[i] = from_float<T>(f[i]);
}
template <int V>
__device__ __forceinline__ void pack(const float (&f)[V], Pack<__half, V>& p) {
  if constexpr (V % 2 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 2)
      *reinterpret_cast<__half2*>(&p.v[i]) = __floats2half2_rn(f[i], f[i + 1]);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) p.v[i] = __float2half_rn(f[i]);
  }
}
template <int V>
__device__ __forceinline__ void pack(const float (&f)[V], Pack<__nv_bfloat16, V>& p) {
  if constexpr (V % 2 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 2)
      *reinterpret_cast<__nv_bfloat162*>(&p.v[i]) = __floats2bfloat162_rn(f[i], f[i + 1]);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) p.v[i] = __float2bfloat16_rn(f[i]);
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block: shuffle within each warp, one partial per warp in shared memory, the
// first warp sums the partials. Every thread gets the total. blockDim.x must be a multiple of 32.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < (int)(blockDim.x >> 5) ? partial[lane] : 0.f;
    s = warp_sum(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

}  // namespace pk

// Each library exports its error text so the Python side can raise with the CUDA message.
PROFKIT_EXPORT const char* profkit_cuda_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}
