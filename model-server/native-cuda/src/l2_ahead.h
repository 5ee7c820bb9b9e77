// Weights pulled into L2 ahead of the kernel that reads them (DISPATCH_CUDA_L2_AHEAD, docs/cuda-backend.md
// "L2 ahead"). In a small decode step HBM sits idle through the latency-bound kernels (q/k norm + RoPE,
// attention, norm + router, routing, combine) and is only part-used while a short weight stream ramps up and
// drains. The pulls run on a side stream that branches off the step at a point (an event after the work
// enqueued so far) and joins it once at the end, so in a decode graph they are a parallel branch: no kernel
// of the step waits for them, and a pull that is late costs only the bytes it read.
//
// Points (comma-separated names):
//   o          after the q|k|v projection: the layer's o projection (and its router), read after attention
//   qkv        after the routed gate|up GEMM: the next layer's q|k|v, read after down and the combine
//   qkv-early  after the o projection: the next layer's q|k|v (through the expert GEMMs' traffic)
//   down       after the routing: the routed down projection of every expert with rows (read on the GPU)
// Each pull is cp.async.bulk.prefetch.L2 in DISPATCH_CUDA_L2_AHEAD_CHUNK_KB chunks (default 16) from one
// warp per SM; DISPATCH_CUDA_L2_AHEAD_HINT=last tags the lines evict_last. A pull stops at
// DISPATCH_CUDA_L2_AHEAD_MB (default 32; an experts pull whose bound, min(E, T k) experts, is over it is
// left out); steps of more than DISPATCH_CUDA_L2_AHEAD_MAX_TOKENS tokens (default 64) pull nothing.
//
// (Bulk prefetches issued from the step's own latency-bound kernels stalled those kernels until they
// drained: 3.36 -> 8.7-15.1 ms per batch-1 step in session 3, docs/findings.md. Hence the side stream.)
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include <string>

namespace dcuda {

enum L2AheadPoint { kAheadO, kAheadQkv, kAheadQkvEarly, kAheadDown };

struct L2Range {
  const void* p = nullptr;
  size_t bytes = 0;
};

// The points of a DISPATCH_CUDA_L2_AHEAD list as a bit mask; throws on an unknown name.
unsigned parse_l2_ahead(const std::string& list);

class L2Ahead {
 public:
  // points: a DISPATCH_CUDA_L2_AHEAD list (the other knobs come from the environment); a side stream and
  // two events only when some point is on
  explicit L2Ahead(const std::string& points);
  ~L2Ahead();
  L2Ahead(const L2Ahead&) = delete;
  L2Ahead& operator=(const L2Ahead&) = delete;

  bool any() const { return points_ != 0; }
  bool on(L2AheadPoint p, int T) const { return (points_ >> p & 1u) && T <= max_tokens_; }
  // Pulls up to two ranges into L2 after everything enqueued on `main` so far.
  void pull(cudaStream_t main, L2Range a, L2Range b = {});
  // Pulls expert e's `expert_bytes` at base + e * expert_bytes (and its `scale_bytes` at scales + e *
  // scale_bytes, if scales) for every e in [0, E) with offsets[e + 1] > offsets[e], read on the GPU;
  // nothing when max_active experts of that size are over the budget.
  void pull_experts(cudaStream_t main, const void* base, size_t expert_bytes, const void* scales, size_t scale_bytes,
                    const int32_t* offsets, int E, int max_active);
  // `main` waits for every pull so far (before the step's end: a captured graph must join its branches).
  void join(cudaStream_t main);

 private:
  void fork(cudaStream_t main);
  unsigned points_ = 0;
  int max_tokens_ = 64;
  int chunk_ = 16 << 10;
  size_t budget_ = size_t(32) << 20;
  bool evict_last_ = false;
  int sms_ = 1;
  bool pending_ = false;  // a pull since the last join
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ = nullptr, done_ = nullptr;
};

}  // namespace dcuda
