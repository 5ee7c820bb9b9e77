// The tile list of the persistent grouped GEMMs, derived on the device from the contiguous row offsets:
// expert e has ceil(rows_e / kRowsPerTile) row tiles, each paired with every output tile. Both TMA
// kernels (bf16 prefill, W8A16) walk items w = blockIdx.x, + gridDim.x, ... of this list.
#pragma once

namespace dispatch {

// Warp 0: s_prefix[e] = row tiles of experts before e (s_prefix[0] = 0, s_prefix[E] = all).
template <int kRowsPerTile>
__device__ __forceinline__ void expert_tile_prefix(const int* __restrict__ offsets, int E, int* s_prefix, int lane) {
  int running = 0;
  if (lane == 0) s_prefix[0] = 0;
  for (int base = 0; base < E; base += 32) {
    const int e = base + lane;
    int v = e < E ? (__ldg(offsets + e + 1) - __ldg(offsets + e) + kRowsPerTile - 1) / kRowsPerTile : 0;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int u = __shfl_up_sync(0xffffffffu, v, d);
      if (lane >= d) v += u;
    }
    if (e < E) s_prefix[e + 1] = running + v;
    running += __shfl_sync(0xffffffffu, v, 31);
  }
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

}  // namespace dispatch
