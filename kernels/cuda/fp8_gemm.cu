// fp8 (e4m3) GEMM with promotion, warp-specialized, in CUDA C++: cuBLAS's 128 x 112 tile.
//
// Why 112 columns: at qwen7b-down-m1024 (M 1024, N 3584, K 18944) 224 tiles of 128 x 128 are two
// tile-times on 132 SMs (the second wave 70 % full); cuBLAS's 256 tiles of 128 x 112 are 1.94
// waves of a tile 12.5 % smaller. Built from power-of-two wgmma chains (64 + 32 + 16) the narrow
// instructions kept the tensor pipe ~68 % busy against cuBLAS's 87-90 %; PTX has the
// one-instruction shape cuBLAS issues, wgmma m64n112k32, and this kernel uses it:
//
//   producer   warpgroup 0 (40 registers), one thread: TMA loads of A (128 x 128 bytes) and B
//              (BN x 128) into a ring of `stages` shared-memory stages (128-byte swizzle), each
//              announced on its `full` mbarrier with the bytes it expects
//   consumers  warpgroups 1 and 2 (232 registers), 64 rows of the tile each: per k tile four
//              wgmma m64nBNk32 (both operands from shared memory, K-major descriptors) into a
//              partial sum, one k tile's group in flight; every CHUNK k tiles the partial is added
//              into the fp32 accumulator (the promotion, as cuBLAS without fast accumulation);
//              a stage is handed back on `empty` (one arrival per consumer warp) once the MMAs
//              over it are done. With STAGGER the second warpgroup's chunks end half a chunk
//              after the first's, so one drains its MMAs while the other's run.
//   epilogue   per consumer: acc * sa[row] * sb[col] (per-tensor: stride 0), bf16, stored from
//              registers (clipped at M and N), or (epi 1) written into shared memory in two
//              halves of the columns and stored by TMA; the scales are loaded when the tile starts
//              (they were the epilogue's 14 dependent loads a row: per-row 1.11-1.20x)
//
// Persistent over output tiles in grouped order (GROUP_M rows of tiles), one CTA an SM. BN is 112
// or 128 (the control: the tile's effect told from the code's). Needs sm_90a (wgmma, setmaxnreg,
// TMA); A (M, K) and B (N, K) row-major e4m3, K a multiple of 16, N of 8 (the Python launcher
// checks, kernels/fp8_gemm_cuda.py).
//
// The registered launch (benchmarks/results/gemm.md): no cluster attribute (a launch with one
// spreads consecutive CTAs over the GPCs, and the L2 request coalescer, which merges identical
// reads of SMs of one GPC, then merged 12 % of the reads instead of 46 %), GROUP_M 8, the TMA
// epilogue (clock64 stamps, `trace`, put each k loop at 98.5-99.7 % of the tensor pipe's rate and
// 4-6 K cycles a tile in a register epilogue, 1.5-2.2 K through TMA). Clusters (along M or N,
// steered by GPC), kflip and the diagnostics stay as probes; none was faster.
#include "common.cuh"
#include "sm90.cuh"

#ifndef PROFKIT_CPU_EMULATION
#include <cuda.h>  // CUtensorMap (the encoder comes from the driver at run time: no -lcuda)

#include <map>
#include <mutex>
#include <tuple>
#include <vector>
#endif

namespace profkit {
namespace fp8 {

constexpr int BM = 128, BK = 128;  // BK in bytes = elements (e4m3): one 128-byte swizzle row
constexpr int THREADS = 384;       // producer warpgroup + two consumer warpgroups
constexpr int A_BYTES = BM * BK;
constexpr int MAX_SMEM = 227 * 1024;  // what an H100 / H200 block may have
constexpr int MAX_DEVICES = 64;

#if !defined(PROFKIT_CPU_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && \
    (defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(__CUDA_ARCH_SPECIFIC__) || defined(__CUDA_ARCH_FEAT_SM90A))
#define PK_SM90A 1
#endif

#ifndef PROFKIT_CPU_EMULATION
using sm90::saddr;

// Shared-memory matrix descriptor of a K-major operand in 128-byte swizzle: rows of 128 bytes,
// 8-row groups 1024 bytes apart (the stride byte offset); the leading offset is unused there.
// Advancing the start address by 32 bytes steps k by 32 (e4m3) inside the swizzle atom; every
// stage starts 1024-byte aligned, so the base offset is 0.
__device__ __forceinline__ uint64_t smem_desc(const void* p) {
  return (uint64_t)((saddr(p) & 0x3FFFF) >> 4) | (uint64_t)1 << 16 | (uint64_t)(1024 >> 4) << 32 |
         (uint64_t)1 << 62;
}

// Keep the compiler from moving reads or writes of accumulator registers across wgmma.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// m64n112k32 e4m3 x e4m3 -> f32, both operands from shared memory (K-major descriptors);
// d += a * b where scale_d, else d = a * b.
__device__ __forceinline__ void wgmma_n112(float (&d)[56], uint64_t da, uint64_t db, uint32_t scale_d) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %58, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n112k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55"
      "}, %56, %57, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
      : "l"(da), "l"(db), "r"(scale_d));
}
// m64n128k32 e4m3 x e4m3 -> f32, both operands from shared memory (K-major descriptors);
// d += a * b where scale_d, else d = a * b.
__device__ __forceinline__ void wgmma_n128(float (&d)[64], uint64_t da, uint64_t db, uint32_t scale_d) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(scale_d));
}
template <int BN>
__device__ __forceinline__ void wgmma(float (&d)[BN / 2], uint64_t da, uint64_t db, uint32_t scale_d) {
  if constexpr (BN == 112) wgmma_n112(d, da, db, scale_d);
  else wgmma_n128(d, da, db, scale_d);
}

// A 2-D box of a tensor map into shared memory, completion counted on `bar`.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          saddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(saddr(bar))
      : "memory");
}

// The same box into this shared offset of every CTA in `mask` (a cluster), each one's barrier at
// `bar`'s offset counting the bytes.
__device__ __forceinline__ void tma_load_multicast(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar,
                                                   uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(saddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(saddr(bar)), "h"(mask)
      : "memory");
}

// A box of shared memory (row-major, dense) to the global tensor at (x, y) by TMA; rows and columns
// past the tensor's end are not written. One thread issues it; commit_group ends its bulk group.
__device__ __forceinline__ void tma_store(const CUtensorMap* map, const void* src, int x, int y) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(x), "r"(y), "r"(saddr(src))
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// until this thread's bulk groups have read their shared memory / have finished entirely
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// this thread's generic-proxy writes to shared memory, visible to the async proxy (TMA) after a barrier
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Tile `t` of the grouped order: GROUP_M rows of tiles at a time, column by column within them
// (as kernels/_gemm_common.tile_coords), so the CTAs of a wave share B's and A's tiles in L2.
__device__ __forceinline__ void tile_coords(int t, int pm, int pn, int group_m, int& m, int& n) {
  const int in_group = group_m * pn, first = (t / in_group) * group_m, gsz = min(pm - first, group_m);
  m = first + (t % in_group) % gsz;
  n = (t % in_group) / gsz;
}

// A position in the ring of stages: the stage and the parity of its barriers' current phase.
struct Ring {
  int s;
  uint32_t phase;
  __device__ __forceinline__ void next(int stages) {
    if (++s == stages) s = 0, phase ^= 1;
  }
};

struct Params {
  int M, N, K, stages, chunk, stagger, group_m;
  // kmode, the k tiles the producer loads: 0 in order; 1 (kflip) a CTA's odd tiles from the last k
  // tile down: B (68 MB at qwen7b-down) does not fit in the L2, and a wave's tiles all
  // end at K's end, so the next wave, starting there, finds the most recently read k tiles still in
  // the L2. Diagnostics, wrong products by design (probes of where the k loop waits):
  // 2 only k tiles 0 and 1 (operands L2-resident, the same bytes to the SMs); 3 none (the producer
  // arrives on each stage's full barrier without a load: the consumers, unchanged, run on whatever
  // the stages hold)
  int kmode;
  // the clusters' order (null: the launch order): perm[blockIdx / CL] is the cluster's place in
  // the tile order, a permutation, so any placement computes every tile once (steer(): why)
  const uint16_t* perm;
  const float* sa;
  const float* sb;
  int s_stride;  // 1: per-row scales; 0: per-tensor (the same loads at one address)
  // 0: the epilogue stores bf16 pairs from registers (one 16-byte run of a row per quad of lanes:
  // half of each 32-byte sector written, 4-6 K cycles a tile); 1: through shared memory in
  // two halves of the columns (all four warps writing, no bank conflicts at 112 columns: rows 112
  // bytes apart), each stored by one thread with TMA, as cuBLAS's epilogue (1.5-2.2 K cycles)
  int epi;
  __nv_bfloat16* c;
  unsigned long long* trace;  // probe: clock64 at points of each consumer's life (null: none)
};

// The cluster: CM CTAs along M by CN along N (rank = rm + CM * rn), 1 x 1, 2 x 1, 1 x 2 or 2 x 2.
// The CTAs of one cluster row (same rn, CM of them) share B's tile: each loads a CM-th of it and
// multicasts it to them; those of one cluster column (same rm) share A's tile the same way. So
// per k tile an SM reads A / CN + B / CM bytes from L2 (2 x 1: B shared; cuBLAS's "2x1" runs
// along its m, our N: 1 x 2 here, A shared). A CTA's stage is written by the
// CTAs of its row and of its column, so a stage is refilled only after the consumers of all of
// them released it: each consumer warp arrives on the `empty` of every CTA that writes into it.
template <int BN, int CM, int CN>
__global__ void __launch_bounds__(THREADS, 1)
    fp8_gemm_ws(const __grid_constant__ CUtensorMap ma, const __grid_constant__ CUtensorMap mb,
                const __grid_constant__ CUtensorMap mo, const Params p) {
#ifdef PK_SM90A
  constexpr int CL = CM * CN, B_BYTES = BN * BK, R = BN / 2;  // R: accumulator registers a thread
  constexpr int A_PART = A_BYTES / CN, B_PART = B_BYTES / CM;  // what each CTA loads of A and of B
  extern __shared__ uint8_t raw[];
  // stages of A then B, 1024-byte aligned (the swizzle atom), then the barriers
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  uint8_t* sa_smem = base;
  uint8_t* sb_smem = base + p.stages * A_BYTES;
  uint64_t* full = reinterpret_cast<uint64_t*>(sb_smem + p.stages * B_BYTES);
  uint64_t* empty = full + p.stages;
  // the epilogue's staging (epi): per consumer 64 rows x BN / 2 columns of bf16, 128-byte aligned (TMA)
  __nv_bfloat16* ebuf = reinterpret_cast<__nv_bfloat16*>(
      (reinterpret_cast<uintptr_t>(empty + p.stages) + 127) & ~uintptr_t(127));

  // the warpgroup, broadcast from lane 0 so that the compiler knows it is warp-uniform (as CUTLASS's
  // canonical_warp_group_idx): what derives from it, the stages' wgmma descriptors among them, can then
  // live in uniform registers (without it every wgmma waited on four R2UR moves)
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0), tid = threadIdx.x % 128;
  const uint32_t rank = CL > 1 ? sm90::cluster_rank() : 0, rm = rank % CM, rn = rank / CM;
  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; ++s) {
      sm90::mbar_init(&full[s], 1);
      sm90::mbar_init(&empty[s], 8 * (CM + CN - 1));  // each consumer warp's lane 0, of every CTA written to
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if constexpr (CL > 1) sm90::cluster_sync();  // the peers' barriers exist before anything reaches them
  else __syncthreads();

  // the clusters' tiles: CM x CN tiles each, those past M or N (where M or N has an odd number of
  // tiles) loaded as zeros by TMA and skipped by the stores
  const int pm = (p.M + BM - 1) / BM, pn = (p.N + BN - 1) / BN, pmc = (pm + CM - 1) / CM, pnc = (pn + CN - 1) / CN;
  const int tiles = pmc * pnc;
  const int nk = (p.K + BK - 1) / BK;
  const int cid = p.perm ? p.perm[blockIdx.x / CL] : blockIdx.x / CL, nclusters = gridDim.x / CL;
  // the ranks sharing this CTA's A tile (its cluster column) and its B tile (its cluster row)
  uint16_t col_mask = 0, row_mask = 0;
#pragma unroll
  for (int r = 0; r < CL; ++r) {
    if (r % CM == (int)rm) col_mask |= 1 << r;
    if (r / CM == (int)rn) row_mask |= 1 << r;
  }
  const uint16_t writers = col_mask | row_mask;  // the CTAs whose producers write into this CTA's stages
  if (wg == 0) {  // the producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (tid == 0) {
      Ring ring{0, 0};
      for (int t = cid, j = 0; t < tiles; t += nclusters, ++j) {
        int mc, nc;
        tile_coords(t, pmc, pnc, p.group_m, mc, nc);
        const int m = mc * CM + rm, n = nc * CN + rn;
        const bool down = p.kmode == 1 && (j & 1);  // the consumers take the stages in ring order: k's order is ours
        for (int i = 0; i < nk; ++i, ring.next(p.stages)) {  // (one thread: p.stages from the constant bank is as fast)
          const int k = p.kmode == 2 ? (i & 1) : down ? nk - 1 - i : i;
          sm90::mbar_wait(&empty[ring.s], ring.phase ^ 1);  // a fresh barrier passes parity 1 at once
          if (p.kmode == 3) {  // the diagnostic without loads
            sm90::mbar_arrive(&full[ring.s]);
            continue;
          }
          sm90::mbar_expect_tx(&full[ring.s], A_BYTES + B_BYTES);
          if constexpr (CN > 1)  // to the CTAs of this cluster column (same rm)
            tma_load_multicast(sa_smem + ring.s * A_BYTES + rn * A_PART, &ma, k * BK, m * BM + rn * (BM / CN),
                               &full[ring.s], col_mask);
          else
            tma_load(sa_smem + ring.s * A_BYTES, &ma, k * BK, m * BM, &full[ring.s]);
          if constexpr (CM > 1)  // to the CTAs of this cluster row (same rn)
            tma_load_multicast(sb_smem + ring.s * B_BYTES + rm * B_PART, &mb, k * BK, n * BN + rm * (BN / CM),
                               &full[ring.s], row_mask);
          else
            tma_load(sb_smem + ring.s * B_BYTES, &mb, k * BK, n * BN, &full[ring.s]);
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wg - 1;  // this consumer's 64 rows of every tile
    unsigned long long* tr = p.trace && tid == 0 ? p.trace + (blockIdx.x * 2 + c) * 16 : nullptr;
    if (tr) tr[0] = clock64();
    int tj = 0;
    const int warp = tid / 32, lane = tid % 32;
    const int stages = p.stages, chunk = p.chunk;  // in registers: the fences below clobber memory
    const int first = chunk - (p.stagger ? c * (chunk / 2) : 0);  // the first chunk of a tile is shorter
    // descriptors of stage 0; stage s is s * bytes / 16 further (the address field counts 16 bytes)
    const uint64_t da0 = smem_desc(sa_smem + c * (64 * BK)), db0 = smem_desc(sb_smem);
    const float* __restrict__ sa = p.sa;
    const float* __restrict__ sb = p.sb;
    const float s_tensor = p.s_stride ? 0.f : __ldg(sa) * __ldg(sb);  // per-tensor: one scale for all
    // a stage goes back to the producers of every CTA that writes into it: lane 0 of each warp arrives
    auto release = [&](int s) {
      if (lane == 0) {
        sm90::mbar_arrive(&empty[s]);
#pragma unroll
        for (int r = 0; r < CL; ++r)
          if (r != (int)rank && (writers >> r & 1)) sm90::peer_arrive_cta(sm90::peer_addr(&empty[s], r));
      }
    };
    float acc[R], part[R];
    float sr[2];
    float2 sc[BN / 8];
    // the tile's scales, loaded before its k loop so their L2 round trip hides under it (in the
    // epilogue, one dependent load a column pair, per-row ran 10-20 us behind per-tensor)
    // this thread's first row and column of tile (mc, nc) in the accumulator layout
    auto row0 = [&](int mc) { return (mc * CM + rm) * BM + c * 64 + warp * 16 + lane / 4; };
    auto col0_of = [&](int nc) { return (nc * CN + rn) * BN + 2 * (lane % 4); };
    auto load_scales = [&](int mc, int nc) {
      const int r0 = row0(mc), col0 = col0_of(nc);
#pragma unroll
      for (int h = 0; h < 2; ++h) sr[h] = p.s_stride ? __ldg(sa + min(r0 + 8 * h, p.M - 1)) : s_tensor;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)  // clamped inside the matrix (N is a multiple of 8): the stores skip those
        sc[j] = p.s_stride ? __ldg(reinterpret_cast<const float2*>(sb + min(col0 + 8 * j, p.N - 2)))
                           : make_float2(1.f, 1.f);
    };
    // acc * scales as bf16 into tile (mc, nc): d[4j + 2h + e] is row warp*16 + lane/4 + 8h, column
    // 8j + 2*(lane%4) + e
    auto epilogue = [&](int mc, int nc) {
      if (p.epi) {
        constexpr int HALF = BN / 2;  // columns a store
        __nv_bfloat16* mine = ebuf + c * 64 * HALF;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          if (tid == 0) bulk_wait_read();  // the buffer's previous store has read it
          sm90::named_sync(1 + c, 128);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            __nv_bfloat16* brow = mine + (warp * 16 + lane / 4 + 8 * h) * HALF + 2 * (lane % 4);
#pragma unroll
            for (int jj = 0; jj < BN / 16; ++jj) {
              const int j = half * (BN / 16) + jj;
              *reinterpret_cast<__nv_bfloat162*>(brow + 8 * jj) = __floats2bfloat162_rn(
                  acc[4 * j + 2 * h] * sr[h] * sc[j].x, acc[4 * j + 2 * h + 1] * sr[h] * sc[j].y);
            }
          }
          fence_async_smem();
          sm90::named_sync(1 + c, 128);
          if (tid == 0) {
            tma_store(&mo, mine, (nc * CN + rn) * BN + half * HALF, (mc * CM + rm) * BM + c * 64);
            bulk_commit();
          }
        }
        return;
      }
      const int r0 = row0(mc), col0 = col0_of(nc);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = r0 + 8 * h;
        if (row >= p.M) continue;
        __nv_bfloat16* crow = p.c + (size_t)row * p.N;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int col = col0 + 8 * j;
          if (col < p.N)  // N is a multiple of 8: col + 1 < N too
            *reinterpret_cast<__nv_bfloat162*>(crow + col) = __floats2bfloat162_rn(
                acc[4 * j + 2 * h] * sr[h] * sc[j].x, acc[4 * j + 2 * h + 1] * sr[h] * sc[j].y);
        }
      }
    };
    Ring ring{0, 0};
    for (int t = cid; t < tiles; t += nclusters) {
      int mc, nc;  // here, between the tiles, 0.28 K cycles; inside the k loop they cost more
      tile_coords(t, pmc, pnc, p.group_m, mc, nc);
      load_scales(mc, nc);
#pragma unroll
      for (int i = 0; i < R; ++i) acc[i] = 0.f;
      if (tr && tj < 4) tr[1 + 3 * tj] = clock64();
      for (int c0 = 0, len = first; c0 < nk; c0 += len, len = chunk) {
        const int c1 = min(c0 + len, nk);
        // one k tile's MMA group stays in flight while the next is issued (two in flight, the
        // stage held one k tile longer, measured no faster on an H100, with loads and without)
        int prev = 0;
        for (int k = c0; k < c1; ++k, ring.next(stages)) {
          sm90::mbar_wait(&full[ring.s], ring.phase);
          const uint64_t da = da0 + ring.s * (A_BYTES >> 4), db = db0 + ring.s * (B_BYTES >> 4);
          fence_regs(part);
          wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < BK / 32; ++kk)  // +32 bytes: 2 in the descriptor's 16-byte units
            wgmma<BN>(part, da + 2 * kk, db + 2 * kk, (k > c0 || kk > 0) ? 1u : 0u);
          wgmma_commit();
          fence_regs(part);
          if (k > c0) {  // the previous k tile's MMAs are done: its stage goes back
            wgmma_wait<1>();
            release(prev);
          }
          prev = ring.s;
        }
        wgmma_wait<0>();
        fence_regs(part);
        release(prev);
#pragma unroll
        for (int i = 0; i < R; ++i) acc[i] += part[i];  // the promotion, in fp32
      }
      if (tr && tj < 4) tr[2 + 3 * tj] = clock64();
      epilogue(mc, nc);
      if (tr && tj < 4) tr[3 + 3 * tj] = clock64();
      ++tj;
    }
    if (p.epi && tid == 0) bulk_wait();  // the stores done before the CTA (and its shared memory) ends
    if (tr) {
      uint32_t sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      tr[15] = clock64(), tr[14] = tj, tr[13] = sm;
    }
  }
  // no CTA leaves while its peer may still arrive on its barriers or write into its stages
  if constexpr (CL > 1) sm90::cluster_sync();
#elif defined(__CUDA_ARCH__)
  asm volatile("trap;");  // built without sm_90a's instructions (_cuda_build builds this source for sm_90a)
#endif
}

// cuTensorMapEncodeTiled (its CUDA 12.0 signature) from the driver, looked up once.
using Encoder = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                             const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                             CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
Encoder encoder() {
  static Encoder fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<Encoder>(f);
  }();
  return fn;
}

// A row-major (rows, k) e4m3 matrix as boxes of box_rows x 128 bytes, 128-byte swizzle, zero fill;
// promo: the L2 promotion, 0 / 128 / 256 bytes (256: the default; 128, Triton's, cut the plain
// launch's L2 traffic 12 % at the same time, H100).
bool make_map(CUtensorMap* map, const void* ptr, int rows, int k, int box_rows, int promo) {
  auto enc = encoder();
  if (!enc) return false;
  cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)k};
  cuuint32_t box[2] = {BK, (cuuint32_t)box_rows}, elem[2] = {1, 1};
  return enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(ptr), dims, strides, box, elem,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             promo == 0 ? CU_TENSOR_MAP_L2_PROMOTION_NONE
                        : promo == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B : CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Where the clusters land. A launch puts its CTAs on the SMs in an order fixed by the
// launch's shape (measured on an H100): plainly, 8-16 consecutive CTAs fill one GPC; with a
// cluster attribute consecutive clusters go to different GPCs. The L2 request coalescer merges
// identical reads of one GPC's SMs arriving together, so the tile order should hand one GPC's
// clusters neighbouring tiles. steer() measures once per device, cluster size and grid where each
// cluster lands (a probe launch of the same shape, one CTA an SM) and which SMs share a GPC (a
// cluster never spans GPCs: clusters of 16, or 8), and numbers the clusters GPC by GPC. Only the
// order rests on the measurement: the numbering is a permutation, so where the clusters land
// otherwise (a busy GPU) every tile is still computed once; only fewer reads merge. Measured on an
// H100: the probe's placement is the GEMM's, yet steered clusters' reads merge no more than in
// launch order (5-6 M sectors against the plain launch's 15 M), so the registered launch does
// not steer; the probe stays with the launcher's steer argument.
__global__ void where_probe(int* smid) {
  if (threadIdx.x == 0) {
    uint32_t s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    smid[blockIdx.x] = static_cast<int>(s);
  }
}

// The SM of each CTA of a probe launch of `clusters` clusters of `cl` (0: as many as fit at once).
cudaError_t probe(int cl, int clusters, cudaStream_t s, std::vector<int>& smid) {
  cudaError_t e = cudaFuncSetAttribute(where_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, MAX_SMEM);
  if (e == cudaSuccess && cl > 8) e = cudaFuncSetAttribute(where_probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (e != cudaSuccess) return e;
  cudaLaunchConfig_t q = {};
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = cl, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
  q.blockDim = dim3(32), q.dynamicSmemBytes = MAX_SMEM, q.stream = s, q.attrs = at, q.numAttrs = cl > 1 ? 1 : 0;
  if (clusters <= 0) {
    q.gridDim = dim3(cl * 1024);
    if ((e = cudaOccupancyMaxActiveClusters(&clusters, where_probe, &q)) != cudaSuccess) return e;
    if (clusters < 1) return cudaErrorInvalidConfiguration;
  }
  q.gridDim = dim3(clusters * cl);
  int* buf = nullptr;
  if ((e = cudaMalloc(&buf, sizeof(int) * clusters * cl)) != cudaSuccess) return e;
  e = cudaLaunchKernelEx(&q, where_probe, buf);
  smid.assign(clusters * cl, -1);
  if (e == cudaSuccess) e = cudaMemcpyAsync(smid.data(), buf, sizeof(int) * smid.size(), cudaMemcpyDeviceToHost, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  cudaFree(buf);
  return e;
}

// The clusters' numbering from the probes' SMs: gpc_probe, the SM of each CTA of clusters of
// `per` (consecutive entries, one cluster); where, the SM of each CTA of the launch's own shape
// (clusters of `cl`). Clusters are numbered GPC by GPC (a GPC named by the first SM the probe saw
// in it; SMs it did not reach, after all the others), by SM within one.
std::vector<uint16_t> order_clusters(const std::vector<int>& gpc_probe, int per, const std::vector<int>& where,
                                     int cl) {
  std::map<int, int> gpc;
  for (size_t i = 0; i < gpc_probe.size(); ++i) gpc[gpc_probe[i]] = gpc_probe[i - i % per];
  const int clusters = static_cast<int>(where.size()) / cl;
  std::vector<std::tuple<int, int, int>> order;  // (GPC, SM, cluster)
  for (int c = 0; c < clusters; ++c) {
    const int sm = where[c * cl];
    auto g = gpc.find(sm);
    order.emplace_back(g == gpc.end() ? (1 << 20) + sm : g->second, sm, c);
  }
  std::sort(order.begin(), order.end());
  std::vector<uint16_t> perm(clusters);
  for (int i = 0; i < clusters; ++i) perm[std::get<2>(order[i])] = static_cast<uint16_t>(i);
  return perm;
}

// The permutation for `clusters` clusters of `cl` on the current device (null: not measured, when
// the stream is being captured into a graph before a first plain call, or the probe failed).
const uint16_t* steer(int dev, int cl, int clusters, cudaStream_t s) {
  static std::mutex mu;
  static std::map<std::tuple<int, int, int>, uint16_t*> done;  // device, cluster size, clusters
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(dev, cl, clusters);
  auto it = done.find(key);
  if (it != done.end()) return it->second;
  cudaStreamCaptureStatus cap;
  if (cudaStreamIsCapturing(s, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone) return nullptr;
  uint16_t* perm = nullptr;
  std::vector<int> gpc_probe, where;
  int per = 16;
  if ((probe(per, 0, s, gpc_probe) == cudaSuccess || probe(per = 8, 0, s, gpc_probe) == cudaSuccess) &&
      probe(cl, clusters, s, where) == cudaSuccess) {
    const std::vector<uint16_t> host = order_clusters(gpc_probe, per, where, cl);
    if (cudaMalloc(&perm, sizeof(uint16_t) * clusters) != cudaSuccess ||
        cudaMemcpy(perm, host.data(), sizeof(uint16_t) * clusters, cudaMemcpyHostToDevice) != cudaSuccess) {
      cudaFree(perm);
      perm = nullptr;
    }
  }
  cudaGetLastError();  // a failed probe leaves no error behind for the GEMM's launch
  done[key] = perm;
  return perm;
}

template <int BN>
int smem_bytes(int stages, int epi) {
  const int ring = 1024 + stages * (A_BYTES + BN * BK) + 2 * stages * 8;
  return epi ? (ring + 127) / 128 * 128 + 2 * 64 * (BN / 2) * 2 : ring;
}

// The bf16 (rows, cols) output as boxes of box_rows x box_cols, dense in shared memory (the
// epilogue's TMA stores).
bool make_out_map(CUtensorMap* map, void* ptr, int rows, int cols, int box_rows, int box_cols) {
  auto enc = encoder();
  if (!enc) return false;
  cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)cols * 2};
  cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows}, elem[2] = {1, 1};
  return enc(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ptr, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int BN, int CM, int CN>
cudaError_t launch(const void* a, const void* b, Params p, int programs, int steered, int promo, cudaStream_t s) {
  const int bytes = smem_bytes<BN>(p.stages, p.epi);
  if (bytes > MAX_SMEM) return cudaErrorInvalidValue;
  constexpr int CL = CM * CN;
  auto kern = fp8_gemm_ws<BN, CM, CN>;
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  if (dev < 0 || dev >= MAX_DEVICES) return cudaErrorInvalidDevice;
  // once per device and instance: the shared-memory attribute, and how many clusters fit
  static int fitting[MAX_DEVICES] = {};
  int& clusters = fitting[dev];
  if (!clusters) {
    e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, MAX_SMEM);
    if (e != cudaSuccess) return e;
    int n = 1 << 20;
    if (CL > 1) {
      cudaLaunchConfig_t q = {};
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeClusterDimension;
      at[0].val.clusterDim.x = CL, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
      q.gridDim = dim3(CL * 1024), q.blockDim = dim3(THREADS), q.dynamicSmemBytes = MAX_SMEM, q.attrs = at,
      q.numAttrs = 1;
      e = cudaOccupancyMaxActiveClusters(&n, kern, &q);
      if (e != cudaSuccess) return e;
      if (n < 1) return cudaErrorInvalidConfiguration;
    }
    clusters = n;
  }
  CUtensorMap ma, mb;
  CUtensorMap mo = {};
  if (!make_map(&ma, a, p.M, p.K, BM / CN, promo) || !make_map(&mb, b, p.N, p.K, BN / CM, promo) ||
      (p.epi && !make_out_map(&mo, p.c, p.M, p.N, 64, BN / 2)))
    return cudaErrorInvalidValue;
  const int tiles = ((p.M + BM - 1) / BM + CM - 1) / CM * (((p.N + BN - 1) / BN + CN - 1) / CN);
  const int grid = std::min({programs / CL, tiles, clusters});
  p.perm = steered ? steer(dev, CL, grid, s) : nullptr;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = CL, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3(grid * CL), cfg.blockDim = dim3(THREADS), cfg.dynamicSmemBytes = bytes, cfg.stream = s;
  // no cluster attribute without a cluster: with one (even 1 x 1) the CTAs land on the SMs in
  // another order (H100), and the order decides which tiles' reads the L2 can merge
  cfg.attrs = attr, cfg.numAttrs = CL > 1 ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kern, ma, mb, mo, p);
}
#endif  // PROFKIT_CPU_EMULATION

}  // namespace fp8
}  // namespace profkit

// a (M, K), b (N, K): row-major e4m3, 16-byte aligned, K a multiple of 16, N of 8; sa / sb: fp32
// scales, per row (s_stride 1: M and N of them) or per tensor (s_stride 0: one each); c: (M, N)
// bf16. bn: 112 or 128; stages: the ring (2..7); chunk: k tiles of 128 per promotion (1..);
// stagger 0/1; cluster_m x cluster_n: the cluster's CTAs along M (sharing B by multicast) and along
// N (sharing A), each 1 or 2; programs: the persistent grid's CTAs at most (the SMs; fewer where
// clusters do not fit); steer 0/1: the clusters numbered by the GPC they land on (steer());
// kmode: 0 k tiles in order, 1 every other tile of a CTA takes its k tiles from the last down
// (kflip); 2 and 3 are diagnostics with wrong products (Params::kmode);
// l2_promo: the operands' TMA L2 promotion in bytes, 0, 128 or 256 (make_map); epi 0/1: the
// epilogue from registers, or through shared memory and TMA stores (Params::epi); trace: null, or
// 32 int64 a CTA for the consumers' clock64 stamps (Params::trace; fp8_gemm_cuda documents them).
// Returns a cudaError_t (0: launched).
PROFKIT_EXPORT int profkit_fp8_gemm_ws(const void* a, const void* b, const float* sa, const float* sb, void* c,
                                       int M, int N, int K, int s_stride, int bn, int stages, int chunk,
                                       int stagger, int group_m, int cluster_m, int cluster_n, int programs,
                                       int steer, int kmode, int l2_promo, int epi, void* trace, void* stream) {
#ifdef PROFKIT_CPU_EMULATION
  (void)a, (void)b, (void)sa, (void)sb, (void)c, (void)M, (void)N, (void)K, (void)s_stride, (void)bn, (void)stages,
      (void)chunk, (void)stagger, (void)group_m, (void)cluster_m, (void)cluster_n, (void)programs,
      (void)steer, (void)kmode, (void)l2_promo, (void)epi, (void)trace, (void)stream;
  return cudaErrorNotSupported;  // wgmma, TMA and mbarriers: no CPU stand-in
#else
  using namespace profkit::fp8;
  if (M <= 0 || N <= 0 || K <= 0 || K % 16 || N % 8 || stages < 2 || chunk < 1 || group_m < 1 || programs < 1 ||
      (s_stride != 0 && s_stride != 1) || kmode < 0 || kmode > 3 || (l2_promo != 0 && l2_promo != 128 && l2_promo != 256) ||
      (epi != 0 && epi != 1))
    return cudaErrorInvalidValue;
  Params p{M, N, K, stages, chunk, stagger ? 1 : 0, group_m, kmode, nullptr, sa, sb, s_stride, epi,
           static_cast<__nv_bfloat16*>(c), static_cast<unsigned long long*>(trace)};
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  // one instance per tile width and cluster shape (a table: the shape picks the template)
  using Launch = cudaError_t (*)(const void*, const void*, Params, int, int, int, cudaStream_t);
  static constexpr Launch table[2][2][2] = {
      {{launch<112, 1, 1>, launch<112, 1, 2>}, {launch<112, 2, 1>, launch<112, 2, 2>}},
      {{launch<128, 1, 1>, launch<128, 1, 2>}, {launch<128, 2, 1>, launch<128, 2, 2>}}};
  if ((bn != 112 && bn != 128) || cluster_m < 1 || cluster_m > 2 || cluster_n < 1 || cluster_n > 2)
    return cudaErrorInvalidValue;
  return table[bn == 128][cluster_m - 1][cluster_n - 1](a, b, p, programs, steer ? 1 : 0, l2_promo, s);
#endif
}

// order_clusters() for the tests (placements measured on a GPU, read on a CPU): n_gpc SMs of
// clusters of `per`, n_where of clusters of `cl`; perm gets n_where / cl entries.
PROFKIT_EXPORT int profkit_fp8_order_clusters(const int* gpc_probe, int n_gpc, int per, const int* where, int n_where,
                                              int cl, uint16_t* perm) {
#ifdef PROFKIT_CPU_EMULATION
  (void)gpc_probe, (void)n_gpc, (void)per, (void)where, (void)n_where, (void)cl, (void)perm;
  return 1;
#else
  if (per < 1 || cl < 1 || n_gpc < 0 || n_where < cl || n_where % cl) return 1;
  const auto p = profkit::fp8::order_clusters(std::vector<int>(gpc_probe, gpc_probe + n_gpc), per,
                                              std::vector<int>(where, where + n_where), cl);
  std::copy(p.begin(), p.end(), perm);
  return 0;
#endif
}
