// Permute (gather token rows into expert-grouped rows) and unpermute (router-weighted sum back).
#include <cuda_bf16.h>
#include "moe_ops.h"
#include "../common/check.h"
#include "../common/launch.h"
#include "../common/sm90.cuh"

namespace dispatch {
namespace {

constexpr int kAlignThreads = 1024;
constexpr int kMaxAlignExperts = 4096;

// One CTA: histogram in shared memory, exclusive scan, then each slot takes the next free row of
// its expert. Rows inside an expert come in no fixed order (the GEMMs don't care; unpermute reads
// slot_row, so results are still deterministic).
__global__ void __launch_bounds__(kAlignThreads) moe_align_kernel(const int32_t* __restrict__ ids, int M, int E,
                                                                  int cap, int32_t* __restrict__ counts,
                                                                  int32_t* __restrict__ offsets,
                                                                  int32_t* __restrict__ slot_row) {
  __shared__ int s_count[kMaxAlignExperts];
  __shared__ int s_next[kMaxAlignExperts];
  pdl_wait();  // launched with PDL (launch.h): the ids come from the kernel before
  pdl_trigger();
  for (int e = threadIdx.x; e < E; e += blockDim.x) s_count[e] = 0;
  __syncthreads();
  for (int s = threadIdx.x; s < M; s += blockDim.x) atomicAdd(&s_count[ids[s]], 1);
  __syncthreads();
  if (threadIdx.x < 32) {  // exclusive scan by one warp
    const int lane = threadIdx.x;
    int running = 0;
    for (int base = 0; base < E; base += 32) {
      const int e = base + lane;
      const int c = e < E ? s_count[e] : 0;
      int v = c;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const int u = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += u;
      }
      if (e < E) {
        s_next[e] = cap > 0 ? e * cap : running + v - c;
        counts[e] = c;
        if (offsets) offsets[e] = running + v - c;
      }
      running += __shfl_sync(0xffffffffu, v, 31);
    }
    if (lane == 0 && offsets) offsets[E] = running;
  }
  __syncthreads();
  for (int s = threadIdx.x; s < M; s += blockDim.x) slot_row[s] = atomicAdd(&s_next[ids[s]], 1);
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

void sm90_i32_moe_align(const int32_t* ids, int M, int E, int cap, int32_t* counts, int32_t* offsets,
                        int32_t* slot_row, int32_t* /*workspace*/, cudaStream_t stream) {
  DK_CHECK(E > 0 && E <= kMaxAlignExperts, "E must be in [1, 4096]");
  DK_CHECK(cap > 0 || offsets != nullptr, "the contiguous layout needs offsets");
  launch_pdl(moe_align_kernel, dim3(1), dim3(kAlignThreads), 0, stream, ids, M, E, cap, counts, offsets, slot_row);
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
