// Prefill grouped GEMM on Hopper: Y[r, n] = sum_k X[r, k] * W[e, n, k] for the rows r of expert e.
//
// Legend: M rows (grouped by expert, offsets[E+1]), E experts, N outputs, K inputs.
// Tile 128 (rows) x 256 (outputs) x 64 (k), 4-stage TMA ring in 128B-swizzled shared memory.
// 3 warpgroups, warp-specialized: WG0 is the producer (one thread issues TMA loads, its registers
// shrink to 40 with setmaxnreg); WG1 and WG2 are consumers, each running wgmma m64n256k16 on
// 64 of the tile's rows with 128 fp32 accumulators per thread (registers grow to 232).
// Persistent: grid = #SMs; each CTA walks tiles blockIdx.x, +gridDim.x, ... The tile list is
// derived on the device from the offsets (per expert ceil(rows/128) row tiles), so groups need
// no alignment and the host never reads the routing. A row tile may run past its expert's rows
// into the next expert's rows (or past M, which TMA fills with zeros); the epilogue drops those.
// kStaged picks the epilogue (sm90_bf16_grouped_gemm_contiguous_epilogue.cuh): false writes from
// the registers (the old one), true stages each warpgroup's rows through its own 8 KB of shared memory
// after the ring and writes 16-byte pieces of whole rows.
#pragma once
#include <cuda_bf16.h>
#include "../common/sm90.cuh"
#include "expert_tiles.cuh"
#include "sm90_bf16_grouped_gemm_contiguous_epilogue.cuh"
#include "wgmma_m64n256k16.cuh"

namespace dispatch {

struct ContigTile {
  static constexpr int kM = 128, kN = 256, kK = 64, kStages = 4;
  static constexpr int kThreads = 384;
  static constexpr int kMaxExperts = 1024;
  static constexpr int kABytes = kM * kK * 2, kBBytes = kN * kK * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + alignment slack
  // + one staging buffer per consumer warpgroup (staged epilogue): 214,016 bytes + 4,176 static of 232,448
  static constexpr int kSmemBytesStaged = kSmemBytes + 2 * kEpiBytes;
};

template <bool kStaged>
__global__ void __launch_bounds__(ContigTile::kThreads, 1)
    sm90_bf16_grouped_gemm_contiguous_kernel(const __grid_constant__ CUtensorMap tm_x,
                                             const __grid_constant__ CUtensorMap tm_w,
                                             __nv_bfloat16* __restrict__ Y, const int* __restrict__ offsets,
                                             int E, int N, int K, int fuse_silu) {
  using T = ContigTile;
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[T::kStages], empty[T::kStages];
  __shared__ int s_prefix[T::kMaxExperts + 1];  // row tiles before expert e

  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = tid >> 7;
  if (tid == 0) tma_ring_init(full, empty, T::kStages, &tm_x, &tm_w);  // reads nothing of the previous kernel's
  pdl_trigger();
  pdl_wait();  // offsets and X come from the previous kernel

  if (warp == 0) expert_tile_prefix<T::kM>(offsets, E, s_prefix, lane);
  __syncthreads();

  const int n_tiles = (N + T::kN - 1) / T::kN;
  const int total = s_prefix[E] * n_tiles;
  const int k_blocks = (K + T::kK - 1) / T::kK;
  // Tile w -> (expert, first row, end row, first output). Inside an expert the row tiles vary
  // fastest: CTAs running together share each weight tile through L2 (the expert's rows are few
  // megabytes and stay in L2), so weights stream from HBM about once per launch.
  auto decode = [&](int w, int& e, int& row0, int& row_end, int& n0) {
    expert_tile_decode<T::kM, T::kN>(s_prefix, offsets, E, n_tiles, w, e, row0, row_end, n0);
  };

  if (wg == 0) {
    sm90::setmaxnreg_dec<40>();
    if (tid == 0) {
      int stage = 0;
      uint32_t phase = 0;
      for (int w = blockIdx.x; w < total; w += gridDim.x) {
        int e, row0, row_end, n0;
        decode(w, e, row0, row_end, n0);
        for (int kb = 0; kb < k_blocks; ++kb) {
          sm90::mbar_wait(&empty[stage], phase ^ 1);
          sm90::mbar_expect_tx(&full[stage], T::kStageBytes);
          uint8_t* sa = smem + stage * T::kStageBytes;
          sm90::tma_load_2d(sa, &tm_x, &full[stage], kb * T::kK, row0);
#ifdef DK_MUTATE_EXPERT_OFF_BY_ONE  // test-only build: proves the tests catch a wrong expert index
          const int e_w = (e + 1) % E;
#else
          const int e_w = e;
#endif
          sm90::tma_load_2d(sa + T::kABytes, &tm_w, &full[stage], kb * T::kK, e_w * N + n0);
          if (++stage == T::kStages) stage = 0, phase ^= 1;
        }
      }
    }
  } else {
    sm90::setmaxnreg_inc<232>();
    const int cw = wg - 1;  // this warpgroup's 64 rows: cw*64 ..
    float acc[128];
    int stage = 0;
    uint32_t phase = 0;
    for (int w = blockIdx.x; w < total; w += gridDim.x) {
      int e, row0, row_end, n0;
      decode(w, e, row0, row_end, n0);
      int prev = -1;
      for (int kb = 0; kb < k_blocks; ++kb) {
        sm90::mbar_wait(&full[stage], phase);
        const uint8_t* sa = smem + stage * T::kStageBytes + cw * (64 * T::kK * 2);
        const uint8_t* sb = smem + stage * T::kStageBytes + T::kABytes;
        sm90::wgmma_fence();
#pragma unroll
        for (int k = 0; k < T::kK / 16; ++k)
          sm90::wgmma_m64n256k16_bf16(acc, sm90::desc_k_major_sw128(sa + k * 32), sm90::desc_k_major_sw128(sb + k * 32),
                                      (kb | k) != 0);
        sm90::wgmma_commit();
        sm90::wgmma_wait<1>();  // the previous k-block's MMAs are done: release its stage
        if (prev >= 0 && (tid & 127) == 0) sm90::mbar_arrive(&empty[prev]);
        prev = stage;
        if (++stage == T::kStages) stage = 0, phase ^= 1;
      }
      sm90::wgmma_wait<0>();
      if (prev >= 0 && (tid & 127) == 0) sm90::mbar_arrive(&empty[prev]);

      if constexpr (kStaged) {
        uint8_t* buf = smem + T::kStages * T::kStageBytes + cw * kEpiBytes;
        const int row_base = row0 + cw * 64;
        if (!fuse_silu)
          contig_epilogue_staged<false>(acc, buf, 1 + cw, Y, row_base, row_end, n0, N, tid & 127);
        else
          contig_epilogue_staged<true>(acc, buf, 1 + cw, Y, row_base, row_end, n0 / 2, N / 2, tid & 127);
      } else {
        const int r = row0 + cw * 64 + (warp & 3) * 16 + (lane >> 2);
        contig_epilogue_direct(acc, Y, r, n0, row_end, N, lane, fuse_silu != 0);
      }
    }
  }
}

}  // namespace dispatch
