// Split K across a thread-block cluster for the swap-AB grouped GEMMs (bf16 and W8A16), for launches with fewer
// work items than multiprocessors (one or two tokens: Qwen3-30B-A3B gate_up at one token has 96 items for 132
// SMs, Mixtral down 64). The SPLIT CTAs of a cluster take the same item, each a contiguous SPLIT-th of its k
// blocks; ranks 1.. push their fp32 accumulators into rank 0's shared memory (distributed shared memory) and
// rank 0 adds them, in rank order (deterministic), before its epilogue. No global workspace, no counter to
// reset: the launch stays graph-safe.
//
// Protocol (barriers in every CTA's shared memory, at the same offsets):
// - `full` (rank 0, (SPLIT - 1) x 256 arrivals): every consumer thread of ranks 1.. arrives, release at cluster
//   scope, after its stores into rank 0's scratch; rank 0's consumers wait on it with acquire.
// - `free` (ranks 1.., 256 arrivals): rank 0's consumers arrive after reading, and only when the cluster has a
//   next item, so no arrival ever targets a CTA that has exited; a rank waits on it before pushing again.
// - One cluster barrier after the barriers' initialisation, so no remote arrival precedes an init.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include "../common/launch.h"
#include "../common/cluster.cuh"
#include "../common/sm90.cuh"

namespace dispatch {

// Rank 0's scratch: for each other rank, 256 consumer threads x NTOK / 2 floats, laid out [rank - 1][i / 4][thread]
// as float4, so a warp's stores and loads are contiguous.
template <int NTOK, int SPLIT>
struct SplitScratch {
  static constexpr int kBytes = (SPLIT - 1) * NTOK * 512;
  static constexpr int kConsumers = 256;
};

// Rank 0 / ranks 1..: the k blocks [kb0, kb1) of this rank's share.
__device__ __forceinline__ void split_k_range(int k_blocks, int rank, int split, int& kb0, int& kb1) {
  kb0 = rank * k_blocks / split;
  kb1 = (rank + 1) * k_blocks / split;
}

// Rank r > 0: wait until rank 0 has read the previous item's partials (not before the first), store this thread's
// accumulators into slot r - 1 of rank 0's scratch, arrive on rank 0's `full`.
template <int NTOK, int SPLIT>
__device__ __forceinline__ void split_k_push(const float (&acc)[NTOK / 2], const uint8_t* scratch, uint64_t* full,
                                             uint64_t* free_bar, uint32_t& free_phase, bool first, int rank, int ctid) {
  if (!first) {
    cluster::wait_acquire(free_bar, free_phase);
    free_phase ^= 1;
  }
  const uint32_t base = cluster::map(sm90::smem_addr(scratch), 0) + uint32_t(rank - 1) * NTOK * 512;
#pragma unroll
  for (int i = 0; i < NTOK / 8; ++i)
    cluster::store_v4(base + uint32_t(i * SplitScratch<NTOK, SPLIT>::kConsumers + ctid) * 16, acc[4 * i],
                      acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]);
  cluster::arrive_remote(cluster::map(sm90::smem_addr(full), 0));
}

// Rank 0: wait for every other rank's partials of this item, add them in rank order; when the cluster has a next
// item, tell the other ranks their slots are free.
template <int NTOK, int SPLIT>
__device__ __forceinline__ void split_k_reduce(float (&acc)[NTOK / 2], const uint8_t* scratch, uint64_t* full,
                                               uint32_t& full_phase, uint64_t* free_bar, bool more, int ctid) {
  cluster::wait_acquire(full, full_phase);
  full_phase ^= 1;
  const float4* s = reinterpret_cast<const float4*>(scratch);
#pragma unroll
  for (int r = 1; r < SPLIT; ++r)
#pragma unroll
    for (int i = 0; i < NTOK / 8; ++i) {
      const float4 v = s[((r - 1) * (NTOK / 8) + i) * SplitScratch<NTOK, SPLIT>::kConsumers + ctid];
      acc[4 * i] += v.x;
      acc[4 * i + 1] += v.y;
      acc[4 * i + 2] += v.z;
      acc[4 * i + 3] += v.w;
    }
  if (more)
#pragma unroll
    for (int r = 1; r < SPLIT; ++r) cluster::arrive_remote(cluster::map(sm90::smem_addr(free_bar), r));
}

// Thread 0, before the kernel's fence.mbarrier_init (tma_ring_init): the two split barriers.
template <int SPLIT>
__device__ __forceinline__ void split_k_init(uint64_t* full, uint64_t* free_bar) {
  sm90::mbar_init(full, (SPLIT - 1) * 256);
  sm90::mbar_init(free_bar, 256);
}

// Host side of both split launchers: opts the kernel in to its shared memory and returns the clusters of its grid,
// min(items, clusters that fit at once), or 0 when fewer fit than there are items and the split was not forced (the
// rule assumes one item per cluster: the caller then launches unsplit). DK_SWAPAB_SPLIT_LOG=1 prints the grid.
template <auto Kernel>
int split_k_clusters(const char* name, int split, int threads, int smem, int64_t items, bool forced) {
  opt_in_smem_once<Kernel>(smem);
  const int fit = max_active_clusters_once<Kernel>(split, threads, smem);
  if (!forced && fit < items) return 0;
  const int clusters = int(std::min<int64_t>(fit, items));
  if (std::getenv("DK_SWAPAB_SPLIT_LOG"))
    std::fprintf(stderr, "[dk] %s swap-AB split %d: items <= %lld, %d clusters fit, grid %d clusters\n", name, split,
                 static_cast<long long>(items), fit, clusters);
  return clusters;
}

}  // namespace dispatch
