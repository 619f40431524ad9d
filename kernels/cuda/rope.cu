// RoPE on q and k, one block per token (every q and k head), as kernels/rope.py:
//   NeoX (rotate_half):  pairs (d, d + half) of the first rotary_dim = 2 * half dims
//   GPT-J (interleaved): pairs (2d, 2d + 1)
// cos/sin: fp32 tables [max_pos, half] (row stride scs), positions int64 [tokens]. Dims past
// rotary_dim are copied when the output is not the input (in place they are left alone).
// Work item = P consecutive pairs of one head, loaded as one pack of V elements per half
// (NeoX, V == P) or one pack of V = 2P elements (GPT-J); the host picks the widest pack
// (16 bytes) that the strides and pointers allow.
#include "common.cuh"

namespace profkit {

template <typename T, int P, bool INTER>
__device__ __forceinline__ void rotate(const T* __restrict__ x, T* __restrict__ xo, int pair0, int half,
                                       const float* __restrict__ c, const float* __restrict__ s) {
  if constexpr (!INTER) {
    using Pk = pk::Pack<T, P>;
    float a[P], b[P];
    pk::unpack(*reinterpret_cast<const Pk*>(x + pair0), a);
    pk::unpack(*reinterpret_cast<const Pk*>(x + half + pair0), b);
    float oa[P], ob[P];
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const float cj = c[pair0 + j], sj = s[pair0 + j];
      oa[j] = a[j] * cj - b[j] * sj;
      ob[j] = b[j] * cj + a[j] * sj;
    }
    Pk pa, pb;
    pk::pack(oa, pa);
    pk::pack(ob, pb);
    *reinterpret_cast<Pk*>(xo + pair0) = pa;
    *reinterpret_cast<Pk*>(xo + half + pair0) = pb;
  } else {
    using Pk = pk::Pack<T, 2 * P>;
    float v[2 * P], o[2 * P];
    pk::unpack(*reinterpret_cast<const Pk*>(x + 2 * pair0), v);
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const float cj = c[pair0 + j], sj = s[pair0 + j];
      o[2 * j] = v[2 * j] * cj - v[2 * j + 1] * sj;
      o[2 * j + 1] = v[2 * j + 1] * cj + v[2 * j] * sj;
    }
    Pk po;
    pk::pack(o, po);
    *reinterpret_cast<Pk*>(xo + 2 * pair0) = po;
  }
}

struct RopeArgs {
  const void *q, *k;
  void *qo, *ko;
  const float *cos, *sin;
  const int64_t* pos;
  int64_t sq_t, sq_h, sk_t, sk_h, sqo_t, sqo_h, sko_t, sko_h, scs;
  int HQ, HK, half, pass;  // pass: head_dim - rotary_dim, copied when copy_pass
  int copy_pass;
};

template <typename T, int P, bool INTER>
__global__ void rope_fwd(RopeArgs a) {
  const int64_t t = blockIdx.x;
  const int64_t p = a.pos[t];
  const float* c = a.cos + p * a.scs;
  const float* s = a.sin + p * a.scs;
  const T* q = static_cast<const T*>(a.q) + t * a.sq_t;
  const T* k = static_cast<const T*>(a.k) + t * a.sk_t;
  T* qo = static_cast<T*>(a.qo) + t * a.sqo_t;
  T* ko = static_cast<T*>(a.ko) + t * a.sko_t;
  const int items = a.half / P;  // per head
  const int total = (a.HQ + a.HK) * items;
  for (int it = threadIdx.x; it < total; it += blockDim.x) {
    const int h = it / items;
    const int pair0 = (it - h * items) * P;
    if (h < a.HQ)
      rotate<T, P, INTER>(q + h * a.sq_h, qo + h * a.sqo_h, pair0, a.half, c, s);
    else
      rotate<T, P, INTER>(k + (h - a.HQ) * a.sk_h, ko + (h - a.HQ) * a.sko_h, pair0, a.half, c, s);
  }
  if (a.copy_pass) {
    const int rd = 2 * a.half;
    const int ptotal = (a.HQ + a.HK) * a.pass;
    for (int it = threadIdx.x; it < ptotal; it += blockDim.x) {
      const int h = it / a.pass;
      const int d = rd + (it - h * a.pass);
      if (h < a.HQ)
        qo[h * a.sqo_h + d] = q[h * a.sq_h + d];
      else
        ko[(h - a.HQ) * a.sko_h + d] = k[(h - a.HQ) * a.sk_h + d];
    }
  }
}

constexpr int THREADS = 128;

inline bool aligned(const void* ptr, int bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// Widest access (elements, at most 16 bytes) that every pointer and stride allows: NeoX
// accesses v elements = v pairs per half, GPT-J v elements = v / 2 pairs. 0: none (GPT-J with
// odd strides; the Python launcher refuses those first).
template <typename T>
int pack_elems(const RopeArgs& a, bool inter) {
  for (int v = 16 / (int)sizeof(T); v >= (inter ? 2 : 1); v /= 2) {
    const int pairs = inter ? v / 2 : v;
    if (a.half % pairs) continue;  // the items must tile a head's pairs
    bool ok = true;
    for (int64_t st : {a.sq_t, a.sq_h, a.sk_t, a.sk_h, a.sqo_t, a.sqo_h, a.sko_t, a.sko_h})
      ok = ok && st % v == 0;
    for (const void* ptr : {a.q, a.k, static_cast<const void*>(a.qo), static_cast<const void*>(a.ko)})
      ok = ok && aligned(ptr, v * (int)sizeof(T));
    if (ok) return v;
  }
  return 0;
}

template <typename T, bool INTER>
cudaError_t launch_t(const RopeArgs& a, int tokens, cudaStream_t s) {
  const int v = pack_elems<T>(a, INTER);
  if (v == 0) return cudaErrorMisalignedAddress;
  const int pairs = INTER ? v / 2 : v;  // pairs per work item
  const dim3 grid(tokens);
  switch (pairs) {
    case 8: pk::launch(rope_fwd<T, 8, INTER>, grid, dim3(THREADS), s, a); break;
    case 4: pk::launch(rope_fwd<T, 4, INTER>, grid, dim3(THREADS), s, a); break;
    case 2: pk::launch(rope_fwd<T, 2, INTER>, grid, dim3(THREADS), s, a); break;
    default: pk::launch(rope_fwd<T, 1, INTER>, grid, dim3(THREADS), s, a); break;
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch(const RopeArgs& a, int tokens, int interleaved, cudaStream_t s) {
  return interleaved ? launch_t<T, true>(a, tokens, s) : launch_t<T, false>(a, tokens, s);
}

}  // namespace profkit

using namespace profkit;

// q [T, HQ, D], k [T, HK, D] (token and head strides in elements, unit stride on D); outputs
// likewise (may be the inputs: in place). cos/sin fp32 [max_pos, half], row stride scs;
// positions int64 [T]. rotary_dim = 2 * half <= D. Returns a cudaError_t (0: launched).
PROFKIT_EXPORT int profkit_rope_fwd(const void* q, const void* k, void* qo, void* ko, const float* cos,
                                    const float* sin, const long long* pos, long long sq_t, long long sq_h,
                                    long long sk_t, long long sk_h, long long sqo_t, long long sqo_h,
                                    long long sko_t, long long sko_h, long long scs, int tokens, int HQ,
                                    int HK, int head_dim, int half, int interleaved, int copy_pass,
                                    int dtype, void* stream) {
  if (tokens < 0 || HQ <= 0 || HK <= 0 || half <= 0 || 2 * half > head_dim) return cudaErrorInvalidValue;
  if (tokens == 0) return cudaSuccess;
  RopeArgs a{q, k, qo, ko, cos, sin, reinterpret_cast<const int64_t*>(pos), sq_t, sq_h, sk_t, sk_h,
             sqo_t, sqo_h, sko_t, sko_h, scs, HQ, HK, half, head_dim - 2 * half,
             copy_pass && head_dim > 2 * half};
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case PK_FP32: return launch<float>(a, tokens, interleaved, s);
    case PK_FP16: return launch<__half>(a, tokens, interleaved, s);
    case PK_BF16: return launch<__nv_bfloat16>(a, tokens, interleaved, s);
    default: return cudaErrorInvalidValue;
  }
}
