// L2 pulls on a side stream (l2_ahead.h).
#include "l2_ahead.h"
#include <algorithm>
#include <cstdlib>
#include "check.h"

namespace dcuda {
namespace {

constexpr const char* kPointNames[] = {"o", "qkv", "qkv-early", "down"};  // L2AheadPoint order
constexpr int kWarp = 32;

__device__ __forceinline__ void bulk_prefetch_l2(const char* p, uint32_t bytes, bool evict_last, uint64_t policy) {
  if (evict_last) {
    asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;\n" ::"l"(p), "r"(bytes), "l"(policy)
                 : "memory");
  } else {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
  }
}

__device__ __forceinline__ uint64_t evict_last_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// Chunks first, first + stride, ... of [p, p + bytes): 16-byte aligned p, each chunk's length rounded
// down to 16 bytes (the bulk copy's granule; every range pulled here is a multiple of 16 bytes).
__device__ void pull_chunks(const char* p, size_t bytes, size_t chunk, size_t first, size_t stride, bool evict_last,
                            uint64_t policy) {
  const size_t n = (bytes + chunk - 1) / chunk;
  for (size_t c = first; c < n; c += stride) {
    const size_t len = min(chunk, bytes - c * chunk) & ~size_t(15);
    if (len > 0) bulk_prefetch_l2(p + c * chunk, uint32_t(len), evict_last, policy);
  }
}

__global__ void l2_pull_ranges(const char* a, size_t na, const char* b, size_t nb, uint32_t chunk, int evict_last) {
  const uint64_t policy = evict_last ? evict_last_policy() : 0;
  const size_t t = size_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = size_t(gridDim.x) * blockDim.x;
  pull_chunks(a, na, chunk, t, stride, evict_last != 0, policy);
  if (b != nullptr) pull_chunks(b, nb, chunk, t, stride, evict_last != 0, policy);
}

// grid (splits, E): the CTAs of column e pull expert e (len bytes at base + e * stride, and scale_len at
// scales + e * scale_stride) when it has rows this step.
__global__ void l2_pull_experts(const char* base, size_t stride, size_t len, const char* scales, size_t scale_stride,
                                size_t scale_len, const int32_t* offsets, uint32_t chunk, int evict_last) {
  const int e = blockIdx.y;
  if (__ldg(offsets + e + 1) <= __ldg(offsets + e)) return;
  const uint64_t policy = evict_last ? evict_last_policy() : 0;
  const size_t t = size_t(blockIdx.x) * blockDim.x + threadIdx.x, step = size_t(gridDim.x) * blockDim.x;
  pull_chunks(base + size_t(e) * stride, len, chunk, t, step, evict_last != 0, policy);
  if (scales != nullptr) pull_chunks(scales + size_t(e) * scale_stride, scale_len, chunk, t, step, evict_last != 0, policy);
}

int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  return v && *v ? std::min(std::max(std::atoi(v), lo), hi) : fallback;
}

}  // namespace

unsigned parse_l2_ahead(const std::string& list) {
  unsigned mask = 0;
  std::string name;
  for (char ch : list + ",") {
    if (ch != ',' && ch != '+' && ch != ' ') {
      name += ch;
      continue;
    }
    if (name.empty()) continue;
    int i = 0;
    while (i < int(std::size(kPointNames)) && name != kPointNames[i]) ++i;
    DC_CHECK(i < int(std::size(kPointNames)),
             "DISPATCH_CUDA_L2_AHEAD: unknown point '" + name + "' (points: o, qkv, qkv-early, down)");
    mask |= 1u << i;
    name.clear();
  }
  return mask;
}

L2Ahead::L2Ahead(const std::string& points) {
  if (points.empty() || points == "0") return;
  points_ = parse_l2_ahead(points);
  if (points_ == 0) return;
  max_tokens_ = env_int("DISPATCH_CUDA_L2_AHEAD_MAX_TOKENS", 64, 0, 1 << 20);
  chunk_ = env_int("DISPATCH_CUDA_L2_AHEAD_CHUNK_KB", 16, 1, 1024) << 10;
  budget_ = size_t(env_int("DISPATCH_CUDA_L2_AHEAD_MB", 32, 0, 1 << 16)) << 20;
  const char* hint = std::getenv("DISPATCH_CUDA_L2_AHEAD_HINT");
  evict_last_ = hint && std::string(hint) == "last";
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  DC_CUDA(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, dev));
  DC_CUDA(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  DC_CUDA(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  DC_CUDA(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
}

L2Ahead::~L2Ahead() {
  if (side_ == nullptr) return;
  cudaStreamSynchronize(side_);
  cudaEventDestroy(fork_);
  cudaEventDestroy(done_);
  cudaStreamDestroy(side_);
}

void L2Ahead::fork(cudaStream_t main) {
  DC_CUDA(cudaEventRecord(fork_, main));
  DC_CUDA(cudaStreamWaitEvent(side_, fork_, 0));
  pending_ = true;
}

void L2Ahead::pull(cudaStream_t main, L2Range a, L2Range b) {
  if (side_ == nullptr) return;
  a.bytes = std::min(a.bytes, budget_);
  b.bytes = std::min(b.bytes, budget_ - a.bytes);
  if (a.p == nullptr || a.bytes == 0) return;
  fork(main);
  l2_pull_ranges<<<sms_, kWarp, 0, side_>>>(static_cast<const char*>(a.p), a.bytes & ~size_t(15),
                                            static_cast<const char*>(b.p), b.p ? b.bytes & ~size_t(15) : 0,
                                            uint32_t(chunk_), evict_last_ ? 1 : 0);
  DC_LAUNCHED();
}

void L2Ahead::pull_experts(cudaStream_t main, const void* base, size_t expert_bytes, const void* scales,
                           size_t scale_bytes, const int32_t* offsets, int E, int max_active) {
  if (side_ == nullptr || E <= 0) return;
  const size_t per = expert_bytes + (scales ? scale_bytes : 0);
  if (size_t(std::min(E, max_active)) * per > budget_) return;
  fork(main);
  // about one warp per SM over the experts that have rows
  const int splits = std::max(1, std::min(16, sms_ / std::max(1, std::min(E, max_active))));
  l2_pull_experts<<<dim3(splits, E), kWarp, 0, side_>>>(
      static_cast<const char*>(base), expert_bytes, expert_bytes & ~size_t(15), static_cast<const char*>(scales),
      scale_bytes, scale_bytes & ~size_t(15), offsets, uint32_t(chunk_), evict_last_ ? 1 : 0);
  DC_LAUNCHED();
}

void L2Ahead::join(cudaStream_t main) {
  if (!pending_) return;
  DC_CUDA(cudaEventRecord(done_, side_));
  DC_CUDA(cudaStreamWaitEvent(main, done_, 0));
  pending_ = false;
}

}  // namespace dcuda
