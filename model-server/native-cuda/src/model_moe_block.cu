// The one-token MoE block's side of the model (see moe_block.h; opt-in, DISPATCH_CUDA_MOE_BLOCK=1): which layers
// it takes, the transposed routers it reads, and its launch in place of the chain from the o projection on.
#include <cstdio>
#include <cstdlib>
#include <string>
#include "check.h"
#include "fused_ops.h"
#include "model.h"
#include "moe_block.h"

namespace dcuda {

// One-token MoE blocks (moe_block.h), opt-in: DISPATCH_CUDA_MOE_BLOCK=1 or the config's moe_block = 1. Each MoE layer
// the kernel takes gets its router transposed once, here. Not for int8 experts or layers with a shared expert (the
// chain runs those). Off by default: on the H200 (2026-12-02) the kernel is slower than the chain it replaces
// (Qwen3-30B-A3B, 8 layers, batch 1: 1.18 vs 0.94 ms per step; docs/cuda-backend.md, "Session 11").
void Model::prepare_moe_block() {
  router_t_.assign(cfg_.num_layers, -1);
  int mode = cfg_.moe_block;
  if (mode < 0) {
    const char* v = std::getenv("DISPATCH_CUDA_MOE_BLOCK");
    mode = v && v[0] == '1' ? 1 : 0;
  }
  if (mode == 0 || cfg_.int8_experts) return;
  const int H = cfg_.hidden, Ko = cfg_.num_heads * cfg_.head_dim;
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const LayerConfig& c = cfg_.layers[l];
    if (!c.moe || c.shared_intermediate > 0) continue;
    std::string why;
    if (!moe_block_supported(H, Ko, c.num_experts, c.top_k, c.intermediate, &why)) {
      std::fprintf(stderr, "[native-cuda] layer %d: no one-token MoE block (the kernel chain runs it): %s\n", l, why.c_str());
      continue;
    }
    const int id = alloc_buf(size_t(c.num_experts) * H * 4);
    moe_block_transpose(static_cast<const float*>(buf(w_.layers[l].router)), c.num_experts, H,
                        static_cast<float*>(buf(id)), stream_);
    router_t_[l] = id;
  }
  DC_CUDA(cudaStreamSynchronize(stream_));
}

bool Model::moe_block_takes(int l, int T) const {
  return T == 1 && l < int(router_t_.size()) && router_t_[l] >= 0 && moe_block_scratch_ && !legacy_kernels() &&
         !skip_ops_ && !ep_;
}

bool Model::moe_block_layer(int l, const float* next_norm) {
  const LayerConfig& c = cfg_.layers[l];
  const LayerWeights& w = w_.layers[l];
  MoeBlockArgs a;
  a.attn = attn_, a.Ko = cfg_.num_heads * cfg_.head_dim, a.wo = static_cast<const bf16*>(buf(w.o));
  a.o_bias = w.o_bias >= 0 ? static_cast<const float*>(buf(w.o_bias)) : nullptr;
  a.x = x_, a.H = cfg_.hidden, a.post_norm = static_cast<const float*>(buf(w.post_norm)), a.eps = cfg_.rms_eps;
  a.router_t = static_cast<const float*>(buf(router_t_[l]));
  a.router_bias = static_cast<const float*>(buf(w.router_bias));
  a.E = c.num_experts, a.top_k = c.top_k, a.renormalize = c.norm_top_k;
  a.gate_up = static_cast<const bf16*>(buf(w.gate_up)), a.down = static_cast<const bf16*>(buf(w.down));
  a.I = c.intermediate, a.interleaved = gate_up_fused(l);
  a.next_norm = next_norm, a.hb = hb_;
  moe_block_bind_scratch(a, moe_block_scratch_);
  moe_block(a, stream_);
  return next_norm != nullptr;
}

}  // namespace dcuda
