// Register-level helpers of the prefill attention kernels (attention_flash.cu, attention_flash_wgmma.cu): bf16
// packing, the reductions over the four threads that share an accumulator row, and the softmax's exp2.
#pragma once
#include <cuda_bf16.h>
#include <cstdint>

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

}  // namespace dcuda::flash
