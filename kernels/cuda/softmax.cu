// Softmax over long rows (vocabulary logits), one row shared by a thread-block cluster.
//
// Measured 0.80x of the Triton kernel on the H200, 0.85-0.88x on the H100 (kernels.md): the lab's
// CUDA C++ variant `cuda`, not the default.
//
// Why this shape: the Triton row-group kernel reads each row once and
// holds it in registers, but on the H200 it stays at 84-86 % of copy. Its loads are issued by the
// threads that will use them, so the bytes in flight are bounded by the registers each program
// holds and by how many programs fit an SM; its partials meet through global memory. Here:
//   - one producer warp streams each CTA's slice of the rows into a ring of shared-memory chunks
//     with the bulk copy engine (cp.async.bulk, completion counted on an mbarrier per chunk):
//     bytes in flight cost neither registers nor issue slots, and run rows ahead;
//   - 15 consumer warps (7 at two CTAs an SM) copy a chunk to registers, free it (an mbarrier
//     arrive), and once the whole slice is held reduce it to a (max, sum of exp) pair, each
//     thread against its own max, the exponentials held in fp32 where registers allow;
//   - the C CTAs of a cluster hold the C slices of one row and exchange their pairs through
//     distributed shared memory (st.shared::cluster + a remote mbarrier arrive with cluster-scope
//     release), not global memory;
//   - each thread writes exp(x - max) / sum from what it holds (held input: one more exp2 an
//     element), while the shared-memory ring is already refilling with later rows.
// Needs sm_90 (clusters, bulk copies); every row read once and written once. n must be a multiple
// of the 16-byte vector and the row strides too (the Python launcher checks; kernels/_cuda_ops.py).
#include "common.cuh"
#include "sm90.cuh"

#include <math.h>

#ifndef PROFKIT_CPU_EMULATION
#include <map>
#include <mutex>
#include <tuple>
#endif

namespace profkit {

#ifndef PROFKIT_CPU_EMULATION
namespace sm90 {

// The same with cluster-scope acquire: the peers' partials, written before their release, are seen.
__device__ __forceinline__ void mbar_wait_cluster(uint64_t* b, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(saddr(b)), "r"(parity)
        : "memory");
  } while (!done);
}
// global -> this CTA's shared memory by the bulk copy engine; bytes and addresses 16-byte aligned.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          saddr(dst)),
      "l"(src), "r"(bytes), "r"(saddr(bar)), "l"(policy)
      : "memory");
}
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ void peer_store(uint32_t addr, float a, float b) {
  asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(a), "f"(b) : "memory");
}
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace sm90

constexpr float LOG2E = 1.4426950408889634f;
// Two shapes of CTA (the launcher's per_sm): one an SM, 15 consumer warps taking two 16-byte
// vectors each from a 15-KB chunk; or two an SM, 7 consumer warps taking four from a 14-KB chunk,
// so that one CTA's reduction and exchange overlap the other's work. Either way 16 warps an SM,
// 4 a scheduler: up to 128 registers a thread.
template <int CW, int VPC>
struct Shape {
  static constexpr int CONSUMERS = CW * 32;
  static constexpr int THREADS = CONSUMERS + 32;  // + the producer warp
  static constexpr int CHUNK_BYTES = CONSUMERS * VPC * 16;
  static constexpr int PER_SM = CW == 15 ? 1 : 2;
};
constexpr int MAX_STAGES = 13;           // 195 KB of ring: within the 227 KB an H100 / H200 block may have
constexpr int MAX_WARPS = 15;
constexpr int MAX_STAGES_2 = 7;          // two CTAs an SM: 98 KB of ring each
constexpr int MAX_CLUSTER = 8;           // the portable cluster size
constexpr int HOLD_FLOATS = 80;          // up to here a thread's slice is held as fp32 exponentials (ptxas -v:
                                         // no spills); beyond, as packed input

// (m1, s1) and (m2, s2): sums of exp2 against their own maxima, combined against the larger one.
// A side that saw no element (m = -inf) weighs 0, also when both did not (no inf - inf).
__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  const float w1 = m == mm ? 1.f : sm90::ex2((m - mm) * LOG2E);
  const float w2 = m2 == mm ? 1.f : sm90::ex2((m2 - mm) * LOG2E);
  s = s * w1 + s2 * w2;
  m = mm;
}

struct alignas(16) Shared {
  uint64_t full[MAX_STAGES];   // a chunk landed (the bulk copy's bytes counted)
  uint64_t empty[MAX_STAGES];  // every consumer warp has its part of a chunk in registers
  uint64_t xbar[2];            // the cluster's partials of a row arrived (rows alternate)
  float2 slot[2][MAX_CLUSTER]; // those partials, by the rank that wrote them
  float2 warp_part[MAX_WARPS];
};

// NCH: chunks (14-15 KB) in this CTA's slice of a row, at most (the launcher picks the instance).
template <typename T, int NCH, bool HOLD, int CW, int VPC>
__global__ void __launch_bounds__(Shape<CW, VPC>::THREADS, Shape<CW, VPC>::PER_SM)
    softmax_cluster(const T* __restrict__ x, T* __restrict__ y, int rows, int n, int64_t sx, int64_t sy, int slice,
                    int stages, int probe) {
  using P = pk::Pack<T, 16 / sizeof(T)>;
  constexpr int V = 16 / sizeof(T);
  constexpr int CONSUMER_WARPS = CW, CONSUMERS = CW * 32, CHUNK_BYTES = Shape<CW, VPC>::CHUNK_BYTES;
  constexpr int CHE = CHUNK_BYTES / sizeof(T);  // elements a chunk
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ Shared sh;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const uint32_t rank = sm90::cluster_rank(), C = sm90::cluster_size();
  const int G = sm90::cluster_count(), first = sm90::cluster_id();
  const int c0 = rank * slice;
  const int len = rank == C - 1 ? n - c0 : slice;  // this CTA's columns of every row
  const int nch = (len + CHE - 1) / CHE;

  if (tid == 0) {
    for (int k = 0; k < stages; ++k) {
      sm90::mbar_init(&sh.full[k], 1);
      sm90::mbar_init(&sh.empty[k], CONSUMER_WARPS);
    }
    sm90::mbar_init(&sh.xbar[0], C);
    sm90::mbar_init(&sh.xbar[1], C);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  sm90::cluster_sync();  // every CTA's barriers exist before a peer arrives on them

  if (warp == CONSUMER_WARPS) {  // the producer
    if (lane == 0) {
      const uint64_t policy = sm90::evict_first_policy();  // each byte is read once
      int k = 0;
      uint32_t phase = 0;
      for (int row = first; row < rows; row += G) {
        const T* src = x + row * sx + c0;
        for (int c = 0; c < nch; ++c) {
          sm90::mbar_wait(&sh.empty[k], phase ^ 1);  // a fresh barrier passes parity 1 at once
          const uint32_t bytes = static_cast<uint32_t>(min(CHE, len - c * CHE)) * sizeof(T);
          sm90::mbar_expect_tx(&sh.full[k], bytes);
          sm90::bulk_load(ring + k * CHUNK_BYTES, src + c * CHE, bytes, &sh.full[k], policy);
          if (++k == stages) k = 0, phase ^= 1;
        }
      }
    }
    __syncwarp();
  } else {
    int k = 0;
    uint32_t phase = 0;
    int it = 0;
    for (int row = first; row < rows; row += G, ++it) {
      // HOLD: the slice held as fp32 and turned into exp against this thread's max in place (one
      // exp2 an element); else held as packed input and exp2 taken again for the output (fewer
      // registers, for slices of more than 5 chunks)
      float h[NCH][VPC][HOLD ? V : 1];
      P v[NCH][VPC];
      float m = -INFINITY;
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        if (c < nch) {
          sm90::mbar_wait(&sh.full[k], phase);
          const P* buf = reinterpret_cast<const P*>(ring + k * CHUNK_BYTES);
#pragma unroll
          for (int j = 0; j < VPC; ++j) {
            const int vi = j * CONSUMERS + tid;
            if (c * CHE + vi * V < len) {
              v[c][j] = buf[vi];
              float f[V];
              pk::unpack(v[c][j], f);
#pragma unroll
              for (int i = 0; i < V; ++i) {
                m = fmaxf(m, f[i]);
                if constexpr (HOLD) h[c][j][i] = f[i];
              }
            }
          }
          __syncwarp();
          if (lane == 0) sm90::mbar_arrive(&sh.empty[k]);
          if (++k == stages) k = 0, phase ^= 1;
        }
      }
      if (probe & 2) {  // probe: the read stream alone (the slice loaded to registers, nothing else)
        if (m == 12345.f) y[row] = T();  // keeps the loads live
        continue;
      }
      // this thread's sum of exp against its own max (no barrier before it)
      float s = 0.f;
      const float mb = m == -INFINITY ? 0.f : m * LOG2E;  // an all -inf slice: exp2(-inf) = 0, not NaN
#pragma unroll
      for (int c = 0; c < NCH; ++c)
#pragma unroll
        for (int j = 0; j < VPC; ++j)
          if (c < nch && c * CHE + (j * CONSUMERS + tid) * V < len) {
            if constexpr (HOLD) {
#pragma unroll
              for (int i = 0; i < V; ++i) s += (h[c][j][i] = sm90::ex2(fmaf(h[c][j][i], LOG2E, -mb)));
            } else {
              float f[V];
              pk::unpack(v[c][j], f);
#pragma unroll
              for (int i = 0; i < V; ++i) s += sm90::ex2(fmaf(f[i], LOG2E, -mb));
            }
          }
      if (m == -INFINITY) s = 0.f;  // no element here, or all -inf: weighs nothing
      const float m_own = m;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) combine(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
      const int par = it & 1;
      if (lane == 0) sh.warp_part[warp] = make_float2(m, s);
      sm90::named_sync(1, CONSUMERS);
      float M = -INFINITY, S = 0.f;
      if (probe & 1) {  // probe: the CTA's own partial only (outputs wrong): what the exchange costs
#pragma unroll 1
        for (int w = 0; w < CONSUMER_WARPS; ++w) combine(M, S, sh.warp_part[w].x, sh.warp_part[w].y);
      } else {
        if (warp == 0) {
          float2 p = lane < CONSUMER_WARPS ? sh.warp_part[lane] : make_float2(-INFINITY, 0.f);
          float wm = p.x, ws = p.y;
#pragma unroll
          for (int o = 16; o > 0; o >>= 1)
            combine(wm, ws, __shfl_xor_sync(0xffffffffu, wm, o), __shfl_xor_sync(0xffffffffu, ws, o));
          // this CTA's partial to every CTA of the cluster (itself too), then a release-arrive there
          if (lane < C) {
            sm90::peer_store(sm90::peer_addr(&sh.slot[par][rank], lane), wm, ws);
            sm90::peer_arrive(sm90::peer_addr(&sh.xbar[par], lane));
          }
        }
        sm90::mbar_wait_cluster(&sh.xbar[par], (it >> 1) & 1);
        for (uint32_t r = 0; r < C; ++r) combine(M, S, sh.slot[par][r].x, sh.slot[par][r].y);
      }
      if (probe & 1) sm90::named_sync(1, CONSUMERS);  // warp_part read by all before the next row writes it
      const float inv = 1.f / S, Mb = M * LOG2E;
      // HOLD: exp(x - m_own) * exp(m_own - M) / S
      // (a row of -inf only: NaN, as torch.softmax)
      const float scale = M == -INFINITY ? NAN : m_own == -INFINITY ? 0.f : sm90::ex2(fmaf(m_own, LOG2E, -Mb)) * inv;
      T* dst = y + row * sy + c0;
#pragma unroll
      for (int c = 0; c < NCH; ++c)
#pragma unroll
        for (int j = 0; j < VPC; ++j) {
          const int e = c * CHE + (j * CONSUMERS + tid) * V;
          if (c < nch && e < len && (!(probe & 4) || (c == 0 && j == 0))) {  // probe 4: one store a thread
            float f[V];
            if constexpr (HOLD) {
#pragma unroll
              for (int i = 0; i < V; ++i) f[i] = h[c][j][i] * scale;
            } else {
              pk::unpack(v[c][j], f);
#pragma unroll
              for (int i = 0; i < V; ++i) f[i] = sm90::ex2(fmaf(f[i], LOG2E, -Mb)) * inv;
            }
            P o;
            pk::pack(f, o);
            *reinterpret_cast<P*>(dst + e) = o;
          }
        }
    }
  }
  sm90::cluster_sync();  // no CTA leaves while a peer may still write to its shared memory
}

// Clusters of `cfg` resident at once (the persistent grid), with the kernel's shared-memory limit
// raised to cover it first. Both are asked of the driver once and kept (the occupancy per kernel,
// device, cluster and shared memory; the limit, a property of the kernel on a device, only ever
// raised), so that a launch costs no occupancy query (a launcher's host time counts at small shapes).
inline cudaError_t resident_clusters(const void* kern, cudaLaunchConfig_t& cfg, int* active) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  const auto key = std::make_tuple(kern, dev, cfg.attrs[0].val.clusterDim.x, cfg.dynamicSmemBytes);
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, unsigned, size_t>, int> known;
  static std::map<std::pair<const void*, int>, size_t> limit;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(key); it != known.end()) {
    *active = it->second;
    return cudaSuccess;
  }
  size_t& set = limit[{kern, dev}];
  if (cfg.dynamicSmemBytes > set) {
    e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cfg.dynamicSmemBytes);
    if (e != cudaSuccess) return e;
    set = cfg.dynamicSmemBytes;
  }
  e = cudaOccupancyMaxActiveClusters(active, kern, &cfg);
  if (e == cudaSuccess) known[key] = *active;
  return e;
}

template <typename T, int NCH, int CW, int VPC>
cudaError_t launch_nch(const T* x, T* y, int rows, int n, int64_t sx, int64_t sy, int cluster, int slice, int stages,
                       int max_clusters, int probe, cudaStream_t s, int* clusters_out) {
  auto kern = softmax_cluster<T, NCH, (NCH * VPC * (16 / sizeof(T)) <= HOLD_FLOATS), CW, VPC>;
  const int dyn = stages * Shape<CW, VPC>::CHUNK_BYTES;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(Shape<CW, VPC>::THREADS);
  cfg.dynamicSmemBytes = dyn;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cfg.gridDim = dim3(cluster);
  int active = 0;
  cudaError_t e = resident_clusters(reinterpret_cast<const void*>(kern), cfg, &active);
  if (e != cudaSuccess) return e;
  if (active < 1) return cudaErrorInvalidConfiguration;
  int g = std::min(active, rows);
  if (max_clusters > 0) g = std::min(g, max_clusters);
  if (clusters_out) *clusters_out = g;
  cfg.gridDim = dim3(g * cluster);
  e = cudaLaunchKernelEx(&cfg, kern, x, y, rows, n, sx, sy, slice, stages, probe);
  return e != cudaSuccess ? e : cudaGetLastError();
}

template <typename T, int CW, int VPC>
cudaError_t launch_shape(const T* x, T* y, int rows, int n, int64_t sx, int64_t sy, int cluster, int stages,
                         int max_clusters, int probe, cudaStream_t s, int* clusters_out) {
  constexpr int V = 16 / sizeof(T);
  constexpr int CHE = Shape<CW, VPC>::CHUNK_BYTES / sizeof(T);
  // every CTA but the last takes `slice` columns (a whole number of vectors); the last the rest
  const int slice = (n / V + cluster - 1) / cluster * V;
  const int last = n - (cluster - 1) * slice;
  if (last <= 0) return cudaErrorInvalidValue;
  const int nch = (std::max(slice, last) + CHE - 1) / CHE;  // instances: 1-8 chunks (1-5 at two CTAs an SM)
  switch (nch) {
#define PK_CASE(K)                                                                                              \
  case K:                                                                                                       \
    return launch_nch<T, K, CW, VPC>(x, y, rows, n, sx, sy, cluster, slice, stages, max_clusters, probe, s, \
                                     clusters_out);
    PK_CASE(1) PK_CASE(2) PK_CASE(3) PK_CASE(4) PK_CASE(5)
    case 6: case 7: case 8:
      if constexpr (CW == 15) {  // two CTAs an SM hold at most 5 chunks (registers)
        if (nch == 6) return launch_nch<T, 6, CW, VPC>(x, y, rows, n, sx, sy, cluster, slice, stages, max_clusters, probe, s, clusters_out);
        if (nch == 7) return launch_nch<T, 7, CW, VPC>(x, y, rows, n, sx, sy, cluster, slice, stages, max_clusters, probe, s, clusters_out);
        return launch_nch<T, 8, CW, VPC>(x, y, rows, n, sx, sy, cluster, slice, stages, max_clusters, probe, s, clusters_out);
      }
      return cudaErrorInvalidValue;
#undef PK_CASE
    default: return cudaErrorInvalidValue;
  }
}

template <typename T>
cudaError_t launch(const void* xv, void* yv, int rows, int n, int64_t sx, int64_t sy, int cluster, int stages,
                   int max_clusters, int probe, int per_sm, cudaStream_t s, int* clusters_out) {
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  if (per_sm == 1)
    return launch_shape<T, 15, 2>(x, y, rows, n, sx, sy, cluster, stages, max_clusters, probe, s, clusters_out);
  if (per_sm == 2 && stages <= MAX_STAGES_2)
    return launch_shape<T, 7, 4>(x, y, rows, n, sx, sy, cluster, stages, max_clusters, probe, s, clusters_out);
  return cudaErrorInvalidValue;
}
#endif  // PROFKIT_CPU_EMULATION

}  // namespace profkit

using namespace profkit;

// x, y: [rows, n] with unit column stride, row strides sx / sy in elements; n, sx, sy multiples
// of 16 bytes' worth of elements and both pointers 16-byte aligned; cluster in 1..8 with every
// CTA's slice at most 8 chunks of 15 KB; stages: the ring's 15-KB chunks, 2..13. max_clusters
// (0: as many as fit) bounds the persistent grid; probe (measurements, wrong outputs), bits: 1 each
// CTA normalises by its own slice, no exchange; 2 the slices loaded and nothing else; 4 one
// 16-byte store a thread a row; per_sm: CTAs an SM, 1 (15-KB chunks, stages <= 13) or 2 (14-KB
// chunks, stages <= 7, slices of at most 5 chunks); clusters_out (may be null) gets the clusters
// launched. Returns a cudaError_t (0: launched).
PROFKIT_EXPORT int profkit_softmax_cluster_fwd(const void* x, void* y, long long rows, long long n, long long sx,
                                               long long sy, int dtype, int cluster, int stages, int max_clusters,
                                               int probe, int per_sm, int* clusters_out, void* stream) {
#ifdef PROFKIT_CPU_EMULATION
  (void)x, (void)y, (void)rows, (void)n, (void)sx, (void)sy, (void)dtype, (void)cluster, (void)stages,
      (void)max_clusters, (void)probe, (void)per_sm, (void)clusters_out, (void)stream;
  return cudaErrorNotSupported;  // clusters, bulk copies and mbarriers: no CPU stand-in
#else
  if (rows < 0 || n <= 0 || rows >= (1ll << 31) || n >= (1ll << 31)) return cudaErrorInvalidValue;
  if (cluster < 1 || cluster > MAX_CLUSTER || stages < 2 || stages > MAX_STAGES) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case PK_FP32: return launch<float>(x, y, (int)rows, (int)n, sx, sy, cluster, stages, max_clusters, probe, per_sm, s, clusters_out);
    case PK_FP16: return launch<__half>(x, y, (int)rows, (int)n, sx, sy, cluster, stages, max_clusters, probe, per_sm, s, clusters_out);
    case PK_BF16:
      return launch<__nv_bfloat16>(x, y, (int)rows, (int)n, sx, sy, cluster, stages, max_clusters, probe, per_sm, s, clusters_out);
    default: return cudaErrorInvalidValue;
  }
#endif
}
