// Weights of the model (see model.h): uploads from host arrays or file ranges, random and
// constant tensors for benchmarks, int8 quantization of the routed experts, binding.
#include <cstring>
#include <map>
#include <string>
#include "check.h"
#include "gemm/grouped_gemm.h"
#include "model.h"
#include "moe/moe_ops.h"

namespace dcuda {
namespace {

__global__ void random_kernel(void* out, size_t n, float scale, uint64_t seed, bool as_bf16) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t z = seed + i * 0x9E3779B97F4A7C15ull;  // splitmix64
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = float(z >> 40) * (1.f / 16777216.f);  // [0, 1)
    const float v = (2.f * u - 1.f) * scale;
    if (as_bf16) static_cast<bf16*>(out)[i] = __float2bfloat16(v);
    else static_cast<float*>(out)[i] = v;
  }
}

__global__ void fill_kernel(void* out, size_t n, float value, bool as_bf16) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    if (as_bf16) static_cast<bf16*>(out)[i] = __float2bfloat16(value);
    else static_cast<float*>(out)[i] = value;
  }
}

}  // namespace

void* Model::buf(int id) const {
  if (id < 0) return nullptr;
  DC_CHECK(id < int(bufs_.size()), "unknown weight id");
  return bufs_[id];
}

int Model::upload(const float* data, size_t n, bool as_bf16) {
  void* d = nullptr;
  const size_t bytes = n * (as_bf16 ? 2 : 4);
  DC_CUDA(cudaMalloc(&d, bytes ? bytes : 16));
  bufs_.push_back(d);
  weight_bytes_ += bytes;
  if (!as_bf16) {
    DC_CUDA(cudaMemcpy(d, data, bytes, cudaMemcpyHostToDevice));
  } else {
    // convert in 8 M-value pieces so host memory stays bounded for big tensors
    constexpr size_t kPiece = size_t(1) << 23;
    std::vector<uint16_t> tmp(std::min(n, kPiece));
    for (size_t at = 0; at < n; at += kPiece) {
      const size_t m = std::min(kPiece, n - at);
      f32_to_bf16_host(data + at, tmp.data(), m);
      DC_CUDA(cudaMemcpy(static_cast<uint16_t*>(d) + at, tmp.data(), m * 2, cudaMemcpyHostToDevice));
    }
  }
  return int(bufs_.size()) - 1;
}

int Model::upload_ranges(const std::vector<std::string>& files, const std::vector<FileRange>& ranges, size_t n,
                         bool as_bf16) {
  const int id = alloc_buf(n * (as_bf16 ? 2 : 4));
  if (!staging_) staging_ = std::make_unique<UploadStaging>();
  const size_t written = upload_file_ranges(files, ranges, buf(id), as_bf16, *staging_);
  DC_CHECK(written == n, "ranges hold " + std::to_string(written) + " values, expected " + std::to_string(n));
  return id;
}

int Model::random(size_t n, float scale, uint64_t seed, bool as_bf16) {
  void* d = nullptr;
  const size_t bytes = n * (as_bf16 ? 2 : 4);
  DC_CUDA(cudaMalloc(&d, bytes ? bytes : 16));
  bufs_.push_back(d);
  weight_bytes_ += bytes;
  random_kernel<<<1024, 256, 0, stream_>>>(d, n, scale, seed, as_bf16);
  DC_LAUNCHED();
  DC_CUDA(cudaStreamSynchronize(stream_));
  return int(bufs_.size()) - 1;
}

int Model::fill(size_t n, float value, bool as_bf16) {
  void* d = nullptr;
  const size_t bytes = n * (as_bf16 ? 2 : 4);
  DC_CUDA(cudaMalloc(&d, bytes ? bytes : 16));
  bufs_.push_back(d);
  weight_bytes_ += bytes;
  fill_kernel<<<256, 256, 0, stream_>>>(d, n, value, as_bf16);
  DC_LAUNCHED();
  DC_CUDA(cudaStreamSynchronize(stream_));
  return int(bufs_.size()) - 1;
}

int Model::alloc_buf(size_t bytes) {
  void* d = nullptr;
  DC_CUDA(cudaMalloc(&d, bytes ? bytes : 16));
  bufs_.push_back(d);
  weight_bytes_ += bytes;
  return int(bufs_.size()) - 1;
}

void Model::free_buf(int id, size_t bytes) {
  DC_CUDA(cudaFree(bufs_[id]));
  bufs_[id] = nullptr;
  weight_bytes_ -= bytes;
}

// Gate/up rows interleaved by 8 (dispatch::interleave_gate_up) in the MoE layers whose expert
// GEMMs are the kernels' (moe_kernels_take), so the gate/up GEMM writes silu(gate) * up itself
// (fuse_silu) and the SiLU-mul launch goes. Runs before quantize_experts: int8 quantization is
// per row, so the int8 rows and their scales inherit the layout. The reference grouped GEMM
// (DISPATCH_CUDA_REF_MOE=1, the tiny test models' shapes) and DISPATCH_CUDA_FUSED_SILU=0 keep the
// plain [gate; up] layout. The old copy is freed layer by layer, like quantize_experts.
void Model::interleave_experts() {
  gate_up_interleaved_.assign(cfg_.num_layers, 0);
  if (!fused_silu_) return;
  DC_CUDA(cudaSetDevice(device_));
  const int H = cfg_.hidden;
  std::map<int, int> done;  // a buffer bound to several layers is interleaved once
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const LayerConfig& c = cfg_.layers[l];
    if (!c.moe || !moe_kernels_take(c)) continue;
    LayerWeights& w = w_.layers[l];
    gate_up_interleaved_[l] = 1;
    if (auto it = done.find(w.gate_up); it != done.end()) {
      w.gate_up = it->second;
      continue;
    }
    const size_t bytes = size_t(c.num_experts) * 2 * c.intermediate * H * 2;
    const int id = alloc_buf(bytes);
    dispatch::interleave_gate_up(buf(w.gate_up), buf(id), c.num_experts, c.intermediate, H, 2, stream_);
    DC_CUDA(cudaStreamSynchronize(stream_));
    free_buf(w.gate_up, bytes);
    done[w.gate_up] = id;
    w.gate_up = id;
  }
}

// bf16 experts -> int8 + per-row scales, layer by layer (the bf16 copy is freed as it goes, so
// device memory holds both only for one tensor at a time).
void Model::quantize_experts() {
  int8_.assign(cfg_.num_layers, {});
  const int H = cfg_.hidden;
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const LayerConfig& c = cfg_.layers[l];
    if (!c.moe) continue;
    LayerWeights& w = w_.layers[l];
    const size_t E = c.num_experts, I = c.intermediate;
    Int8Experts& q = int8_[l];
    q.gate_up_q = alloc_buf(E * 2 * I * H);
    q.gate_up_s = alloc_buf(E * 2 * I * 4);
    dispatch::sm90_bf16_quantize_int8_rows(buf(w.gate_up), int(E * 2 * I), H, static_cast<int8_t*>(buf(q.gate_up_q)),
                                           static_cast<float*>(buf(q.gate_up_s)), stream_);
    q.down_q = alloc_buf(E * H * I);
    q.down_s = alloc_buf(E * H * 4);
    dispatch::sm90_bf16_quantize_int8_rows(buf(w.down), int(E * H), int(I), static_cast<int8_t*>(buf(q.down_q)),
                                           static_cast<float*>(buf(q.down_s)), stream_);
    DC_CUDA(cudaStreamSynchronize(stream_));
    free_buf(w.gate_up, E * 2 * I * H * 2);
    free_buf(w.down, E * H * I * 2);
    // the bf16 scratch is for steps neither int8 kernel takes (shapes they refuse, or the tensor-core one off)
    if (!int8_wgmma_takes(c)) dequant_elems_ = std::max(dequant_elems_, E * 2 * I * H);
  }
  if (dequant_elems_) DC_CUDA(cudaMalloc(&dequant_, dequant_elems_ * 2));
}

void Model::bind(ModelWeights w) {
  DC_CHECK(int(w.layers.size()) == cfg_.num_layers, "one weight set per layer");
  DC_CHECK(w.embed >= 0 && w.norm >= 0 && w.lm_head >= 0, "embedding, final norm and LM head are required");
  for (int l = 0; l < cfg_.num_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    DC_CHECK(lw.input_norm >= 0 && lw.post_norm >= 0 && lw.qkv >= 0 && lw.o >= 0, "layer " + std::to_string(l) + ": attention weights missing");
    DC_CHECK(lw.gate_up >= 0 && lw.down >= 0, "layer " + std::to_string(l) + ": MLP weights missing");
    if (cfg_.layers[l].moe) DC_CHECK(lw.router >= 0, "layer " + std::to_string(l) + ": router missing");
  }
  w_ = std::move(w);
  staging_.reset();  // loading is over
  interleave_experts();
  if (cfg_.int8_experts) quantize_experts();
  prepare_moe_block();
}

}  // namespace dcuda
