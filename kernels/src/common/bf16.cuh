// Small device helpers: bf16 packing, int8 -> bf16 conversion, the m16n8k16 tensor-core MMA.
#pragma once
#include <cuda_bf16.h>
#include <cstdint>

namespace dispatch {

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ float2 unpack_bf16x2(uint32_t v) {
  return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&v));
}

// Two signed int8 in the low bytes of the two 16-bit halves of x (the high bytes are ignored) -> bf16x2,
// exactly and without fp32. With m = b & 0x7f, the bf16 bits 0x4300 | m are 128 + m, and 0x4300 |
// (b & 0x80) are 128 (b >= 0) or 256 (b < 0): their difference is b, an integer of at most 8 bits,
// which bf16 holds exactly, so the one bf16x2 subtraction rounds nothing. Two LOP3 and one
// bf16x2 subtraction per pair, against an xor, three byte permutes and two fp32 subtractions for the
// 2^23 magic-number route (LOP3 and PRMT issue on the ALU pipe, at half the FMA pipe's rate).
__device__ __forceinline__ uint32_t int8_lo_bytes_to_bf16x2(uint32_t x) {
  const uint32_t a = (x & 0x007f007fu) | 0x43004300u;
  const uint32_t c = (x & 0x00800080u) | 0x43004300u;
  uint32_t d;
  asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(c));
  return d;
}

// Two int8 of a 16-bit value (lo = bits 0-7, the lower k) -> bf16x2 (lo in the low half), exactly.
__device__ __forceinline__ uint32_t int8x2_to_bf16x2(uint32_t h) {
  return int8_lo_bytes_to_bf16x2(__byte_perm(h, 0u, 0x4140));  // [b0, 0, b1, 0]
}

// Four signed int8 in one word -> two bf16x2 words (bytes 0-1 -> lo, 2-3 -> hi), exactly.
__device__ __forceinline__ void int8x4_to_bf16x4(uint32_t q, uint32_t& lo, uint32_t& hi) {
  lo = int8_lo_bytes_to_bf16x2(__byte_perm(q, 0u, 0x4140));  // [b0, 0, b1, 0]
  hi = int8_lo_bytes_to_bf16x2(__byte_perm(q, 0u, 0x4342));  // [b2, 0, b3, 0]
}

// D(16x8) += A(16x16, row) * B(16x8, col), bf16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                               uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Ask L2 for the 128-byte line at p (no register, no wait).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }

__device__ __forceinline__ uint4 ldg_stream(const void* p) {
  // Weights are read once: don't let them evict the activations from L1.
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

}  // namespace dispatch
