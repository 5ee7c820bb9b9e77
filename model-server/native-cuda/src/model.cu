// The forward step (see model.h). Per layer:
//   h = rmsnorm(x) -> qkv = h Wqkv^T (+b) -> q/k norm, clip -> rope -> KV write -> attention
//   x += attn Wo^T (+b); h = rmsnorm(x)
//   dense: x += down(silu(gate h) * up h)
//   MoE:   logits = h Wr^T (fp32) -> top-k -> align/permute -> grouped GEMM (gate|up) -> silu*mul
//          (one launch when bind interleaved the gate/up rows) -> grouped GEMM (down)
//          -> weighted unpermute; x += routed (+ shared, sigmoid-gated)
// then logits = rmsnorm(x[rows]) Wlm^T. Nothing here reads device data on the host; the only
// synchronization is the final logits copy, so a decode step is captured once per batch size.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include "attention_decode.cuh"
#include "check.h"
#include "fused_ops.h"
#include "gemm.h"
#include "gemm/grouped_gemm.h"
#include "model.h"
#include "moe_block.h"
#include "skip_ops.h"
#include "moe/moe_ops.h"

namespace dcuda {
namespace {

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v && v[0] == '1';
}

}  // namespace

Model::Model(ModelConfig cfg) : cfg_(std::move(cfg)) {
  if (const char* v = std::getenv("DISPATCH_CUDA_SKIP_OPS")) {
    skip_ops_ = parse_skip_ops(v);
    static std::atomic<bool> warned{false};
    if (skip_ops_ && !warned.exchange(true)) {
      std::fprintf(stderr,
                   "[native-cuda] WARNING: DISPATCH_CUDA_SKIP_OPS=%s: these op groups are not launched in steps of "
                   "<= %d tokens; logits and tokens are garbage (a graph-replay cost probe, never for serving)\n",
                   v, kSkipMaxTokens);
    }
  }
  DC_CHECK(cfg_.num_layers > 0 && cfg_.hidden > 0 && cfg_.vocab > 0, "empty model");
  DC_CHECK(cfg_.hidden % 8 == 0, "hidden size must be a multiple of 8 (MoE permute)");
  DC_CHECK(int(cfg_.layers.size()) == cfg_.num_layers, "one layer config per layer");
  DC_CHECK(int(cfg_.inv_freq.size()) == cfg_.head_dim / 2, "inv_freq must hold D/2 values");
  DC_CUDA(cudaGetDevice(&device_));
  DC_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  for (const LayerConfig& l : cfg_.layers) {
    if (l.moe) {
      max_e_ = std::max(max_e_, l.num_experts);
      max_k_ = std::max(max_k_, l.top_k);
      max_i_ = std::max(max_i_, l.intermediate);
      max_dense_i_ = std::max(max_dense_i_, l.shared_intermediate);
    } else {
      max_dense_i_ = std::max(max_dense_i_, l.dense_intermediate);
    }
  }
  use_kernels_moe_ = !env_on("DISPATCH_CUDA_REF_MOE");
  if (const char* v = std::getenv("DISPATCH_CUDA_SMALL_M_HINT")) small_m_hint_ = std::max(0, std::atoi(v));
  int8_wgmma_ = !(std::getenv("DISPATCH_CUDA_INT8_WGMMA") && std::getenv("DISPATCH_CUDA_INT8_WGMMA")[0] == '0');
  if (const char* v = std::getenv("DISPATCH_CUDA_SELF_ROUTE")) self_route_ = v[0] != '0';
  if (cfg_.self_route >= 0) self_route_ = cfg_.self_route == 1;
  if (const char* v = std::getenv("DISPATCH_CUDA_INT8_SMALL_M_MAX"))
    int8_small_m_max_ = std::min(std::max(std::atoi(v), 0), dispatch::kSmallMMaxTokens);
  // PDL for the routed experts' small-M GEMMs (kernels' g_small_m_pdl_mode: 1 on, 2 on but waiting first); a
  // process-wide knob, the same for every model in the process
  if (const char* v = std::getenv("DISPATCH_CUDA_SMALL_M_PDL")) dispatch::g_small_m_pdl_mode = std::min(std::max(std::atoi(v), 0), 2);
  const char* silu_env = std::getenv("DISPATCH_CUDA_FUSED_SILU");
  fused_silu_ = !(silu_env && silu_env[0] == '0');
  // The tiled prefill attention is on unless DISPATCH_CUDA_FLASH=0; it takes eager steps of at
  // least DISPATCH_CUDA_FLASH_MIN_TOKENS tokens (default 65: the decode kernel takes <= 64).
  const char* flash_env = std::getenv("DISPATCH_CUDA_FLASH");
  flash_ = !(flash_env && flash_env[0] == '0') && attention_flash_supported(cfg_.head_dim);
  if (const char* m = std::getenv("DISPATCH_CUDA_FLASH_MIN_TOKENS")) flash_min_tokens_ = std::max(1, std::atoi(m));
  inv_freq_id_ = upload(cfg_.inv_freq.data(), cfg_.inv_freq.size(), false);
}

Model::~Model() {
  clear_graphs();
  cudaStreamSynchronize(stream_);
  for (void* p : scratch_) cudaFree(p);
  for (void* p : bufs_) cudaFree(p);
  for (bf16* p : k_cache_) cudaFree(p);
  for (bf16* p : v_cache_) cudaFree(p);
  if (dequant_) cudaFree(dequant_);
  for (PinnedSlot& p : slots_)
    for (void* q : {(void*)p.meta, (void*)p.params, (void*)p.sampled, (void*)p.logprob, (void*)p.chain, (void*)p.tiles,
                    (void*)p.top_ids, (void*)p.top_logprobs, (void*)p.pen})
      if (q) cudaFreeHost(q);
  if (pen_) cudaFree(pen_);
  for (cudaEvent_t e : step_done_)
    if (e) cudaEventDestroy(e);
  if (host_logits_) cudaFreeHost(host_logits_);
  cudaStreamDestroy(stream_);
}

void Model::ensure_capacity(StepShape s) {
  const size_t meta = size_t(4) * s.T + s.R + size_t(s.S) * table_stride_;
  if (s.T <= cap_.T && s.R <= cap_.R && s.S <= cap_.S && meta <= meta_cap_) return;
  DC_CUDA(cudaStreamSynchronize(stream_));
  clear_graphs();
  for (void* p : scratch_) cudaFree(p);
  scratch_.clear();
  for (PinnedSlot& p : slots_) {
    for (void* q : {(void*)p.meta, (void*)p.params, (void*)p.sampled, (void*)p.logprob, (void*)p.chain, (void*)p.tiles,
                    (void*)p.top_ids, (void*)p.top_logprobs})
      if (q) cudaFreeHost(q);
    int2* pen = p.pen;  // the penalty staging is sized apart from the step
    const size_t pen_cap = p.pen_cap;
    p = PinnedSlot{};
    p.pen = pen, p.pen_cap = pen_cap;
  }
  if (host_logits_) cudaFreeHost(host_logits_), host_logits_ = nullptr;
  // grow geometrically so a run of slightly longer chunks does not reallocate every step
  const int T = std::max({s.T, cap_.T * 3 / 2, graph_max_batch_, 16});
  const int R = std::max({s.R, cap_.R * 3 / 2, graph_max_batch_, 16});
  const int S = std::max({s.S, cap_.S * 3 / 2, graph_max_batch_, 16});
  cap_ = {T, S, R};
  meta_cap_ = size_t(4) * T + R + size_t(S) * table_stride_;
  const int H = cfg_.hidden, D = cfg_.head_dim;
  const size_t qkv_cols = size_t(cfg_.num_heads + 2 * cfg_.num_kv_heads) * D;
  const size_t M = size_t(T) * max_k_;
  auto alloc = [&](size_t bytes) {
    void* p = nullptr;
    DC_CUDA(cudaMalloc(&p, bytes ? bytes : 16));
    if (skip_ops_) DC_CUDA(cudaMemsetAsync(p, 0, bytes ? bytes : 16, stream_));  // skipped ops leave it stale
    scratch_.push_back(p);
    return p;
  };
  x_ = static_cast<float*>(alloc(size_t(T) * H * 4));
  moe_block_scratch_ = nullptr;
  if (std::any_of(router_t_.begin(), router_t_.end(), [](int id) { return id >= 0; })) {
    const size_t bytes = moe_block_scratch_bytes(max_e_, max_k_, max_i_);
    moe_block_scratch_ = alloc(bytes);
    DC_CUDA(cudaMemsetAsync(moe_block_scratch_, 0, bytes, stream_));  // the grid barrier's word starts at 0
  }
  h_ = static_cast<float*>(alloc(size_t(T) * H * 4));
  hb_ = static_cast<bf16*>(alloc(size_t(T) * H * 2));
  qkv_ = static_cast<float*>(alloc(size_t(T) * qkv_cols * 4));
  rope_cs_ = gemm_qkv_post_enabled() ? static_cast<float*>(alloc(size_t(T) * D * 4)) : nullptr;  // opt-in path only
  attn_ = static_cast<bf16*>(alloc(size_t(T) * cfg_.num_heads * D * 2));
  gu_ = static_cast<float*>(alloc(size_t(T) * 2 * max_dense_i_ * 4));
  act_ = static_cast<bf16*>(alloc(size_t(T) * max_dense_i_ * 2));
  shared_ = static_cast<float*>(alloc(size_t(T) * H * 4));
  gate_ = static_cast<float*>(alloc(size_t(T) * 4));
  router_logits_ = static_cast<float*>(alloc(size_t(T) * max_e_ * 4));
  topk_ids_ = static_cast<int32_t*>(alloc(M * 4));
  topk_w_ = static_cast<float*>(alloc(M * 4));
  slot_row_ = static_cast<int32_t*>(alloc(M * 4));
  counts_ = static_cast<int32_t*>(alloc(size_t(max_e_) * 4));
  offsets_ = static_cast<int32_t*>(alloc(size_t(max_e_ + 1) * 4));
  ws_ = static_cast<int32_t*>(alloc(size_t(max_e_) * 4));
  xp_ = static_cast<bf16*>(alloc(M * H * 2));
  g1_ = static_cast<bf16*>(alloc(M * 2 * max_i_ * 2));
  a1_ = static_cast<bf16*>(alloc(M * max_i_ * 2));
  y1_ = static_cast<bf16*>(alloc(M * H * 2));
  moe_out_ = static_cast<bf16*>(alloc(size_t(T) * H * 2));
  last_ = static_cast<float*>(alloc(size_t(R) * H * 4));
  lastb_ = static_cast<bf16*>(alloc(size_t(R) * H * 2));
  logits_ = static_cast<float*>(alloc(size_t(R) * cfg_.vocab * 4));
  meta_ = static_cast<int32_t*>(alloc(meta_cap_ * 4));
  DC_CUDA(cudaMallocHost(&host_logits_, size_t(R) * cfg_.vocab * 4));
  params_ = static_cast<SampleParams*>(alloc(size_t(R) * sizeof(SampleParams)));
  sampled_ = static_cast<int32_t*>(alloc(size_t(R) * 4));
  sampled_logprob_ = static_cast<float*>(alloc(size_t(R) * 4));
  chain_ = static_cast<int32_t*>(alloc(size_t(T) * 4));
  top_ids_ = static_cast<int32_t*>(alloc(size_t(R) * kMaxTopLogprobs * 4));
  top_logprobs_ = static_cast<float*>(alloc(size_t(R) * kMaxTopLogprobs * 4));
  last_sampled_rows_ = -1;  // sampled_ is new
  for (PinnedSlot& p : slots_) {
    DC_CUDA(cudaMallocHost(&p.meta, meta_cap_ * 4));
    DC_CUDA(cudaMallocHost(&p.params, size_t(R) * sizeof(SampleParams)));
    DC_CUDA(cudaMallocHost(&p.sampled, size_t(R) * 4));
    DC_CUDA(cudaMallocHost(&p.logprob, size_t(R) * 4));
    DC_CUDA(cudaMallocHost(&p.chain, size_t(T) * 4));
    DC_CUDA(cudaMallocHost(&p.tiles, size_t(T) * 2 * 4));
    DC_CUDA(cudaMallocHost(&p.top_ids, size_t(R) * kMaxTopLogprobs * 4));
    DC_CUDA(cudaMallocHost(&p.top_logprobs, size_t(R) * kMaxTopLogprobs * 4));
  }
  tiles_ = static_cast<int32_t*>(alloc(size_t(T) * 2 * 4));
  use_slot(cur_slot_);
}

// kernels/ GEMMs need N % 16 and K % 64 (small-M path) and K % 8 (wgmma path); the tiny test
// models fall back to the reference grouped GEMM.
bool Model::moe_kernels_take(const LayerConfig& c) const {
  const int H = cfg_.hidden, I = c.intermediate;
  return use_kernels_moe_ && (2 * I) % 16 == 0 && H % 64 == 0 && I % 64 == 0;
}

bool Model::moe_layer(int l, int T, float* h, bf16* hb, const float* post_norm, const float* next_norm) {
  if (ep_) return moe_layer_ep(l, T, h, hb, post_norm);  // expert parallel (model_ep.cu)
  const LayerConfig& c = cfg_.layers[l];
  const LayerWeights& w = w_.layers[l];
  const int H = cfg_.hidden, E = c.num_experts, k = c.top_k, I = c.intermediate, M = T * k;
  const bool fused = !legacy_kernels();
  if (post_norm) {
    if (!skipped(skip_ops_, kSkipNormRouter, T))
      norm_router(x_, T, H, post_norm, cfg_.rms_eps, static_cast<const float*>(buf(w.router)), E, router_logits_, h,
                  hb, stream_);
    mark("norm_router_logits");
  } else {
    linear_f32(h, T, H, static_cast<const float*>(buf(w.router)), E, router_logits_, stream_);
    mark("router_logits");
  }
  dispatch::RouterConfig rc;
  rc.num_experts = E, rc.top_k = k, rc.renormalize = c.norm_top_k;
  const float* router_bias = static_cast<const float*>(buf(w.router_bias));
  // one-token steps: gate|up routes itself (the kernels' moe_gate_up_self_routed), no routing kernel in between
  const bool self_route = fused && T == 1 && self_route_ && !cfg_.int8_experts && gate_up_fused(l) &&
                          moe_kernels_take(c) && route_small_supported(T, rc, H) &&
                          dispatch::moe_gate_up_self_routed_supported(E, 2 * I, H, rc) &&
                          !skipped(skip_ops_, kSkipExperts, T);
  if (self_route) {
    const dispatch::SelfRoute route{router_logits_, router_bias, rc, topk_ids_, topk_w_, slot_row_, counts_, offsets_};
    dispatch::moe_gate_up_self_routed(hb, buf(w.gate_up), a1_, route, E, 2 * I, H, stream_, true);
    // down waits for gate|up, which wrote the routing (no early loads at one token: kSwapAbEarlyMinTokens)
    dispatch::moe_grouped_gemm_bf16(a1_, buf(w.down), y1_, offsets_, M, T, E, H, I, stream_, false, false);
    mark("self_routed_experts");
  } else {
    expert_chain(l, T, hb, rc, router_bias);
  }
  if (fused) {
    // shared expert first, so one kernel can add everything into x and norm the result
    const int SI = c.shared_intermediate;
    const bool gated = SI > 0 && c.shared_gate;
    if (SI > 0) {
      const bf16* wgu = static_cast<const bf16*>(buf(w.shared_gate_up));
      if (!gemm_silu(hb, T, H, wgu, SI, act_, stream_)) {
        gemm(hb, T, H, wgu, 2 * SI, nullptr, gu_, false, stream_);
        silu_mul_f32(gu_, T, SI, act_, stream_);
      }
      // ungated: accumulated straight into x; gated: added by the combine with sigmoid(gate)
      gemm(act_, T, SI, static_cast<const bf16*>(buf(w.shared_down)), H, nullptr, gated ? shared_ : x_, !gated,
           stream_);
      if (gated) linear_f32(h, T, H, static_cast<const float*>(buf(w.shared_gate)), 1, gate_, stream_);
      mark("shared_expert");
    }
    if (!skipped(skip_ops_, kSkipCombine, T))
      moe_combine_norm(y1_, slot_row_, topk_w_, T, k, H, gated ? shared_ : nullptr, gated ? gate_ : nullptr, x_,
                       next_norm, cfg_.rms_eps, hb_, stream_);
    mark("combine_norm");
    return next_norm != nullptr;
  }
  dispatch::sm90_bf16_moe_unpermute(y1_, slot_row_, topk_w_, T, k, H, moe_out_, stream_);
  mark("unpermute");

  add_routed_and_shared(l, T, h, hb);
  return false;
}

// x += routed (moe_out_, bf16) + the layer's shared expert on the same tokens (sigmoid-gated
// for Qwen2-MoE, folded into x by its down GEMM otherwise): the unfused tail of the MoE layer,
// shared by moe_layer and moe_layer_ep.
void Model::add_routed_and_shared(int l, int T, float* h, bf16* hb) {
  const LayerConfig& c = cfg_.layers[l];
  const LayerWeights& w = w_.layers[l];
  const int H = cfg_.hidden;
  if (c.shared_intermediate == 0) {
    add_moe(x_, moe_out_, nullptr, nullptr, T, H, stream_);
    mark("residual_add");
    return;
  }
  const int SI = c.shared_intermediate;
  gemm(hb, T, H, static_cast<const bf16*>(buf(w.shared_gate_up)), 2 * SI, nullptr, gu_, false, stream_);
  silu_mul_f32(gu_, T, SI, act_, stream_);
  if (c.shared_gate) {
    gemm(act_, T, SI, static_cast<const bf16*>(buf(w.shared_down)), H, nullptr, shared_, false, stream_);
    linear_f32(h, T, H, static_cast<const float*>(buf(w.shared_gate)), 1, gate_, stream_);
    add_moe(x_, moe_out_, shared_, gate_, T, H, stream_);
  } else {
    gemm(act_, T, SI, static_cast<const bf16*>(buf(w.shared_down)), H, nullptr, x_, true, stream_);
    add_moe(x_, moe_out_, nullptr, nullptr, T, H, stream_);
  }
  mark("shared_expert_add");
}

void Model::launch(StepShape s, const int32_t* m) {
  const int T = s.T, H = cfg_.hidden, D = cfg_.head_dim, Hq = cfg_.num_heads, Hkv = cfg_.num_kv_heads;
  const int32_t *ids = m, *pos = m + T, *slot = m + 2 * T, *tok_seq = m + 3 * T, *rows = m + 4 * T;
  const int32_t* tables = rows + s.R;
  const int ld = (Hq + 2 * Hkv) * D;
  const float eps = cfg_.rms_eps;
  const float* inv_freq = static_cast<const float*>(buf(inv_freq_id_));
  auto f = [&](int id) { return static_cast<const float*>(buf(id)); };
  auto b = [&](int id) { return static_cast<const bf16*>(buf(id)); };

  const bool fused = !legacy_kernels();
  const bool fused_post = fused && qkv_post_supported(Hq, Hkv, D);
  // qkv_post folded into the decode attention kernel (attention_decode_qkv) when no token of the
  // step reads a key another token of it writes: T == S, one token per sequence (pack-step.ts gives
  // a table row only to a sequence with tokens, so T tokens over S == T rows hold one each; decode
  // graphs' padding rows share row 0 but write no KV). Not for the whole-projection norm
  // (qk_norm 2), prefill tiles or DISPATCH_CUDA_ATTN_PER_HEAD=1. Opt-in
  // (DISPATCH_CUDA_ATTN_FUSED_QKV=1): on the H200 (20:40 UTC) it was no faster end to end (batch 1
  // 3.295 vs 3.309 ms, batch 64 21.04 vs 20.32) and 3-16% slower in attention-check's graph replays
  // at T = 1-4 (its prologue costs what the saved launch gave back).
  static const bool fold_env = [] {
    const char* v = std::getenv("DISPATCH_CUDA_ATTN_FUSED_QKV");
    const char* ph = std::getenv("DISPATCH_CUDA_ATTN_PER_HEAD");
    return (v && v[0] == '1') && !(ph && ph[0] == '1');
  }();
  const bool fold_post = fused_post && fold_env && s.T == s.S && cfg_.qk_norm != 2 && flash_plan_.num_tiles == 0 &&
                         !skipped(skip_ops_, kSkipQkvPost, T) && !skipped(skip_ops_, kSkipAttention, T);
  bool normed = false;  // hb_ already holds this layer's input norm (the previous MoE layer's combine)
  embedding(b(w_.embed), ids, T, H, x_, stream_);
  mark("embedding");
  // the rotary sines and cosines of the step, once for its layers, where the q|k|v projection may take qkv_post
  const bool rope_tab =
      fused_post && !fold_post && T > 64 && D == 128 && rope_cs_ != nullptr && gemm_qkv_post_enabled();
  if (rope_tab) rope_table(pos, T, D, inv_freq, rope_cs_, stream_);
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const LayerWeights& w = w_.layers[l];
    if (!normed) rms_norm(x_, H, T, H, H, f(w.input_norm), eps, nullptr, 0, hb_, stream_);
    normed = false;
    mark("rms_norm");
    QkvPostArgs p;
    p.qkv = qkv_, p.T = T, p.Hq = Hq, p.Hkv = Hkv, p.D = D, p.qk_norm = cfg_.qk_norm;
    p.q_norm = cfg_.qk_norm != 0 ? f(w.q_norm) : nullptr, p.k_norm = cfg_.qk_norm != 0 ? f(w.k_norm) : nullptr;
    p.eps = eps, p.clip = cfg_.clip_qkv, p.pos = pos, p.inv_freq = inv_freq, p.slots = slot;
    p.k_cache = k_cache_[l], p.v_cache = v_cache_[l], p.rope_cs = rope_tab ? rope_cs_ : nullptr;
    const float* qkv_bias = w.qkv_bias >= 0 ? f(w.qkv_bias) : nullptr;
    // prefill steps: qkv_post in the projection's epilogue where that kernel takes the step (gemm_qkv_post)
    const bool post_in_gemm = fused_post && !fold_post && !skipped(skip_ops_, kSkipQkvProj, T) &&
                              !skipped(skip_ops_, kSkipQkvPost, T) &&
                              gemm_qkv_post(hb_, T, H, b(w.qkv), ld, qkv_bias, qkv_, p, stream_);
    if (!post_in_gemm && !skipped(skip_ops_, kSkipQkvProj, T))
      gemm(hb_, T, H, b(w.qkv), ld, qkv_bias, qkv_, false, stream_);
    mark("qkv_proj");
    float* q = qkv_;
    float* k = qkv_ + Hq * D;
    float* v = qkv_ + (Hq + Hkv) * D;
    AttentionArgs a;
    a.q = q, a.ldq = ld, a.k_cache = k_cache_[l], a.v_cache = v_cache_[l], a.pos = pos, a.tok_seq = tok_seq;
    a.tables = tables, a.table_stride = table_stride_, a.T = T, a.B = block_size_, a.Hq = Hq, a.Hkv = Hkv, a.D = D;
    a.scale = 1.f / sqrtf(float(D)), a.window = cfg_.window, a.out = attn_, a.long_context = long_ctx_;
    const bool fold = fold_post && attention_decode_qkv_supported(a, p);
    if (fold || post_in_gemm) {
      // attention_decode_qkv below, or the q|k|v projection's epilogue above, does qkv_post's work
    } else if (fused_post) {
      if (!skipped(skip_ops_, kSkipQkvPost, T)) qkv_post(p, stream_);
      mark("qkv_post");
    } else {
      if (cfg_.qk_norm != 0) {
        const int gq = cfg_.qk_norm == 1 ? D : Hq * D;
        const int gk = cfg_.qk_norm == 1 ? D : Hkv * D;
        rms_norm(q, ld, T, Hq * D, gq, f(w.q_norm), eps, q, ld, nullptr, stream_);
        rms_norm(k, ld, T, Hkv * D, gk, f(w.k_norm), eps, k, ld, nullptr, stream_);
        mark("qk_norm");
      }
      if (cfg_.clip_qkv > 0.f) clamp(qkv_, ld, T, ld, cfg_.clip_qkv, stream_);
      rope(q, ld, T, Hq + Hkv, D, pos, inv_freq, stream_);  // k's heads follow q's in the row: one launch
      mark("rope");
      write_kv(k, v, ld, T, Hkv * D, slot, k_cache_[l], v_cache_[l], stream_);
      mark("kv_write");
    }
    if (skipped(skip_ops_, kSkipAttention, T)) {
      // cost probe: attn_ keeps earlier values
    } else if (fold) {
      attention_decode_qkv(a, p, stream_);
    } else if (flash_plan_.num_tiles > 0) {
      attention_flash(a, tiles_, flash_plan_, stream_);
    } else {
      attention(a, stream_);
    }
    mark("attention");
    const LayerConfig& c = cfg_.layers[l];
    if (moe_block_takes(l, T)) {
      normed = moe_block_layer(l, l + 1 < cfg_.num_layers ? f(w_.layers[l + 1].input_norm) : nullptr);
      mark("moe_block");
      continue;
    }
    if (!skipped(skip_ops_, kSkipOProj, T))
      gemm(attn_, T, Hq * D, b(w.o), H, w.o_bias >= 0 ? f(w.o_bias) : nullptr, x_, true, stream_);
    mark("o_proj");

    // small MoE steps: the router kernel computes this norm itself
    const bool norm_in_router = fused && c.moe && T <= kNormRouterMaxTokens;
    if (!norm_in_router) {
      rms_norm(x_, H, T, H, H, f(w.post_norm), eps, h_, H, hb_, stream_);
      mark("rms_norm");
    }
    if (c.moe) {
      const float* next_norm = fused && l + 1 < cfg_.num_layers ? f(w_.layers[l + 1].input_norm) : nullptr;
      normed = moe_layer(l, T, h_, hb_, norm_in_router ? f(w.post_norm) : nullptr, next_norm);
    } else {
      const int I = c.dense_intermediate;
      if (!gemm_silu(hb_, T, H, b(w.gate_up), I, act_, stream_)) {
        gemm(hb_, T, H, b(w.gate_up), 2 * I, nullptr, gu_, false, stream_);
        silu_mul_f32(gu_, T, I, act_, stream_);
      }
      gemm(act_, T, I, b(w.down), H, nullptr, x_, true, stream_);
      mark("dense_mlp");
    }
  }
  gather_rows(x_, rows, s.R, H, last_, stream_);
  rms_norm(last_, H, s.R, H, H, f(w_.norm), eps, nullptr, 0, lastb_, stream_);
  gemm(lastb_, s.R, H, b(w_.lm_head), cfg_.vocab, nullptr, logits_, false, stream_);
  mark("lm_head");
}

// A decode step (one token and one logit row per sequence) replays the graph of the next captured batch size; rows
// past the real ones are padding that writes no KV. Under EP only low-latency steps are graphed (ep_graphable),
// keyed also by the step's row bound.
StepShape Model::run_shape(const int32_t* meta, StepShape s, bool* decode_out) const {
  bool decode = s.T == s.S && s.T == s.R && s.T <= graph_max_batch_ && (!ep_ || ep_graphable());
  for (int i = 0; decode && i < s.T; ++i) decode = meta[4 * s.T + i] == i && meta[3 * s.T + i] == i;
  *decode_out = decode;
  if (!decode) return s;
  const int g = pow2_at_least(s.T, graph_max_batch_);
  return {g, g, g};
}

void Model::enqueue(const int32_t* meta, StepShape s, const int32_t* chain) {
  DC_CHECK(!k_cache_.empty(), "allocate_kv() must come before a step");
  DC_CHECK(s.T > 0 && s.S > 0 && s.S <= s.T && s.R <= s.T, "bad step shape");
  DC_CUDA(cudaSetDevice(device_));
  bool decode = false;
  const StepShape run = run_shape(meta, s, &decode);
  ensure_capacity(run);
  const size_t stride = table_stride_;
  const size_t meta_len = size_t(4) * run.T + run.R + size_t(run.S) * stride;
  if (decode) {
    const int n = s.T, G = run.T;
    int32_t* hm = host_meta_;
    for (int part = 0; part < 4; ++part) {
      std::memcpy(hm + part * G, meta + part * n, n * 4);
      const int pad = part == 2 ? -1 : 0;  // slot -1: padding writes no KV
      for (int i = n; i < G; ++i) hm[part * G + i] = pad;
    }
    for (int i = 0; i < G; ++i) hm[4 * G + i] = i;
    std::memcpy(hm + 5 * G, meta + 5 * n, size_t(n) * stride * 4);
    std::memset(hm + 5 * G + size_t(n) * stride, 0, size_t(G - n) * stride * 4);
  } else {
    std::memcpy(host_meta_, meta, meta_len * 4);
  }
  DC_CUDA(cudaMemcpyAsync(meta_, host_meta_, meta_len * 4, cudaMemcpyHostToDevice, stream_));
  if (chain) chain_tokens(chain, s.T);  // ids[0, T) of meta_ (both layouts) from the previous step's sampled_
  plan_flash_tiles(meta, run, decode);
  // a decode step of few sequences with a long context takes the split-K attention, in graphs of its own
  long_ctx_ = false;
  const int long_from = attention_long_context();
  if (decode && long_from > 0 && attention_decode_long_split_k(run.T, cfg_.num_kv_heads))
    for (int i = 0; i < s.T && !long_ctx_; ++i) long_ctx_ = meta[s.T + i] + 1 >= long_from;
  const int key = graph_key(run.T) | (long_ctx_ ? kLongContextGraph : 0);

  if (!decode || !replay(key, [&] { launch(run, meta_); })) launch(run, meta_);
}

// Replays the graph under key, capturing body on the key's second use (the first ran eagerly, so
// every launcher's one-time host setup -- attributes, occupancy queries, driver entry points --
// is done). False: the caller runs body eagerly (first use, or capture failed: graphs go off).
bool Model::replay(int key, const std::function<void()>& body) {
  if (!warmed_.count(key)) {
    warmed_.insert(key);
    return false;
  }
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    cudaGraphExec_t exec = nullptr;
    std::string why;
    try {
      exec = capture(body);
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (!exec) {
      std::fprintf(stderr, "[native-cuda] CUDA graph capture failed (%s); decode steps run eagerly from now on\n", why.c_str());
      graph_max_batch_ = 0;
      return false;
    }
    it = graphs_.emplace(key, exec).first;
  }
  DC_CUDA(cudaGraphLaunch(it->second, stream_));
  return true;
}

// Tiles of consecutive rows of one sequence for the tiled attention (plan_attention_flash: 64 or 128 rows), uploaded
// for this step; none (the decode / per-head kernels) for decode steps and steps below flash_min_tokens_.
void Model::plan_flash_tiles(const int32_t* meta, StepShape run, bool decode) {
  flash_plan_ = FlashPlan{};
  if (!flash_ || decode || run.T < flash_min_tokens_) return;
  flash_plan_ = plan_attention_flash(meta + 3 * run.T, meta + run.T, run.T, cfg_.num_heads, cfg_.window, host_tiles_);
  DC_CUDA(cudaMemcpyAsync(tiles_, host_tiles_, size_t(flash_plan_.num_tiles) * 2 * 4, cudaMemcpyHostToDevice, stream_));
}

cudaGraphExec_t Model::capture(const std::function<void()>& body) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  DC_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  try {
    body();
  } catch (...) {
    cudaStreamEndCapture(stream_, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // a refused call inside the capture leaves its error behind
    throw;
  }
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (end != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    fail(__FILE__, __LINE__, std::string("graph capture: ") + cudaGetErrorString(end));
  }
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  DC_CHECK(err == cudaSuccess, std::string("graph instantiate: ") + cudaGetErrorString(err));
  return exec;
}

}  // namespace dcuda
