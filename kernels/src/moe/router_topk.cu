// Router top-k: one warp per token (topk_warp.cuh's topk_token), expert e held by lane e % 32 in slot e / 32.
#include "moe_ops.h"
#include "topk_warp.cuh"
#include "../common/check.h"
#include "../common/launch.h"
#include "../common/sm90.cuh"

namespace dispatch {
namespace {

constexpr int kMaxSlots = 16;  // E <= 512

// S slots per lane (topk_warp.cuh): E <= 32 S (4 for up to 128 experts, so the loops do not walk 16 slots of which
// 12 are empty).
template <int S>
__global__ void router_topk_kernel(const float* __restrict__ logits, const float* __restrict__ bias, int T,
                                   RouterConfig cfg, int32_t* __restrict__ ids, float* __restrict__ weights) {
  pdl_wait();  // launched with PDL (launch.h): the logits come from the kernel before
  pdl_trigger();
  const int lane = threadIdx.x & 31;
  const int t = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (t >= T) return;
  int id = 0;
  float w = 0.f;
  topk::topk_token<S>(logits + size_t(t) * cfg.num_experts, bias, cfg, lane, &id, &w);
  if (lane < cfg.top_k) {
    ids[size_t(t) * cfg.top_k + lane] = id;
    weights[size_t(t) * cfg.top_k + lane] = w;
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
