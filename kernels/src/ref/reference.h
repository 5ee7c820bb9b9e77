// CPU references for every kernel: plain loops, fp32 accumulation, the same rounding points as the
// CUDA kernels (bf16 out). bf16 values travel as uint16_t bit patterns.
//
// Legend: T tokens, E experts, k top-k, H hidden, N outputs, K inputs, M routed rows.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>
#include "../moe/moe_ops.h"

namespace dispatch::ref {

inline float bf16_to_f32(uint16_t v) {
  uint32_t u = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {  // round to nearest even, NaN kept quiet
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

// Rows of expert e: [begin(e), begin(e) + count(e)), as in ExpertRows (host arrays).
struct HostRows {
  const int32_t* offsets = nullptr;  // [E+1] or null
  const int32_t* counts = nullptr;   // [E] or null
  int cap = 0;
  int begin(int e) const { return offsets ? offsets[e] : e * cap; }
  int count(int e) const { return offsets ? offsets[e + 1] - offsets[e] : counts[e]; }
};

// Y[r] = W[e] X[r] for the rows of each expert; scales (int8 only) multiply output channels.
void grouped_gemm_bf16(const uint16_t* X, const uint16_t* W, uint16_t* Y, const HostRows& rows, int E, int N, int K);
void grouped_gemm_w8a16(const uint16_t* X, const int8_t* W, const float* scales, uint16_t* Y, const HostRows& rows,
                        int E, int N, int K);

void router_topk(const float* logits, const float* bias, int T, const RouterConfig& cfg, int32_t* ids,
                 float* weights);

// Stable: inside an expert, rows follow slot order (the GPU order may differ).
void moe_align(const int32_t* ids, int M, int E, int cap, int32_t* counts, int32_t* offsets, int32_t* slot_row);
void moe_permute(const uint16_t* X, const int32_t* slot_row, int T, int k, int H, uint16_t* Xp);
void moe_unpermute(const uint16_t* Y, const int32_t* slot_row, const float* weights, int T, int k, int H,
                   uint16_t* out);
void silu_mul(const uint16_t* h, int rows, int I, uint16_t* act);
void quantize_int8_rows(const uint16_t* w, int rows, int K, int8_t* q, float* scale);

}  // namespace dispatch::ref
