// Device kernels of native-ep (see ep_kernels.cuh). Row copies move 16-byte vectors (H % 8 == 0).
#include <cuda_bf16.h>
#include <cub/block/block_scan.cuh>
#include "check.h"
#include "ep_device.cuh"
#include "ep_kernels.cuh"

namespace dispatch::ep {
namespace {

__device__ __forceinline__ void copyRow(const void* src, void* dst, int H) {
  const uint4* s = reinterpret_cast<const uint4*>(src);
  uint4* d = reinterpret_cast<uint4*>(dst);
  for (int v = threadIdx.x; v < H / 8; v += blockDim.x) d[v] = s[v];
}

__device__ __forceinline__ const __nv_bfloat16* rowAt(const void* base, long row, int H) {
  return reinterpret_cast<const __nv_bfloat16*>(base) + row * H;
}

__global__ void layoutKernel(const int32_t* ids, int T, int k, int src, DevPlacement p, int* slot_rank, uint8_t* in_rank,
                             int* per_rank) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= T) return;
  for (int j = 0; j < k; ++j) {
    const int e = ids[t * k + j];
    if (e < 0 || e >= p.E) { slot_rank[t * k + j] = -1; continue; }
    const int n = p.num_rep[e];
    const int r = n == 1 ? p.rep[e * p.max_rep] : p.rep[e * p.max_rep + (src + t) % n];
    slot_rank[t * k + j] = r;
    if (!in_rank[t * p.N + r]) {  // one thread per token: no race on its own row
      in_rank[t * p.N + r] = 1;
      atomicAdd(per_rank + r, 1);
    }
  }
}

template <int BT>
__global__ void __launch_bounds__(BT) sendPosKernel(const uint8_t* in_rank, int T, int N, int* pos) {
  using Scan = cub::BlockScan<int, BT>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int carry;
  const int d = blockIdx.x;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < T; base += BT) {
    const int t = base + threadIdx.x;
    const int v = t < T ? in_rank[t * N + d] : 0;
    int excl, total;
    Scan(tmp).ExclusiveSum(v, excl, total);
    if (t < T) pos[t * N + d] = v ? carry + excl : -1;
    __syncthreads();
    if (threadIdx.x == 0) carry += total;
    __syncthreads();
  }
}

__global__ void htPackKernel(const void* x, const int32_t* ids, const float* w, const int* slot_rank, const int* pos,
                             const int* send_off, int k, int H, DevPlacement p, void* send_x, int* send_le, float* send_w) {
  const int t = blockIdx.x;
  for (int d = 0; d < p.N; ++d) {
    const int P = pos[t * p.N + d];
    if (P < 0) continue;
    const long row = send_off[d] + P;
    copyRow(rowAt(x, t, H), reinterpret_cast<__nv_bfloat16*>(send_x) + row * H, H);
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
      const int s = t * k + j;
      send_le[row * k + j] = slot_rank[s] == d ? p.local_index[d * p.E + ids[s]] : -1;
      if (send_w) send_w[row * k + j] = w[s];
    }
  }
}

__global__ void htCountKernel(const int* recv_le, int slots, int Le, int align, int* counts, int* offsets, int* next) {
  extern __shared__ int s_count[];
  for (int e = threadIdx.x; e < Le; e += blockDim.x) s_count[e] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < slots; i += blockDim.x) {
    const int le = recv_le[i];
    if (le >= 0 && le < Le) atomicAdd(s_count + le, 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // Le is small (experts of one rank): a serial scan is enough
    int at = 0;
    for (int e = 0; e < Le; ++e) {
      counts[e] = s_count[e];
      offsets[e] = at;
      next[e] = at;
      at += (s_count[e] + align - 1) / align * align;
    }
    offsets[Le] = at;
  }
}

__global__ void htScatterKernel(const void* recv_x, const int* recv_le, int k, int H, int* next, int* row_of, void* xs) {
  __shared__ int rows[kMaxK];
  const int r = blockIdx.x;
  if (threadIdx.x < k) {
    const int le = recv_le[r * k + threadIdx.x];
    rows[threadIdx.x] = le >= 0 ? atomicAdd(next + le, 1) : -1;
    row_of[r * k + threadIdx.x] = rows[threadIdx.x];
  }
  __syncthreads();
  for (int j = 0; j < k; ++j)
    if (rows[j] >= 0) copyRow(rowAt(recv_x, r, H), reinterpret_cast<__nv_bfloat16*>(xs) + long(rows[j]) * H, H);
}

__global__ void htReduceKernel(const void* ys, const int* row_of, const int* recv_le, const float* recv_w,
                               const int* local_to_global, int k, int H, void* partial) {
  __shared__ int keys[kMaxK];
  __shared__ int order[kMaxK];
  const int r = blockIdx.x;
  if (threadIdx.x < k) {
    const int le = recv_le[r * k + threadIdx.x];
    keys[threadIdx.x] = le >= 0 ? local_to_global[le] : -1;
  }
  __syncthreads();
  const int n = sortSlots(keys, k, order);
  for (int h = threadIdx.x; h < H; h += blockDim.x) {
    float acc = 0.f;
    for (int q = 0; q < n; ++q) {
      const int j = order[q];
      acc += recv_w[r * k + j] * __bfloat162float(rowAt(ys, row_of[r * k + j], H)[h]);
    }
    reinterpret_cast<__nv_bfloat16*>(partial)[long(r) * H + h] = __float2bfloat16(acc);
  }
}

__global__ void htSumKernel(const void* back, const int* pos, const int* back_off, int N, int H, void* out) {
  const int t = blockIdx.x;
  for (int h = threadIdx.x; h < H; h += blockDim.x) {
    float acc = 0.f;
    for (int d = 0; d < N; ++d) {
      const int P = pos[t * N + d];
      if (P >= 0) acc += __bfloat162float(rowAt(back, back_off[d] + P, H)[h]);
    }
    reinterpret_cast<__nv_bfloat16*>(out)[long(t) * H + h] = __float2bfloat16(acc);
  }
}

__global__ void llPackKernel(const void* x, const int32_t* ids, const int* slot_rank, int k, int H, int LeMax, int maxT,
                             DevPlacement p, void* send_x, int* send_count, int* slot_pos) {
  __shared__ int at[kMaxK];
  const int t = blockIdx.x;
  if (threadIdx.x < k) {
    const int s = t * k + threadIdx.x;
    const int d = slot_rank[s];
    const int le = d >= 0 ? p.local_index[d * p.E + ids[s]] : -1;
    int j = le >= 0 ? atomicAdd(send_count + d * LeMax + le, 1) : -1;
    if (j >= maxT) j = -1;  // only with a repeated expert in one token (routers never emit it)
    slot_pos[s] = j >= 0 ? le * maxT + j : -1;
    at[threadIdx.x] = j >= 0 ? (d * LeMax + le) * maxT + j : -1;
  }
  __syncthreads();
  for (int j = 0; j < k; ++j)
    if (at[j] >= 0) copyRow(rowAt(x, t, H), reinterpret_cast<__nv_bfloat16*>(send_x) + long(at[j]) * H, H);
}

__device__ __forceinline__ int srcPrefix(const int* recv_count, int s, int le, int LeMax) {
  int pre = 0;
  for (int q = 0; q < s; ++q) pre += recv_count[q * LeMax + le];
  return pre;
}

// grid (Le, N, maxT): one CTA per possible row.
__global__ void llCompactKernel(const void* recv_x, const int* recv_count, int N, int LeMax, int maxT, int H, void* xs,
                                int* counts) {
  const int le = blockIdx.x, s = blockIdx.y, j = blockIdx.z;
  const int cap = N * maxT;
  if (s == 0 && j == 0 && threadIdx.x == 0) counts[le] = srcPrefix(recv_count, N, le, LeMax);
  if (j >= recv_count[s * LeMax + le]) return;
  const int row = le * cap + srcPrefix(recv_count, s, le, LeMax) + j;
  copyRow(rowAt(recv_x, long(s * LeMax + le) * maxT + j, H), reinterpret_cast<__nv_bfloat16*>(xs) + long(row) * H, H);
}

__global__ void llScatterBackKernel(const void* ys, const int* recv_count, int N, int LeMax, int maxT, int H, void* back) {
  const int le = blockIdx.x, s = blockIdx.y, j = blockIdx.z;
  if (j >= recv_count[s * LeMax + le]) return;
  const int row = le * N * maxT + srcPrefix(recv_count, s, le, LeMax) + j;
  copyRow(rowAt(ys, row, H), reinterpret_cast<__nv_bfloat16*>(back) + (long(s * LeMax + le) * maxT + j) * H, H);
}

__global__ void llReduceKernel(const void* back, const int32_t* ids, const float* w, const int* slot_rank, const int* slot_pos,
                               int k, int H, int LeMax, int maxT, void* out) {
  __shared__ int keys[kMaxK];
  __shared__ int order[kMaxK];
  const int t = blockIdx.x;
  if (threadIdx.x < k) keys[threadIdx.x] = slot_pos[t * k + threadIdx.x] >= 0 ? ids[t * k + threadIdx.x] : -1;
  __syncthreads();
  const int n = sortSlots(keys, k, order);
  for (int h = threadIdx.x; h < H; h += blockDim.x) {
    float acc = 0.f;
    for (int q = 0; q < n; ++q) {
      const int s = t * k + order[q];
      const long row = long(slot_rank[s]) * LeMax * maxT + slot_pos[s];
      acc += w[s] * __bfloat162float(rowAt(back, row, H)[h]);
    }
    reinterpret_cast<__nv_bfloat16*>(out)[long(t) * H + h] = __float2bfloat16(acc);
  }
}

__global__ void scaleRowsKernel(const void* xs, void* ys, const int* begin, const int* count, int cap, const int* l2g,
                                const float* scale, int Le, int H, int max_rows) {
  for (int row = blockIdx.x; row < max_rows; row += gridDim.x) {
    int le = -1;
    for (int e = 0; e < Le; ++e) {
      const int b = cap > 0 ? e * cap : begin[e];
      const int n = cap > 0 ? count[e] : begin[e + 1] - begin[e];
      if (row >= b && row < b + n) { le = e; break; }
    }
    if (le < 0) continue;
    const float sc = scale[l2g[le]];
    for (int h = threadIdx.x; h < H; h += blockDim.x)
      reinterpret_cast<__nv_bfloat16*>(ys)[long(row) * H + h] = __float2bfloat16(sc * __bfloat162float(rowAt(xs, row, H)[h]));
  }
}

}  // namespace

void launchLayout(const int32_t* ids, int T, int k, int src, DevPlacement p, int* slot_rank, uint8_t* in_rank, int* per_rank,
                  cudaStream_t s) {
  EP_CUDA(cudaMemsetAsync(in_rank, 0, size_t(T) * p.N, s));
  EP_CUDA(cudaMemsetAsync(per_rank, 0, sizeof(int) * p.N, s));
  if (T == 0) return;
  layoutKernel<<<(T + 255) / 256, 256, 0, s>>>(ids, T, k, src, p, slot_rank, in_rank, per_rank);
  EP_CUDA(cudaGetLastError());
}

void launchSendPositions(const uint8_t* in_rank, int T, int N, int* pos, cudaStream_t s) {
  if (T == 0) return;
  sendPosKernel<1024><<<N, 1024, 0, s>>>(in_rank, T, N, pos);
  EP_CUDA(cudaGetLastError());
}

void launchHtPack(const void* x, const int32_t* ids, const float* w, const int* slot_rank, const int* pos, const int* send_off,
                  int T, int k, int H, DevPlacement p, void* send_x, int* send_le, float* send_w, cudaStream_t s) {
  EP_CHECK(H % 8 == 0 && k <= kMaxK, "H must be a multiple of 8 and k <= 32");
  if (T == 0) return;
  htPackKernel<<<T, 128, 0, s>>>(x, ids, w, slot_rank, pos, send_off, k, H, p, send_x, send_le, send_w);
  EP_CUDA(cudaGetLastError());
}

void launchHtExpand(const void* recv_x, const int* recv_le, int R, int k, int H, int Le, int align, int* counts, int* offsets,
                    int* row_of, int* workspace, void* xs, cudaStream_t s) {
  EP_CHECK(Le <= 12 * 1024, "too many local experts for the shared-memory histogram");
  htCountKernel<<<1, 1024, sizeof(int) * (Le > 0 ? Le : 1), s>>>(recv_le, R * k, Le, align, counts, offsets, workspace);
  EP_CUDA(cudaGetLastError());
  if (R == 0) return;
  htScatterKernel<<<R, 128, 0, s>>>(recv_x, recv_le, k, H, workspace, row_of, xs);
  EP_CUDA(cudaGetLastError());
}

void launchHtReduce(const void* ys, const int* row_of, const int* recv_le, const float* recv_w, const int* l2g, int R, int k,
                    int H, void* partial, cudaStream_t s) {
  if (R == 0) return;
  htReduceKernel<<<R, 256, 0, s>>>(ys, row_of, recv_le, recv_w, l2g, k, H, partial);
  EP_CUDA(cudaGetLastError());
}

void launchHtSum(const void* back, const int* pos, const int* back_off, int T, int N, int H, void* out, cudaStream_t s) {
  if (T == 0) return;
  htSumKernel<<<T, 256, 0, s>>>(back, pos, back_off, N, H, out);
  EP_CUDA(cudaGetLastError());
}

void launchLlPack(const void* x, const int32_t* ids, const int* slot_rank, int T, int k, int H, int LeMax, int maxT,
                  DevPlacement p, void* send_x, int* send_count, int* slot_pos, cudaStream_t s) {
  EP_CHECK(H % 8 == 0 && k <= kMaxK, "H must be a multiple of 8 and k <= 32");
  EP_CUDA(cudaMemsetAsync(send_count, 0, sizeof(int) * p.N * LeMax, s));
  if (T == 0) return;
  llPackKernel<<<T, 128, 0, s>>>(x, ids, slot_rank, k, H, LeMax, maxT, p, send_x, send_count, slot_pos);
  EP_CUDA(cudaGetLastError());
}

void launchLlCompact(const void* recv_x, const int* recv_count, int N, int Le, int LeMax, int maxT, int H, void* xs, int* counts,
                     cudaStream_t s) {
  if (Le == 0) return;
  llCompactKernel<<<dim3(Le, N, maxT), 64, 0, s>>>(recv_x, recv_count, N, LeMax, maxT, H, xs, counts);
  EP_CUDA(cudaGetLastError());
}

void launchLlScatterBack(const void* ys, const int* recv_count, int N, int Le, int LeMax, int maxT, int H, void* back,
                         cudaStream_t s) {
  if (Le == 0) return;
  llScatterBackKernel<<<dim3(Le, N, maxT), 64, 0, s>>>(ys, recv_count, N, LeMax, maxT, H, back);
  EP_CUDA(cudaGetLastError());
}

void launchLlReduce(const void* back, const int32_t* ids, const float* w, const int* slot_rank, const int* slot_pos, int T, int k,
                    int H, int LeMax, int maxT, void* out, cudaStream_t s) {
  if (T == 0) return;
  llReduceKernel<<<T, 256, 0, s>>>(back, ids, w, slot_rank, slot_pos, k, H, LeMax, maxT, out);
  EP_CUDA(cudaGetLastError());
}

void launchScaleRows(const void* xs, void* ys, const int* begin, const int* count, int cap, const int* l2g, const float* scale,
                     int Le, int H, int max_rows, cudaStream_t s) {
  if (max_rows == 0 || Le == 0) return;
  scaleRowsKernel<<<max_rows < 4096 ? max_rows : 4096, 128, 0, s>>>(xs, ys, begin, count, cap, l2g, scale, Le, H, max_rows);
  EP_CUDA(cudaGetLastError());
}

}  // namespace dispatch::ep
