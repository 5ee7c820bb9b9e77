// Fused launches for small steps (decode): each replaces a run of ops.h launches with one
// kernel computing the same values (fp32 sums may be added in another order). model.cu takes
// them unless DISPATCH_CUDA_UNFUSED=1 (the A/B switch, docs/cuda-backend.md).
//
// Legend: T tokens, H hidden, D head dim, Hq/Hkv query/KV heads, E experts, k top-k,
// M = T*k routed slots.
#pragma once
#include <cuda_runtime.h>
#include <cstdint>
#include "moe/moe_ops.h"
#include "ops.h"

namespace dcuda {

// DISPATCH_CUDA_UNFUSED=1 (read once): the step runs the separate ops.h launches and the earlier
// GEMV / router-logit kernels, for A/B against the fused path.
bool legacy_kernels();

struct QkvPostArgs {
  float* qkv;  // [T, ld] fp32, ld = (Hq + 2*Hkv) * D: q | k | v
  int T, Hq, Hkv, D;
  int qk_norm;  // 0 none, 1 per head (q_norm, k_norm [D]), 2 whole projection ([Hq*D], [Hkv*D])
  const float* q_norm;
  const float* k_norm;
  float eps;
  float clip;  // <= 0: none
  const int32_t* pos;
  const float* inv_freq;  // [D/2]
  const int32_t* slots;   // [T]; < 0 writes no KV
  bf16* k_cache;          // [*, Hkv*D] rows by slot
  bf16* v_cache;
  // [T, D]: cos(pos[t] inv_freq[i]) at i, sin at D/2 + i (rope_table); read by gemm_qkv_post's epilogue only (the
  // qkv_post kernels compute their own), null: that epilogue computes them too
  const float* rope_cs = nullptr;
};
// rope_cs (QkvPostArgs) for T tokens: sincosf(float(pos[t]) * inv_freq[i]) for i < D / 2, qkv_post's expression, so
// the same bits; one launch per step, shared by its layers.
void rope_table(const int32_t* pos, int T, int D, const float* inv_freq, float* rope_cs, cudaStream_t stream);
// Per token, in one launch: q/k RMSNorm, clip of q|k|v, rotate-half RoPE on q and k, q back
// into qkv (rotated, for attention), k and v to the cache as bf16. k and v in qkv are left
// as they came (nothing reads them after the cache write). qk_norm 0 or 1: a warp per
// (token, head), Hq + 2 Hkv warps per token over as many SMs; qk_norm 2: a CTA per token (the
// norm sums all of q and all of k before any head is rotated in place). D even, <= 256.
bool qkv_post_supported(int Hq, int Hkv, int D);
void qkv_post(const QkvPostArgs& a, cudaStream_t stream);

// End of a MoE layer, per token (one CTA), in one launch:
//   x[t] += bf16(sum_j w[t, j] * Y[slot_row[t*k + j]])  (+ shared[t] * (gate ? sigmoid(gate[t]) : 1))
//   then, when norm_w is given, out_bf16[t] = rmsnorm(x[t]) * norm_w (the next layer's input norm).
// Y [rows, H] bf16; shared [T, H] fp32 or null; gate [T] fp32 or null. H % 8 == 0.
void moe_combine_norm(const bf16* Y, const int32_t* slot_row, const float* weights, int T, int k, int H,
                      const float* shared, const float* gate, float* x, const float* norm_w, float eps,
                      bf16* out_bf16, cudaStream_t stream);

// Dense MLP / shared expert gate|up at T <= 8 (gemm.cu): act[t, i] = bf16(silu(g) * u) with
// g = X[t] . W[i], u = X[t] . W[I + i] (W [2I, K] bf16), i.e. gemm + silu_mul_f32 in one launch.
// Returns false (nothing launched) where it does not apply: T > 8, K % 8, unaligned, or
// DISPATCH_CUDA_UNFUSED=1; the caller then runs the two launches.
bool gemm_silu(const bf16* X, int T, int K, const bf16* W, int I, bf16* act, cudaStream_t stream);

// The post-attention RMSNorm and the router logits in one launch, for T <= kNormRouterMaxTokens:
//   h[t] = rmsnorm(x[t]) * norm_w (fp32, and bf16 in hb), logits[t, e] = h[t] . W[e] (fp32).
// A CTA per expert row normalizes the step's rows itself (logit = inv_rms * sum W * norm_w * x)
// and writes its H/E-column slice of h and hb. x, h [T, H]; W [E, H]; logits [T, E]. H % 4 == 0.
constexpr int kNormRouterMaxTokens = 16;
void norm_router(const float* x, int T, int H, const float* norm_w, float eps, const float* W, int E, float* logits,
                 float* h, bf16* hb, cudaStream_t stream);

// Router top-k + align (contiguous layout) + permute in one launch, for M = T*k <= kRouteSmallMaxSlots.
// Same outputs as dispatch::sm90_f32_router_topk, sm90_i32_moe_align (cap 0) and sm90_bf16_moe_permute
// in sequence: ids/weights [T, k], counts [E], offsets [E+1], slot_row [M] (an expert's rows in slot
// order), Xp [M, H]. Every CTA computes the routing (cheap at this size); each copies its share of rows.
constexpr int kRouteSmallMaxSlots = 1024;
bool route_small_supported(int T, const dispatch::RouterConfig& cfg, int H);
void route_small(const float* logits, const float* bias, int T, const dispatch::RouterConfig& cfg, const bf16* X,
                 int H, int32_t* ids, float* weights, int32_t* counts, int32_t* offsets, int32_t* slot_row, bf16* Xp,
                 cudaStream_t stream);

}  // namespace dcuda
