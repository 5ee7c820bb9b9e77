// Host entry points of the MoE layer's non-GEMM kernels. Device pointers, async on `stream`,
// graph-capturable (no host reads of device data) unless the comment says otherwise.
//
// Legend: T tokens, E experts, k top-k, H hidden, I expert intermediate, M = T*k routed rows.
#pragma once
#include <cuda_runtime.h>
#include <cstdint>

namespace dispatch {

enum class Scoring : int { kSoftmax = 0, kSigmoid = 1 };

struct RouterConfig {
  int num_experts = 0;       // E (<= 512)
  int top_k = 0;             // k (<= 32)
  Scoring scoring = Scoring::kSoftmax;
  bool renormalize = true;   // weights /= sum of the chosen weights
  int num_groups = 1;        // DeepSeek-V3 grouped top-k: E split into num_groups groups ...
  int topk_groups = 1;       // ... of which the topk_groups best (sum of each group's top-2) stay
  float scale = 1.0f;        // routed_scaling_factor, applied last
};

// logits [T, E] fp32; bias [E] fp32 or null (selection only: weights come from the unbiased
// scores) -> ids [T, k] int32, weights [T, k] fp32. Ties go to the lower expert index.
void sm90_f32_router_topk(const float* logits, const float* bias, int T, const RouterConfig& cfg, int32_t* ids,
                          float* weights, cudaStream_t stream);

// Groups the M = T*k routed slots by expert. cap == 0: contiguous layout, offsets [E+1];
// cap > 0: masked layout, expert e's rows at e*cap (cap >= T always holds every slot).
// Writes counts [E], offsets [E+1] (contiguous only, may be null otherwise) and
// slot_row [M]: the row of slot t*k + j, stable: an expert's rows follow its slots' order, so the layout is a
// function of the routing alone. workspace: unused (E ints, any content).
void sm90_i32_moe_align(const int32_t* ids, int M, int E, int cap, int32_t* counts, int32_t* offsets,
                        int32_t* slot_row, int32_t* workspace, cudaStream_t stream);

// Xp[slot_row[t*k + j]] = X[t] for every slot: X [T, H] bf16 -> Xp [rows, H] bf16.
void sm90_bf16_moe_permute(const void* X, const int32_t* slot_row, int T, int k, int H, void* Xp,
                           cudaStream_t stream);

// out[t] = sum_j weights[t, j] * Y[slot_row[t*k + j]], fp32 sum: Y [rows, H] -> out [T, H] bf16.
void sm90_bf16_moe_unpermute(const void* Y, const int32_t* slot_row, const float* weights, int T, int k, int H,
                             void* out, cudaStream_t stream);

// act[r, i] = silu(h[r, i]) * h[r, I + i]: h [rows, 2I] bf16 -> act [rows, I] bf16.
void sm90_bf16_silu_mul(const void* h, int rows, int I, void* act, cudaStream_t stream);

// Per-row symmetric int8: scale[r] = max|w[r, :]| / 127, q = round(w / scale).
// w [rows, K] bf16 (device) -> q [rows, K] int8, scale [rows] fp32.
void sm90_bf16_quantize_int8_rows(const void* w, int rows, int K, int8_t* q, float* scale, cudaStream_t stream);

// Streams host weights [E, N, K] bf16 through a one-expert device buffer into q [E, N, K] int8 and
// scale [E, N]: device memory never holds the bf16 and int8 copies together. Blocks until done
// (load-time work: the binding runs it off the event loop).
void quantize_int8_streaming(const uint16_t* host_w, int E, int N, int K, int8_t* q, float* scale,
                             cudaStream_t stream);

}  // namespace dispatch
