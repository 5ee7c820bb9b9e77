// Prefill grouped GEMM, ping-pong schedule: the same GEMM as sm90_bf16_grouped_gemm_contiguous.cuh, but each consumer
// warpgroup owns whole 128 x 128 tiles (two wgmma m64n128k16 per 16-wide k step, 128 fp32 accumulators per thread)
// and the CTA's tiles alternate between the two warpgroups, so one warpgroup's epilogue runs while the other's MMAs
// keep the tensor cores busy (the cooperative kernel's two warpgroups finish a 128 x 256 tile together and both store
// while the tensor cores idle: up to 1.23x of its time, docs/kernels.md "Session 17").
//
// One TMA ring of kStages 32 KB stages (A: 128 rows x 64, B: 128 weight rows x 64, 128B swizzle), filled in tile
// order by one producer thread: tile i of the CTA occupies ring positions i * k_blocks ... (i + 1) * k_blocks - 1.
// Warpgroup c takes tiles i = c, c + 2, ... and finds a tile's stages by position; each stage's empty barrier takes
// one arrival (its one consumer). The mainloops take turns in tile order (mma_done[c]: warpgroup c's last tile's MMAs
// are done and its stages released), and each epilogue overlaps the other warpgroup's mainloop. The turns are also
// what keeps a warpgroup from waiting on a stage two phases ahead of it: without them it would skip the other's
// k_blocks positions and could read a parity the stage completed a round earlier.
// Which tile is tile i: the producer tells the consumers through a queue of kQueue tile indices (own mbarriers, one
// entry per CTA tile, -1 ends a warpgroup: two end markers, one per warpgroup, since the ring positions of an end
// marker would leave gaps in the ring). The tile comes from the static stride (blockIdx.x + i * gridDim.x) or, with a
// scheduler slot (`sched`, as the cooperative kernel), from an atomic counter one tile ahead of its loads.
// Half tails (half_tails != 0): a tile of at most 64 rows (an expert's last) runs only its upper m64n128k16 per k step
// and stores only those rows: half the MMAs of a whole tile, the same bits for the rows it holds.
// Epilogue: the staged one (sm90_bf16_grouped_gemm_contiguous_epilogue.cuh) on each 64-row half of the tile, with TMA
// stores through tm_y for the chunks whose rows are all the expert's and stmatrix staging as epi_flags says (bits 0
// and 1, as the cooperative kernel).
// Pairs (kCluster = 2): two CTAs of a thread-block cluster take the same row tile and two neighbouring 128-wide output
// tiles (a unit of 128 x 256; N a multiple of 256), each loading its own weight tile and one 64-row half of the token
// tile, multicast into both CTAs: a third less L2 -> shared-memory traffic per MMA (24 KB per k-block instead of 32,
// what the cooperative kernel's 128 x 256 tiles move per MMA). Rank 0's producer (the leader) takes the units (static
// stride over the clusters, or the atomic counter) and hands each to rank 1's producer through a second queue, the
// link (entries in rank 1, written remotely; link_full in rank 1, link_empty in rank 0, one arrival each); each
// producer then feeds its own consumers through its own queue as a single CTA does. Both CTAs so walk the same units
// in the same order and their rings stay in step; a stage is free again when both CTAs' consumers have read it (each
// consumer arrives on the stage's empty barrier in both CTAs: a plain remote arrival, as the reads were wgmma's and
// are complete; a cluster-scope release there, one memory fence per k-block on the MMA warps' path, took the kernel
// to 0.4x in its first H200 run), and the CTAs wait for each other at the end, so no load or arrival ever targets a
// CTA that has exited.
#pragma once
#include <cuda_bf16.h>
#include <type_traits>
#include "../common/cluster.cuh"
#include "../common/sm90.cuh"
#include "cluster_link.cuh"
#include "expert_tiles.cuh"
#include "sm90_bf16_grouped_gemm_contiguous_epilogue.cuh"
#include "wgmma_ss_m64k16.cuh"

namespace dispatch {

struct PingPongTile : TmaRingTile<128, 128, 6> {
  // 6 x 32 KB ring + one 8 KB staging buffer per consumer warpgroup + alignment slack: 214,016 bytes
  static constexpr int kSmemBytes = kStages * kStageBytes + 2 * kEpiBytes + 1024;
  static constexpr int kQueue = 8;  // tile indices in flight: at least the tiles the ring can hold at K = 64, plus two
};

// kCluster 1: one CTA per tile (tm_x boxes of 128 rows). kCluster 2: the pairs above (tm_x boxes of 64 rows, N a
// multiple of 256, launched in clusters of 2 along x).
template <int kCluster>
__global__ void __launch_bounds__(PingPongTile::kThreads, 1)
    sm90_bf16_grouped_gemm_pingpong_kernel(const __grid_constant__ CUtensorMap tm_x,
                                           const __grid_constant__ CUtensorMap tm_w,
                                           const __grid_constant__ CUtensorMap tm_y, __nv_bfloat16* __restrict__ Y,
                                           const int* __restrict__ offsets, int E, int N, int K, int fuse_silu,
                                           int half_tails, int* __restrict__ sched, int epi_flags) {
  using T = PingPongTile;
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[T::kStages], empty[T::kStages], mma_done[2];
  __shared__ __align__(8) uint64_t tile_full[T::kQueue], tile_empty[T::kQueue];
  __shared__ int s_tile[T::kQueue];  // CTA tile i's index in the list (-1: no more tiles) at i % kQueue
  __shared__ __align__(8) uint64_t link_full[kCluster > 1 ? T::kQueue : 1], link_empty[kCluster > 1 ? T::kQueue : 1];
  __shared__ int s_link[kCluster > 1 ? T::kQueue : 1];  // pairs: the leader's unit i at i % kQueue (in rank 1)
  __shared__ int s_prefix[T::kMaxExperts + 1];  // row tiles before expert e

  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wg = tid >> 7;
  if (tid == 0) {
    sm90::mbar_init(&mma_done[0], 1), sm90::mbar_init(&mma_done[1], 1);
    for (int q = 0; q < T::kQueue; ++q) sm90::mbar_init(&tile_full[q], 1), sm90::mbar_init(&tile_empty[q], 128);
    if constexpr (kCluster > 1)
      for (int q = 0; q < T::kQueue; ++q) sm90::mbar_init(&link_full[q], 1), sm90::mbar_init(&link_empty[q], 1);
    // one reader per stage in each CTA of the cluster; its fence covers mma_done and the queue
    tma_ring_init(full, empty, T::kStages, &tm_x, &tm_w, kCluster);
    if (epi_flags & 1) sm90::tma_prefetch_desc(&tm_y);
  }
  pdl_trigger();
  pdl_wait();  // offsets and X come from the previous kernel

  if (warp == 0) expert_tile_prefix<T::kM>(offsets, E, s_prefix, lane);
  __syncthreads();
  if constexpr (kCluster > 1) cluster::sync();  // both CTAs' barriers initialised before any load or arrival of the other

  // Units: one tile (kCluster 1) or the pair's kCluster tiles side by side along N; rank r of the cluster takes
  // output columns n0 + r * 128 of its unit.
  const int rank = kCluster > 1 ? int(cluster::rank()) : 0;
  const int n_units = (N + T::kN * kCluster - 1) / (T::kN * kCluster);
  const int total = s_prefix[E] * n_units;
  const int k_blocks = (K + T::kK - 1) / T::kK;
  auto decode = [&](int w, int& e, int& row0, int& row_end, int& n0) {
    expert_tile_decode<T::kM, T::kN * kCluster>(s_prefix, offsets, E, n_units, w, e, row0, row_end, n0);
    n0 += rank * T::kN;
  };
  // a stage read by this CTA's consumer is released in every CTA of the cluster (each loaded part of it)
  auto release = [&](int stage) {
    if constexpr (kCluster == 1) {
      sm90::mbar_arrive(&empty[stage]);
    } else {
#pragma unroll
      for (int r = 0; r < kCluster; ++r) cluster::arrive_relaxed(cluster::map(sm90::smem_addr(&empty[stage]), r));
    }
  };

  if (wg == 0) {
    sm90::setmaxnreg_dec<40>();
    if (tid == 0) {
      int stage = 0;
      uint32_t phase = 0;
      // CTA tile i's index into the queue (after its consumers read entry i - kQueue)
      auto publish = [&](int i, int w) {
        const int q = i % T::kQueue;
        sm90::mbar_wait(&tile_empty[q], ((i / T::kQueue) & 1) ^ 1);
        s_tile[q] = w;
        sm90::mbar_arrive(&tile_full[q]);  // release: the consumers' wait on it acquires s_tile[q]
      };
      // pairs, the leader: unit i to rank 1's producer (after it read entry i - kQueue of the link)
      auto link_send = [&](int i, int w) {
        if constexpr (kCluster > 1) dispatch::link_send<T::kQueue>(link_full, link_empty, s_link, i, w);
      };
      auto load_tile = [&](int w) {
        int e, row0, row_end, n0;
        decode(w, e, row0, row_end, n0);
#ifdef DK_MUTATE_EXPERT_OFF_BY_ONE  // test-only build: proves the tests catch a wrong expert index
        const int e_w = (e + 1) % E;
#else
        const int e_w = e;
#endif
        for (int kb = 0; kb < k_blocks; ++kb) {
          uint8_t* sa = smem + stage * T::kStageBytes;
          if constexpr (kCluster == 1) {
            sm90::mbar_wait(&empty[stage], phase ^ 1);
            sm90::mbar_expect_tx(&full[stage], T::kStageBytes);
            sm90::tma_load_2d(sa, &tm_x, &full[stage], kb * T::kK, row0);
          } else {  // both CTAs have read the stage; this CTA's rows of the token tile go to both
            sm90::mbar_wait(&empty[stage], phase ^ 1);
            sm90::mbar_expect_tx(&full[stage], T::kStageBytes);
            constexpr int kPart = T::kM / kCluster;
            sm90::tma_load_2d_multicast(sa + rank * kPart * T::kK * 2, &tm_x, &full[stage], kb * T::kK,
                                        row0 + rank * kPart, uint16_t((1u << kCluster) - 1));
          }
          sm90::tma_load_2d(sa + T::kABytes, &tm_w, &full[stage], kb * T::kK, e_w * N + n0);
          if (++stage == T::kStages) stage = 0, phase ^= 1;
        }
      };
      if (kCluster == 1 || rank == 0) {
        const int takers = gridDim.x / kCluster;  // CTAs, or clusters: the ones that take units
        int next = sched ? atomicAdd(sched, 1) : blockIdx.x / kCluster;
        int i = 0;
        for (;; ++i) {
          const int w = next;
          if (w >= total) break;
          next = sched ? atomicAdd(sched, 1) : w + takers;
          link_send(i, w);
          publish(i, w);
          load_tile(w);
        }
        link_send(i, -1);
        publish(i, -1), publish(i + 1, -1);  // one end marker per warpgroup
        if (sched) {
          __threadfence();  // this CTA's fetches come before its count; the last CTA to count zeroes the slot
          if (atomicAdd(sched + 1, 1) == takers - 1) sched[0] = 0, sched[1] = 0;
        }
      } else {  // rank 1 of a pair: the leader's units, through the link
        for (int i = 0;; ++i) {
          const int w = link_recv<T::kQueue>(link_full, link_empty, s_link, i);
          if (w < 0) {
            publish(i, -1), publish(i + 1, -1);
            break;
          }
          publish(i, w);
          load_tile(w);
        }
      }
    }
    if constexpr (kCluster == 1) return;
    __syncwarp();
    cluster::sync();  // the other CTA's consumers may still arrive on this CTA's barriers
    return;
  }
  sm90::setmaxnreg_inc<232>();
  const int cw = wg - 1;  // this warpgroup takes the CTA's tiles cw, cw + 2, ...
  float acc[128];         // rows 0-63: acc[0..63], rows 64-127: acc[64..127] (m64n128 layout each)
  float(&top)[64] = *reinterpret_cast<float(*)[64]>(acc);
  float(&bot)[64] = *reinterpret_cast<float(*)[64]>(acc + 64);
  uint8_t* buf = smem + T::kStages * T::kStageBytes + cw * kEpiBytes;
  const CUtensorMap* ty = (epi_flags & 1) ? &tm_y : nullptr;  // the epilogue's TMA stores, if any
  const bool stm = (epi_flags & 2) != 0;
  for (int j = 0;; ++j) {  // this warpgroup's j-th tile: CTA tile i = 2j + cw
    const int i = 2 * j + cw, q = i % T::kQueue;
    const int pos = i * k_blocks;  // the ring position of the tile's first k-block
    sm90::mbar_wait(&tile_full[q], (i / T::kQueue) & 1);
    const int w = s_tile[q];
    sm90::mbar_arrive(&tile_empty[q]);  // every thread, after its read
    if (w < 0) break;
    int e, row0, row_end, n0;
    decode(w, e, row0, row_end, n0);
    // the vote tells ptxas the branch below is warp-uniform (it is the same for the whole warpgroup)
    const bool half = __all_sync(0xffffffffu, half_tails != 0 && row_end - row0 <= 64);
    // the other warpgroup's previous tile (CTA tile i - 1) has finished its MMAs
    if (cw == 1)
      sm90::mbar_wait(&mma_done[0], j & 1);
    else if (j > 0)
      sm90::mbar_wait(&mma_done[1], (j - 1) & 1);
    // One k-loop per tile shape, the branch around whole loops (ptxas serializes wgmmas of different shapes on the
    // same accumulators that meet inside a loop, C7520).
    auto mainloop = [&](auto half_tag) {
      constexpr bool kHalf = decltype(half_tag)::value;
      int prev = -1;
      for (int kb = 0; kb < k_blocks; ++kb) {
        const int p = pos + kb, stage = p % T::kStages;
        sm90::mbar_wait(&full[stage], (p / T::kStages) & 1);
        const uint8_t* sa = smem + stage * T::kStageBytes;
        const uint8_t* sb = sa + T::kABytes;
        sm90::wgmma_fence();
#pragma unroll
        for (int k = 0; k < T::kK / 16; ++k) {
          const uint64_t db = sm90::desc_k_major_sw128(sb + k * 32);
          sm90::wgmma_ss_m64k16<128>(top, sm90::desc_k_major_sw128(sa + k * 32), db, (kb | k) != 0);
          if constexpr (!kHalf)
            sm90::wgmma_ss_m64k16<128>(bot, sm90::desc_k_major_sw128(sa + 64 * 128 + k * 32), db, (kb | k) != 0);
        }
        sm90::wgmma_commit();
        sm90::wgmma_wait<1>();  // the previous k-block's MMAs are done: release its stage
        if (prev >= 0 && (tid & 127) == 0) release(prev);
        prev = stage;
      }
      sm90::wgmma_wait<0>();
      if ((tid & 127) == 0) {
        if (prev >= 0) release(prev);
        sm90::mbar_arrive(&mma_done[cw]);  // the other warpgroup's next tile may start its MMAs
      }
    };
    if (half)
      mainloop(std::true_type{});
    else
      mainloop(std::false_type{});
    const int t = tid & 127;
    if (!fuse_silu) {
      contig_epilogue_staged<false>(acc, buf, 1 + cw, Y, row0, row_end, n0, N, 128, t, ty, stm);
      if (!half) contig_epilogue_staged<false>(acc + 64, buf, 1 + cw, Y, row0 + 64, row_end, n0, N, 128, t, ty, stm);
    } else {
      contig_epilogue_staged<true>(acc, buf, 1 + cw, Y, row0, row_end, n0 / 2, N / 2, 128, t, ty, stm);
      if (!half)
        contig_epilogue_staged<true>(acc + 64, buf, 1 + cw, Y, row0 + 64, row_end, n0 / 2, N / 2, 128, t, ty, stm);
    }
  }
  contig_epilogue_drain(ty, tid & 127);
  if constexpr (kCluster > 1) cluster::sync();  // with the producer warpgroup: see above
}

}  // namespace dispatch
