// The second half of a MoE layer for a one-token step (batch-1 decode) in one persistent kernel:
//
//   x += attn Wo^T (+b); h = rmsnorm(x) (post-attention); logits = h Wr^T; softmax top-k;
//   for each chosen expert j: a_j = silu(h Wg_j^T) * (h Wu_j^T); y_j = a_j Wd_j^T;
//   x += bf16(sum_j w_j bf16(y_j)); hb = rmsnorm(x) (the next layer's input norm)
//
// which the chain runs as five to six launches (o GEMV, norm + router, top-k + permute, gate|up, down, combine +
// norm). One CTA per SM streams every weight byte it needs through a ring of shared-memory stages filled by 1-D bulk
// copies (cp.async.bulk), so the weights never wait on a kernel boundary: the o projection's and router's slices are
// requested before griddepcontrol.wait (while attention runs), the experts' as soon as each CTA has the routing.
// Three grid barriers order the phases (all CTAs are resident: one per SM, checked at setup):
//   1. o rows + router partial logits over the CTA's rows of H  -> barrier -> every CTA sums the partials (fixed
//      order), picks the top-k and norms h itself;
//   2. gate|up rows (the CTA's share of the k experts' 2I rows)  -> barrier -> every CTA forms the k activations;
//   3. down rows (the CTA's rows of H for every chosen expert), the weighted sum and the residual -> barrier ->
//      the next input norm of the CTA's rows.
// Numerics follow the chain's kernels: fp32 accumulation, gate|up SiLU-mul on fp32 values rounded to bf16, each
// expert's down row rounded to bf16, the weighted sum rounded to bf16 (moe_unpermute), norms as rms_norm. Sums run
// in a fixed order, so the same bits come back run to run.
// Taken, when switched on, for MoE layers without a shared expert, softmax routing, bf16 experts (model.cu decides).
// Opt-in (DISPATCH_CUDA_MOE_BLOCK=1): on the H200 it is slower than the chain it replaces: its grid barriers and the
// reads every CTA makes of the others' results cost what the chain's kernel boundaries cost, and its weight stream
// runs below the chain's GEMMs (docs/cuda-backend.md, "Session 11"; DISPATCH_CUDA_MOE_BLOCK_TRACE=1 prints the phases).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <string>

namespace dcuda {

using bf16 = __nv_bfloat16;

struct MoeBlockArgs {
  const bf16* attn = nullptr;  // [Ko] attention output of the token
  int Ko = 0;                  // o projection's input width (Hq * D)
  const bf16* wo = nullptr;    // [H, Ko]
  const float* o_bias = nullptr;
  float* x = nullptr;          // [H] residual stream, updated in place
  int H = 0;
  const float* post_norm = nullptr;
  float eps = 1e-6f;
  const float* router_t = nullptr;     // fp32 [H, E]: the router transposed (moe_block_transpose)
  const float* router_bias = nullptr;  // fp32 [E] or null: added for selection only
  int E = 0, top_k = 0;
  bool renormalize = true;
  const bf16* gate_up = nullptr;  // [E, 2I, H]; gate/up rows interleaved by 8 when `interleaved`
  const bf16* down = nullptr;     // [E, H, I]
  int I = 0;
  bool interleaved = false;
  const float* next_norm = nullptr;  // the next layer's input norm; null: x only
  bf16* hb = nullptr;                // [H] rmsnorm(x) * next_norm in bf16 (when next_norm)
  // scratch (moe_block_scratch_bytes), the barrier word zeroed once at allocation
  float* part = nullptr;      // [grid, E + 4]: partial logits and sums of squares per CTA
  float* gu = nullptr;        // [k, 2I] gate|up outputs, fp32
  unsigned* barrier = nullptr;
  // DISPATCH_CUDA_MOE_BLOCK_TRACE=1 (timing probe): a launch counter; launch 200 prints its phase times for two CTAs
  unsigned* trace = nullptr;
};

// Whether the kernel takes this shape on the current device; *why says what it lacks otherwise.
bool moe_block_supported(int H, int Ko, int E, int k, int I, std::string* why);
// Scratch the kernel needs beside its arguments: part, gu and the barrier word, 256-byte aligned pieces.
size_t moe_block_scratch_bytes(int E, int k, int I);
// Points a.part, a.gu and a.barrier into one scratch buffer of moe_block_scratch_bytes(E, k, I).
void moe_block_bind_scratch(MoeBlockArgs& a, void* scratch);
void moe_block(const MoeBlockArgs& a, cudaStream_t stream);
// router [E, H] -> [H, E] (fp32), once per layer at bind.
void moe_block_transpose(const float* router, int E, int H, float* out, cudaStream_t stream);

}  // namespace dcuda
