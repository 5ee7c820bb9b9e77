// W8A16 tensor-core grouped GEMM, "k-permuted" schedule (g_w8_wgmma_variant = 2): the kernel of
// sm90_w8a16_grouped_gemm_wgmma.cuh with the instruction count of the int8 -> bf16 conversion
// halved. Same tiles, ring, items and epilogue; what changes is which int8 bytes a consumer
// thread reads, and the order of X's k inside each 64-wide block.
//
// wgmma's register A fragment wants, per k16 step, the weight pairs at k 2tig..2tig+1 and
// 2tig+8..2tig+9 of two rows: in the natural layout that is two 2-byte shared-memory loads and a
// conversion per pair (the variant-0 kernel: ~5.4 instructions per weight on the H200, its bound).
// A dot product does not care in which order it visits k as long as A and B visit it in the same
// order, so here a thread takes the 16 contiguous bytes of its row at k 64b + 16 tig .. + 15
// (one 16-byte load, four whole 32-bit words for int8x4_to_bf16x4) and uses word j of them as its
// fragment of k16 step 4b + j, and X is written into shared memory in the matching order:
//   logical bf16 pair (word) 8j + 4h + t of a 64-k block  <-  physical pair 8t + 2j + h
// (t = tig, h = low / high pair of the fragment). X rows are small (NTOK x 256 bytes per stage)
// and the producer warpgroup's 127 other threads were idle, so they gather X with 4-byte
// cp.async straight into the permuted, 128B-swizzled positions (rows past M read row M - 1; the
// epilogue drops them), wait for their copies a few stages behind, fence the async proxy (wgmma
// reads shared memory through it) and arrive on the stage's full barrier with the W TMA.
#pragma once
#include <cuda_bf16.h>
#include "../common/bf16.cuh"
#include "../common/sm90.cuh"
#include "sm90_w8a16_grouped_gemm_wgmma.cuh"
#include "wgmma_rs_m64k16.cuh"

namespace dispatch {

__device__ __forceinline__ void w8_cp_async4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(sm90::smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void w8_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void w8_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void w8_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

template <int NTOK>
__global__ void __launch_bounds__(W8Tile<NTOK>::kThreads, 1)
    sm90_w8a16_wgmma_xperm_kernel(const __grid_constant__ CUtensorMap tm_w, const __nv_bfloat16* __restrict__ X,
                                  const float* __restrict__ scales, __nv_bfloat16* __restrict__ Y,
                                  const int* __restrict__ offsets, int M, int E, int N, int K, int fuse_silu) {
  using T = W8Tile<NTOK>;
  constexpr int ST = T::kStages;
  constexpr int kLag = ST >= 4 ? 2 : 1;  // X stages in flight per gathering thread before it waits
  extern __shared__ uint8_t w8x_smem_raw[];
  __shared__ __align__(8) uint64_t full[ST], empty[ST];
  __shared__ int s_prefix[T::kMaxExperts + 1];  // token tiles before expert e

  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(w8x_smem_raw) + 1023) & ~uintptr_t(1023));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = tid >> 7;
  pdl_wait();  // offsets and X come from the previous kernels
  pdl_trigger();

  if (warp == 0) {
    int running = 0;
    if (lane == 0) s_prefix[0] = 0;
    for (int base = 0; base < E; base += 32) {
      const int e = base + lane;
      int v = e < E ? (__ldg(offsets + e + 1) - __ldg(offsets + e) + NTOK - 1) / NTOK : 0;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const int u = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += u;
      }
      if (e < E) s_prefix[e + 1] = running + v;
      running += __shfl_sync(0xffffffffu, v, 31);
    }
    if (lane == 0) {
      for (int s = 0; s < ST; ++s) {
        sm90::mbar_init(&full[s], 1 + 128);  // the W TMA's expect_tx + each X-gathering thread
        sm90::mbar_init(&empty[s], 2);       // one arrival per consumer warpgroup
      }
      sm90::mbar_fence_init();
      sm90::tma_prefetch_desc(&tm_w);
    }
  }
  __syncthreads();

  const int n_tiles = N / T::kRows;
  const int total = s_prefix[E] * n_tiles;
  const int k_blocks = K / T::kK;
  auto decode = [&](int w, int& e, int& row0, int& row_end, int& n0) {
    int lo = 1, hi = E;
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (s_prefix[mid] * n_tiles > w) hi = mid; else lo = mid + 1;
    }
    e = lo - 1;
    const int m_tiles = s_prefix[e + 1] - s_prefix[e];
    const int local = w - s_prefix[e] * n_tiles;
    n0 = (local / m_tiles) * T::kRows;
    row0 = __ldg(offsets + e) + (local % m_tiles) * NTOK;
    row_end = __ldg(offsets + e + 1);
  };
#ifdef DK_MUTATE_EXPERT_OFF_BY_ONE  // test-only build: proves the tests catch a wrong expert index
  auto weight_expert = [&](int e) { return (e + 1) % E; };
#else
  auto weight_expert = [](int e) { return e; };
#endif

  if (wg == 0) {
    sm90::setmaxnreg_dec<40>();
    // Thread tid gathers logical words i = tid + 128 m of the stage's X tile (NTOK rows x 64 words):
    // row i / 64, 64-k block b, logical word L = 8j + 4h + t <- physical word 8t + 2j + h.
    const int L = tid & 31, b = (tid >> 5) & 1;
    const int t = L & 3, h = (L >> 2) & 1, j = L >> 3;
    const int src_word = 64 * b / 2 + 8 * t + 2 * j + h;  // within the stage's 128 k (64 words)
    const int row_step = 128 / 64;                          // rows per pass of the 128 threads
    const int row_first = tid >> 6;
    int stage = 0, pending = 0, pstage = 0;
    uint32_t phase = 0;
    for (int w = blockIdx.x; w < total; w += gridDim.x) {
      int e, row0, row_end, n0;
      decode(w, e, row0, row_end, n0);
      const int w_row = weight_expert(e) * N + n0;
      for (int kb = 0; kb < k_blocks; ++kb) {
        sm90::mbar_wait(&empty[stage], phase ^ 1);
        uint8_t* st = smem + stage * T::kStageBytes;
        if (tid == 0) {
          sm90::mbar_expect_tx(&full[stage], T::kWBytes);
          sm90::tma_load_2d(st, &tm_w, &full[stage], kb * T::kK, w_row);
        }
        uint8_t* sx = st + T::kWBytes + b * NTOK * 128;
        const __nv_bfloat16* xk = X + size_t(kb) * T::kK + 2 * src_word;
#pragma unroll 1
        for (int r = row_first; r < NTOK; r += row_step) {
          const int row = min(row0 + r, M - 1);
          w8_cp_async4(sx + r * 128 + ((((L >> 2) ^ (r & 7))) << 4) + ((L & 3) << 2), xk + size_t(row) * K);
        }
        w8_cp_async_commit();
        if (++pending > kLag) {  // the oldest stage's copies are done: publish it
          w8_cp_async_wait<kLag>();
          w8_fence_proxy_async();
          sm90::mbar_arrive(&full[pstage]);
          if (++pstage == ST) pstage = 0;
          --pending;
        }
        if (++stage == ST) stage = 0, phase ^= 1;
      }
    }
    w8_cp_async_wait<0>();
    w8_fence_proxy_async();
    for (; pending > 0; --pending) {
      sm90::mbar_arrive(&full[pstage]);
      if (++pstage == ST) pstage = 0;
    }
    return;
  }

  sm90::setmaxnreg_inc<232>();
  const int cw = wg - 1, warp_in_wg = warp & 3;
  const int gid = lane >> 2, tig = lane & 3;
  float acc[NTOK / 2];
  uint32_t a[8][4];
  int stage = 0;
  uint32_t phase = 0;
  for (int w = blockIdx.x; w < total; w += gridDim.x) {
    int e, row0, row_end, n0;
    decode(w, e, row0, row_end, n0);
    for (int kb = 0; kb < k_blocks; ++kb) {
      sm90::mbar_wait(&full[stage], phase);
      const uint8_t* st = smem + stage * T::kStageBytes;
      const uint8_t* r0 = st + (cw * 64 + 16 * warp_in_wg + gid) * 128;  // rows gid, gid + 8: r & 7 = gid
#pragma unroll
      for (int bb = 0; bb < 2; ++bb)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const uint4 v = *reinterpret_cast<const uint4*>(r0 + rr * 8 * 128 + (((4 * bb + tig) ^ gid) << 4));
          const uint32_t q[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int jj = 0; jj < 4; ++jj) int8x4_to_bf16x4(q[jj], a[4 * bb + jj][rr], a[4 * bb + jj][2 + rr]);
        }
      const uint8_t* sx = st + T::kWBytes;
      sm90::wgmma_fence();
#pragma unroll
      for (int s = 0; s < 8; ++s)
        sm90::wgmma_rs_m64k16<NTOK>(acc, a[s], sm90::desc_k_major_sw128(sx + (s >> 2) * NTOK * 128 + (s & 3) * 32),
                                    (kb | s) != 0);
      sm90::wgmma_commit();
      sm90::wgmma_wait<0>();
      if ((tid & 127) == 0) sm90::mbar_arrive(&empty[stage]);
      if (++stage == ST) stage = 0, phase ^= 1;
    }

    const int n_row = n0 + cw * 64 + 16 * warp_in_wg + gid;
    const float* sc = scales + size_t(weight_expert(e)) * N + n_row;
    const float s_lo = __ldg(sc), s_hi = __ldg(sc + 8);
#pragma unroll
    for (int j = 0; j < NTOK / 8; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int r = row0 + 8 * j + 2 * tig + c;
        if (r >= row_end) continue;
        const float lo = acc[4 * j + c] * s_lo, hi = acc[4 * j + 2 + c] * s_hi;
        if (!fuse_silu) {
          Y[size_t(r) * N + n_row] = __float2bfloat16_rn(lo);
          Y[size_t(r) * N + n_row + 8] = __float2bfloat16_rn(hi);
        } else {
          Y[size_t(r) * (N / 2) + (n0 + cw * 64 + 16 * warp_in_wg) / 2 + gid] = __float2bfloat16_rn(w8_silu_mul(lo, hi));
        }
      }
  }
}

}  // namespace dispatch
