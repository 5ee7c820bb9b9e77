// Router logits on tensor cores with fp32 accuracy (3xTF32): Y[T, N] = X[T, K] . W[N, K]^T, all
// fp32 (T tokens, K hidden, N experts). Included by ops.cu only; linear_f32() takes it for T > 16
// with DISPATCH_CUDA_ROUTER_TC=1.
//
// 3xTF32: every operand is split into a tf32 high part and a tf32 residual, x = xh + xl + r with
// xh = rna_tf32(x), xl = rna_tf32(x - xh), |r| <= 2^-22 |x|; x w = xh wh + xh wl + xl wh + xl wl
// + O(2^-21 |x w|), and the dropped xl wl is <= 2^-22 |x w|. The three kept products are exact in
// the tensor core (11 x 11 significant bits) and accumulate in fp32, so each product carries
// ~2^-21 relative error, below fp32 accumulation's own. The tensor core adds products with
// truncation, not round-to-nearest; to keep that bias from growing over K, each 32-wide k block is
// accumulated in a fresh register tile (12 mma steps) and then added to the running sum with an
// ordinary fp32 add.
//
// Tiling: mma.sync m16n8k8 tf32, tokens as M (A = X, row-major = K-contiguous), experts as N
// (B = W^T, "col" = W's K-contiguous rows). CTA tile BM tokens x BN experts, warps WARPS_M x
// WARPS_N each BM/WARPS_M x BN/WARPS_N; k blocks of 32 floats staged by cp.async (16 B, zero-fill
// past T, N and K) through ST shared-memory stages ([row][32 + 4]: the fragment loads hit 32
// distinct banks). K may be split over a thread-block cluster of S CTAs (grid.x = S <= 8, rank r
// takes k blocks [kb * r / S, kb * (r + 1) / S)); each rank leaves its partial tile in its drained
// stages, and after a cluster barrier rank r sums slice r of the tile over ranks 0..S-1 in order
// through distributed shared memory. No atomics, no workspace: the result is the same bits on
// every run, and nothing is allocated at launch (graph-capture safe). Under PDL each CTA starts
// its first ST k blocks of W towards L2 (prefetch.global.L2) before griddepcontrol.wait: W is no
// kernel's output, X is.
//
// Needs K % 4 == 0 and 16-byte aligned X and W (linear_f32_tc_fits); shapes and alignment of Y
// are free (scalar stores).
#pragma once
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include "check.h"
#include "pdl.h"

namespace dcuda {
namespace tc32 {

constexpr int kBK = 32;          // floats of K per stage
constexpr int kLd = kBK + 4;     // shared row stride (floats): conflict-free fragment loads
constexpr int kMaxSplits = 8;    // portable cluster size

__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  uint32_t h, l;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(h) : "f"(x));
  const float r = x - __uint_as_float(h);  // exact: h is x with its low 13 bits rounded away
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(l) : "f"(r));
  hi = h, lo = l;
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool full) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(full ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <int BM, int BN, int WARPS_M, int WARPS_N, int ST>
struct Cfg {
  static constexpr int kThreads = 32 * WARPS_M * WARPS_N;
  static constexpr int kWM = BM / WARPS_M, kWN = BN / WARPS_N;  // warp tile
  static constexpr int kMT = kWM / 16, kNT = kWN / 8;          // mma tiles per warp
  static constexpr int kStageFloats = (BM + BN) * kLd;
  static constexpr int kRedLd = BN + 4;                         // partial tile's row stride
  static constexpr int kSmem = ST * kStageFloats * 4;
  // per-block accumulators: one per product (hi*lo, lo*hi, hi*hi) when the warp tile has fewer
  // than 4 mma tiles, so consecutive mma do not wait on each other; else one, swept tile by tile
  static constexpr int kTerms = kMT * kNT >= 4 ? 1 : 3;
  static_assert(kWM % 16 == 0 && kWN % 8 == 0 && kMT > 0 && kNT > 0, "warp tile must be whole m16n8 tiles");
  static_assert(BM * kRedLd <= ST * kStageFloats, "the partial tile must fit in the drained stages");
  static_assert(ST >= 2, "at least two stages");
};

// grid (S, ceil(N / BN), ceil(T / BM)); cluster (S, 1, 1) when S > 1.
template <int BM, int BN, int WARPS_M, int WARPS_N, int ST>
__global__ void __launch_bounds__(Cfg<BM, BN, WARPS_M, WARPS_N, ST>::kThreads)
    sm90_f32_linear_3xtf32(const float* __restrict__ X, int T, int K, const float* __restrict__ W, int N,
                           float* __restrict__ Y) {
  using C = Cfg<BM, BN, WARPS_M, WARPS_N, ST>;
  extern __shared__ __align__(16) float smem[];
  const int S = gridDim.x, rank = blockIdx.x;
  const int n0 = blockIdx.y * BN, m0 = blockIdx.z * BM;
  const int k_blocks = (K + kBK - 1) / kBK;
  const int kb0 = int(int64_t(k_blocks) * rank / S), kb1 = int(int64_t(k_blocks) * (rank + 1) / S);
  const int nkb = kb1 - kb0;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  pdl_trigger();
  {  // W is no other kernel's output: its first ST k blocks start towards L2 before the wait
    const int pre = min(nkb, ST);
    for (int i = tid; i < BN * pre; i += C::kThreads) {
      const int row = n0 + i / pre, kb = kb0 + i % pre;
      if (row < N) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(W + size_t(row) * K + kb * kBK));
    }
  }
  pdl_wait();
  const int g = lane >> 2, t4 = lane & 3;
  const int wm0 = (warp / WARPS_N) * C::kWM, wn0 = (warp % WARPS_N) * C::kWN;

  // one stage: BM rows of X then BN rows of W, kBK floats each, as 16-byte chunks
  auto load = [&](int slot, int kb) {
    float* st = smem + slot * C::kStageFloats;
    const int k0 = kb * kBK;
#pragma unroll 4
    for (int c = tid; c < (BM + BN) * (kBK / 4); c += C::kThreads) {
      const int row = c / (kBK / 4), k = k0 + (c % (kBK / 4)) * 4;
      const bool is_x = row < BM;
      const int grow = is_x ? m0 + row : n0 + row - BM;
      const bool full = k < K && grow < (is_x ? T : N);
      const float* src = full ? (is_x ? X : W) + size_t(grow) * K + k : X;
      cp_async16(st + row * kLd + (c % (kBK / 4)) * 4, src, full);
    }
  };

  float acc[C::kMT][C::kNT][4];
#pragma unroll
  for (int i = 0; i < C::kMT; ++i)
#pragma unroll
    for (int j = 0; j < C::kNT; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.f;

#pragma unroll
  for (int s = 0; s < ST - 1; ++s) {
    if (s < nkb) load(s, kb0 + s);
    cp_async_commit();
  }
  for (int i = 0; i < nkb; ++i) {
    cp_async_wait<ST - 2>();
    __syncthreads();  // stage i landed for every thread; stage i - 1 is no longer read
    if (i + ST - 1 < nkb) load((i + ST - 1) % ST, kb0 + i + ST - 1);
    cp_async_commit();
    const float* sx = smem + (i % ST) * C::kStageFloats;
    const float* sw = sx + BM * kLd;
    float blk[C::kTerms][C::kMT][C::kNT][4];
#pragma unroll
    for (int u = 0; u < C::kTerms; ++u)
#pragma unroll
      for (int a = 0; a < C::kMT; ++a)
#pragma unroll
        for (int b = 0; b < C::kNT; ++b)
#pragma unroll
          for (int c = 0; c < 4; ++c) blk[u][a][b][c] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 8) {
      uint32_t ah[C::kMT][4], al[C::kMT][4], bh[C::kNT][2], bl[C::kNT][2];
#pragma unroll
      for (int a = 0; a < C::kMT; ++a) {
        const float* p = sx + (wm0 + 16 * a + g) * kLd + kk + t4;
        split_tf32(p[0], ah[a][0], al[a][0]);
        split_tf32(p[8 * kLd], ah[a][1], al[a][1]);
        split_tf32(p[4], ah[a][2], al[a][2]);
        split_tf32(p[8 * kLd + 4], ah[a][3], al[a][3]);
      }
#pragma unroll
      for (int b = 0; b < C::kNT; ++b) {
        const float* p = sw + (wn0 + 8 * b + g) * kLd + kk + t4;
        split_tf32(p[0], bh[b][0], bl[b][0]);
        split_tf32(p[4], bh[b][1], bl[b][1]);
      }
      // the three products, each a sweep over the warp tile (independent accumulators between
      // dependent mma); small terms first
#pragma unroll
      for (int a = 0; a < C::kMT; ++a)
#pragma unroll
        for (int b = 0; b < C::kNT; ++b) mma_tf32(blk[0][a][b], al[a], bh[b]);
#pragma unroll
      for (int a = 0; a < C::kMT; ++a)
#pragma unroll
        for (int b = 0; b < C::kNT; ++b) mma_tf32(blk[C::kTerms > 1 ? 1 : 0][a][b], ah[a], bl[b]);
#pragma unroll
      for (int a = 0; a < C::kMT; ++a)
#pragma unroll
        for (int b = 0; b < C::kNT; ++b) mma_tf32(blk[C::kTerms - 1][a][b], ah[a], bh[b]);
    }
#pragma unroll
    for (int a = 0; a < C::kMT; ++a)
#pragma unroll
      for (int b = 0; b < C::kNT; ++b)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          float v = blk[0][a][b][c];
          if (C::kTerms > 1) v += blk[1][a][b][c];
          if (C::kTerms > 2) v += blk[2][a][b][c];
          acc[a][b][c] += v;
        }
  }

  // C fragment (a, b, c): row wm0 + 16a + g + 8 (c >> 1), column wn0 + 8b + 2 t4 + (c & 1)
  if (S == 1) {
#pragma unroll
    for (int a = 0; a < C::kMT; ++a)
#pragma unroll
      for (int b = 0; b < C::kNT; ++b)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int m = m0 + wm0 + 16 * a + g + 8 * (c >> 1), n = n0 + wn0 + 8 * b + 2 * t4 + (c & 1);
          if (m < T && n < N) Y[size_t(m) * N + n] = acc[a][b][c];
        }
    return;
  }

  cp_async_wait<0>();
  __syncthreads();  // every stage drained and read: the partial tile goes over them
  float* red = smem;
#pragma unroll
  for (int a = 0; a < C::kMT; ++a)
#pragma unroll
    for (int b = 0; b < C::kNT; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c)
        red[(wm0 + 16 * a + g + 8 * (c >> 1)) * C::kRedLd + wn0 + 8 * b + 2 * t4 + (c & 1)] = acc[a][b][c];

  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every rank's partial tile written
  const float* part[kMaxSplits];
#pragma unroll
  for (int q = 0; q < kMaxSplits; ++q) part[q] = cluster.map_shared_rank(red, q < S ? q : 0);
  const int F = BM * BN;
  const int f_end = F * (rank + 1) / S;
  for (int f = F * rank / S + tid; f < f_end; f += C::kThreads) {
    const int r = f / BN, col = f % BN, m = m0 + r, n = n0 + col;
    if (m >= T || n >= N) continue;
    float v = part[0][r * C::kRedLd + col];
#pragma unroll
    for (int q = 1; q < kMaxSplits; ++q) {
      if (q >= S) break;
      v += part[q][r * C::kRedLd + col];
    }
    Y[size_t(m) * N + n] = v;
  }
  cluster.sync();  // no CTA exits while another rank reads its shared memory
}

inline int sm_count_once() {
  static const int sms = [] {
    int dev = 0, n = 0;
    DC_CUDA(cudaGetDevice(&dev));
    DC_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  return sms;
}

// Launches one configuration: S K-splits (cluster size) chosen so that tiles x S CTAs cover about
// one wave of SMs, each split keeping at least 2 k blocks; splits > 0 forces it (clamped 1..8).
template <int BM, int BN, int WARPS_M, int WARPS_N, int ST>
void launch_3xtf32(const float* X, int T, int K, const float* W, int N, float* Y, int splits, cudaStream_t s) {
  using C = Cfg<BM, BN, WARPS_M, WARPS_N, ST>;
  auto kernel = sm90_f32_linear_3xtf32<BM, BN, WARPS_M, WARPS_N, ST>;
  static const bool opted = [&] {
    DC_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
    return true;
  }();
  (void)opted;
  const long tiles_m = (T + BM - 1) / BM, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;
  DC_CHECK(tiles_m <= 65535 && tiles_n <= 65535, "linear_f32_tc: T or N too large for one launch");
  const int k_blocks = (K + kBK - 1) / kBK;
  int S = splits;
  if (S <= 0) S = int(std::min<long>(kMaxSplits, std::max<long>(1, sm_count_once() / tiles)));
  S = std::max(1, std::min({S, kMaxSplits, std::max(1, k_blocks / 2)}));
  launch_kc(kernel, dim3(S, unsigned(tiles_n), unsigned(tiles_m)), dim3(C::kThreads), C::kSmem, s, dim3(S, 1, 1), X, T, K,
            W, N, Y);
}

}  // namespace tc32
}  // namespace dcuda
