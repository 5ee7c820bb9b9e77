// Per-output-channel symmetric int8 quantization of expert weights, and its streaming driver.
#include <cuda_bf16.h>
#include "moe_ops.h"
#include "../common/check.h"

namespace dispatch {
namespace {

// One warp per row: max |w| -> scale = max / 127, q = round(w / scale) (scale 0 for an all-zero row).
__global__ void quantize_rows_kernel(const __nv_bfloat16* __restrict__ w, int rows, int K, int8_t* __restrict__ q,
                                     float* __restrict__ scale) {
  const int lane = threadIdx.x & 31;
  const int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= rows) return;
  const __nv_bfloat16* row = w + size_t(r) * K;
  float amax = 0.f;
  for (int i = lane; i < K; i += 32) amax = fmaxf(amax, fabsf(__bfloat162float(row[i])));
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, d));
  const float s = amax / 127.f;
  const float inv = amax > 0.f ? 127.f / amax : 0.f;
  for (int i = lane; i < K; i += 32) {
    const float v = rintf(__bfloat162float(row[i]) * inv);
    q[size_t(r) * K + i] = static_cast<int8_t>(fminf(fmaxf(v, -127.f), 127.f));
  }
  if (lane == 0) scale[r] = s;
}

}  // namespace

void sm90_bf16_quantize_int8_rows(const void* w, int rows, int K, int8_t* q, float* scale, cudaStream_t stream) {
  if (rows == 0) return;
  quantize_rows_kernel<<<(rows + 7) / 8, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(w), rows, K, q, scale);
  DK_LAUNCHED();
}

void quantize_int8_streaming(const uint16_t* host_w, int E, int N, int K, int8_t* q, float* scale,
                             cudaStream_t stream) {
  const size_t expert_elems = size_t(N) * K;
  void* staging = nullptr;
  DK_CUDA(cudaMalloc(&staging, expert_elems * 2));
  try {
    for (int e = 0; e < E; ++e) {
      DK_CUDA(cudaMemcpyAsync(staging, host_w + e * expert_elems, expert_elems * 2, cudaMemcpyHostToDevice, stream));
      sm90_bf16_quantize_int8_rows(staging, N, K, q + e * expert_elems, scale + size_t(e) * N, stream);
    }
    DK_CUDA(cudaStreamSynchronize(stream));
  } catch (...) {
    cudaFree(staging);
    throw;
  }
  DK_CUDA(cudaFree(staging));
}

}  // namespace dispatch
