// Kernels of the NCCL backend's token-sized low-latency exchange (see ep_ll_tokens.cuh).
#include <cuda_bf16.h>
#include "check.h"
#include "ep_device.cuh"
#include "ep_ll_tokens.cuh"

namespace dispatch::ep {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ const uint4* vecRow(const void* base, long row, int H) {
  return reinterpret_cast<const uint4*>(base) + row * (H / 8);
}
__device__ __forceinline__ uint4* vecRow(void* base, long row, int H) { return reinterpret_cast<uint4*>(base) + row * (H / 8); }

// grid N*maxT: block per (source, position).
__global__ void __launch_bounds__(kThreads) expandKernel(const void* recv_x, const int* recv_le, const int* recv_n, int maxT,
                                                          int k, int H, int Le, void* xs, int* counts, int* row_src) {
  __shared__ int rows[kMaxK];
  const int src = blockIdx.x / maxT, i = blockIdx.x % maxT;
  if (i >= recv_n[src]) return;
  const int cap = gridDim.x;  // N * maxT
  const long tok = long(src) * maxT + i;
  if (threadIdx.x < k) {
    const int le = recv_le[tok * k + threadIdx.x];
    int r = le >= 0 && le < Le ? atomicAdd(counts + le, 1) : -1;
    if (r >= cap) r = -1;  // only with a repeated expert in one token (routers never emit it)
    if (r >= 0) row_src[le * cap + r] = int(tok * k + threadIdx.x);
    rows[threadIdx.x] = r >= 0 ? le * cap + r : -1;
  }
  __syncthreads();
  const uint4* s = vecRow(recv_x, tok, H);
  for (int j = 0; j < k; ++j) {
    if (rows[j] < 0) continue;
    uint4* d = vecRow(xs, rows[j], H);
    for (int v = threadIdx.x; v < H / 8; v += blockDim.x) d[v] = s[v];
  }
}

__global__ void clampKernel(int* counts, int Le, int cap) {
  for (int e = threadIdx.x; e < Le; e += blockDim.x)
    if (counts[e] > cap) counts[e] = cap;
}

// grid (Le, 4): warps stride over expert le's rows.
__global__ void __launch_bounds__(kThreads) returnKernel(const void* ys, const int* counts, const int* row_src, int cap, int H,
                                                          void* ret) {
  const int le = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n = counts[le];
  for (int i = blockIdx.y * kWarps + warp; i < n; i += gridDim.y * kWarps) {
    const uint4* s = vecRow(ys, long(le) * cap + i, H);
    uint4* d = vecRow(ret, row_src[le * cap + i], H);
    for (int v = lane; v < H / 8; v += 32) d[v] = s[v];
  }
}

// grid T: block per token.
__global__ void __launch_bounds__(kThreads) reduceKernel(const void* back, const int32_t* ids, const float* w, const int* slot_rank,
                                                          const int* pos, int N, int maxT, int k, int H, void* out) {
  __shared__ int keys[kMaxK];
  __shared__ int order[kMaxK];
  __shared__ long rows[kMaxK];
  const int t = blockIdx.x;
  if (threadIdx.x < k) {
    const int d = slot_rank[t * k + threadIdx.x];
    keys[threadIdx.x] = d >= 0 ? ids[t * k + threadIdx.x] : -1;
    rows[threadIdx.x] = d >= 0 ? (long(d) * maxT + pos[t * N + d]) * k + threadIdx.x : -1;
  }
  __syncthreads();
  const int n = sortSlots(keys, k, order);
  for (int v = threadIdx.x; v < H / 8; v += blockDim.x) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int q = 0; q < n; ++q) {
      const int j = order[q];
      const uint4 y = vecRow(back, rows[j], H)[v];
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&y);
      const float wj = w[t * k + j];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const float2 f = __bfloat1622float2(h[c]);
        acc[2 * c] += wj * f.x;
        acc[2 * c + 1] += wj * f.y;
      }
    }
    uint4 r;
    __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
    for (int c = 0; c < 4; ++c) o[c] = __floats2bfloat162_rn(acc[2 * c], acc[2 * c + 1]);
    vecRow(out, t, H)[v] = r;
  }
}

}  // namespace

void launchLlExpandTokens(const void* recv_x, const int* recv_le, const int* recv_n, int N, int maxT, int k, int H, int Le,
                          void* xs, int* counts, int* row_src, cudaStream_t s) {
  EP_CHECK(H % 8 == 0 && k >= 1 && k <= kMaxK, "H must be a multiple of 8 and 1 <= k <= 32");
  if (Le == 0) return;
  EP_CUDA(cudaMemsetAsync(counts, 0, sizeof(int) * Le, s));
  expandKernel<<<N * maxT, kThreads, 0, s>>>(recv_x, recv_le, recv_n, maxT, k, H, Le, xs, counts, row_src);
  EP_CUDA(cudaGetLastError());
  clampKernel<<<1, 256, 0, s>>>(counts, Le, N * maxT);
  EP_CUDA(cudaGetLastError());
}

void launchLlReturnTokens(const void* ys, const int* counts, const int* row_src, int N, int maxT, int k, int H, int Le, void* ret,
                          cudaStream_t s) {
  (void)k;
  if (Le == 0) return;
  returnKernel<<<dim3(Le, 4), kThreads, 0, s>>>(ys, counts, row_src, N * maxT, H, ret);
  EP_CUDA(cudaGetLastError());
}

void launchLlReduceTokens(const void* back, const int32_t* ids, const float* w, const int* slot_rank, const int* pos, int T,
                          int N, int maxT, int k, int H, void* out, cudaStream_t s) {
  if (T == 0) return;
  reduceKernel<<<T, kThreads, 0, s>>>(back, ids, w, slot_rank, pos, N, maxT, k, H, out);
  EP_CUDA(cudaGetLastError());
}

}  // namespace dispatch::ep
