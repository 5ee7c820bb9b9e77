// The routed experts of a MoE layer (model.h): the routing kernels + grouped GEMMs of every step but the
// self-routed one-token ones (expert_chain), and the int8 experts' GEMMs (expert_gemms_int8).
#include <algorithm>
#include "check.h"
#include "fused_ops.h"
#include "gemm/grouped_gemm.h"
#include "model.h"
#include "moe/moe_ops.h"
#include "skip_ops.h"

namespace dcuda {
namespace {

// Rows per expert the small-M tile covers in one pass (it sizes the tile: 8, 16, 32 or 64 rows).
// T is exact but at T = 64 gives every expert (about T * k / E = 4 rows) a 64-row tile; the
// kernels' benchmark rule (bench/kernels/bench.py) is about twice the mean plus slack, from T, M
// and E only (no routing read on the host, so a graph replays one tile). An expert with more rows
// takes several passes: correct, it re-reads its weights. override > 0: that many (capped at T).
int small_m_rows_hint(int T, int M, int E, int override_rows) {
  const int hint = override_rows > 0 ? override_rows : 2 * ((M + E - 1) / E) + 8;
  return std::min(T, hint);
}

}  // namespace

// A MoE layer's routing kernel(s) and expert GEMMs (every step but the self-routed one-token ones): route_small at
// T <= 16 in the fused path, else the kernels' top-k, align and permute; then gate|up (+ SiLU) and down into y1_.
void Model::expert_chain(int l, int T, const bf16* hb, const dispatch::RouterConfig& rc, const float* router_bias) {
  const LayerConfig& c = cfg_.layers[l];
  const LayerWeights& w = w_.layers[l];
  const int H = cfg_.hidden, E = c.num_experts, k = c.top_k, I = c.intermediate, M = T * k;
  const bool fused = !legacy_kernels();
  if (fused && route_small_supported(T, rc, H)) {
    route_small(router_logits_, router_bias, T, rc, hb, H, topk_ids_, topk_w_, counts_, offsets_, slot_row_, xp_,
                stream_);
  } else {
    dispatch::sm90_f32_router_topk(router_logits_, router_bias, T, rc, topk_ids_, topk_w_, stream_);
    dispatch::sm90_i32_moe_align(topk_ids_, M, E, 0, counts_, offsets_, slot_row_, ws_, stream_);
    dispatch::sm90_bf16_moe_permute(hb, slot_row_, T, k, H, xp_, stream_);
  }
  mark("topk_align_permute");
  if (skipped(skip_ops_, kSkipExperts, T)) {
    // cost probe: y1_ keeps earlier values
  } else if (cfg_.int8_experts) {
    expert_gemms_int8(l, T, M);
  } else {
    const void* wgu = buf(w.gate_up);
    const void* wd = buf(w.down);
    const bool fast = moe_kernels_take(c);
    // interleaved gate/up rows: the GEMM writes silu(gate) * up [M, I] straight into a1_
    const bool fuse = gate_up_fused(l);
    DC_CHECK(fast || !fuse, "interleaved gate/up rows need the kernels/ GEMM");
    if (fast) {
      dispatch::moe_grouped_gemm_bf16(xp_, wgu, fuse ? a1_ : g1_, offsets_, M, T, E, 2 * I, H, stream_, fuse);
      if (!fuse) silu_mul_bf16(g1_, M, I, a1_, stream_);
      // routing from two kernels back (gate|up waits before it triggers): down may read it before its wait
      dispatch::moe_grouped_gemm_bf16(a1_, wd, y1_, offsets_, M, T, E, H, I, stream_, false, true);
    } else {
      grouped_gemm_ref(xp_, static_cast<const bf16*>(wgu), g1_, offsets_, M, E, 2 * I, H, stream_);
      silu_mul_bf16(g1_, M, I, a1_, stream_);
      grouped_gemm_ref(a1_, static_cast<const bf16*>(wd), y1_, offsets_, M, E, H, I, stream_);
    }
  }
  mark("expert_gemms");
}

// int8 experts: steps of more than int8_small_m_max_ tokens (decode batches and prefill) on the kernels'
// W8A16 tensor-core GEMM (int8 tiles converted to bf16 in registers; N, K % 128; token tile from
// small_m_rows_hint); single-token steps (or with DISPATCH_CUDA_INT8_WGMMA=0 up to 64 tokens) the W8A16
// small-M GEMM (N % 16, K % 128); otherwise the layer's experts are dequantized into one bf16 scratch
// and the bf16 path runs.
void Model::expert_gemms_int8(int l, int T, int M) {
  const LayerConfig& c = cfg_.layers[l];
  const Int8Experts& q = int8_[l];
  const int H = cfg_.hidden, E = c.num_experts, I = c.intermediate;
  const dispatch::ExpertRows rows{offsets_, nullptr, 0};
  // H200 (docs/kernels.md, W8A16 tensor-core GEMM): since session 6's conversion the tensor-core kernel
  // is 1.1-1.5x the small-M one at 8-64 tokens and 3x+ the dequantize-then-bf16 path at prefill sizes;
  // at one token the two were within ~10% either way, and since session 10's early weight loads the
  // tensor-core kernel takes one-token steps too (DISPATCH_CUDA_INT8_SMALL_M_MAX moves the bound).
  const bool tc = int8_wgmma_takes(c) && T > int8_small_m_max_;
  const bool small = !tc && use_kernels_moe_ && T <= 64 && (2 * I) % 16 == 0 && H % 16 == 0 &&
                     H % 128 == 0 && I % 128 == 0;
  const int active = M < E ? M : E;
  const int hint = small_m_rows_hint(T, M, E, small_m_hint_);
  const bool fast_bf16 = moe_kernels_take(c);
  // interleaved gate/up rows (int8 rows and scales; the dequantized scratch inherits the layout)
  const bool fuse = gate_up_fused(l);
  DC_CHECK(fast_bf16 || !fuse, "interleaved gate/up rows need the kernels/ GEMM");
  // routing_ready: down's routing is from two kernels back (see moe_layer): the tensor-core and small-M kernels
  // may read it, and load weights, before their griddepcontrol.wait (the tensor-core kernel at every T: its gate|up
  // is the same kernel, whose CTAs fill their SMs' shared memory, so down's CTAs start only on SMs gate|up has left;
  // H200 2026-12-02, Qwen3-30B-A3B int8 batch 1: 2.991 ms vs 3.139 without, docs/cuda-backend.md session 10); never
  // with the dequantized scratch below, which the previous kernel writes
  auto gemm_of = [&](const bf16* X, int qid, int sid, bf16* Y, int N, int K, bool silu, bool routing_ready) {
    if (tc) {
      dispatch::sm90_w8a16_grouped_gemm_contiguous(X, static_cast<const int8_t*>(buf(qid)),
                                                   static_cast<const float*>(buf(sid)), Y, offsets_, M, E, N, K, hint,
                                                   stream_, silu, routing_ready);
      return;
    }
    if (small) {
      dispatch::sm90_w8a16_grouped_gemm_masked(X, static_cast<const int8_t*>(buf(qid)), static_cast<const float*>(buf(sid)),
                                               Y, rows, E, N, K, hint, active, stream_, silu, routing_ready);
      return;
    }
    dequant_int8(static_cast<const int8_t*>(buf(qid)), static_cast<const float*>(buf(sid)), size_t(E) * N, K, dequant_,
                 stream_);
    if (fast_bf16) dispatch::moe_grouped_gemm_bf16(X, dequant_, Y, offsets_, M, T, E, N, K, stream_, silu);
    else grouped_gemm_ref(X, dequant_, Y, offsets_, M, E, N, K, stream_);
  };
  gemm_of(xp_, q.gate_up_q, q.gate_up_s, fuse ? a1_ : g1_, 2 * I, H, fuse, false);
  if (!fuse) silu_mul_bf16(g1_, M, I, a1_, stream_);
  gemm_of(a1_, q.down_q, q.down_s, y1_, H, I, false, true);
}

}  // namespace dcuda
