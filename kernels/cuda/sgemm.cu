// SGEMM ladder, C = A @ B in fp32, all row-major: A [M, K], B [K, N], C [M, N].
// Eight steps, each one change over the one before (after the well-known SGEMM worklog):
//   0 naive         one thread per output; consecutive threads walk down a column of C, so
//                   their loads of A and stores of C are strided (uncoalesced)
//   1 coalesced     the same, threads of a warp along a row of C: B loads and C stores coalesce
//   2 smem          32x32 tiles of A and B staged in shared memory
//   3 blocktile_1d  64x64x8 block tile, each thread 8 outputs of one column (TM=8)
//   4 blocktile_2d  128x128x8 block tile, each thread an 8x8 outer product in registers
//   5 vectorized    the same with 16-byte global loads, A transposed into shared memory so that
//                   the inner loop reads A and B as float4
//   6 tuned         step 5's template over a set of tile shapes; the fastest per (M, N, K) is
//                   picked by timing on the GPU (kernels/sgemm.py keeps the choice)
//   7 warptile      warp tiles of 4x4 thread sub-tiles (conflict-free float4 shared reads),
//                   shared memory double buffered with the next tile prefetched into registers,
//                   grouped block order for L2 reuse; tuned like step 6
// Steps 0-2 take any M, N, K (bounds checked); steps 3-7 need M, N, K multiples of their tile
// (profkit_sgemm_tile says which); pointers 16-byte aligned for 5-7.
#include "common.cuh"

namespace profkit {

// ---- 0: naive -----------------------------------------------------------------------------
__global__ void sgemm_naive(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                            float* __restrict__ C) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;  // threadIdx.x varies fastest: rows
  const int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
  }
}

// ---- 1: coalesced -------------------------------------------------------------------------
template <int BS>
__global__ void sgemm_coalesced(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                                float* __restrict__ C) {
  const int row = blockIdx.y * BS + threadIdx.x / BS;
  const int col = blockIdx.x * BS + threadIdx.x % BS;  // a warp covers BS consecutive columns
  if (row < M && col < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
  }
}

// ---- 2: shared-memory tiles ---------------------------------------------------------------
template <int BS>
__global__ void sgemm_smem(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                           float* __restrict__ C) {
  __shared__ float As[BS * BS];
  __shared__ float Bs[BS * BS];
  const int ty = threadIdx.x / BS, tx = threadIdx.x % BS;
  const int row = blockIdx.y * BS + ty;
  const int col = blockIdx.x * BS + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    As[ty * BS + tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.f;
    Bs[ty * BS + tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BS; ++kk) acc += As[ty * BS + kk] * Bs[kk * BS + tx];
    __syncthreads();
  }
  if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

// ---- 3: 1D block tiling -------------------------------------------------------------------
template <int BM, int BN, int BK, int TM>
__global__ void __launch_bounds__(BM * BN / TM)
    sgemm_blocktile_1d(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                       float* __restrict__ C) {
  constexpr int NT = BM * BN / TM;
  static_assert(BM * BK == NT && BN * BK == NT, "one element of A and of B per thread per tile");
  __shared__ float As[BM * BK];
  __shared__ float Bs[BK * BN];
  const int tcol = threadIdx.x % BN, trow = threadIdx.x / BN;
  const int a_r = threadIdx.x / BK, a_c = threadIdx.x % BK;
  const int b_r = threadIdx.x / BN, b_c = threadIdx.x % BN;
  A += (size_t)blockIdx.y * BM * K;
  B += (size_t)blockIdx.x * BN;
  C += (size_t)blockIdx.y * BM * N + (size_t)blockIdx.x * BN;
  float acc[TM] = {0.f};
  for (int k0 = 0; k0 < K; k0 += BK) {
    As[a_r * BK + a_c] = A[(size_t)a_r * K + k0 + a_c];
    Bs[b_r * BN + b_c] = B[(size_t)(k0 + b_r) * N + b_c];
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      const float b = Bs[kk * BN + tcol];  // reused for TM products
#pragma unroll
      for (int i = 0; i < TM; ++i) acc[i] += As[(trow * TM + i) * BK + kk] * b;
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) C[(size_t)(trow * TM + i) * N + tcol] = acc[i];
}

// ---- 4: 2D block tiling -------------------------------------------------------------------
template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__(BM * BN / (TM * TN))
    sgemm_blocktile_2d(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                       float* __restrict__ C) {
  constexpr int NT = BM * BN / (TM * TN);
  static_assert(NT % BK == 0 && BM % (NT / BK) == 0, "A tile loads");
  static_assert(NT % BN == 0 && BK % (NT / BN) == 0, "B tile loads");
  __shared__ float As[BM * BK];
  __shared__ float Bs[BK * BN];
  const int trow = threadIdx.x / (BN / TN), tcol = threadIdx.x % (BN / TN);
  const int a_r = threadIdx.x / BK, a_c = threadIdx.x % BK;
  const int b_r = threadIdx.x / BN, b_c = threadIdx.x % BN;
  constexpr int A_STEP = NT / BK, B_STEP = NT / BN;
  A += (size_t)blockIdx.y * BM * K;
  B += (size_t)blockIdx.x * BN;
  C += (size_t)blockIdx.y * BM * N + (size_t)blockIdx.x * BN;
  float acc[TM][TN] = {{0.f}};
  float rm[TM], rn[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int o = 0; o < BM; o += A_STEP) As[(a_r + o) * BK + a_c] = A[(size_t)(a_r + o) * K + k0 + a_c];
#pragma unroll
    for (int o = 0; o < BK; o += B_STEP) Bs[(b_r + o) * BN + b_c] = B[(size_t)(k0 + b_r + o) * N + b_c];
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
#pragma unroll
      for (int i = 0; i < TM; ++i) rm[i] = As[(trow * TM + i) * BK + kk];
#pragma unroll
      for (int j = 0; j < TN; ++j) rn[j] = Bs[kk * BN + tcol * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += rm[i] * rn[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) C[(size_t)(trow * TM + i) * N + tcol * TN + j] = acc[i][j];
}

// ---- 5 and 6: vectorized (and its tuned shapes) -------------------------------------------
template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__(BM * BN / (TM * TN))
    sgemm_vectorized(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                     float* __restrict__ C) {
  constexpr int NT = BM * BN / (TM * TN);
  constexpr int A_ROWS = NT * 4 / BK;  // rows of the A tile loaded per pass (BK/4 float4 per row)
  constexpr int B_ROWS = NT * 4 / BN;
  static_assert(BK % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "float4 access");
  static_assert(A_ROWS > 0 && BM % A_ROWS == 0, "A tile loads");
  static_assert(B_ROWS > 0 && BK % B_ROWS == 0, "B tile loads");
  __shared__ __align__(16) float As[BK * BM];  // transposed: As[k][m]
  __shared__ __align__(16) float Bs[BK * BN];
  const int trow = threadIdx.x / (BN / TN), tcol = threadIdx.x % (BN / TN);
  const int a_r = threadIdx.x / (BK / 4), a_c = threadIdx.x % (BK / 4) * 4;
  const int b_r = threadIdx.x / (BN / 4), b_c = threadIdx.x % (BN / 4) * 4;
  A += (size_t)blockIdx.y * BM * K;
  B += (size_t)blockIdx.x * BN;
  C += (size_t)blockIdx.y * BM * N + (size_t)blockIdx.x * BN;
  float acc[TM][TN] = {{0.f}};
  float rm[TM], rn[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int o = 0; o < BM; o += A_ROWS) {
      const float4 v = *reinterpret_cast<const float4*>(&A[(size_t)(a_r + o) * K + k0 + a_c]);
      As[(a_c + 0) * BM + a_r + o] = v.x;
      As[(a_c + 1) * BM + a_r + o] = v.y;
      As[(a_c + 2) * BM + a_r + o] = v.z;
      As[(a_c + 3) * BM + a_r + o] = v.w;
    }
#pragma unroll
    for (int o = 0; o < BK; o += B_ROWS)
      *reinterpret_cast<float4*>(&Bs[(b_r + o) * BN + b_c]) =
          *reinterpret_cast<const float4*>(&B[(size_t)(k0 + b_r + o) * N + b_c]);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
#pragma unroll
      for (int i = 0; i < TM; i += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&As[kk * BM + trow * TM + i]);
        rm[i] = v.x; rm[i + 1] = v.y; rm[i + 2] = v.z; rm[i + 3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < TN; j += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[kk * BN + tcol * TN + j]);
        rn[j] = v.x; rn[j + 1] = v.y; rn[j + 2] = v.z; rn[j + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += rm[i] * rn[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; j += 4)
      *reinterpret_cast<float4*>(&C[(size_t)(trow * TM + i) * N + tcol * TN + j]) =
          make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
}

// ---- 7: warp tiling -----------------------------------------------------------------------
// The block tile BM x BN is split into warp tiles WM x WN; a warp computes its tile in
// WMITER x WNITER steps of (WM/WMITER) x (WN/WNITER) sub-tiles, each thread a TM x TN piece of
// each sub-tile. A thread's float4 reads of a k-slice are then 4 apart within a warp (no bank
// conflicts), and a warp's operands come from a small window of shared memory.
// MINB: blocks per SM asked of the register allocator (__launch_bounds__'s second argument).
template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int NT, int MINB>
__global__ void __launch_bounds__(NT, MINB)
    sgemm_warptile(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                   float* __restrict__ C) {
  constexpr int WARPS = NT / 32;
  static_assert((BM / WM) * (BN / WN) == WARPS && BM % WM == 0 && BN % WN == 0, "warps tile the block");
  constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
  static_assert(WMITER >= 1 && WMITER * 32 * TM * TN * WNITER == WM * WN, "threads tile the warp tile");
  constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER;
  static_assert((WSUBM / TM) * (WSUBN / TN) == 32 && WSUBM % TM == 0 && WSUBN % TN == 0, "lanes");
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "float4 access");
  constexpr int LDA = BM + 4;  // padded k-row of transposed A: a warp's transposed stores spread over the banks
  constexpr int A_F4 = BM * BK / 4 / NT, B_F4 = BK * BN / 4 / NT;  // float4 per thread per tile
  static_assert(A_F4 >= 1 && A_F4 * NT * 4 == BM * BK, "A tile loads");
  static_assert(B_F4 >= 1 && B_F4 * NT * 4 == BK * BN, "B tile loads");
  __shared__ __align__(16) float As[2][BK * LDA];
  __shared__ __align__(16) float Bs[2][BK * BN];

  // grouped block order: GROUP consecutive blocks walk down a column of tiles, so a band of
  // A's row panels stays in L2 while B's column panels stream past it
  constexpr int GROUP = 8;
  const int tiles_m = M / BM, tiles_n = N / BN;
  const int per_group = GROUP * tiles_n;
  const int bid = blockIdx.x;
  const int first_m = bid / per_group * GROUP;
  const int group_m = min(tiles_m - first_m, GROUP);
  const int tile_m = first_m + (bid % per_group) % group_m;
  const int tile_n = (bid % per_group) / group_m;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_row = warp / (BN / WN), warp_col = warp % (BN / WN);
  const int t_row = lane / (WSUBN / TN), t_col = lane % (WSUBN / TN);

  A += (size_t)tile_m * BM * K;
  B += (size_t)tile_n * BN;
  float4 ra[A_F4], rb[B_F4];
  auto load_global = [&](int k0) {
#pragma unroll
    for (int i = 0; i < A_F4; ++i) {
      const int f = threadIdx.x + i * NT;
      ra[i] = *reinterpret_cast<const float4*>(&A[(size_t)(f / (BK / 4)) * K + k0 + f % (BK / 4) * 4]);
    }
#pragma unroll
    for (int i = 0; i < B_F4; ++i) {
      const int f = threadIdx.x + i * NT;
      rb[i] = *reinterpret_cast<const float4*>(&B[(size_t)(k0 + f / (BN / 4)) * N + f % (BN / 4) * 4]);
    }
  };
  auto store_shared = [&](int buf) {
#pragma unroll
    for (int i = 0; i < A_F4; ++i) {
      const int f = threadIdx.x + i * NT;
      const int r = f / (BK / 4), c = f % (BK / 4) * 4;
      As[buf][(c + 0) * LDA + r] = ra[i].x;
      As[buf][(c + 1) * LDA + r] = ra[i].y;
      As[buf][(c + 2) * LDA + r] = ra[i].z;
      As[buf][(c + 3) * LDA + r] = ra[i].w;
    }
#pragma unroll
    for (int i = 0; i < B_F4; ++i) {
      const int f = threadIdx.x + i * NT;
      *reinterpret_cast<float4*>(&Bs[buf][(f / (BN / 4)) * BN + f % (BN / 4) * 4]) = rb[i];
    }
  };

  float acc[WMITER * TM][WNITER * TN] = {{0.f}};
  float rm[WMITER * TM], rn[WNITER * TN];
  load_global(0);
  store_shared(0);
  __syncthreads();
  int buf = 0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    const bool next = k0 + BK < K;
    if (next) load_global(k0 + BK);  // in flight while this tile is multiplied
    const float* as = As[buf] + warp_row * WM + t_row * TM;
    const float* bs = Bs[buf] + warp_col * WN + t_col * TN;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
#pragma unroll
      for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
        for (int i = 0; i < TM; i += 4) {
          const float4 v = *reinterpret_cast<const float4*>(as + kk * LDA + wm * WSUBM + i);
          rm[wm * TM + i] = v.x; rm[wm * TM + i + 1] = v.y; rm[wm * TM + i + 2] = v.z; rm[wm * TM + i + 3] = v.w;
        }
#pragma unroll
      for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
          const float4 v = *reinterpret_cast<const float4*>(bs + kk * BN + wn * WSUBN + j);
          rn[wn * TN + j] = v.x; rn[wn * TN + j + 1] = v.y; rn[wn * TN + j + 2] = v.z; rn[wn * TN + j + 3] = v.w;
        }
#pragma unroll
      for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
        for (int j = 0; j < WNITER * TN; ++j) acc[i][j] += rm[i] * rn[j];
    }
    // the other buffer was last read before the previous barrier: safe to overwrite now
    if (next) store_shared(buf ^ 1);
    __syncthreads();
    buf ^= 1;
  }
  C += (size_t)(tile_m * BM + warp_row * WM) * N + (size_t)tile_n * BN + warp_col * WN;
#pragma unroll
  for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
          const float* a = &acc[wm * TM + i][wn * TN + j];
          *reinterpret_cast<float4*>(&C[(size_t)(wm * WSUBM + t_row * TM + i) * N + wn * WSUBN + t_col * TN + j]) =
              make_float4(a[0], a[1], a[2], a[3]);
        }
}

// ---- the table of launchable configurations ----------------------------------------------
using Launch = void (*)(int, int, int, const float*, const float*, float*, cudaStream_t);

struct Config {
  const char* name;
  int bm, bn, bk;  // M, N, K must be multiples (1: any size)
  Launch launch;
};

inline unsigned cdiv(int a, int b) { return (unsigned)((a + b - 1) / b); }

void run_naive(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
  pk::launch(sgemm_naive, dim3(cdiv(M, 32), cdiv(N, 32)), dim3(32, 32), s, M, N, K, A, B, C);
}
void run_coalesced(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
  pk::launch(sgemm_coalesced<32>, dim3(cdiv(N, 32), cdiv(M, 32)), dim3(32 * 32), s, M, N, K, A, B, C);
}
void run_smem(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
  pk::launch(sgemm_smem<32>, dim3(cdiv(N, 32), cdiv(M, 32)), dim3(32 * 32), s, M, N, K, A, B, C);
}
template <int BM, int BN, int BK, int TM>
void run_1d(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
  pk::launch(sgemm_blocktile_1d<BM, BN, BK, TM>, dim3(N / BN, M / BM), dim3(BM * BN / TM), s, M, N, K, A, B, C);
}
template <int BM, int BN, int BK, int TM, int TN>
void run_2d(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
  pk::launch(sgemm_blocktile_2d<BM, BN, BK, TM, TN>, dim3(N / BN, M / BM), dim3(BM * BN / (TM * TN)), s, M, N, K, A, B, C);
}
template <int BM, int BN, int BK, int TM, int TN>
void run_vec(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
  pk::launch(sgemm_vectorized<BM, BN, BK, TM, TN>, dim3(N / BN, M / BM), dim3(BM * BN / (TM * TN)), s, M, N, K, A, B, C);
}
template <int BM, int BN, int BK, int WM, int WN, int WNITER, int TM, int TN, int NT, int MINB>
void run_wt(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
  pk::launch(sgemm_warptile<BM, BN, BK, WM, WN, WNITER, TM, TN, NT, MINB>, dim3((M / BM) * (N / BN)), dim3(NT), s, M, N, K, A, B, C);
}

#define VEC(BM, BN, BK, TM, TN) \
  {"bm" #BM "_bn" #BN "_bk" #BK "_tm" #TM "_tn" #TN, BM, BN, BK, run_vec<BM, BN, BK, TM, TN>}
#define WT(BM, BN, BK, WM, WN, WNITER, TM, TN, NT, MINB)                                            \
  {"bm" #BM "_bn" #BN "_bk" #BK "_wm" #WM "_wn" #WN "_wniter" #WNITER "_tm" #TM "_tn" #TN "_nt" #NT  \
   "_minb" #MINB,                                                                                   \
   BM, BN, BK, run_wt<BM, BN, BK, WM, WN, WNITER, TM, TN, NT, MINB>}

const Config NAIVE[] = {{"bs32", 1, 1, 1, run_naive}};
const Config COALESCED[] = {{"bs32", 1, 1, 1, run_coalesced}};
const Config SMEM[] = {{"bs32", 1, 1, 1, run_smem}};
const Config BLOCK1D[] = {{"bm64_bn64_bk8_tm8", 64, 64, 8, run_1d<64, 64, 8, 8>}};
const Config BLOCK2D[] = {{"bm128_bn128_bk8_tm8_tn8", 128, 128, 8, run_2d<128, 128, 8, 8, 8>}};
const Config VECTORIZED[] = {VEC(128, 128, 8, 8, 8)};
const Config TUNED[] = {
    VEC(128, 128, 8, 8, 8),  VEC(128, 128, 16, 8, 8), VEC(64, 128, 16, 8, 8),
    VEC(128, 64, 16, 8, 8),  VEC(64, 64, 16, 4, 4),   VEC(128, 128, 16, 8, 4),
    VEC(64, 128, 8, 8, 8),
};
const Config WARPTILE[] = {
    WT(128, 128, 8, 64, 32, 2, 4, 4, 256, 2),  WT(128, 128, 16, 64, 32, 2, 4, 4, 256, 1),
    WT(128, 128, 16, 64, 32, 2, 4, 4, 256, 2), WT(128, 128, 16, 32, 64, 2, 4, 4, 256, 1),
    WT(128, 256, 8, 64, 64, 4, 4, 4, 256, 1),  WT(256, 128, 8, 64, 64, 4, 4, 4, 256, 1),
    WT(64, 128, 16, 32, 64, 2, 4, 4, 128, 2),  WT(128, 64, 16, 64, 32, 2, 4, 4, 128, 2),
};

struct Step {
  const char* name;
  const Config* configs;
  int n;
};
#define STEP(name, table) {name, table, (int)(sizeof(table) / sizeof(table[0]))}
const Step STEPS[] = {
    STEP("naive", NAIVE),           STEP("coalesced", COALESCED),     STEP("smem", SMEM),
    STEP("blocktile_1d", BLOCK1D),  STEP("blocktile_2d", BLOCK2D),    STEP("vectorized", VECTORIZED),
    STEP("tuned", TUNED),           STEP("warptile", WARPTILE),
};
constexpr int NSTEPS = (int)(sizeof(STEPS) / sizeof(STEPS[0]));

const Config* config(int step, int cfg) {
  if (step < 0 || step >= NSTEPS || cfg < 0 || cfg >= STEPS[step].n) return nullptr;
  return &STEPS[step].configs[cfg];
}

}  // namespace profkit

using namespace profkit;

// The table, for the Python side (readable without a GPU).
PROFKIT_EXPORT int profkit_sgemm_num_steps() { return NSTEPS; }
PROFKIT_EXPORT const char* profkit_sgemm_step_name(int step) {
  return step >= 0 && step < NSTEPS ? STEPS[step].name : nullptr;
}
PROFKIT_EXPORT int profkit_sgemm_num_configs(int step) { return step >= 0 && step < NSTEPS ? STEPS[step].n : 0; }
PROFKIT_EXPORT const char* profkit_sgemm_config_name(int step, int cfg) {
  const Config* c = config(step, cfg);
  return c ? c->name : nullptr;
}
// Writes the multiples that M, N, K must be; returns 0, or -1 for an unknown step/config.
PROFKIT_EXPORT int profkit_sgemm_tile(int step, int cfg, int* bm, int* bn, int* bk) {
  const Config* c = config(step, cfg);
  if (!c) return -1;
  *bm = c->bm;
  *bn = c->bn;
  *bk = c->bk;
  return 0;
}

// C = A @ B with step `step`, configuration `cfg`. Returns a cudaError_t (0: launched).
PROFKIT_EXPORT int profkit_sgemm(int step, int cfg, int M, int N, int K, const float* A, const float* B, float* C,
                                 void* stream) {
  const Config* c = config(step, cfg);
  if (!c || M <= 0 || N <= 0 || K <= 0 || M % c->bm || N % c->bn || K % c->bk) return cudaErrorInvalidValue;
  c->launch(M, N, K, A, B, C, static_cast<cudaStream_t>(stream));
  return cudaGetLastError();
}
