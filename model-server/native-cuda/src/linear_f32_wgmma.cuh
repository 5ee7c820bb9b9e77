// Router logits at prefill sizes on wgmma with fp32 accuracy (3xTF32): Y[T, N] = X[T, K] . W[N, K]^T, all fp32, N <= 128
// experts. The same arithmetic as linear_f32_tc.cuh's mma.sync kernel (each operand split into a tf32 high part and a
// tf32 residual, x w = xh wh + xh wl + xl wh, each 32-wide k block summed in a fresh accumulator and then added to the
// running sum with an ordinary fp32 add), with the split done once per element and CTA instead of once per warp
// and use, and the products on wgmma m64n128k8 (A and B K-major in 128B-swizzled shared memory).
//
// One warpgroup per CTA, tile 64 tokens x 128 experts, K split over a thread-block cluster of S CTAs (grid.x = S <= 8,
// rank r takes k blocks [kb r / S, kb (r + 1) / S)) reduced through distributed shared memory in rank order as
// linear_f32_tc.cuh does: deterministic, nothing allocated (graph-capture safe). Pipeline per 32-wide k block: the raw
// fp32 rows arrive by cp.async in a ring of kRawStages (zero-filled past T, N and K); the CTA splits block i + 1 into
// the high / low tiles of one of two buffers while block i's 12 wgmmas run on the other, then waits for them and adds.
// Needs K % 4 == 0 and 16-byte aligned X and W (linear_f32_tc_fits), N <= 128.
#pragma once
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include "check.h"
#include "common/sm90.cuh"
#include "linear_f32_tc.cuh"
#include "pdl.h"

namespace dcuda {
namespace tc32w {

namespace sm90 = ::dispatch::sm90;

constexpr int kBM = 64, kBN = 128, kBK = 32;  // k block: 32 floats = one 128-byte swizzled row
constexpr int kThreads = 128;
constexpr int kRawStages = 4;
constexpr int kRawX = kBM * kBK * 4, kRawW = kBN * kBK * 4;  // 8 + 16 KB per raw stage
constexpr int kRawStage = kRawX + kRawW;
constexpr int kCvt = 2 * kRawX + 2 * kRawW;                   // X hi, X lo, W hi, W lo: 48 KB per buffer
constexpr int kRedLd = kBN + 4;
constexpr int kSmem = 2 * kCvt + kRawStages * kRawStage + 1024;  // converted buffers first (1024-aligned)
static_assert(kBM * kRedLd * 4 <= kRawStages * kRawStage, "the partial tile must fit in the drained raw ring");

// d (+)= A(64 x 8) . B(128 x 8)^T, tf32, both K-major 128B-swizzled; accumulate 0 ignores d's old value.
__device__ __forceinline__ void wgmma_m64n128k8_tf32(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                     int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "
      "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// grid (S, 1, ceil(T / 64)); cluster (S, 1, 1) when S > 1.
__global__ void __launch_bounds__(kThreads, 1)
    sm90_f32_linear_3xtf32_wgmma(const float* __restrict__ X, int T, int K, const float* __restrict__ W, int N,
                                 float* __restrict__ Y) {
  extern __shared__ uint8_t raw_smem[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw_smem) + 1023) & ~uintptr_t(1023));
  uint8_t* cvt = base;                 // [2][X hi | X lo | W hi | W lo]
  float* ring = reinterpret_cast<float*>(base + 2 * kCvt);  // [kRawStages][64 X rows | 128 W rows][32]
  const int S = gridDim.x, rank = blockIdx.x, m0 = blockIdx.z * kBM;
  const int k_blocks = (K + kBK - 1) / kBK;
  const int kb0 = int(int64_t(k_blocks) * rank / S), kb1 = int(int64_t(k_blocks) * (rank + 1) / S);
  const int nkb = kb1 - kb0;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  pdl_trigger();
  {  // W is no other kernel's output: its first k blocks start towards L2 before the wait
    const int pre = min(nkb, kRawStages);
    for (int i = tid; i < kBN * pre; i += kThreads) {
      const int row = i / pre, kb = kb0 + i % pre;
      if (row < N) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(W + size_t(row) * K + kb * kBK));
    }
  }
  pdl_wait();

  auto load = [&](int i) {  // k block kb0 + i into raw stage i % kRawStages (nothing past the split's end)
    if (i < nkb) {
      float* st = ring + (i % kRawStages) * (kRawStage / 4);
      const int k0 = (kb0 + i) * kBK;
#pragma unroll 4
      for (int c = tid; c < (kBM + kBN) * (kBK / 4); c += kThreads) {
        const int row = c / (kBK / 4), k = k0 + (c % (kBK / 4)) * 4;
        const bool is_x = row < kBM;
        const int grow = is_x ? m0 + row : row - kBM;
        const bool full = k < K && grow < (is_x ? T : N);
        const float* src = full ? (is_x ? X : W) + size_t(grow) * K + k : X;
        tc32::cp_async16(st + row * kBK + (c % (kBK / 4)) * 4, src, full);
      }
    }
    tc32::cp_async_commit();
  };
  // raw stage of block i -> buffer b: hi and lo tf32 parts, each row's 16-byte chunk c at c ^ (row & 7)
  auto convert = [&](int i, int b) {
    const float4* st = reinterpret_cast<const float4*>(ring + (i % kRawStages) * (kRawStage / 4));
    uint8_t* out = cvt + b * kCvt;
#pragma unroll
    for (int u = 0; u < (kBM + kBN) * 8 / kThreads; ++u) {
      const int idx = tid + kThreads * u, row = idx >> 3, ch = idx & 7;
      const float4 v = st[idx];
      const bool is_x = row < kBM;
      const int r = is_x ? row : row - kBM;
      uint8_t* hi = out + (is_x ? 0 : 2 * kRawX);
      uint8_t* lo = hi + (is_x ? kRawX : kRawW);
      const int off = r * 128 + ((ch ^ (r & 7)) << 4);
      uint32_t h[4], l[4];
      tc32::split_tf32(v.x, h[0], l[0]);
      tc32::split_tf32(v.y, h[1], l[1]);
      tc32::split_tf32(v.z, h[2], l[2]);
      tc32::split_tf32(v.w, h[3], l[3]);
      *reinterpret_cast<uint4*>(hi + off) = make_uint4(h[0], h[1], h[2], h[3]);
      *reinterpret_cast<uint4*>(lo + off) = make_uint4(l[0], l[1], l[2], l[3]);
    }
  };

  float acc[64], blk[64];
#pragma unroll
  for (int c = 0; c < 64; ++c) acc[c] = 0.f, blk[c] = 0.f;
#pragma unroll
  for (int s = 0; s < kRawStages - 1; ++s) load(s);
  tc32::cp_async_wait<kRawStages - 2>();
  __syncthreads();  // block 0 landed for every thread
  load(kRawStages - 1);
  if (nkb > 0) convert(0, 0);
  sm90::fence_proxy_async_shared();
  __syncthreads();
  for (int i = 0; i < nkb; ++i) {
    const uint8_t* cb = cvt + (i & 1) * kCvt;
    const uint8_t *xh = cb, *xl = cb + kRawX, *wh = cb + 2 * kRawX, *wl = wh + kRawW;
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 8; ++kk) {  // k8 steps: 32 bytes along the swizzled rows; small terms first
      const int o = 32 * kk;
      wgmma_m64n128k8_tf32(blk, sm90::desc_k_major_sw128(xl + o), sm90::desc_k_major_sw128(wh + o), kk != 0);
      wgmma_m64n128k8_tf32(blk, sm90::desc_k_major_sw128(xh + o), sm90::desc_k_major_sw128(wl + o), 1);
      wgmma_m64n128k8_tf32(blk, sm90::desc_k_major_sw128(xh + o), sm90::desc_k_major_sw128(wh + o), 1);
    }
    sm90::wgmma_commit();
    if (i + 1 < nkb) {
      tc32::cp_async_wait<kRawStages - 2>();
      __syncthreads();  // block i + 1 landed for every thread; block i's raw stage is no longer read
      load(i + kRawStages);
      convert(i + 1, (i + 1) & 1);  // the other buffer: block i - 1's wgmmas on it completed last iteration
      sm90::fence_proxy_async_shared();
    }
    sm90::wgmma_wait<0>();
#pragma unroll
    for (int c = 0; c < 64; ++c) acc[c] += blk[c];
    __syncthreads();  // block i + 1 converted by every thread before its wgmmas; block i's buffer free
  }

  // accumulator d[4j + c]: token 16 warp + gid + 8 (c >> 1), expert 8j + 2 tig + (c & 1)
  const int gid = lane >> 2, tig = lane & 3;
  if (S == 1) {
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int m = m0 + 16 * warp + gid + 8 * (c >> 1), n = 8 * j + 2 * tig + (c & 1);
        if (m < T && n < N) Y[size_t(m) * N + n] = acc[4 * j + c];
      }
    return;
  }
  tc32::cp_async_wait<0>();
  __syncthreads();  // the raw ring drained and read: the partial tile goes over it
  float* red = ring;
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int c = 0; c < 4; ++c) red[(16 * warp + gid + 8 * (c >> 1)) * kRedLd + 8 * j + 2 * tig + (c & 1)] = acc[4 * j + c];
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every rank's partial tile written
  const float* part[tc32::kMaxSplits];
#pragma unroll
  for (int q = 0; q < tc32::kMaxSplits; ++q) part[q] = cluster.map_shared_rank(red, q < S ? q : 0);
  const int F = kBM * kBN, f_end = F * (rank + 1) / S;
  for (int f = F * rank / S + tid; f < f_end; f += kThreads) {
    const int r = f / kBN, col = f % kBN, m = m0 + r;
    if (m >= T || col >= N) continue;
    float v = part[0][r * kRedLd + col];
#pragma unroll
    for (int q = 1; q < tc32::kMaxSplits; ++q) {
      if (q >= S) break;
      v += part[q][r * kRedLd + col];
    }
    Y[size_t(m) * N + col] = v;
  }
  cluster.sync();  // no CTA exits while another rank reads its shared memory
}

// S K-splits (cluster size): one wave of CTAs, each split keeping at least 2 k blocks; splits > 0 forces it (1..8).
inline void launch(const float* X, int T, int K, const float* W, int N, float* Y, int splits, cudaStream_t s) {
  DC_CHECK(N > 0 && N <= kBN, "linear_f32 wgmma: at most 128 outputs");
  static const bool opted = [] {
    DC_CUDA(cudaFuncSetAttribute(sm90_f32_linear_3xtf32_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    return true;
  }();
  (void)opted;
  const long tiles = (T + kBM - 1) / kBM;
  DC_CHECK(tiles <= 65535, "linear_f32 wgmma: T too large for one launch");
  const int k_blocks = (K + kBK - 1) / kBK;
  int S = splits > 0 ? splits : int(std::min<long>(tc32::kMaxSplits, std::max<long>(1, tc32::sm_count_once() / tiles)));
  S = std::max(1, std::min({S, tc32::kMaxSplits, std::max(1, k_blocks / 2)}));
  launch_kc(sm90_f32_linear_3xtf32_wgmma, dim3(S, 1, unsigned(tiles)), dim3(kThreads), kSmem, s, dim3(S, 1, 1), X, T, K,
            W, N, Y);
}

}  // namespace tc32w
}  // namespace dcuda
