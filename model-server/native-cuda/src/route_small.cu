// Router top-k + align + permute in one launch for small steps (see fused_ops.h).
//
// The top-k is kernels/src/moe/topk_warp.cuh's (router_topk.cu's algorithm line for line), so
// ids and weights are the same values. The
// align writes the contiguous layout the grouped GEMMs read (counts [E], offsets [E+1] exclusive
// prefix sums, slot_row[s] in [offsets[e], offsets[e+1]) for the expert e of slot s); rows inside
// an expert are in slot order (deterministic, so every CTA computes the same slot_row).
// Every CTA recomputes the routing of the whole step (a few hundred logits); CTA 0 writes the
// routing outputs, and each CTA copies its share of the M token rows into Xp. A CTA loads the
// first pieces of the token rows it copies before the routing (which rows it copies does not
// depend on it), so the copy only waits for the stores; the top-k rounds use redux.sync.
#include <cfloat>
#include "check.h"
#include "fused_ops.h"
#include "pdl.h"
#include "moe/topk_warp.cuh"

namespace dcuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxTokens = kWarps;  // one warp per token: the routing never loops
constexpr int kMaxSlots = 16;       // E <= 512 (kernels for E <= 128 hold 4 slots per lane)
constexpr int kPrefetch = 2;        // X pieces per thread loaded before the routing is known
constexpr int kMaxExperts = 32 * kMaxSlots;
constexpr int kMaxCtas = 64;

template <int S>
__global__ void __launch_bounds__(kThreads, 1) route_small_kernel(const float* __restrict__ logits,
                                                               const float* __restrict__ bias, int T,
                                                               dispatch::RouterConfig cfg, const uint4* __restrict__ X,
                                                               int vecs, int32_t* __restrict__ ids,
                                                               float* __restrict__ weights, int32_t* __restrict__ counts,
                                                               int32_t* __restrict__ offsets,
                                                               int32_t* __restrict__ slot_row, uint4* __restrict__ Xp) {
  __shared__ int s_id[kRouteSmallMaxSlots];
  __shared__ int s_row[kRouteSmallMaxSlots];
  __shared__ int s_count[kMaxExperts];
  __shared__ int s_next[kMaxExperts];
  pdl_trigger();
  const int E = cfg.num_experts, k = cfg.top_k, M = T * k;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const bool writer = blockIdx.x == 0;
  for (int e = tid; e < E; e += kThreads) s_count[e] = 0;
  pdl_wait();
  // this CTA's slots: blockIdx.x, blockIdx.x + gridDim.x, ...; which token rows it copies is known
  // before the routing, so the first pieces are loaded now and land while the routing runs
  const int mine = (M - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x);
  uint4 pre[kPrefetch];
#pragma unroll
  for (int u = 0; u < kPrefetch; ++u) {
    const int i = tid + u * kThreads;
    if (i < mine * vecs) {
      const int s = int(blockIdx.x) + (i / vecs) * int(gridDim.x);
      pre[u] = X[size_t(s / k) * vecs + i % vecs];
    }
  }
  if (warp < T) {
    int id;
    float w;
    dispatch::topk::topk_token<S>(logits + size_t(warp) * E, bias, cfg, lane, &id, &w);
    if (lane < k) {
      s_id[warp * k + lane] = id;
      if (writer) ids[size_t(warp) * k + lane] = id, weights[size_t(warp) * k + lane] = w;
    }
  }
  __syncthreads();
  for (int s = tid; s < M; s += kThreads) atomicAdd(&s_count[s_id[s]], 1);
  __syncthreads();
  if (warp == 0) {
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
  __syncthreads();
#pragma unroll
  for (int u = 0; u < kPrefetch; ++u) {
    const int i = tid + u * kThreads;
    if (i < mine * vecs) {
      const int s = int(blockIdx.x) + (i / vecs) * int(gridDim.x);
      Xp[size_t(s_row[s]) * vecs + i % vecs] = pre[u];
    }
  }
  for (int i = tid + kPrefetch * kThreads; i < mine * vecs; i += kThreads) {
    const int s = int(blockIdx.x) + (i / vecs) * int(gridDim.x);
    const int v = i % vecs;
    Xp[size_t(s_row[s]) * vecs + v] = X[size_t(s / k) * vecs + v];
  }
}

}  // namespace

bool route_small_supported(int T, const dispatch::RouterConfig& cfg, int H) {
  return T >= 1 && T <= kMaxTokens && H % 8 == 0 && cfg.num_experts >= 1 && cfg.num_experts <= kMaxExperts &&
         cfg.top_k >= 1 && cfg.top_k <= 32 && cfg.top_k <= cfg.num_experts &&
         T * cfg.top_k <= kRouteSmallMaxSlots && cfg.num_groups >= 1 && cfg.num_groups <= 32 &&
         cfg.num_experts % cfg.num_groups == 0 && cfg.topk_groups >= 1 && cfg.topk_groups <= cfg.num_groups &&
         (cfg.num_groups == 1 || cfg.num_experts / cfg.num_groups >= 2);
}

void route_small(const float* logits, const float* bias, int T, const dispatch::RouterConfig& cfg, const bf16* X,
                 int H, int32_t* ids, float* weights, int32_t* counts, int32_t* offsets, int32_t* slot_row, bf16* Xp,
                 cudaStream_t s) {
  DC_CHECK(route_small_supported(T, cfg, H), "route_small: step or router outside the fused kernel's limits");
  const int M = T * cfg.top_k;
  const int grid = M < kMaxCtas ? M : kMaxCtas;
  auto kernel = cfg.num_experts <= 128 ? route_small_kernel<4> : route_small_kernel<kMaxSlots>;
  launch_k(kernel, dim3(grid), dim3(kThreads), 0, s, logits, bias, T, cfg, reinterpret_cast<const uint4*>(X),
           H / 8, ids, weights, counts, offsets, slot_row, reinterpret_cast<uint4*>(Xp));
  DC_LAUNCHED();
}

}  // namespace dcuda
