// SiLU-and-multiply between the two expert projections: act = silu(gate) * up, 8 values a thread.
#include <cuda_bf16.h>
#include "moe_ops.h"
#include "../common/check.h"

namespace dispatch {
namespace {

__global__ void silu_mul_kernel(const uint4* __restrict__ h, int rows, int vecs, uint4* __restrict__ act) {
  const size_t n = size_t(rows) * vecs;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t r = i / vecs, v = i % vecs;
    const uint4 g = h[r * 2 * vecs + v], u = h[r * 2 * vecs + vecs + v];
    const __nv_bfloat162* gp = reinterpret_cast<const __nv_bfloat162*>(&g);
    const __nv_bfloat162* up = reinterpret_cast<const __nv_bfloat162*>(&u);
    uint4 o;
    __nv_bfloat162* op = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 a = __bfloat1622float2(gp[j]), b = __bfloat1622float2(up[j]);
      op[j] = __floats2bfloat162_rn(__fdividef(a.x, 1.f + __expf(-a.x)) * b.x, __fdividef(a.y, 1.f + __expf(-a.y)) * b.y);
    }
    act[i] = o;
  }
}

}  // namespace

void sm90_bf16_silu_mul(const void* h, int rows, int I, void* act, cudaStream_t stream) {
  DK_CHECK(I % 8 == 0, "I must be a multiple of 8");
  if (rows == 0) return;
  const size_t n = size_t(rows) * (I / 8);
  const int blocks = int(n / 256 + 1 < 132 * 16 ? n / 256 + 1 : 132 * 16);
  silu_mul_kernel<<<blocks, 256, 0, stream>>>(static_cast<const uint4*>(h), rows, I / 8, static_cast<uint4*>(act));
  DK_LAUNCHED();
}

}  // namespace dispatch
