// Tensor-core dense GEMMs for gemm.cu (mma.sync m16n8k16 bf16 -> fp32), Y[T, N] (+)= X[T, K] .
// W[N, K]^T (+ bias[N]). Both need K % 8 == 0 and X, W 16-byte aligned (the caller checks).
//
// sm90_bf16_gemm_skinny (8 < T <= 64, decode batches): bandwidth-bound, so W is streamed once
//   straight from HBM into registers with 16-byte loads (L1 no-allocate), 4 k32 blocks (8 KB per
//   warp) issued before the first MMA; X (T x K, a few hundred KB) comes through L1 (the CTA's
//   warps read the same K range). A warp owns 32 rows of W (four n8 tiles, the MMA's B operand)
//   and all T tokens (MT m16 tiles, the A operand). A lane's 16-byte load holds 8 consecutive k of
//   one row; both operands use the same k permutation (lane tig's 8 k feed logical k {2tig, 2tig+1,
//   2tig+8, 2tig+9} of two k16 MMAs), which the dot product does not see. A CTA is 4 warps along
//   N x 2 along K (alternate 128-k load groups; the second group's sums are added through shared
//   memory, in a fixed order). K is split across CTAs (grid.y) until every SM has a CTA (see
//   pick_splits); see gemm_splitk.cuh for how the splits' sums meet.
// sm90_bf16_gemm_tiled (T > 64, prefill): 128xBN CTA tile (BN 128; 256 as GemmPath::TiledWide for
//   A/B), BK 32, 4-stage cp.async pipeline (zero-filled past T, N, K), ldmatrix + mma.sync, 8 warps
//   of 64 x BN/4. K is split only when there are fewer tiles than SMs.
// Split K (both): gemm_splitk.cuh (partials in a workspace, the tile's last CTA adds them in a
//   fixed order; or DISPATCH_CUDA_GEMM_ATOMIC_SPLITK=1's atomics), through splitk_pairs().
// Legend: T tokens (MMA rows), N output features, K input features; gid = lane / 4, tig = lane % 4.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include "check.h"
#include "gemm_splitk.cuh"
#include "pdl.h"

namespace dcuda {
namespace mma {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// 16 bytes of a weight row: read once, so not kept in L1 (volatile keeps a load group issued in
// program order, all before the first MMA that uses it).
__device__ __forceinline__ uint4 ld_stream(const bf16* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// 16 bytes global -> shared, asynchronously; bytes 0 writes zeros (past T, N or K).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int bytes) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}

// ---- skinny: 8 < T <= 64 -------------------------------------------------------------------
constexpr int kSkNWarps = 4;                   // warps along N
constexpr int kSkKWarps = 2;                   // warp groups along K (alternate load groups)
constexpr int kSkThreads = kSkNWarps * kSkKWarps * 32;
constexpr int kSkRows = 32;                    // W rows per warp (4 n8 tiles)
constexpr int kSkBN = kSkNWarps * kSkRows;     // W rows per CTA
constexpr int kSkU = 4;                        // k32 blocks per load group
constexpr int kSkKStep = 32 * kSkU;            // K per load group

// One k32 block: lane's W chunks w[j] (rows n_warp + 8j + gid, k .. k + 7 at tig) times every
// token tile's X chunks (zero past T or K).
template <int MT>
__device__ __forceinline__ void skinny_k32(float (&acc)[MT][4][4], const uint4 (&w)[4], const bf16* const (&xrow)[MT][2],
                                           const bool (&xok)[MT][2], int k, bool kin) {
#pragma unroll
  for (int i = 0; i < MT; ++i) {
    const uint4 z = make_uint4(0, 0, 0, 0);
    const uint4 xa = xok[i][0] && kin ? __ldg(reinterpret_cast<const uint4*>(xrow[i][0] + k)) : z;
    const uint4 xb = xok[i][1] && kin ? __ldg(reinterpret_cast<const uint4*>(xrow[i][1] + k)) : z;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      mma_bf16(acc[i][j], xa.x, xb.x, xa.y, xb.y, w[j].x, w[j].y);
      mma_bf16(acc[i][j], xa.z, xb.z, xa.w, xb.w, w[j].z, w[j].w);
    }
  }
}

// A thread's row pointers (clamped in range; xok says which tokens are real) and zeroed sums.
template <int MT>
__device__ __forceinline__ void skinny_setup(const bf16* (&wrow)[4], const bf16* (&xrow)[MT][2], bool (&xok)[MT][2],
                                             float (&acc)[MT][4][4], const bf16* X, int T, int K,
                                             const bf16* W, int N, int n_warp, int gid, int tig) {
#pragma unroll
  for (int j = 0; j < 4; ++j) wrow[j] = W + size_t(min(n_warp + 8 * j + gid, N - 1)) * K + tig * 8;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int t = 16 * i + 8 * h + gid;
      xok[i][h] = t < T;
      xrow[i][h] = X + size_t(min(t, T - 1)) * K + tig * 8;
    }
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.f;
}

// K group 1 hands its sums to K group 0 through shared memory (every thread reaches the
// barrier), which adds them and writes Y.
template <int MT>
__device__ __forceinline__ void skinny_finish(float (&acc)[MT][4][4], float (&partial)[4][MT * 16][32], int kw, int nw,
                                              int lane, bool live, float* __restrict__ Y, int T, int N, int n_warp,
                                              const float* __restrict__ bias, bool accumulate, bool atomic,
                                              bool vec2, SplitK sk) {
  const int gid = lane >> 2, tig = lane & 3;
  if (kw == 1) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) partial[nw][(i * 4 + j) * 4 + c][lane] = acc[i][j][c];
  }
  __syncthreads();
  auto add_k_group1 = [&](int i, int j) {
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[i][j][c] += partial[nw][(i * 4 + j) * 4 + c][lane];
  };
  auto row = [&](int i, int h) { return 16 * i + 8 * h + gid; };
  auto col = [&](int j) { return n_warp + 8 * j + 2 * tig; };
  const bool own = kw == 0 && live;
  if (sk.ws == nullptr) {
    if (own) store_pairs(acc, add_k_group1, row, col, Y, T, N, bias, accumulate, atomic, vec2);
    return;
  }
  splitk_pairs<false>(acc, add_k_group1, row, col, own, Y, T, N, bias, accumulate, vec2, sk);
}

template <int MT>  // m16 tiles of tokens: T <= 16 * MT
__global__ void __launch_bounds__(kSkThreads) sm90_bf16_gemm_skinny(const bf16* __restrict__ X, int T, int K,
                                                                   const bf16* __restrict__ W, int N,
                                                                   const float* __restrict__ bias,
                                                                   float* __restrict__ Y, bool accumulate,
                                                                   int k_chunk, bool atomic, bool vec2, SplitK sk) {
  // the K group 1 warps' partial sums, [N warp][accumulator][lane], added by K group 0
  __shared__ float partial[kSkNWarps][MT * 16][32];
  pdl_trigger();
  const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
  const int nw = (threadIdx.x >> 5) % kSkNWarps, kw = (threadIdx.x >> 5) / kSkNWarps;
  const int n_warp = blockIdx.x * kSkBN + nw * kSkRows;
  const bool live = n_warp < N;
  const int k_begin = blockIdx.y * k_chunk + kw * kSkKStep;
  const int k_end = min(K, blockIdx.y * k_chunk + k_chunk);
  const bf16* wrow[4];
  const bf16* xrow[MT][2];
  bool xok[MT][2];
  float acc[MT][4][4];
  skinny_setup<MT>(wrow, xrow, xok, acc, X, T, K, W, N, n_warp, gid, tig);

  uint4 wv[kSkU][4];
  auto load_w = [&](int k0) {
#pragma unroll
    for (int u = 0; u < kSkU; ++u)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        wv[u][j] = k0 + 32 * u + tig * 8 < k_end ? ld_stream(wrow[j] + k0 + 32 * u) : make_uint4(0, 0, 0, 0);
  };
  if (live) load_w(k_begin);  // weights are never written: load before waiting on the producer
  pdl_wait();
  for (int k0 = k_begin; live && k0 < k_end; k0 += kSkKWarps * kSkKStep) {
    if (k0 != k_begin) load_w(k0);
#pragma unroll
    for (int u = 0; u < kSkU; ++u) {
      const int k = k0 + 32 * u;
      if (k >= k_end) break;
      const bool kin = k + tig * 8 < k_end;
      skinny_k32<MT>(acc, wv[u], xrow, xok, k, kin);
    }
  }
  // the deterministic split's last CTA adds the whole bias once; the atomic split's split 0 does
  skinny_finish<MT>(acc, partial, kw, nw, lane, live, Y, T, N, n_warp, sk.ws || blockIdx.y == 0 ? bias : nullptr,
                    accumulate, atomic, vec2, sk);
}

// sm90_bf16_gemm_skinny_async (GemmPath::SkinnyAsync, DISPATCH_CUDA_GEMM_SKINNY=async): the same
// CTA and fragments, but each thread stages its own W chunks through a 4-stage shared-memory ring
// with cp.async (64 k per stage, 4 KB per warp), so ~12 KB per warp stay in flight while it
// computes, and registers hold one k32 block of W instead of four. A thread reads back only what
// it copied, so cp.async.wait_group alone orders it (no barrier in the loop).
constexpr int kSaU = 2;                          // k32 blocks per stage
constexpr int kSaStages = 4;
constexpr int kSaGroupK = 32 * kSaU;
constexpr int kSaSmem = kSaStages * kSaU * 4 * kSkThreads * int(sizeof(uint4));

template <int MT>
__global__ void __launch_bounds__(kSkThreads) sm90_bf16_gemm_skinny_async(const bf16* __restrict__ X, int T, int K,
                                                                         const bf16* __restrict__ W, int N,
                                                                         const float* __restrict__ bias,
                                                                         float* __restrict__ Y, bool accumulate,
                                                                         int k_chunk, bool atomic, bool vec2,
                                                                         SplitK sk) {
  extern __shared__ uint4 ring[];  // [stage][u][j][thread]
  __shared__ float partial[kSkNWarps][MT * 16][32];
  pdl_trigger();
  const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
  const int nw = (threadIdx.x >> 5) % kSkNWarps, kw = (threadIdx.x >> 5) / kSkNWarps;
  const int n_warp = blockIdx.x * kSkBN + nw * kSkRows;
  const bool live = n_warp < N;
  const int k_begin = blockIdx.y * k_chunk + kw * kSaGroupK;
  const int k_end = min(K, blockIdx.y * k_chunk + k_chunk);
  constexpr int kStride = kSkKWarps * kSaGroupK;  // the K groups alternate stages of 64 k
  const int groups = live && k_begin < k_end ? (k_end - k_begin + kStride - 1) / kStride : 0;
  const bf16* wrow[4];
  const bf16* xrow[MT][2];
  bool xok[MT][2];
  float acc[MT][4][4];
  skinny_setup<MT>(wrow, xrow, xok, acc, X, T, K, W, N, n_warp, gid, tig);

  auto slot = [&](int stage, int u, int j) { return ring + ((stage * kSaU + u) * 4 + j) * kSkThreads + threadIdx.x; };
  auto issue = [&](int g) {  // group g past the last: zeros, nothing read
    const int k0 = k_begin + g * kStride;
#pragma unroll
    for (int u = 0; u < kSaU; ++u)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const bool ok = g < groups && k0 + 32 * u + tig * 8 < k_end;
        cp_async16(slot(g % kSaStages, u, j), ok ? wrow[j] + k0 + 32 * u : W, ok ? 16 : 0);
      }
  };
#pragma unroll
  for (int g = 0; g < kSaStages - 1; ++g) {
    issue(g);  // weights are never written: in flight before waiting on the producer
    asm volatile("cp.async.commit_group;\n" ::);
  }
  pdl_wait();
  for (int g = 0; g < groups; ++g) {
    // "memory": this stage's plain shared loads stay after the wait, last stage's before the
    // copies that overwrite it
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kSaStages - 2) : "memory");
    issue(g + kSaStages - 1);  // into the stage this thread finished reading last iteration
    asm volatile("cp.async.commit_group;\n" ::);
    const int k0 = k_begin + g * kStride;
#pragma unroll
    for (int u = 0; u < kSaU; ++u) {
      const int k = k0 + 32 * u;
      if (k >= k_end) break;
      uint4 w[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) w[j] = *slot(g % kSaStages, u, j);
      skinny_k32<MT>(acc, w, xrow, xok, k, k + tig * 8 < k_end);
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::);
  // the deterministic split's last CTA adds the whole bias once; the atomic split's split 0 does
  skinny_finish<MT>(acc, partial, kw, nw, lane, live, Y, T, N, n_warp, sk.ws || blockIdx.y == 0 ? bias : nullptr,
                    accumulate, atomic, vec2, sk);
}

// ---- tiled: T > 64 --------------------------------------------------------------------------
// BN 128 (default) or 256 (GemmPath::TiledWide, for A/B): warps 64 x BN/4.
constexpr int kTiBM = 128, kTiBK = 32, kTiStages = 4;
constexpr int kTiLd = kTiBK + 8;  // smem row stride (80 B: ldmatrix rows hit distinct banks)
constexpr int kTiThreads = 256;   // 8 warps: 2 (T) x 4 (N)
constexpr int tiled_smem(int BN) { return kTiStages * (kTiBM + BN) * kTiLd * int(sizeof(bf16)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16* smem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

template <int BN>
__global__ void __launch_bounds__(kTiThreads, BN == 128 ? 2 : 1) sm90_bf16_gemm_tiled(const bf16* __restrict__ X, int T, int K,
                                                                     const bf16* __restrict__ W, int N,
                                                                     const float* __restrict__ bias,
                                                                     float* __restrict__ Y, bool accumulate,
                                                                     int k_chunk, bool atomic, bool vec2,
                                                                     SplitK sk) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* sA = reinterpret_cast<bf16*>(smem_raw);        // [stages][BM][ld]
  bf16* sB = sA + kTiStages * kTiBM * kTiLd;           // [stages][BN][ld]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gid = lane >> 2, tig = lane & 3;
  constexpr int WN = BN / 4, NT = WN / 8;  // warp columns, n8 tiles per warp
  const int m0 = blockIdx.y * kTiBM, n0 = blockIdx.x * BN;
  const int wm = (warp >> 2) * 64, wn = (warp & 3) * WN;
  const int k_begin = blockIdx.z * k_chunk;
  const int k_end = min(K, k_begin + k_chunk);
  const int nk = (k_end - k_begin + kTiBK - 1) / kTiBK;

  // 16-byte chunks: rows x 4 per tile; each thread copies 2 of A and BN / 64 of B per stage
  auto load_stage = [&](int stage, int kb) {
    const int k0 = k_begin + kb * kTiBK;
#pragma unroll
    for (int c = 0; c < kTiBM * 4 / kTiThreads; ++c) {
      const int chunk = tid + c * kTiThreads;
      const int r = chunk >> 2, cc = (chunk & 3) * 8;
      const int k = k0 + cc, gm = m0 + r;
      const bool in = gm < T && k < k_end;
      cp_async16(sA + (stage * kTiBM + r) * kTiLd + cc, X + (in ? size_t(gm) * K + k : 0), in ? 16 : 0);
    }
#pragma unroll
    for (int c = 0; c < BN * 4 / kTiThreads; ++c) {
      const int chunk = tid + c * kTiThreads;
      const int r = chunk >> 2, cc = (chunk & 3) * 8;
      const int k = k0 + cc, gn = n0 + r;
      const bool in = gn < N && k < k_end;
      cp_async16(sB + (stage * BN + r) * kTiLd + cc, W + (in ? size_t(gn) * K + k : 0), in ? 16 : 0);
    }
  };

  float acc[4][NT][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.f;

#pragma unroll
  for (int s = 0; s < kTiStages - 1; ++s) {
    if (s < nk) load_stage(s, s);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  for (int kb = 0; kb < nk; ++kb) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kTiStages - 2));
    __syncthreads();  // stage kb landed for all threads; stage kb - 1 is free to overwrite
    const int next = kb + kTiStages - 1;
    if (next < nk) load_stage(next % kTiStages, next);
    asm volatile("cp.async.commit_group;\n" ::);
    const bf16* a = sA + (kb % kTiStages) * kTiBM * kTiLd;
    const bf16* b = sB + (kb % kTiStages) * BN * kTiLd;
#pragma unroll
    for (int kk = 0; kk < kTiBK; kk += 16) {
      uint32_t af[4][4], bfr[NT / 2][4];
#pragma unroll
      for (int i = 0; i < 4; ++i) ldmatrix_x4(af[i], a + (wm + 16 * i + (lane & 15)) * kTiLd + kk + (lane >> 4) * 8);
#pragma unroll
      for (int p = 0; p < NT / 2; ++p)
        ldmatrix_x4(bfr[p], b + (wn + 16 * p + (lane >> 4) * 8 + (lane & 7)) * kTiLd + kk + ((lane >> 3) & 1) * 8);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
          mma_bf16(acc[i][j], af[i][0], af[i][1], af[i][2], af[i][3], bfr[j >> 1][(j & 1) * 2],
                   bfr[j >> 1][(j & 1) * 2 + 1]);
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::);
  auto none = [](int, int) {};
  auto row = [&](int i, int h) { return m0 + wm + 16 * i + 8 * h + gid; };
  auto col = [&](int j) { return n0 + wn + 8 * j + 2 * tig; };
  if (sk.ws != nullptr) {
    splitk_pairs<true>(acc, none, row, col, true, Y, T, N, bias, accumulate, vec2, sk);
    return;
  }
  // the atomic split's split 0 adds the bias (the deterministic split's last CTA adds it once)
  store_pairs(acc, none, row, col, Y, T, N, blockIdx.z == 0 ? bias : nullptr, accumulate, atomic, vec2);
}

// ---- launchers ------------------------------------------------------------------------------

// splits: 0 picks; otherwise the number of K splits (clamped to the K steps). async: the
// cp.async ring variant.
inline void launch_skinny(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y,
                          bool accumulate, int splits, bool async, cudaStream_t s) {
  DC_CHECK(T > 0 && T <= 64, "gemm skinny: T must be 1..64");
  const int ctas_n = (N + kSkBN - 1) / kSkBN;
  const int k_steps = (K + kSkKStep - 1) / kSkKStep;
  const bool vec2 = y_vec2(Y, N);
  static const int sms = sm_count();
  auto go = [&](auto kernel, int smem, int slots) {
    int sp = splits > 0 ? splits : pick_splits(ctas_n, k_steps, kSkKWarps, kSkKWarps, sms, slots);
    sp = std::max(1, std::min(sp, k_steps));
    const int k_chunk = ((k_steps + sp - 1) / sp) * kSkKStep;
    sp = (K + k_chunk - 1) / k_chunk;
    const bool atomic = sp > 1 && atomic_splitk();
    const dim3 grid(ctas_n, sp), block(kSkThreads);
    if (atomic) {
      if (!accumulate) DC_CUDA(cudaMemsetAsync(Y, 0, size_t(T) * N * sizeof(float), s));
      kernel<<<grid, block, smem, s>>>(X, T, K, W, N, bias, Y, true, k_chunk, true, vec2, SplitK{});
    } else if (sp > 1) {
      // no PDL: the next split launch on this stream reuses the workspace and counters
      const SplitK sk = splitk_workspace(size_t(sp) * T * N, size_t(ctas_n), s);
      kernel<<<grid, block, smem, s>>>(X, T, K, W, N, bias, Y, accumulate, k_chunk, false, vec2, sk);
    } else {
      launch_k(kernel, grid, block, smem, s, X, T, K, W, N, bias, Y, accumulate, k_chunk, false, vec2, SplitK{});
    }
  };
  if (async) {
    // the dynamic shared-memory opt-in holds per device (expert parallelism drives several)
    static std::atomic<uint64_t> opted{0};
    int dev = 0;
    DC_CUDA(cudaGetDevice(&dev));
    const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
    if (!bit || !(opted.load() & bit)) {
      DC_CUDA(cudaFuncSetAttribute(sm90_bf16_gemm_skinny_async<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSaSmem));
      DC_CUDA(cudaFuncSetAttribute(sm90_bf16_gemm_skinny_async<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSaSmem));
      DC_CUDA(cudaFuncSetAttribute(sm90_bf16_gemm_skinny_async<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSaSmem));
      DC_CUDA(cudaFuncSetAttribute(sm90_bf16_gemm_skinny_async<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSaSmem));
      opted.fetch_or(bit);
    }
    static const int a1 = resident_ctas(sm90_bf16_gemm_skinny_async<1>, kSkThreads, kSaSmem);
    static const int a2 = resident_ctas(sm90_bf16_gemm_skinny_async<2>, kSkThreads, kSaSmem);
    static const int a3 = resident_ctas(sm90_bf16_gemm_skinny_async<3>, kSkThreads, kSaSmem);
    static const int a4 = resident_ctas(sm90_bf16_gemm_skinny_async<4>, kSkThreads, kSaSmem);
    switch ((T + 15) / 16) {
      case 1: go(sm90_bf16_gemm_skinny_async<1>, kSaSmem, a1); break;
      case 2: go(sm90_bf16_gemm_skinny_async<2>, kSaSmem, a2); break;
      case 3: go(sm90_bf16_gemm_skinny_async<3>, kSaSmem, a3); break;
      default: go(sm90_bf16_gemm_skinny_async<4>, kSaSmem, a4); break;
    }
    return;
  }
  static const int slots1 = resident_ctas(sm90_bf16_gemm_skinny<1>, kSkThreads, 0);
  static const int slots2 = resident_ctas(sm90_bf16_gemm_skinny<2>, kSkThreads, 0);
  static const int slots3 = resident_ctas(sm90_bf16_gemm_skinny<3>, kSkThreads, 0);
  static const int slots4 = resident_ctas(sm90_bf16_gemm_skinny<4>, kSkThreads, 0);
  switch ((T + 15) / 16) {
    case 1: go(sm90_bf16_gemm_skinny<1>, 0, slots1); break;
    case 2: go(sm90_bf16_gemm_skinny<2>, 0, slots2); break;
    case 3: go(sm90_bf16_gemm_skinny<3>, 0, slots3); break;
    default: go(sm90_bf16_gemm_skinny<4>, 0, slots4); break;
  }
}

template <int BN>
void launch_tiled(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y, bool accumulate,
                  int splits, cudaStream_t s) {
  constexpr int smem = tiled_smem(BN);
  // The shared-memory opt-in holds for the current device only: once per device (expert
  // parallelism drives several GPUs from one process); the slot count is the same on each.
  static std::atomic<uint64_t> opted{0};
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (!bit || !(opted.load() & bit)) {
    DC_CUDA(cudaFuncSetAttribute(sm90_bf16_gemm_tiled<BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    opted.fetch_or(bit);
  }
  static const int slots = resident_ctas(sm90_bf16_gemm_tiled<BN>, kTiThreads, smem);
  const int tiles = ((N + BN - 1) / BN) * ((T + kTiBM - 1) / kTiBM);
  const int k_blocks = (K + kTiBK - 1) / kTiBK;
  // split K only when the tiles leave SMs idle, each split at least 8 K blocks long
  static const int sms = sm_count();
  if (splits <= 0) splits = tiles >= sms ? 1 : pick_splits(tiles, k_blocks, 8, 1, sms, slots);
  splits = std::max(1, std::min(splits, k_blocks));
  const int k_chunk = ((k_blocks + splits - 1) / splits) * kTiBK;
  splits = (K + k_chunk - 1) / k_chunk;
  const bool atomic = splits > 1 && atomic_splitk();
  if (atomic && !accumulate) {
    DC_CUDA(cudaMemsetAsync(Y, 0, size_t(T) * N * sizeof(float), s));
    accumulate = true;
  }
  const dim3 grid((N + BN - 1) / BN, (T + kTiBM - 1) / kTiBM, splits);
  const SplitK sk = splits > 1 && !atomic ? splitk_workspace(size_t(splits) * T * N, size_t(grid.x) * grid.y, s)
                                          : SplitK{};
  sm90_bf16_gemm_tiled<BN><<<grid, kTiThreads, smem, s>>>(X, T, K, W, N, bias, Y, accumulate, k_chunk, atomic,
                                                           y_vec2(Y, N), sk);
}

}  // namespace mma
}  // namespace dcuda
