// Register-level helpers of the prefill attention kernels (attention_flash.cu, attention_flash_wgmma.cu): bf16
// packing, the reductions over the four threads that share an accumulator row, the softmax's exp2, and q's load.
#pragma once
#include <cuda_bf16.h>
#include <cstdint>
#include "ops.h"

namespace dcuda::flash {

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// 2^x flushed to zero below 2^-126: one MUFU.EX2 (exp2f's denormal handling costs three more instructions per
// score, and a probability below 2^-126 adds nothing a bf16 P can hold).
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// q's dims d .. d+3 of tile row i (query row r0 + i, head h; fp32, unscaled) as four bf16, zeros past nq and past D;
// q_vec: 16-byte aligned rows (one float4 load).
__device__ __forceinline__ uint2 q_bf16x4(const AttentionArgs& a, int r0, int i, int nq, int h, int d, bool q_vec) {
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  if (i < nq && d < a.D) {
    const float* src = a.q + size_t(r0 + i) * a.ldq + size_t(h) * a.D + d;
    if (q_vec) v = *reinterpret_cast<const float4*>(src);
    else v = make_float4(src[0], src[1], src[2], src[3]);
  }
  uint2 packed;
  packed.x = pack_bf16(v.x, v.y), packed.y = pack_bf16(v.z, v.w);
  return packed;
}

}  // namespace dcuda::flash
