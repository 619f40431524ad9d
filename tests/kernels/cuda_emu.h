// Runs the lab's CUDA C++ kernels on the CPU, for tests on machines without a GPU.
//
//   g++ -std=c++20 -DPROFKIT_CPU_EMULATION -include cuda_emu.h -x c++ kernels/cuda/X.cu -shared ...
//
// gives a library with the same exported functions as the nvcc build, taking host pointers.
// Each block runs alone; each of its threads is a host thread, so __syncthreads is a barrier
// over the block and __shfl_xor_sync an exchange through memory between two warp barriers.
// __shared__ becomes `static`: one copy per kernel, which is right because blocks run one
// after another. The kernels' index arithmetic, tiling, packing and reductions are what is
// tested; speed, memory ordering subtleties and the hardware's rounding of intrinsics are not.
#pragma once

#include <cuda_bf16.h>  // host conversions of __half / __nv_bfloat16 (and float2, dim3, ...)
#include <cuda_fp16.h>
#include <driver_types.h>
#include <pthread.h>
#include <vector_functions.h>
#include <vector_types.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#undef __shared__
#undef __align__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

using std::max;
using std::min;

inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;

namespace pkemu {
struct Thread {
  std::barrier<>* block;
  std::barrier<>* warp;
  float* lanes;  // the warp's 32 exchange slots
  int lane;
};
inline thread_local Thread self;
}  // namespace pkemu

inline void __syncthreads() { pkemu::self.block->arrive_and_wait(); }

inline float __shfl_xor_sync(unsigned, float v, int mask) {
  pkemu::self.lanes[pkemu::self.lane] = v;
  pkemu::self.warp->arrive_and_wait();
  const float r = pkemu::self.lanes[pkemu::self.lane ^ mask];
  pkemu::self.warp->arrive_and_wait();
  return r;
}

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated error"; }

namespace pk {

template <typename... P, typename... A>
inline void launch(void (*kernel)(P...), dim3 grid, dim3 block, cudaStream_t, A... args) {
  const unsigned nt = block.x * block.y * block.z;
  if (nt == 0 || nt > 1024) throw std::invalid_argument("block size");
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        std::barrier<> bar(nt);
        const unsigned nw = (nt + 31) / 32;
        std::vector<std::unique_ptr<std::barrier<>>> warps;
        for (unsigned w = 0; w < nw; ++w) warps.emplace_back(new std::barrier<>(std::min(32u, nt - 32 * w)));
        std::vector<float> lanes(nw * 32);
        std::vector<std::function<void()>> bodies(nt);
        std::vector<pthread_t> ids(nt);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        for (unsigned t = 0; t < nt; ++t) {
          bodies[t] = [&, t] {
            threadIdx = make_uint3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
            blockIdx = make_uint3(bx, by, bz);
            blockDim = block;
            gridDim = grid;
            pkemu::self = {&bar, warps[t / 32].get(), &lanes[t / 32 * 32], (int)(t % 32)};
            kernel(args...);
          };
          auto run = [](void* f) -> void* {
            (*static_cast<std::function<void()>*>(f))();
            return nullptr;
          };
          if (pthread_create(&ids[t], &attr, run, &bodies[t]) != 0) throw std::runtime_error("pthread_create");
        }
        for (unsigned t = 0; t < nt; ++t) pthread_join(ids[t], nullptr);
        pthread_attr_destroy(&attr);
      }
}

}  // namespace pk
