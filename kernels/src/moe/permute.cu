// Permute (gather token rows into expert-grouped rows) and unpermute (router-weighted sum back).
#include <algorithm>
#include <cstdlib>
#include <cuda_bf16.h>
#include "moe_ops.h"
#include "../common/check.h"
#include "../common/cluster.cuh"
#include "../common/launch.h"
#include "../common/sm90.cuh"

namespace dispatch {
namespace {

constexpr int kAlignWarps = 32;
constexpr int kMaxAlignExperts = 4096;
constexpr int kAlignSmem = 160 * 1024;  // the per-warp table's budget: 32 warps up to 1,204 experts, 8 at 4,096
constexpr int kAlignMaxCluster = 8;     // portable cluster size
constexpr int kAlignSlotsPerCta = 8192; // the rule: one CTA per 8,192 slots, up to the cluster's 8

// Stable: the slots are cut into contiguous segments, one per warp of the cluster in (CTA rank, warp) order, so the
// rows of an expert follow its slots' order (slot s before slot s' < s never), and a layout depends on the routing
// alone. The session 22 swapped tails made that matter: an expert's last rows past its whole 128-row tiles run as a
// swapped MMA, whose bits differ from the whole tile's, so which token lands in the tail must not depend on the
// order in which shared-memory atomics happened to land (the kernel before session 23 assigned rows with them).
// Pass 1: each warp counts its segment's experts into its row of its CTA's table (peers found with match.any, one
// add per expert and step: no atomics); per expert an exclusive sum over the CTA's warps and the CTA's total; with
// more than one CTA (a thread-block cluster: gridDim.x CTAs, <= 8), a cluster barrier, then each CTA reads the
// totals of the CTAs before it and after it through distributed shared memory, adds the earlier ones into its
// warps' rows and arrives on a second barrier, which it waits on only before it exits (no CTA's table may go
// while another still reads it). Every CTA then scans the experts' totals the same way (the experts' first rows:
// e * cap, or the exclusive scan of the counts); rank 0 writes counts / offsets. Pass 2: each warp walks its
// segment again and gives slot s the row first[e] + the rows of e in earlier warps and CTAs + the earlier slots of
// e in its own segment. One CTA (session 23) measured 56.5-58.8 us per 65,536 slots in the model's prefill, against
// 27.5 for the unstable atomic version; one ballot per bit of the expert index instead of match.any measured
// 72.5 (session 24) and was removed. kBatch: ids in flight per lane (16 spills 20 bytes, as run).
template <int kBatch>
__global__ void __launch_bounds__(kAlignWarps * 32) moe_align_kernel(const int32_t* __restrict__ ids, int M, int E,
                                                                     int cap, int32_t* __restrict__ counts,
                                                                     int32_t* __restrict__ offsets,
                                                                     int32_t* __restrict__ slot_row) {
  extern __shared__ int s_align[];  // [W][E]: warp w's count of expert e, then the rows of e before its segment
  int* s_first = s_align + (blockDim.x >> 5) * E;  // [E]: expert e's total, then its first row
  int* s_cta = s_first + E;                        // [E]: this CTA's total of expert e (read by the cluster)
  pdl_wait();  // launched with PDL (launch.h): the ids come from the kernel before
  pdl_trigger();
  const int W = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int C = gridDim.x, rank = C > 1 ? int(cluster::rank()) : 0;
  for (int i = threadIdx.x; i < W * E; i += blockDim.x) s_align[i] = 0;
  __syncthreads();
  const int gw = rank * W + warp, seg = (M + C * W - 1) / (C * W);
  const int s0 = int(min(long(M), long(gw) * seg)), s1 = min(M, s0 + seg);
  int* mine = s_align + warp * E;
  // one pass over the warp's segment: f(e, peers, s) for each lane, in slot order (peers: the lanes whose expert
  // equals this lane's; e = -1: no slot)
  auto walk = [&](auto&& f) {
    for (int b = s0; b < s1; b += 32 * kBatch) {
      int e[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int s = b + 32 * u + lane;
        e[u] = s < s1 ? ids[s] : -1;
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) f(e[u], __match_any_sync(0xffffffffu, e[u]), b + 32 * u + lane);
    }
  };
  walk([&](int e, unsigned peers, int) {
    if (e >= 0 && lane == __ffs(peers) - 1) mine[e] += __popc(peers);
  });
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {  // per expert: exclusive over the warps
    int run = 0;
    for (int w = 0; w < W; ++w) {
      const int c = s_align[w * E + e];
      s_align[w * E + e] = run;
      run += c;
    }
    s_first[e] = run;
    s_cta[e] = run;
  }
  if (C > 1) {
    cluster::sync();  // every CTA's s_cta written
    const uint32_t base = sm90::smem_addr(s_cta);
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
      int before = 0, total = 0;
      for (int c = 0; c < C; ++c) {  // in rank order: the same sum in every CTA
        const int n = c == rank ? s_first[e] : cluster::load_s32(cluster::map(base + 4u * e, c));
        if (c < rank) before += n;
        total += n;
      }
      if (before)
        for (int w = 0; w < W; ++w) s_align[w * E + e] += before;
      s_first[e] = total;
    }
    cluster::arrive();  // done reading the others' tables; waited on before this CTA exits
  }
  __syncthreads();
  if (warp == 0) {  // exclusive scan of the counts by one warp
    int running = 0;
    for (int base = 0; base < E; base += 32) {
      const int e = base + lane;
      const int c = e < E ? s_first[e] : 0;
      int v = c;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const int u = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += u;
      }
      if (e < E) {
        s_first[e] = cap > 0 ? e * cap : running + v - c;
        if (rank == 0) {
          counts[e] = c;
          if (offsets) offsets[e] = running + v - c;
        }
      }
      running += __shfl_sync(0xffffffffu, v, 31);
    }
    if (lane == 0 && rank == 0 && offsets) offsets[E] = running;
  }
  __syncthreads();
  walk([&](int e, unsigned peers, int s) {
    const int leader = __ffs(peers) - 1;
    int base = 0;
    if (e >= 0 && lane == leader) {
      base = s_first[e] + mine[e];
      mine[e] += __popc(peers);
    }
    base = __shfl_sync(0xffffffffu, base, leader);
    if (e >= 0) slot_row[s] = base + __popc(peers & ((1u << lane) - 1u));
  });
  if (C > 1) cluster::wait();
}

__global__ void permute_kernel(const uint4* __restrict__ X, const int32_t* __restrict__ slot_row, int k, int vecs,
                               uint4* __restrict__ Xp) {
  pdl_wait();  // launched with PDL (launch.h): slot_row comes from the kernel before
  pdl_trigger();
  const int slot = blockIdx.x;
  const uint4* src = X + size_t(slot / k) * vecs;
  uint4* dst = Xp + size_t(slot_row[slot]) * vecs;
  for (int v = threadIdx.x; v < vecs; v += blockDim.x) dst[v] = src[v];
}

__global__ void unpermute_kernel(const uint4* __restrict__ Y, const int32_t* __restrict__ slot_row,
                                 const float* __restrict__ weights, int k, int vecs, uint4* __restrict__ out) {
  const int t = blockIdx.x;
  for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < k; ++j) {
      const float w = weights[size_t(t) * k + j];
      const uint4 y = Y[size_t(slot_row[size_t(t) * k + j]) * vecs + v];
      const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&y);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 f = __bfloat1622float2(p[i]);
        acc[2 * i] += w * f.x;
        acc[2 * i + 1] += w * f.y;
      }
    }
    uint4 o;
    __nv_bfloat162* q = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
    for (int i = 0; i < 4; ++i) q[i] = __floats2bfloat162_rn(acc[2 * i], acc[2 * i + 1]);
    out[size_t(t) * vecs + v] = o;
  }
}

}  // namespace

// CTAs of the cluster: DK_ALIGN_CLUSTER=1-8 (read per launch, for tests and A/B runs), else one per 8,192 slots,
// up to 8 (decode steps' few slots keep one CTA and its single launch without a cluster).
static int align_ctas(int M) {
  const char* v = std::getenv("DK_ALIGN_CLUSTER");
  if (v && v[0] >= '1' && v[0] <= '8' && v[1] == '\0') return v[0] - '0';
  return std::max(1, std::min(kAlignMaxCluster, (M + kAlignSlotsPerCta - 1) / kAlignSlotsPerCta));
}

void sm90_i32_moe_align(const int32_t* ids, int M, int E, int cap, int32_t* counts, int32_t* offsets,
                        int32_t* slot_row, int32_t* /*workspace*/, cudaStream_t stream) {
  DK_CHECK(E > 0 && E <= kMaxAlignExperts, "E must be in [1, 4096]");
  DK_CHECK(M >= 0, "M must not be negative");
  DK_CHECK(cap > 0 || offsets != nullptr, "the contiguous layout needs offsets");
  const int warps = std::min(kAlignWarps, kAlignSmem / (4 * E) - 2);  // - 2: room for s_first and s_cta
  const size_t smem = size_t(warps + 2) * E * 4;
  const int ctas = align_ctas(M);
  constexpr auto kernel = moe_align_kernel<16>;
  opt_in_smem_once<kernel>(kAlignSmem);
  launch_pdl_cluster(kernel, dim3(ctas), dim3(warps * 32), smem, ctas, stream, ids, M, E, cap, counts, offsets,
                     slot_row);
  DK_LAUNCHED();
}

void sm90_bf16_moe_permute(const void* X, const int32_t* slot_row, int T, int k, int H, void* Xp,
                           cudaStream_t stream) {
  DK_CHECK(H % 8 == 0, "H must be a multiple of 8");
  if (T == 0) return;
  launch_pdl(permute_kernel, dim3(T * k), dim3(128), 0, stream, static_cast<const uint4*>(X), slot_row, k, H / 8,
             static_cast<uint4*>(Xp));
  DK_LAUNCHED();
}

void sm90_bf16_moe_unpermute(const void* Y, const int32_t* slot_row, const float* weights, int T, int k, int H,
                             void* out, cudaStream_t stream) {
  DK_CHECK(H % 8 == 0, "H must be a multiple of 8");
  if (T == 0) return;
  unpermute_kernel<<<T, 128, 0, stream>>>(static_cast<const uint4*>(Y), slot_row, weights, k, H / 8,
                                          static_cast<uint4*>(out));
  DK_LAUNCHED();
}

}  // namespace dispatch
