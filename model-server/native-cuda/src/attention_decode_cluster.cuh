// The cluster path's merge (attention_decode.cu): the split CTAs of one (token, KV head) form a
// thread-block cluster and merge their parts through distributed shared memory.
#pragma once
#include <cooperative_groups.h>
#include <cmath>
#include "attention_decode_core.cuh"

namespace dcuda {
namespace decode_attn {

// Every CTA of the (token, KV head) left its part in its shared memory, O relative to its M over
// slab 0 of s_o [G][D] and (M, L) per head in s_cml. The items (head g, 8 dims) are dealt
// round-robin to the cluster's CTAs; each reads its items' parts from the `active` CTAs that hold
// keys through distributed shared memory and writes the output:
//   M = max_s M_s, w_s = 2^(M_s - M), out = sum_s w_s O_s / sum_s w_s L_s (sums in split order).
// The first barrier makes every part visible cluster-wide, the second keeps each CTA's shared
// memory alive until the cluster's reads of it are done.
template <int W>
__device__ __forceinline__ void cluster_merge(const AttentionArgs& a, int G, int active, float* s_o, float2* s_cml,
                                              int t, int kvh, int rank) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int nranks = int(cluster.num_blocks());
  const int D = a.D, per_row = D / 8, items = G * per_row;
  cluster.sync();
  for (int it = threadIdx.x * nranks + rank; it < items; it += W * 32 * nranks) {
    const int g = it / per_row, d = (it % per_row) * 8;
    float2 ml[kMaxCluster];
    float4 xa[kMaxCluster], xb[kMaxCluster];
#pragma unroll
    for (int u = 0; u < kMaxCluster; ++u) {
      if (u < active) {  // all loads in flight together
        ml[u] = cluster.map_shared_rank(s_cml, u)[g];
        const float4* src = reinterpret_cast<const float4*>(cluster.map_shared_rank(s_o, u) + size_t(g) * D + d);
        xa[u] = src[0], xb[u] = src[1];
      }
    }
    float M = -INFINITY;
#pragma unroll
    for (int u = 0; u < kMaxCluster; ++u)
      if (u < active) M = fmaxf(M, ml[u].x);
    float L = 0.f, acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int u = 0; u < kMaxCluster; ++u) {
      if (u < active) {
        const float w = ml[u].x == -INFINITY ? 0.f : exp2f(ml[u].x - M);  // split 0 holds keys: M finite
        L += ml[u].y * w;
        add_weighted8(acc, xa[u], xb[u], w);
      }
    }
    store_out8(a, D, G, t, kvh, g, d, acc, 1.f / L);
  }
  cluster.sync();
}

}  // namespace decode_attn
}  // namespace dcuda
