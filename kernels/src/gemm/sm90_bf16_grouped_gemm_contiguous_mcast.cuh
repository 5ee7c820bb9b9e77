// Prefill grouped GEMM, the cooperative kernel in 2-CTA clusters that multicast the weight tile (opt-in,
// g_contig_mcast / DK_CONTIG_MCAST; written in session 22 without a GPU to run it on: docs/kernels.md "Session 22").
//
// The same GEMM and tiles as sm90_bf16_grouped_gemm_contiguous.cuh (128 x 256 x 64, a 4-stage ring of 48 KB stages,
// one producer and two consumer warpgroups, the staged epilogue), but the two CTAs of a cluster take a unit of two row
// tiles of one expert on one 256-wide output tile: rank r computes rows row0 + 128 r .. of the unit with the whole
// weight tile, loads its own 128 x 64 token box and half of the 256 x 64 weight box (outputs n0 + 128 r ..), the
// latter multicast into both CTAs. Per stage a CTA so reads 16 + 16 KB from L2 instead of 16 + 32 (at 4,096 tokens
// the cooperative kernel runs the L2 at 91-94% of its peak, docs/kernels.md "Session 21, continued").
// An expert's rows run in 256-row units (expert_tile_prefix<256>); a unit of at most 128 rows (an expert's odd last
// row tile) is split along N instead: both ranks compute its 128 rows, rank r on outputs n0 + 128 r .. with its own
// 128 weight rows, each loading one 64-row half of the token box multicast into both (as the ping-pong kernel's
// pairs do). No half or swapped tails here: a pair's two CTAs wait for each other at every stage, so a shorter tile
// would only wait.
// Protocol (the ping-pong pairs' one, sm90_bf16_grouped_gemm_contiguous_pingpong.cuh): rank 0's producer takes the
// units (static stride over the clusters, or the atomic counter one unit ahead) and hands each to rank 1's producer
// through the link queue; both producers then fill their rings in the same unit order, each expecting the stage's
// bytes from both CTAs' loads on its own full barrier. A stage is free again when the consumers of both CTAs have read
// it (four arrivals: each consumer warpgroup arrives on the stage's empty barrier in both CTAs, plain remote
// arrivals after wgmma_wait), so no multicast lands in a stage the other CTA still reads. Each producer tells its own
// consumers the unit in a per-stage slot written before the unit's first stage (-1 ends), as the cooperative kernel's
// dynamic schedule does. The CTAs wait for each other at the end, so no load or arrival targets a CTA that exited.
#pragma once
#include <cuda_bf16.h>
#include <type_traits>
#include "../common/cluster.cuh"
#include "../common/sm90.cuh"
#include "cluster_link.cuh"
#include "expert_tiles.cuh"
#include "sm90_bf16_grouped_gemm_contiguous.cuh"
#include "sm90_bf16_grouped_gemm_contiguous_epilogue.cuh"
#include "wgmma_m64n256k16.cuh"
#include "wgmma_ss_m64k16.cuh"

namespace dispatch {

struct McastTile : ContigTile {
  static constexpr int kUnitRows = 2 * kM;  // rows of an expert per cluster unit
  static constexpr int kHalfW = kBBytes / 2;  // one rank's 128 weight rows x 64
  static constexpr int kQueue = 8;            // units in flight on the link
  static constexpr int kPairBytes = kABytes + kBBytes;      // own token box + both weight halves
  static constexpr int kSplitBytes = kABytes + kHalfW;      // both token halves + own weight rows
};

// tm_x: X with 128-row boxes; tm_x64: 64-row boxes; tm_w128: W as [E * N, K] with 128-row boxes. N a multiple of 256.
__global__ void __launch_bounds__(McastTile::kThreads, 1)
    sm90_bf16_grouped_gemm_mcast_kernel(const __grid_constant__ CUtensorMap tm_x,
                                        const __grid_constant__ CUtensorMap tm_x64,
                                        const __grid_constant__ CUtensorMap tm_w128,
                                        const __grid_constant__ CUtensorMap tm_y, __nv_bfloat16* __restrict__ Y,
                                        const int* __restrict__ offsets, int E, int N, int K, int fuse_silu,
                                        int* __restrict__ sched, int epi_flags) {
  using T = McastTile;
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[T::kStages], empty[T::kStages];
  __shared__ __align__(8) uint64_t link_full[T::kQueue], link_empty[T::kQueue];
  __shared__ int s_link[T::kQueue];               // rank 1: the leader's unit i at i % kQueue
  __shared__ int s_item[T::kStages];              // the unit whose first k-block is in the stage (-1: the end)
  __shared__ int s_prefix[T::kMaxExperts + 1];    // units before expert e

  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = tid >> 7;
  const int rank = int(cluster::rank());
  const CUtensorMap* ty = (epi_flags & 1) ? &tm_y : nullptr;  // the epilogue's TMA stores, if any
  const bool stm = (epi_flags & 2) != 0;
  if (tid == 0) {
    for (int q = 0; q < T::kQueue; ++q) sm90::mbar_init(&link_full[q], 1), sm90::mbar_init(&link_empty[q], 1);
    tma_ring_init(full, empty, T::kStages, &tm_x, &tm_w128, 4);  // 2 consumer warpgroups x 2 CTAs read each stage
    sm90::tma_prefetch_desc(&tm_x64);
    if (ty) sm90::tma_prefetch_desc(ty);
  }
  pdl_trigger();
  pdl_wait();  // offsets and X come from the previous kernel

  if (warp == 0) expert_tile_prefix<T::kUnitRows>(offsets, E, s_prefix, lane);
  __syncthreads();
  cluster::sync();  // both CTAs' barriers initialised before any multicast or remote arrival

  const int n_tiles = N / T::kN;
  const int total = s_prefix[E] * n_tiles;
  const int k_blocks = (K + T::kK - 1) / T::kK;
  // unit w -> (expert, its first row, the expert's end row, first output); more than 128 rows: a pair
  auto decode = [&](int w, int& e, int& row0, int& row_end, int& n0) {
    expert_tile_decode<T::kUnitRows, T::kN>(s_prefix, offsets, E, n_tiles, w, e, row0, row_end, n0);
  };

  if (wg == 0) {
    sm90::setmaxnreg_dec<40>();
    if (tid == 0) {
      int stage = 0;
      uint32_t phase = 0;
      auto load_unit = [&](int w) {
        int e, row0, row_end, n0;
        decode(w, e, row0, row_end, n0);
        const bool pair = row_end - row0 > T::kM;
#ifdef DK_MUTATE_EXPERT_OFF_BY_ONE  // test-only build: proves the tests catch a wrong expert index
        const int e_w = (e + 1) % E;
#else
        const int e_w = e;
#endif
        const int w_row = e_w * N + n0 + rank * T::kM;  // this rank's 128 weight rows
        for (int kb = 0; kb < k_blocks; ++kb) {
          sm90::mbar_wait(&empty[stage], phase ^ 1);  // read by the consumers of both CTAs
          if (kb == 0) s_item[stage] = w;             // visible to this CTA's consumers through the arrival below
          sm90::mbar_expect_tx(&full[stage], pair ? T::kPairBytes : T::kSplitBytes);
          uint8_t* sa = smem + stage * T::kStageBytes;
          if (pair) {
            sm90::tma_load_2d(sa, &tm_x, &full[stage], kb * T::kK, row0 + rank * T::kM);
            sm90::tma_load_2d_multicast(sa + T::kABytes + rank * T::kHalfW, &tm_w128, &full[stage], kb * T::kK, w_row,
                                        uint16_t(3));
          } else {
            sm90::tma_load_2d_multicast(sa + rank * (T::kABytes / 2), &tm_x64, &full[stage], kb * T::kK,
                                        row0 + rank * (T::kM / 2), uint16_t(3));
            sm90::tma_load_2d(sa + T::kABytes, &tm_w128, &full[stage], kb * T::kK, w_row);
          }
          if (++stage == T::kStages) stage = 0, phase ^= 1;
        }
      };
      auto finish = [&] {  // a stage with no data and unit -1 ends this CTA's consumers
        sm90::mbar_wait(&empty[stage], phase ^ 1);
        s_item[stage] = -1;
        sm90::mbar_arrive(&full[stage]);
      };
      if (rank == 0) {
        const int takers = int(gridDim.x) / 2;  // clusters
        int next = sched ? atomicAdd(sched, 1) : int(blockIdx.x) / 2;
        int i = 0;
        for (;; ++i) {
          const int w = next;
          if (w >= total) break;
          next = sched ? atomicAdd(sched, 1) : w + takers;
          link_send<T::kQueue>(link_full, link_empty, s_link, i, w);
          load_unit(w);
        }
        link_send<T::kQueue>(link_full, link_empty, s_link, i, -1);
        finish();
        if (sched) {
          __threadfence();  // this CTA's fetches come before its count; the last leader to count zeroes the slot
          if (atomicAdd(sched + 1, 1) == takers - 1) sched[0] = 0, sched[1] = 0;
        }
      } else {  // rank 1: the leader's units, through the link
        for (int i = 0;; ++i) {
          const int w = link_recv<T::kQueue>(link_full, link_empty, s_link, i);
          if (w < 0) break;
          load_unit(w);
        }
        finish();
      }
    }
    __syncwarp();
    cluster::sync();  // the other CTA's consumers may still arrive on this CTA's barriers
    return;
  }

  sm90::setmaxnreg_inc<232>();
  const int cw = wg - 1;  // this warpgroup's 64 rows of the CTA's 128: cw * 64 ..
  float acc[128];
  int stage = 0;
  uint32_t phase = 0;
  // a stage this CTA's warpgroup has read is released in both CTAs (each loaded part of it)
  auto release = [&](int s) {
#pragma unroll
    for (int r = 0; r < 2; ++r) cluster::arrive_relaxed(cluster::map(sm90::smem_addr(&empty[s]), r));
  };
  for (;;) {
    sm90::mbar_wait(&full[stage], phase);  // the unit's first stage (the k-loop below waits on it again)
    const int w = s_item[stage];
    if (w < 0) break;
    int e, row0, row_end, n0;
    decode(w, e, row0, row_end, n0);
    const bool pair = __all_sync(0xffffffffu, row_end - row0 > T::kM);  // warp-uniform: the CTA takes one unit
    // One k-loop per unit shape (ptxas fences wgmmas of different shapes on the same accumulators in one loop).
    auto mainloop = [&](auto pair_tag) {
      constexpr bool kPair = decltype(pair_tag)::value;
      int prev = -1;
      for (int kb = 0; kb < k_blocks; ++kb) {
        sm90::mbar_wait(&full[stage], phase);
        const uint8_t* sa = smem + stage * T::kStageBytes + cw * (64 * T::kK * 2);  // this warpgroup's 64 token rows
        const uint8_t* sb = smem + stage * T::kStageBytes + T::kABytes;
        sm90::wgmma_fence();
#pragma unroll
        for (int k = 0; k < T::kK / 16; ++k) {
          if constexpr (kPair) {  // all 256 outputs: both ranks' weight halves, in output order
            sm90::wgmma_m64n256k16_bf16(acc, sm90::desc_k_major_sw128(sa + k * 32),
                                        sm90::desc_k_major_sw128(sb + k * 32), (kb | k) != 0);
          } else {  // this rank's 128 outputs
            float(&acc_half)[64] = *reinterpret_cast<float(*)[64]>(acc);
            sm90::wgmma_ss_m64k16<128>(acc_half, sm90::desc_k_major_sw128(sa + k * 32),
                                       sm90::desc_k_major_sw128(sb + k * 32), (kb | k) != 0);
          }
        }
        sm90::wgmma_commit();
        sm90::wgmma_wait<1>();  // the previous k-block's MMAs are done: release its stage
        if (prev >= 0 && (tid & 127) == 0) release(prev);
        prev = stage;
        if (++stage == T::kStages) stage = 0, phase ^= 1;
      }
      sm90::wgmma_wait<0>();
      if (prev >= 0 && (tid & 127) == 0) release(prev);
    };
    if (pair)
      mainloop(std::true_type{});
    else
      mainloop(std::false_type{});

    if (Y == nullptr) continue;  // benchmark knob (g_contig_epilogue 2): nothing written
    const int row_base = (pair ? row0 + rank * T::kM : row0) + cw * 64;
    const int col0 = pair ? n0 : n0 + rank * T::kM;
    const int width = pair ? 256 : 128;
    uint8_t* buf = smem + T::kStages * T::kStageBytes + cw * kEpiBytes;
    const int t = tid & 127;
    if (!fuse_silu)
      contig_epilogue_staged<false>(acc, buf, 1 + cw, Y, row_base, row_end, col0, N, width, t, ty, stm);
    else
      contig_epilogue_staged<true>(acc, buf, 1 + cw, Y, row_base, row_end, col0 / 2, N / 2, width, t, ty, stm);
  }
  contig_epilogue_drain(ty, tid & 127);
  cluster::sync();  // with the producer warpgroup: see above
}

}  // namespace dispatch
