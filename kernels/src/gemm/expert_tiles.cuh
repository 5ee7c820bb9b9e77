// The tile list of the persistent grouped GEMMs, derived on the device from the contiguous row offsets:
// expert e has ceil(rows_e / kRowsPerTile) row tiles, each paired with every output tile. Both TMA
// kernels (bf16 prefill, W8A16) walk items w = blockIdx.x, + gridDim.x, ... of this list.
#pragma once
#include <cstdint>
#include "../common/sm90.cuh"

namespace dispatch {

// The TMA ring of the bf16 prefill GEMMs (cooperative and ping-pong): per stage an M x 64 tile of X and an N x 64 tile
// of W (bf16, 128B swizzle), one producer and two consumer warpgroups, up to kMaxExperts experts in the tile list.
template <int M, int N, int Stages>
struct TmaRingTile {
  static constexpr int kM = M, kN = N, kK = 64, kStages = Stages;
  static constexpr int kThreads = 384;
  static constexpr int kMaxExperts = 1024;
  static constexpr int kABytes = kM * kK * 2, kBBytes = kN * kK * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
};

// Warp 0: s_prefix[e] = row tiles of experts before e (s_prefix[0] = 0, s_prefix[E] = all). The offsets of up to
// 256 experts are loaded at once before the scan: one global-load latency per 256 experts, where a load per
// 32-expert step put four dependent latencies (~0.7 us each) before the first TMA load of a 128-expert layer.
// kSwapRows > 0 (the prefill kernel's swapped tails): a remainder of at most kSwapRows rows past an expert's whole
// tiles joins its last whole tile (that tile then holds 129 to 128 + kSwapRows rows), or is a tile of its own when the
// expert has no whole tile; so a tile of the list holds at most kSwapRows rows (alone), up to kRowsPerTile, or more
// than kRowsPerTile (the last, merged), and the decode below needs no other state: the last tile's rows say which.
template <int kRowsPerTile, int kSwapRows = 0>
__host__ __device__ __forceinline__ int expert_row_tiles(int rows) {
  const int whole = rows / kRowsPerTile, rem = rows - whole * kRowsPerTile;
  if (kSwapRows > 0 && whole > 0 && rem <= kSwapRows) return whole;
  return whole + (rem > 0 ? 1 : 0);
}

template <int kRowsPerTile, int kSwapRows = 0>
__device__ __forceinline__ void expert_tile_prefix(const int* __restrict__ offsets, int E, int* s_prefix, int lane) {
  constexpr int kBatch = 8;  // 32-expert steps per batch of loads
  int running = 0;
  if (lane == 0) s_prefix[0] = 0;
  for (int base = 0; base < E; base += 32 * kBatch) {
    int lo[kBatch], hi[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int e = base + 32 * j + lane;
      lo[j] = e < E ? __ldg(offsets + e) : 0;
      hi[j] = e < E ? __ldg(offsets + e + 1) : 0;
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int e = base + 32 * j + lane;
      int v = expert_row_tiles<kRowsPerTile, kSwapRows>(hi[j] - lo[j]);  // 0 past E (both loads 0)
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const int u = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += u;
      }
      if (e < E) s_prefix[e + 1] = running + v;
      running += __shfl_sync(0xffffffffu, v, 31);
    }
  }
}

// The swapped rows of a tile in the prefill kernel's swapped tails (kSwapRows > 0 above): an expert of n rows with
// 0 < n % kRows <= kSwapRows has a tail of rem = n % kRows rows. With no whole tile (n < kRows) the tail is a tile of
// its own (alone); otherwise it joins the expert's last whole tile. width: the MMA's N for the tail (16 or 32), 0 where
// the tile has no swapped rows. (Cutting the tail into slices over the last two whole tiles, so that the tiles sharing
// a weight tile keep one pace, measured slower on the H200: docs/kernels.md "Session 22".)
struct SwapSlice {
  int row0, rows, width;
  bool alone;
};

template <int kRowsPerTile, int kSwapRows>
__device__ __forceinline__ SwapSlice swap_slice(int off_e, int row0, int row_end) {
  const int n = row_end - off_e, whole = n / kRowsPerTile, rem = n - whole * kRowsPerTile;
  if (rem == 0 || rem > kSwapRows) return {0, 0, 0, false};
  const int width = rem <= 16 ? 16 : 32;
  if (whole == 0) return {row0, rem, width, true};
  if (row0 - off_e != (whole - 1) * kRowsPerTile) return {0, 0, 0, false};  // not the last whole tile
  return {off_e + whole * kRowsPerTile, rem, width, false};
}

// Item w -> (expert, first row, end row of the expert, first output). Inside an expert the row tiles
// vary fastest, so CTAs running together share each weight tile through L2.
template <int kRowsPerTile, int kColsPerTile>
__device__ __forceinline__ void expert_tile_decode(const int* s_prefix, const int* __restrict__ offsets, int E,
                                                   int n_tiles, int w, int& e, int& row0, int& row_end, int& n0) {
  int lo = 1, hi = E;  // first idx in [1, E] with s_prefix[idx] * n_tiles > w
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (s_prefix[mid] * n_tiles > w) hi = mid; else lo = mid + 1;
  }
  e = lo - 1;
  const int m_tiles = s_prefix[e + 1] - s_prefix[e];
  const int local = w - s_prefix[e] * n_tiles;
  n0 = (local / m_tiles) * kColsPerTile;
  row0 = __ldg(offsets + e) + (local % m_tiles) * kRowsPerTile;
  row_end = __ldg(offsets + e + 1);
}

// Host bound on the items of that list, from M and E alone (the host never reads the routing): output tiles x
// (row tiles of M rows + one partial row tile per expert with rows). The persistent launchers size their grid by it.
inline int64_t expert_items_bound(int rows_per_tile, int cols_per_tile, int M, int E, int N) {
  return int64_t(N / cols_per_tile) * ((M + rows_per_tile - 1) / rows_per_tile + (E < M ? E : M));
}

// Thread 0 of the persistent TMA grouped GEMMs, before their griddepcontrol.wait (it reads nothing the previous
// kernel writes): the ring's mbarriers (full: the producer's one arrival with its expect_tx; empty: one arrival per
// consumer warpgroup that reads the stage: two, or one in the ping-pong kernel, where each stage has one reader) and
// the prefetch of both tensor maps. Then, after the wait, warp 0 builds the expert prefix (expert_tile_prefix) before
// the kernel's __syncthreads(). Its fence also publishes mbarriers the caller initialized before it.
__device__ __forceinline__ void tma_ring_init(uint64_t* full, uint64_t* empty, int stages, const CUtensorMap* tm_x,
                                              const CUtensorMap* tm_w, int readers = 2) {
  for (int s = 0; s < stages; ++s) {
    sm90::mbar_init(&full[s], 1);
    sm90::mbar_init(&empty[s], readers);
  }
  sm90::mbar_fence_init();
  sm90::tma_prefetch_desc(tm_x);
  sm90::tma_prefetch_desc(tm_w);
}

}  // namespace dispatch
