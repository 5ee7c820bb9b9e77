// A router's top-k for one token by one warp (native-cuda's route_small.cu, the self-routed small-M kernel in
// gemm/grouped_gemm_small_m.cuh): router_topk.cu's algorithm line for line (expert e at lane e % 32 slot e / 32, softmax or sigmoid, selection bias, DeepSeek-V3
// grouped top-k, renormalize, scale; ties to the lower index), so every kernel that routes gets the same ids and
// weights. Device code only; include from .cu files.
#pragma once
#include <cfloat>
#include <cstdint>
#include "moe_ops.h"

namespace dispatch {
namespace topk {

struct Best {
  float v;
  int i;
};

// Largest v over the warp, ties to the lowest i: two redux.sync (max of the order-preserving
// integer image of v, then min of i among the lanes holding it) instead of five rounds of two
// shuffles. v + 0 folds -0 into +0 (they compare equal as floats); v is never NaN (lane_best
// skips NaN, as the comparison chain did).
__device__ __forceinline__ uint32_t ordered(float v) {
  const uint32_t u = __float_as_uint(v + 0.f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float unordered(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
__device__ __forceinline__ Best warp_best(Best b) {
  const uint32_t key = ordered(b.v);
  const uint32_t mk = __reduce_max_sync(0xffffffffu, key);
  const uint32_t i = __reduce_min_sync(0xffffffffu, key == mk ? uint32_t(b.i) : 0xffffffffu);
  return {unordered(mk), int(i)};
}

template <int S, typename Keep>
__device__ __forceinline__ Best lane_best(const float (&s)[S], int E, int lane, Keep keep) {
  Best b{-FLT_MAX, 0x7fffffff};
#pragma unroll
  for (int j = 0; j < S; ++j) {
    const int e = lane + 32 * j;
    if (e < E && keep(e) && s[j] > b.v) b = {s[j], e};
  }
  return b;
}

// Token t's top-k by one warp: lane r < k gets the r-th choice (id, weight). S slots per lane (E <= 32 S).
template <int S>
__device__ __forceinline__ void topk_token(const float* __restrict__ row, const float* __restrict__ bias,
                           const dispatch::RouterConfig& cfg, int lane, int* out_id, float* out_w) {
  const int E = cfg.num_experts;
  float score[S], choice[S];
  float mx = -FLT_MAX;
#pragma unroll
  for (int j = 0; j < S; ++j) {
    const int e = lane + 32 * j;
    score[j] = e < E ? row[e] : -FLT_MAX;
    mx = fmaxf(mx, score[j]);
  }
  if (cfg.scoring == dispatch::Scoring::kSoftmax) {
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, d));
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < S; ++j) {
      score[j] = lane + 32 * j < E ? __expf(score[j] - mx) : 0.f;
      sum += score[j];
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, d);
#pragma unroll
    for (int j = 0; j < S; ++j) score[j] /= sum;
  } else {
#pragma unroll
    for (int j = 0; j < S; ++j) score[j] = 1.f / (1.f + __expf(-score[j]));
  }
#pragma unroll
  for (int j = 0; j < S; ++j) {
    const int e = lane + 32 * j;
    choice[j] = e < E ? score[j] + (bias ? bias[e] : 0.f) : -FLT_MAX;
  }
  if (cfg.num_groups > 1) {
    const int gsize = E / cfg.num_groups;
    float gscore[32];
    for (int g = 0; g < cfg.num_groups; ++g) {
      auto in_g = [&](int e) { return e / gsize == g; };
      const Best b1 = warp_best(lane_best(choice, E, lane, in_g));
      const Best b2 = warp_best(lane_best(choice, E, lane, [&](int e) { return in_g(e) && e != b1.i; }));
      gscore[g] = b1.v + b2.v;
    }
    uint32_t group_mask = 0;
    for (int r = 0; r < cfg.topk_groups; ++r) {
      int best = -1;
      for (int g = 0; g < cfg.num_groups; ++g)
        if (!(group_mask >> g & 1) && (best < 0 || gscore[g] > gscore[best])) best = g;
      group_mask |= 1u << best;
    }
#pragma unroll
    for (int j = 0; j < S; ++j) {
      const int e = lane + 32 * j;
      if (e < E && !(group_mask >> (e / gsize) & 1)) choice[j] = -FLT_MAX;
    }
  }
  float wsum = 0.f, my_w = 0.f;
  int my_id = 0;
  for (int r = 0; r < cfg.top_k; ++r) {
    const Best b = warp_best(lane_best(choice, E, lane, [](int) { return true; }));
    float w = 0.f;
#pragma unroll
    for (int j = 0; j < S; ++j)
      if (lane + 32 * j == b.i) {
        w = score[j];
        choice[j] = -FLT_MAX;
      }
    w = __shfl_sync(0xffffffffu, w, b.i & 31);
    wsum += w;
    if (lane == r) my_id = b.i, my_w = w;
  }
  if (cfg.renormalize) my_w /= (wsum + 1e-20f);
  *out_id = my_id;
  *out_w = my_w * cfg.scale;
}

}  // namespace topk
}  // namespace dispatch
