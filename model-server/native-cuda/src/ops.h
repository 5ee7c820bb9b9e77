// The forward pass's non-MoE device ops (the MoE GEMMs, router top-k and permute come from
// kernels/). Every launcher is asynchronous on `stream`, reads step data (ids, positions, slots,
// block tables) from device memory only, and depends on host values only through shapes, so a
// step built from them can be captured into a CUDA graph.
//
// Legend: T tokens, H hidden, N output features, K input features, D head dim, Hq/Hkv query/KV
// heads, B block size, E experts, V vocabulary. Activations fp32 unless named *_bf16;
// weights bf16 (router, norms and biases fp32); accumulation always fp32.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

namespace dcuda {

using bf16 = __nv_bfloat16;

// x[t] = float(table[ids[t]]): table [V, H] bf16 -> x [T, H].
void embedding(const bf16* table, const int32_t* ids, int T, int H, float* x, cudaStream_t stream);

// RMSNorm over groups of G columns of x [T, C] (row stride ld_x); w [G]. Writes out (fp32, row
// stride ld_out, may alias x) and/or out_bf16 ([T, C] contiguous); either may be null.
void rms_norm(const float* x, int ld_x, int T, int C, int G, const float* w, float eps, float* out, int ld_out,
              bf16* out_bf16, cudaStream_t stream);

// Clamp the first C columns of x [T, *] (row stride ld) to [-limit, limit].
void clamp(float* x, int ld, int T, int C, float limit, cudaStream_t stream);

// Rotate-half RoPE in place on heads*D columns of x (row stride ld); angle = pos * inv_freq[i] (fp32).
void rope(float* x, int ld, int T, int heads, int D, const int32_t* pos, const float* inv_freq, cudaStream_t stream);

// Store k, v [T, W] (row stride ld, W = Hkv*D) as bf16 at cache rows slots[t]; slot < 0 skips.
void write_kv(const float* k, const float* v, int ld, int T, int W, const int32_t* slots, bf16* k_cache,
              bf16* v_cache, cudaStream_t stream);

struct AttentionArgs {
  const float* q;  // [T, Hq*D] at row stride ldq
  int ldq;
  const bf16* k_cache;  // [blocks, B, Hkv, D]
  const bf16* v_cache;
  const int32_t* pos;        // [T] absolute position of each query
  const int32_t* tok_seq;    // [T] row of the block table each query reads
  const int32_t* tables;     // [S, table_stride] physical block ids
  int table_stride;
  int T, B, Hq, Hkv, D;
  float scale;
  int window;  // attend to the last `window` positions (0 = all)
  bf16* out;   // [T, Hq*D]
  // Some query of the step sees a long context (Model::enqueue: DISPATCH_CUDA_ATTN_LONG_CONTEXT): steps too small to
  // fill the GPU with the decode kernel's clusters take its split-K merge instead (attention_decode_long_split_k).
  bool long_context = false;
};
// Causal paged attention: query t attends keys [max(0, pos-window+1), pos] of its sequence.
void attention(const AttentionArgs& a, cudaStream_t stream);

// SMs of the current device (asked once per device).
int current_device_sms();

// Tiled tensor-core attention for prefill (attention_flash.cu): tiles [num_tiles, 2] = (first row,
// rows) of up to plan.rows consecutive query rows of one sequence.
bool attention_flash_supported(int D);
// kMma: attention_flash.cu's per-warp mma.sync kernel (64- or 128-row tiles); kWgmma: attention_flash_wgmma.cu's
// warpgroup kernel (128-row tiles, a CTA of two compute warpgroups per (tile, head) item, or persistent CTAs that
// walk the items). kAuto: the planner's rule.
enum class FlashKernel { kAuto, kMma, kWgmma };
struct FlashPlan {
  int num_tiles = 0;
  int rows = 64;  // query rows per tile (and CTA): 64 or 128
  FlashKernel kernel = FlashKernel::kMma;
  int ctas = 0;   // the wgmma kernel's grid: 0 one CTA per (tile, head); n > 0 n persistent CTAs (one per SM)
};
// Plans a step's tiles into tiles[0, 2 * num_tiles) (room for 2 T values), most keys first. kAuto: the wgmma kernel
// where the step's (128-row tile, 128-key tile, query head) products number at least the SMs of the current device,
// on a persistent grid (FlashPlan::ctas = the SMs) where the tiles see few keys (flash_plan.cu), else one CTA per
// (tile, head) (ctas 0); else (a few short sequences) the mma.sync kernel with 128-row tiles
// (two 16-row MMA tiles per warp) where they still give every SM two CTAs (tiles x Hq >= 2 x SMs), else 64-row ones.
// DISPATCH_CUDA_FLASH_KERNEL=mma|wgmma forces the kernel, DISPATCH_CUDA_FLASH_ROWS=64|128 the mma.sync kernel's
// rows and DISPATCH_CUDA_FLASH_PERSISTENT=0|1 the wgmma kernel's persistent grid (each read once per process);
// `want` other than kAuto forces the kernel for this call. tok_seq [T]: the sequence of each row (rows of one
// sequence consecutive), pos [T] its position; window as AttentionArgs'.
FlashPlan plan_attention_flash(const int32_t* tok_seq, const int32_t* pos, int T, int Hq, int window, int32_t* tiles,
                               FlashKernel want = FlashKernel::kAuto);
void attention_flash(const AttentionArgs& a, const int32_t* tiles, const FlashPlan& plan, cudaStream_t stream);

// Y[T, N] (+)= X[T, K] . W[N, K]^T (+ bias[N]); X, W bf16, Y fp32.
void gemm(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y, bool accumulate,
          cudaStream_t stream);

// Y[T, N] = X[T, K] . W[N, K]^T, all fp32 (router logits, Qwen2-MoE's shared-expert gate).
void linear_f32(const float* X, int T, int K, const float* W, int N, float* Y, cudaStream_t stream);
// linear_f32's row kernel for any T (what T > 8 ran before the tiled kernel; scripts/prefill_check.cu).
void linear_f32_rows(const float* X, int T, int K, const float* W, int N, float* Y, cudaStream_t stream);
// 3xTF32 tensor-core kernel (linear_f32_tc.cuh; error ~fp32, deterministic, graph-capture safe)
// for any T; linear_f32 takes it (when linear_f32_tc_fits: K % 4 == 0, X and W 16-byte aligned) at
// T >= 128 with N >= 64 or T >= 2048 by default, every T > 16 with N >= 8 under
// DISPATCH_CUDA_ROUTER_TC=1 (linear_f32_tc_enabled()), never under =0.
int linear_f32_tc_mode();     // 0 never, 1 the default rule, 2 every T > 16 (=1)
bool linear_f32_tc_enabled();  // mode 2
bool linear_f32_tc_fits(const float* X, int K, const float* W);
void linear_f32_tc(const float* X, int T, int K, const float* W, int N, float* Y, cudaStream_t stream);
// linear_f32's tiled kernel with tile_rows (64 or 128) tokens per CTA tile, whatever T (for A/B).
void linear_f32_tiled(const float* X, int T, int K, const float* W, int N, float* Y, int tile_rows, cudaStream_t stream);

// act[r, i] = silu(gu[r, i]) * gu[r, I + i]: gu [rows, 2I] fp32 -> act [rows, I] bf16.
void silu_mul_f32(const float* gu, int rows, int I, bf16* act, cudaStream_t stream);
// Same over bf16 gu (the routed experts' rows).
void silu_mul_bf16(const bf16* gu, int rows, int I, bf16* act, cudaStream_t stream);

// Reference grouped GEMM for shapes the kernels/ GEMMs refuse (tiny test models):
// rows [offsets[e], offsets[e+1]) of X [M, K] times W[e] [N, K]^T -> Y [M, N], bf16 in and out.
void grouped_gemm_ref(const bf16* X, const bf16* W, bf16* Y, const int32_t* offsets, int M, int E, int N, int K,
                      cudaStream_t stream);

// w[r, k] = q[r, k] * scale[r]: int8 rows [rows, K] -> bf16 (int8 experts, steps above small-M).
void dequant_int8(const int8_t* q, const float* scale, size_t rows, int K, bf16* w, cudaStream_t stream);

// x[t] += routed[t] (+ shared[t] * (gate ? sigmoid(gate[t]) : 1)); routed bf16 [T, H], shared fp32 or null.
void add_moe(float* x, const bf16* routed, const float* shared, const float* gate, int T, int H, cudaStream_t stream);

// out[i] = x[rows[i]]: x [*, H] fp32 -> out [R, H].
void gather_rows(const float* x, const int32_t* rows, int R, int H, float* out, cudaStream_t stream);

// Host fp32 -> bf16 bits, round to nearest even (weights are converted once, at load).
void f32_to_bf16_host(const float* src, uint16_t* dst, size_t n);

}  // namespace dcuda
