// A one-token decode step's layers in one persistent kernel (batch-1 decode; docs/cuda-backend.md, "Session 14").
//
// The chain runs eight kernels per MoE layer at one token, and each weight-streaming launch pays a few microseconds
// of ramp and tail beyond its bytes (session 13's read probe). Here one CTA per SM walks every layer of the step:
// each of its warps owns a ring of shared-memory stages filled by 1-D bulk copies (cp.async.bulk) and streams the
// weight rows assigned to it -- q|k|v, o, router, the chosen experts' gate|up pairs and down rows, then the next
// layer's q|k|v -- so a weight copy waits only for a free stage (and, for the experts, for the routing), never for a
// kernel boundary or another phase's data. Phases hand results over through global counters (release / acquire):
//
//   combine(l-1) + input norm (every CTA) -> q|k|v rows -> attention (one CTA per head and split: q/k norm, RoPE,
//   the new K/V into the cache, a split of the context) -> merge (every CTA) -> o rows -> residual + post norm
//   (every CTA) -> router rows -> top-k (every CTA) -> gate|up pairs (silu(g) * u) -> down rows -> next layer
//
// Numerics follow the chain: fp32 sums, q|k|v and o in fp32, K/V and the attention output in bf16, activations
// and expert outputs rounded to bf16, x += bf16(sum_j w_j y_j). Every sum has a fixed order, so a step's bits repeat.
// Taken (model.cu) for steps of one token when every layer is a MoE layer with bf16 experts whose gate|up rows are
// interleaved (fused SiLU), no shared expert, no biases, softmax or sigmoid routing without groups, and the shape fits
// the stage size (decode_b1_supported).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <string>
#include "moe/moe_ops.h"

namespace dcuda {

using bf16 = __nv_bfloat16;

struct DecodeB1Layer {
  const float *input_norm = nullptr, *post_norm = nullptr, *q_norm = nullptr, *k_norm = nullptr;
  const float *router = nullptr, *router_bias = nullptr;  // fp32 [E, H], [E] (selection only) or null
  const bf16 *qkv = nullptr, *o = nullptr;                // [(Hq + 2 Hkv) D, H], [H, Hq D]
  const bf16 *gate_up = nullptr, *down = nullptr;         // [E, 2I, H] interleaved by 8, [E, H, I]
  bf16 *k_cache = nullptr, *v_cache = nullptr;            // [blocks, B, Hkv, D]
};

struct DecodeB1Shape {
  int L = 0, H = 0, Hq = 0, Hkv = 0, D = 0, E = 0, k = 0, I = 0;
  int qk_norm = 0;  // 0 none, 1 per head
  dispatch::RouterConfig rc;
};

struct DecodeB1Args {
  DecodeB1Shape s;
  const DecodeB1Layer* layers = nullptr;  // device [L]
  float eps = 1e-6f;
  const int32_t *pos = nullptr, *slot = nullptr, *table = nullptr;  // the token's position, cache slot, block table
  int B = 0;                                                       // KV block size
  const float* inv_freq = nullptr;                                 // [D / 2]
  float* x = nullptr;  // [H] residual: the embedding in, the last layer's output out
  // scratch (decode_b1_scratch): q|k|v [ld], attention partials, o [H], logits [E], activations [k, I],
  // expert outputs [k, H] (bf16), and the phase counters (zeroed by decode_b1 before the kernel)
  float *qkv = nullptr, *attn_part = nullptr, *o = nullptr, *logits = nullptr;
  bf16 *act = nullptr, *y = nullptr;
  unsigned* counters = nullptr;
  // DISPATCH_CUDA_PERSISTENT_TRACE=1 (a timing probe): a launch counter; launch 150 prints, for the first and the last
  // CTA, the mean time per layer of each phase (the CTA's thread 0, %globaltimer)
  unsigned* trace = nullptr;
};

// Whether the kernel takes this shape on the current device; *why says what it lacks otherwise.
bool decode_b1_supported(const DecodeB1Shape& s, std::string* why);
// Bytes of scratch decode_b1 needs beside the buffers the caller passes (attention partials and counters).
size_t decode_b1_scratch_bytes(const DecodeB1Shape& s);
// Points a.attn_part and a.counters into one buffer of decode_b1_scratch_bytes(a.s) bytes.
void decode_b1_bind_scratch(DecodeB1Args& a, void* scratch);
// Zeroes the counters and launches the kernel (one CTA per SM, cooperative). Graph-capturable.
void decode_b1(const DecodeB1Args& a, cudaStream_t stream);

}  // namespace dcuda
