// Device pieces both GPU samplers share (sampling.cu: a CTA per row; sampling_cluster.cu: a cluster per row): the
// seeded draw, the banned-id test, and the last walk of a draw over the kept candidates.
#pragma once
#include <cstdint>
#include "sampling.h"

namespace dcuda {

// Counter-based uniform in [0, 1) with 24 bits for (seed, step): the same on any GPU (engine/rng.ts counterUniform
// is the host's copy).
__device__ __forceinline__ float sample_uniform01(uint64_t seed, uint64_t step) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + step + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(z >> 40) * (1.f / 16777216.f);
}

__device__ __forceinline__ bool sample_banned(const SampleParams& p, int id) {
  for (int b = 0; b < p.num_banned && b < kMaxBanned; ++b)
    if (p.banned[b] == id) return true;
  return false;
}

// The top-k / top-p threshold on the unnormalized probabilities (max 1): the largest tau in (0, 1], found by
// kBisect halvings, that keeps >= top_k candidates and >= top_p of the `total` mass; 0 when neither limits.
// mass_above(tau, &count) returns the mass of the candidates >= tau (and their count) over the whole row.
constexpr int kBisect = 24;

template <typename MassAbove>
__device__ float draw_threshold(MassAbove&& mass_above, const SampleParams& p, int V, float total) {
  float lo = 0.f, hi = 1.f;
  const bool limit_k = p.top_k > 0 && p.top_k < V;
  const bool limit_p = p.top_p > 0.f && p.top_p < 1.f;
  if (!limit_k && !limit_p) return lo;
  float count = 0.f;
  for (int it = 0; it < kBisect; ++it) {
    const float mid = 0.5f * (lo + hi);
    const float mass = mass_above(mid, &count);
    const bool keeps = (!limit_k || count >= float(p.top_k)) && (!limit_p || mass >= p.top_p * total);
    if (keeps) lo = mid;
    else hi = mid;
  }
  return lo;
}

constexpr int kNoPick = -2;

// The draw's walk over candidates i in [0, n), mass prob(i) kept where q >= tau and q > 0, the running mass starting
// at acc0: each thread owns a contiguous span, thread 0 scans the span sums, and the thread whose span crosses u
// walks it. That thread returns the candidate where the mass first passes u (the span's last kept one if rounding
// leaves it short, kNoPick if it has none); every other thread returns -1. chunk_sum: blockDim.x floats of shared
// memory; si, sf: one int and one float of shared memory.
template <typename Prob>
__device__ int walk_to_draw(Prob&& prob, int n, float tau, float u, float acc0, float* chunk_sum, int* si, float* sf) {
  const int span = (n + int(blockDim.x) - 1) / int(blockDim.x);
  const int begin = int(threadIdx.x) * span, end = min(n, begin + span);
  float s = 0.f;
  for (int i = begin; i < end; ++i) {
    const float q = prob(i);
    if (q >= tau && q > 0.f) s += q;
  }
  chunk_sum[threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float acc = acc0;
    int owner = int(blockDim.x) - 1;
    for (int t = 0; t < int(blockDim.x); ++t) {
      if (acc + chunk_sum[t] > u) {
        owner = t;
        break;
      }
      acc += chunk_sum[t];
    }
    si[0] = owner;
    sf[0] = acc;
  }
  __syncthreads();
  if (int(threadIdx.x) != si[0]) return -1;
  float acc = sf[0];
  int pick = kNoPick;
  for (int i = begin; i < end; ++i) {
    const float q = prob(i);
    if (q < tau || q <= 0.f) continue;
    pick = i;
    acc += q;
    if (acc > u) break;
  }
  return pick;
}

}  // namespace dcuda
