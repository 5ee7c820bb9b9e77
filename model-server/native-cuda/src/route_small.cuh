// Device parts of the small-step routing (route_small.cu), shared with norm_router's folded
// routing (fused_ops.cu): the top-k of one token by one warp (kernels/src/moe/router_topk.cu's
// algorithm line for line) and the align of the step's slots by one warp.
#pragma once
#include <cfloat>
#include <cstdint>
#include "moe/moe_ops.h"

namespace dcuda {
namespace route_detail {

constexpr int kLaneSlots = 16;                  // E <= 512 (kernels for E <= 128 hold 4 slots per lane)
constexpr int kMaxExperts = 32 * kLaneSlots;

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
__device__ void topk_token(const float* __restrict__ row, const float* __restrict__ bias,
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

// Warp 0 of a CTA, after s_count [E] holds each expert's slots among s_id [M]: the contiguous
// layout (counts, offsets, slot_row as sm90_i32_moe_align with cap 0; an expert's rows in slot
// order), into s_row [M] (and the outputs when writer). s_next [E] is scratch.
__device__ __forceinline__ void align_slots_warp(const int* s_id, const int* s_count, int* s_next, int* s_row, int E,
                                                 int M, int lane, bool writer, int32_t* __restrict__ counts,
                                                 int32_t* __restrict__ offsets, int32_t* __restrict__ slot_row) {
  // exclusive scan of the counts (lane l sums experts [l per, (l + 1) per), one warp scan of
  // those sums), then each slot's row = its expert's offset + the number of earlier slots with
  // the same expert (32 slots per round, matched within the warp)
  const int per = (E + 31) / 32, e0 = lane * per;
  int sum = 0;
  for (int q = 0; q < per; ++q)
    if (e0 + q < E) sum += s_count[e0 + q];
  int v = sum;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int u = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += u;
  }
  int at = v - sum;
  for (int q = 0; q < per; ++q) {
    const int e = e0 + q;
    if (e >= E) break;
    const int c = s_count[e];
    s_next[e] = at;
    if (writer) counts[e] = c, offsets[e] = at;
    at += c;
  }
  if (lane == 31 && writer) offsets[E] = v;
  __syncwarp();
  const unsigned below = (1u << lane) - 1u;
  for (int base = 0; base < M; base += 32) {
    const int s = base + lane;
    const int e = s < M ? s_id[s] : -1 - lane;  // past M: a group of one
    const unsigned same = __match_any_sync(0xffffffffu, e);
    int row = 0;
    if (s < M) row = s_next[e] + __popc(same & below);
    __syncwarp();
    if (s < M) {
      s_row[s] = row;
      if (writer) slot_row[s] = row;
      if ((same & below) == 0) s_next[e] += __popc(same);  // the group's first lane
    }
    __syncwarp();
  }
}

// route_small's whole work by one CTA (any multiple of 32 threads, at least T warps), for
// norm_router's folded routing at T <= kFoldMaxTokens: logits [T, E] fp32 and X [T, vecs] (bf16
// rows as uint4) were written by other CTAs of the same launch, so they are read through L2
// (__ldcg) after the caller's fence. Same outputs as route_small: ids/weights [T, k], counts [E],
// offsets [E+1], slot_row [M], Xp [M, vecs].
constexpr int kFoldMaxTokens = 2;
constexpr int kFoldMaxSlots = kFoldMaxTokens * 32;  // top_k <= 32
template <int S>
__device__ void route_one_cta(const float* logits, const float* __restrict__ bias, int T,
                              const dispatch::RouterConfig& cfg, const uint4* X, int vecs, int32_t* __restrict__ ids,
                              float* __restrict__ weights, int32_t* __restrict__ counts, int32_t* __restrict__ offsets,
                              int32_t* __restrict__ slot_row, uint4* __restrict__ Xp) {
  __shared__ float s_logits[kFoldMaxTokens * kMaxExperts];
  __shared__ int s_id[kFoldMaxSlots], s_row[kFoldMaxSlots];
  __shared__ int s_count[kMaxExperts], s_next[kMaxExperts];
  const int E = cfg.num_experts, k = cfg.top_k, M = T * k;
  const int tid = threadIdx.x, nt = blockDim.x, warp = tid >> 5, lane = tid & 31;
  for (int i = tid; i < T * E; i += nt) s_logits[i] = __ldcg(logits + i);
  for (int e = tid; e < E; e += nt) s_count[e] = 0;
  __syncthreads();
  if (warp < T) {
    int id;
    float w;
    topk_token<S>(s_logits + warp * E, bias, cfg, lane, &id, &w);
    if (lane < k) {
      s_id[warp * k + lane] = id;
      ids[warp * k + lane] = id, weights[warp * k + lane] = w;
    }
  }
  __syncthreads();
  for (int s = tid; s < M; s += nt) atomicAdd(&s_count[s_id[s]], 1);
  __syncthreads();
  if (warp == 0) align_slots_warp(s_id, s_count, s_next, s_row, E, M, lane, true, counts, offsets, slot_row);
  __syncthreads();
  for (int i = tid; i < M * vecs; i += nt) {
    const int s = i / vecs, v = i % vecs;
    Xp[size_t(s_row[s]) * vecs + v] = __ldcg(X + size_t(s / k) * vecs + v);
  }
}

}  // namespace route_detail
}  // namespace dcuda
