// The persistent one-token step's side of the model (decode_b1.h): whether it takes the model, its per-layer pointer
// table (rebuilt when the weights or the KV cache change) and its launch in place of the layer loop.
#include <cstdio>
#include <cstdlib>
#include <string>
#include "check.h"
#include "decode_b1.h"
#include "fused_ops.h"
#include "model.h"

namespace dcuda {

// Called after bind() and after allocate_kv(): the kernel reads the KV cache's per-layer pointers from its table.
void Model::prepare_decode_b1() {
  b1_ready_ = false;
  int mode = cfg_.persistent_decode;
  if (mode < 0) {
    const char* v = std::getenv("DISPATCH_CUDA_PERSISTENT_DECODE");
    mode = v && v[0] == '1' ? 1 : 0;
  }
  if (mode == 0 || w_.layers.empty() || k_cache_.empty()) return;
  auto no = [&](const std::string& why) {
    static bool said = false;
    if (!said) std::fprintf(stderr, "[native-cuda] persistent one-token steps off (the kernel chain runs them): %s\n", why.c_str());
    said = true;
  };
  if (cfg_.int8_experts) return no("int8 experts");
  if (cfg_.clip_qkv > 0.f || cfg_.window > 0) return no("qkv clipping or a sliding window");
  const LayerConfig& c0 = cfg_.layers[0];
  DecodeB1Shape s;
  s.L = cfg_.num_layers, s.H = cfg_.hidden, s.Hq = cfg_.num_heads, s.Hkv = cfg_.num_kv_heads, s.D = cfg_.head_dim;
  s.E = c0.num_experts, s.k = c0.top_k, s.I = c0.intermediate, s.qk_norm = cfg_.qk_norm;
  s.rc.num_experts = s.E, s.rc.top_k = s.k, s.rc.renormalize = c0.norm_top_k;
  std::vector<DecodeB1Layer> table(cfg_.num_layers);
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const LayerConfig& c = cfg_.layers[l];
    const LayerWeights& w = w_.layers[l];
    if (!c.moe || c.shared_intermediate > 0) return no("a dense layer or a shared expert");
    if (c.num_experts != s.E || c.top_k != s.k || c.intermediate != s.I || c.norm_top_k != c0.norm_top_k)
      return no("layers of different expert shapes");
    if (!gate_up_fused(l) || !moe_kernels_take(c)) return no("gate|up rows not interleaved for the fused SiLU");
    if (w.qkv_bias >= 0 || w.o_bias >= 0) return no("q|k|v or o bias");
    DecodeB1Layer& t = table[l];
    auto f = [&](int id) { return id >= 0 ? static_cast<const float*>(buf(id)) : nullptr; };
    auto b = [&](int id) { return static_cast<const bf16*>(buf(id)); };
    t.input_norm = f(w.input_norm), t.post_norm = f(w.post_norm), t.q_norm = f(w.q_norm), t.k_norm = f(w.k_norm);
    t.router = f(w.router), t.router_bias = f(w.router_bias);
    t.qkv = b(w.qkv), t.o = b(w.o), t.gate_up = b(w.gate_up), t.down = b(w.down);
    t.k_cache = k_cache_[l], t.v_cache = v_cache_[l];
  }
  std::string why;
  if (!decode_b1_supported(s, &why)) return no(why);
  const size_t bytes = table.size() * sizeof(DecodeB1Layer);
  if (!b1_layers_) DC_CUDA(cudaMalloc(&b1_layers_, bytes));
  DC_CUDA(cudaMemcpy(b1_layers_, table.data(), bytes, cudaMemcpyHostToDevice));
  if (!b1_scratch_) DC_CUDA(cudaMalloc(&b1_scratch_, decode_b1_scratch_bytes(s)));
  const char* trace = std::getenv("DISPATCH_CUDA_PERSISTENT_TRACE");
  if (trace && trace[0] == '1' && !b1_trace_) {
    DC_CUDA(cudaMalloc(&b1_trace_, sizeof(unsigned)));
    DC_CUDA(cudaMemset(b1_trace_, 0, sizeof(unsigned)));
  }
  b1_shape_ = s;
  b1_ready_ = true;
}

bool Model::decode_b1_takes(StepShape s) const {
  return b1_ready_ && s.T == 1 && s.S == 1 && s.R == 1 && !ep_ && !skip_ops_ && num_tiles_ == 0 && !legacy_kernels();
}

// The layers of a one-token step: x_ holds the embedding before and the last layer's output after.
void Model::decode_b1_step(const int32_t* meta) {
  DecodeB1Args a;
  a.s = b1_shape_;
  a.layers = static_cast<const DecodeB1Layer*>(b1_layers_);
  a.eps = cfg_.rms_eps;
  a.pos = meta + 1, a.slot = meta + 2, a.table = meta + 5;  // ids pos slot tok_seq rows tables, T = R = 1
  a.B = block_size_;
  a.inv_freq = static_cast<const float*>(buf(inv_freq_id_));
  a.x = x_, a.qkv = qkv_, a.o = h_, a.logits = router_logits_, a.act = a1_, a.y = y1_;
  a.trace = b1_trace_;
  decode_b1_bind_scratch(a, b1_scratch_);
  decode_b1(a, stream_);
}

}  // namespace dcuda
