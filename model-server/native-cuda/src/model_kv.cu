// KV cache storage and copies, and the per-op-group step profile (see model.h).
#include <algorithm>
#include <cstring>
#include <string>
#include "check.h"
#include "model.h"

namespace dcuda {

size_t Model::kv_bytes_per_block(int block_size) const {
  return size_t(cfg_.num_layers) * 2 * block_size * cfg_.num_kv_heads * cfg_.head_dim * sizeof(bf16);
}

void Model::allocate_kv(int num_blocks, int block_size) {
  DC_CHECK(num_blocks > 0 && block_size > 0, "allocate_kv: both must be positive");
  DC_CUDA(cudaStreamSynchronize(stream_));
  clear_graphs();
  for (bf16* p : k_cache_) cudaFree(p);
  for (bf16* p : v_cache_) cudaFree(p);
  k_cache_.assign(cfg_.num_layers, nullptr);
  v_cache_.assign(cfg_.num_layers, nullptr);
  const size_t per_layer = size_t(num_blocks) * block_size * cfg_.num_kv_heads * cfg_.head_dim * sizeof(bf16);
  for (int l = 0; l < cfg_.num_layers; ++l) {
    DC_CUDA(cudaMalloc(&k_cache_[l], per_layer));
    DC_CUDA(cudaMalloc(&v_cache_[l], per_layer));
    DC_CUDA(cudaMemset(k_cache_[l], 0, per_layer));
    DC_CUDA(cudaMemset(v_cache_[l], 0, per_layer));
  }
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  table_stride_ = std::min(num_blocks, (cfg_.max_context + block_size - 1) / block_size);
}

void Model::clear_graphs() {
  for (auto& [_, g] : graphs_) cudaGraphExecDestroy(g);
  graphs_.clear();
  warmed_.clear();
}

void Model::mark(const char* name) {
  if (!profiling_) return;
  cudaEvent_t e;
  DC_CUDA(cudaEventCreate(&e));
  DC_CUDA(cudaEventRecord(e, stream_));
  marks_.emplace_back(name, e);
}

std::vector<std::pair<std::string, float>> Model::profile(const int32_t* meta, StepShape s) {
  DC_CHECK(!k_cache_.empty(), "allocate_kv() must come before a step");
  ensure_capacity(s);
  const size_t meta_len = size_t(4) * s.T + s.R + size_t(s.S) * table_stride_;
  std::memcpy(host_meta_, meta, meta_len * 4);
  DC_CUDA(cudaMemcpyAsync(meta_, host_meta_, meta_len * 4, cudaMemcpyHostToDevice, stream_));
  plan_flash_tiles(meta, s, false);  // the attention a real eager step of this shape would run
  profiling_ = true;
  mark("start");
  try {
    launch(s, meta_);
  } catch (...) {
    profiling_ = false;
    throw;
  }
  profiling_ = false;
  DC_CUDA(cudaStreamSynchronize(stream_));
  std::vector<std::pair<std::string, float>> out;
  for (size_t i = 1; i < marks_.size(); ++i) {
    float ms = 0.f;
    DC_CUDA(cudaEventElapsedTime(&ms, marks_[i - 1].second, marks_[i].second));
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == marks_[i].first; });
    if (it == out.end()) out.emplace_back(marks_[i].first, ms);
    else it->second += ms;
  }
  for (auto& [_, e] : marks_) cudaEventDestroy(e);
  marks_.clear();
  return out;
}

void Model::export_kv(const int32_t* blocks, int n, uint16_t* out) {
  DC_CHECK(!k_cache_.empty(), "no KV cache");
  const size_t per = size_t(block_size_) * cfg_.num_kv_heads * cfg_.head_dim;
  DC_CUDA(cudaStreamSynchronize(stream_));
  size_t at = 0;
  for (int l = 0; l < cfg_.num_layers; ++l) {
    for (bf16* cache : {k_cache_[l], v_cache_[l]}) {
      for (int i = 0; i < n; ++i) {
        DC_CHECK(blocks[i] >= 0 && blocks[i] < num_blocks_, "block id outside the cache");
        DC_CUDA(cudaMemcpy(out + at, cache + size_t(blocks[i]) * per, per * 2, cudaMemcpyDeviceToHost));
        at += per;
      }
    }
  }
}

void Model::import_kv(const int32_t* blocks, int n, const uint16_t* in) {
  DC_CHECK(!k_cache_.empty(), "no KV cache");
  const size_t per = size_t(block_size_) * cfg_.num_kv_heads * cfg_.head_dim;
  DC_CUDA(cudaStreamSynchronize(stream_));
  size_t at = 0;
  for (int l = 0; l < cfg_.num_layers; ++l) {
    for (bf16* cache : {k_cache_[l], v_cache_[l]}) {
      for (int i = 0; i < n; ++i) {
        DC_CHECK(blocks[i] >= 0 && blocks[i] < num_blocks_, "block id outside the cache");
        DC_CUDA(cudaMemcpy(cache + size_t(blocks[i]) * per, in + at, per * 2, cudaMemcpyHostToDevice));
        at += per;
      }
    }
  }
}

}  // namespace dcuda
