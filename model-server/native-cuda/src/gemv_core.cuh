// The bandwidth-bound GEMV's inner loop (gemm.cu's dense GEMVs): a warp dots W rows with token rows, 8 16-byte
// weight loads per lane in flight. Device code only; include from .cu files.
#pragma once
#include <cuda_bf16.h>
#include <cstdint>
#include "pdl.h"

namespace dcuda {
namespace gemv {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ void unpack8(const uint4& u, float f[8]) {
  const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __bfloat1622float2(p[i]);
    f[2 * i] = v.x, f[2 * i + 1] = v.y;
  }
}

// acc[r][t] = W row r . X row t over K (kv 16-byte vectors), this lane's share (no warp sum).
// The first chunk of weights is loaded before pdl_wait() (weights are never written), so under
// PDL those loads overlap the previous kernel's tail; X is read after it.
template <int TT, int R>
__device__ __forceinline__ void gemv_dot(const uint4* const (&w)[R], const uint4* __restrict__ x, int kv, int lane,
                                         float (&acc)[R][TT]) {
  constexpr int U = 8 / R;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < TT; ++t) acc[r][t] = 0.f;
  uint4 wv[R][U];
  auto load = [&](int c0) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r)
        wv[r][u] = c0 + 32 * u < kv ? __ldcs(w[r] + c0 + 32 * u) : make_uint4(0, 0, 0, 0);
  };
  load(lane);
  pdl_wait();
  for (int c0 = lane; c0 < kv; c0 += 32 * U) {
    if (c0 != lane) load(c0);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + 32 * u;
      if (c >= kv) break;
      float wf[R][8];
#pragma unroll
      for (int r = 0; r < R; ++r) unpack8(wv[r][u], wf[r]);
#pragma unroll
      for (int t = 0; t < TT; ++t) {
        float xf[8];
        unpack8(__ldg(x + size_t(t) * kv + c), xf);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[r][t] += wf[r][i] * xf[i];
      }
    }
  }
}

}  // namespace gemv
}  // namespace dcuda
