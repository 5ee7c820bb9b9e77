// Router top-k: one warp per token, expert e held by lane e % 32 in slot e / 32.
#include <cfloat>
#include "moe_ops.h"
#include "../common/check.h"
#include "../common/launch.h"
#include "../common/sm90.cuh"

namespace dispatch {
namespace {

constexpr int kMaxSlots = 16;  // E <= 512

struct Best {
  float v;
  int i;
};

__device__ __forceinline__ Best warp_best(Best b) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, b.v, d);
    const int i = __shfl_xor_sync(0xffffffffu, b.i, d);
    if (v > b.v || (v == b.v && i < b.i)) b = {v, i};
  }
  return b;
}

// Best (value, index) among this lane's S slots where `keep` holds; -inf/INT_MAX when none.
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

// S slots per lane: E <= 32 S (4 for up to 128 experts, so the loops do not walk 16 slots of which 12 are empty).
template <int S>
__global__ void router_topk_kernel(const float* __restrict__ logits, const float* __restrict__ bias, int T,
                                   RouterConfig cfg, int32_t* __restrict__ ids, float* __restrict__ weights) {
  pdl_wait();  // launched with PDL (launch.h): the logits come from the kernel before
  pdl_trigger();
  const int lane = threadIdx.x & 31;
  const int t = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (t >= T) return;
  const int E = cfg.num_experts;
  const float* row = logits + size_t(t) * E;

  float score[S], choice[S];
  float mx = -FLT_MAX;
#pragma unroll
  for (int j = 0; j < S; ++j) {
    const int e = lane + 32 * j;
    score[j] = e < E ? row[e] : -FLT_MAX;
    mx = fmaxf(mx, score[j]);
  }
  if (cfg.scoring == Scoring::kSoftmax) {
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

  // Grouped top-k: keep the topk_groups groups whose two best choices sum highest.
  uint32_t group_mask = 0xffffffffu;
  if (cfg.num_groups > 1) {
    const int gsize = E / cfg.num_groups;
    float gscore[32];
    for (int g = 0; g < cfg.num_groups; ++g) {
      auto in_g = [&](int e) { return e / gsize == g; };
      const Best b1 = warp_best(lane_best(choice, E, lane, in_g));
      const Best b2 = warp_best(lane_best(choice, E, lane, [&](int e) { return in_g(e) && e != b1.i; }));
      gscore[g] = b1.v + b2.v;
    }
    group_mask = 0;
    for (int r = 0; r < cfg.topk_groups; ++r) {
      int best = -1;
      for (int g = 0; g < cfg.num_groups; ++g)
        if (!(group_mask >> g & 1) && (best < 0 || gscore[g] > gscore[best])) best = g;
      group_mask |= 1u << best;
    }
    const int gs = gsize;
#pragma unroll
    for (int j = 0; j < S; ++j)
      if (!(group_mask >> ((lane + 32 * j) / gs) & 1)) choice[j] = -FLT_MAX;
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
  if (lane < cfg.top_k) {
    float w = my_w;
    if (cfg.renormalize) w /= (wsum + 1e-20f);
    ids[size_t(t) * cfg.top_k + lane] = my_id;
    weights[size_t(t) * cfg.top_k + lane] = w * cfg.scale;
  }
}

}  // namespace

void sm90_f32_router_topk(const float* logits, const float* bias, int T, const RouterConfig& cfg, int32_t* ids,
                          float* weights, cudaStream_t stream) {
  DK_CHECK(cfg.num_experts > 0 && cfg.num_experts <= 32 * kMaxSlots, "num_experts must be in [1, 512]");
  DK_CHECK(cfg.top_k > 0 && cfg.top_k <= 32 && cfg.top_k <= cfg.num_experts, "top_k must be in [1, min(32, E)]");
  DK_CHECK(cfg.num_groups >= 1 && cfg.num_groups <= 32 && cfg.num_experts % cfg.num_groups == 0,
           "num_groups must divide E and be <= 32");
  DK_CHECK(cfg.topk_groups >= 1 && cfg.topk_groups <= cfg.num_groups, "topk_groups must be in [1, num_groups]");
  DK_CHECK(cfg.num_groups == 1 || cfg.num_experts / cfg.num_groups >= 2, "groups need >= 2 experts");
  if (T == 0) return;
  const int warps = 8;
  auto kernel = cfg.num_experts <= 128 ? router_topk_kernel<4> : router_topk_kernel<kMaxSlots>;
  launch_pdl(kernel, dim3((T + warps - 1) / warps), dim3(warps * 32), 0, stream, logits, bias, T, cfg, ids,
             weights);
  DK_LAUNCHED();
}

}  // namespace dispatch
