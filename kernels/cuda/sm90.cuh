// Hopper (sm_90) building blocks shared by the lab's CUDA C++ sources: shared-memory addresses
// the mbarrier protocol (a producer's expected bytes, consumers' arrivals, parity waits) and
// thread-block clusters (ranks, cluster-wide sync, a peer's shared addresses and barriers).
#pragma once

#ifndef PROFKIT_CPU_EMULATION
#include <stdint.h>

namespace profkit {
namespace sm90 {

__device__ __forceinline__ uint32_t saddr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint64_t* b, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(saddr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(saddr(b)) : "memory");
}
// Spin until the barrier's phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(saddr(b)), "r"(parity)
        : "memory");
  } while (!done);
}
// Wait at named barrier `id` (1-15; 0 is __syncthreads') until `threads` threads, this warp's
// among them, have reached it: a sync of some of a block's warps.
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// The cluster's special registers: this CTA's rank in its cluster, the cluster's CTAs, the
// cluster's index in the grid and the grid's clusters.
#define PK_SREG(fn, reg)                                  \
  __device__ __forceinline__ uint32_t fn() {              \
    uint32_t r;                                           \
    asm volatile("mov.u32 %0, %%" reg ";" : "=r"(r));     \
    return r;                                             \
  }
PK_SREG(cluster_rank, "cluster_ctarank")
PK_SREG(cluster_size, "cluster_nctarank")
PK_SREG(cluster_id, "clusterid.x")
PK_SREG(cluster_count, "nclusterid.x")
#undef PK_SREG
// Every thread of every CTA of the cluster; release / acquire order shared memory across it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// This CTA's shared address as seen in the cluster, at CTA `rank`.
__device__ __forceinline__ uint32_t peer_addr(const void* p, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(saddr(p)), "r"(rank));
  return r;
}
__device__ __forceinline__ void peer_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(bar) : "memory");
}
// The same at CTA scope: no cluster-wide release fence (measured: the fence stalled the fp8 GEMM's
// consumers 40 % of the time). For an arrival that publishes no writes of this CTA,
// e.g. "my MMAs have finished reading this stage", where wgmma.wait_group already orders the reads.
__device__ __forceinline__ void peer_arrive_cta(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(bar) : "memory");
}
}  // namespace sm90
}  // namespace profkit
#endif
