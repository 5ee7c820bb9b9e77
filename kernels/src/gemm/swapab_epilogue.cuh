// Epilogue of the swap-AB grouped GEMMs (weights as wgmma's A, tokens as its N side): the W8A16 kernel
// and the bf16 decode kernel. A consumer thread holds d[4j + c] = weight row 16 warp + gid + 8 (c >> 1) of
// its warpgroup's 64, token 8j + 2 tig + (c & 1) of the tile; it writes them scaled by its two rows' scales
// (1 for bf16), or silu(gate) * up when the rows are gate/up pairs interleaved by 8
// (sm90_bf16_interleave_gate_up: rows gid and gid + 8 of the thread's 16-row slice are one pair).
#pragma once
#include <cuda_bf16.h>

namespace dispatch {

__device__ __forceinline__ float swapab_silu_mul(float g, float u) { return __fdividef(g, 1.f + __expf(-g)) * u; }

// rows [row0, row_end) of the tile are the expert's (the rest are dropped); n16 = the first of the
// thread's 16 output rows (n0 + 64 cw + 16 warp); Y is [M, N] or, with fuse_silu, [M, N / 2].
template <int NTOK>
__device__ __forceinline__ void swapab_store(const float (&acc)[NTOK / 2], __nv_bfloat16* __restrict__ Y, int row0,
                                             int row_end, int n16, int N, float s_lo, float s_hi, bool fuse_silu,
                                             int lane) {
  const int gid = lane >> 2, tig = lane & 3;
  const int n_row = n16 + gid;
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
      } else {  // rows gid (gate) and gid + 8 (up) -> act column n16 / 2 + gid
        Y[size_t(r) * (N / 2) + n16 / 2 + gid] = __float2bfloat16_rn(swapab_silu_mul(lo, hi));
      }
    }
}

}  // namespace dispatch
