// Prefill grouped GEMM, ping-pong schedule: the same contract as the cooperative kernel
// (sm90_bf16_grouped_gemm_contiguous.cuh), but each consumer warpgroup owns whole 128x128 tiles
// (two wgmma m64n128k16 per k16 step, 2 x 64 fp32 accumulators per thread) and the two consumers
// take alternate tiles. The producer fills one ring in tile order, so consumer 1's main loop starts
// as consumer 0's ends: one warpgroup's epilogue (stores, SiLU) overlaps the other's MMAs.
//
// STATUS: not yet verified on a GPU. Its first run (2026-11-29) hung: consumer 1 waited on ring
// stages two phases ahead. The mainloop_done ordering below fixes that by construction but has
// not run; the default schedule is the cooperative kernel (grouped_gemm.h).
//
// Legend: M rows (grouped by expert, offsets[E+1]), E experts, N outputs, K inputs.
// Ring position of k-block kb of the CTA's i-th tile: g = i * k_blocks + kb (K is one for all
// tiles), stage g % kStages, phase (g / kStages) & 1; only the tile's owner releases the stage.
#pragma once
#include <cuda_bf16.h>
#include "../common/sm90.cuh"
#include "wgmma_m64n128k16.cuh"

namespace dispatch {

struct PingPongTile {
  static constexpr int kM = 128, kN = 128, kK = 64, kStages = 6;
  static constexpr int kThreads = 384;
  static constexpr int kMaxExperts = 1024;
  static constexpr int kABytes = kM * kK * 2, kBBytes = kN * kK * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024;
};

__global__ void __launch_bounds__(PingPongTile::kThreads, 1)
    sm90_bf16_grouped_gemm_contiguous_pingpong_kernel(const __grid_constant__ CUtensorMap tm_x,
                                                      const __grid_constant__ CUtensorMap tm_w,
                                                      __nv_bfloat16* __restrict__ Y, const int* __restrict__ offsets,
                                                      int E, int N, int K, int fuse_silu) {
  using T = PingPongTile;
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[T::kStages], empty[T::kStages];
  __shared__ __align__(8) uint64_t mainloop_done[2];  // consumer c finished a tile's main loop
  __shared__ int s_prefix[T::kMaxExperts + 1];  // row tiles before expert e

  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = tid >> 7;
  pdl_trigger();
  pdl_wait();  // offsets and X come from the previous kernel

  if (warp == 0) {
    int running = 0;
    if (lane == 0) s_prefix[0] = 0;
    for (int base = 0; base < E; base += 32) {
      const int e = base + lane;
      int v = e < E ? (__ldg(offsets + e + 1) - __ldg(offsets + e) + T::kM - 1) / T::kM : 0;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const int u = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += u;
      }
      if (e < E) s_prefix[e + 1] = running + v;
      running += __shfl_sync(0xffffffffu, v, 31);
    }
    if (lane == 0) {
      for (int s = 0; s < T::kStages; ++s) {
        sm90::mbar_init(&full[s], 1);
        sm90::mbar_init(&empty[s], 1);  // the owning consumer warpgroup
      }
      sm90::mbar_init(&mainloop_done[0], 1);
      sm90::mbar_init(&mainloop_done[1], 1);
      sm90::mbar_fence_init();
      sm90::tma_prefetch_desc(&tm_x);
      sm90::tma_prefetch_desc(&tm_w);
    }
  }
  __syncthreads();

  const int n_tiles = (N + T::kN - 1) / T::kN;
  const int total = s_prefix[E] * n_tiles;
  const int k_blocks = (K + T::kK - 1) / T::kK;
  const int my_tiles = blockIdx.x < total ? (total - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  // Tile w -> (expert, first row, end row, first output); row tiles fastest inside an expert.
  auto decode = [&](int w, int& e, int& row0, int& row_end, int& n0) {
    int lo = 1, hi = E;
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (s_prefix[mid] * n_tiles > w) hi = mid; else lo = mid + 1;
    }
    e = lo - 1;
    const int m_tiles = s_prefix[e + 1] - s_prefix[e];
    const int local = w - s_prefix[e] * n_tiles;
    n0 = (local / m_tiles) * T::kN;
    row0 = __ldg(offsets + e) + (local % m_tiles) * T::kM;
    row_end = __ldg(offsets + e + 1);
  };

  if (wg == 0) {
    sm90::setmaxnreg_dec<40>();
    if (tid == 0) {
      for (int i = 0; i < my_tiles; ++i) {
        int e, row0, row_end, n0;
        decode(blockIdx.x + i * gridDim.x, e, row0, row_end, n0);
#ifdef DK_MUTATE_EXPERT_OFF_BY_ONE  // test-only build: proves the tests catch a wrong expert index
        e = (e + 1) % E;
#endif
        for (int kb = 0; kb < k_blocks; ++kb) {
          const int g = i * k_blocks + kb, stage = g % T::kStages;
          sm90::mbar_wait(&empty[stage], ((g / T::kStages) & 1) ^ 1);
          sm90::mbar_expect_tx(&full[stage], T::kStageBytes);
          uint8_t* sa = smem + stage * T::kStageBytes;
          sm90::tma_load_2d(sa, &tm_x, &full[stage], kb * T::kK, row0);
          sm90::tma_load_2d(sa + T::kABytes, &tm_w, &full[stage], kb * T::kK, e * N + n0);
        }
      }
    }
  } else {
    sm90::setmaxnreg_inc<232>();
    float acc[2][64];  // rows 0-63 and 64-127 of the tile
    const int c = wg - 1;
    for (int i = c; i < my_tiles; i += 2) {
      int e, row0, row_end, n0;
      decode(blockIdx.x + i * gridDim.x, e, row0, row_end, n0);
      // Main loops run in tile order: wait until the other consumer's main loop of tile i-1 is
      // done. Without this, consumer 1 would wait on ring stages more than one phase ahead, and a
      // parity wait cannot tell those phases apart (its first GPU run hung and read unloaded
      // stages exactly so).
      if (i > 0) sm90::mbar_wait(&mainloop_done[1 - c], ((i - 1) >> 1) & 1);
      int prev = -1;
      for (int kb = 0; kb < k_blocks; ++kb) {
        const int g = i * k_blocks + kb, stage = g % T::kStages;
        sm90::mbar_wait(&full[stage], (g / T::kStages) & 1);
        const uint8_t* sa = smem + stage * T::kStageBytes;
        const uint8_t* sb = sa + T::kABytes;
        sm90::wgmma_fence();
#pragma unroll
        for (int k = 0; k < T::kK / 16; ++k) {
          const uint64_t db = sm90::desc_k_major_sw128(sb + k * 32);
          sm90::wgmma_m64n128k16_bf16(acc[0], sm90::desc_k_major_sw128(sa + k * 32), db, (kb | k) != 0);
          sm90::wgmma_m64n128k16_bf16(acc[1], sm90::desc_k_major_sw128(sa + 64 * 128 + k * 32), db, (kb | k) != 0);
        }
        sm90::wgmma_commit();
        sm90::wgmma_wait<1>();  // the previous k-block's MMAs are done: release its stage
        if (prev >= 0 && (tid & 127) == 0) sm90::mbar_arrive(&empty[prev]);
        prev = stage;
      }
      if ((tid & 127) == 0) sm90::mbar_arrive(&mainloop_done[c]);  // the other consumer may start
      sm90::wgmma_wait<0>();
      if (prev >= 0 && (tid & 127) == 0) sm90::mbar_arrive(&empty[prev]);

      // Accumulator layout (m64nN): reg 4j+{0,1} -> (row r, cols 8j + 2(lane%4) + {0,1}), 4j+{2,3} -> row r+8.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row0 + h * 64 + (warp & 3) * 16 + (lane >> 2);
        if (!fuse_silu) {
          const int c = n0 + 2 * (lane & 3);
#pragma unroll
          for (int j = 0; j < 16; ++j) {
            const int col = c + 8 * j;
            if (col < N) {
              if (r < row_end)
                *reinterpret_cast<__nv_bfloat162*>(Y + size_t(r) * N + col) =
                    __floats2bfloat162_rn(acc[h][4 * j], acc[h][4 * j + 1]);
              if (r + 8 < row_end)
                *reinterpret_cast<__nv_bfloat162*>(Y + size_t(r + 8) * N + col) =
                    __floats2bfloat162_rn(acc[h][4 * j + 2], acc[h][4 * j + 3]);
            }
          }
        } else {  // gate/up interleaved by 8 rows of W: column block 2i gate, 2i+1 up; Y is act [M, N/2]
          auto silu_mul = [](float g, float u) { return __fdividef(g, 1.f + __expf(-g)) * u; };
#pragma unroll
          for (int q = 0; q < 8; ++q) {
            const int col = n0 / 2 + 8 * q + 2 * (lane & 3);
            if (2 * col < N) {
              const float* gt = acc[h] + 8 * q;
              const float* up = acc[h] + 8 * q + 4;
              if (r < row_end)
                *reinterpret_cast<__nv_bfloat162*>(Y + size_t(r) * (N / 2) + col) =
                    __floats2bfloat162_rn(silu_mul(gt[0], up[0]), silu_mul(gt[1], up[1]));
              if (r + 8 < row_end)
                *reinterpret_cast<__nv_bfloat162*>(Y + size_t(r + 8) * (N / 2) + col) =
                    __floats2bfloat162_rn(silu_mul(gt[2], up[2]), silu_mul(gt[3], up[3]));
            }
          }
        }
      }
    }
  }
}

}  // namespace dispatch
