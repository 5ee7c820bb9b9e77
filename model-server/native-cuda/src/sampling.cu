// Sampling on the GPU: one CTA per logits row, so only R token ids cross PCIe instead of R x V
// logits. Greedy when temperature <= 0 or top_k == 1; otherwise softmax at the temperature,
// restricted to the top_k largest and to the smallest set whose mass reaches top_p, then one
// seeded draw. The restriction is a threshold on the probability found by bisection (a
// handful of passes over the row, which sits in L2), so no sort is needed; ties at the
// threshold are all kept. The draw is a counter-based hash of (seed, step): deterministic for
// a seed on any GPU, but not the CPU sampler's stream of draws.
#include <cfloat>
#include "check.h"
#include "sampling.h"

namespace dcuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kBisect = 24;

// Sum over the CTA; every thread gets the result. smem: 32 floats, reused across calls.
__device__ float block_sum(float v, float* smem) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // earlier readers of smem are done
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < int(blockDim.x >> 5) ? smem[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) smem[0] = v;
  }
  __syncthreads();
  return smem[0];
}

struct MaxIdx {
  float v;
  int i;
};

__device__ float uniform01(uint64_t seed, uint64_t step) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + step + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(z >> 40) * (1.f / 16777216.f);
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* __restrict__ logits, int V,
                                                          const SampleParams* __restrict__ params,
                                                          int32_t* __restrict__ out) {
  __shared__ float sf[32];
  __shared__ int si[32];
  __shared__ float chunk_sum[kThreads];
  const int r = blockIdx.x;
  const float* row = logits + size_t(r) * V;
  const SampleParams p = params[r];

  // argmax (lowest index wins ties, as the CPU sampler)
  MaxIdx best{-FLT_MAX, 0x7fffffff};
  for (int i = threadIdx.x; i < V; i += blockDim.x)
    if (row[i] > best.v) best = {row[i], i};
  {
    float v = best.v;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) sf[warp] = v;
    __syncthreads();
    float m = sf[0];
    for (int w = 1; w < int(blockDim.x >> 5); ++w) m = fmaxf(m, sf[w]);
    int idx = best.v == m ? best.i : 0x7fffffff;
    for (int o = 16; o > 0; o >>= 1) idx = min(idx, __shfl_xor_sync(0xffffffffu, idx, o));
    __syncthreads();
    if (lane == 0) si[warp] = idx;
    __syncthreads();
    idx = si[0];
    for (int w = 1; w < int(blockDim.x >> 5); ++w) idx = min(idx, si[w]);
    best = {m, idx};
    __syncthreads();
  }
  if (p.temperature <= 0.f || p.top_k == 1) {
    if (threadIdx.x == 0) out[r] = best.i;
    return;
  }
  const float inv_t = 1.f / p.temperature;
  auto prob = [&](int i) { return expf((row[i] - best.v) * inv_t); };  // unnormalized, max = 1
  auto mass_above = [&](float tau, float* count) {
    float s = 0.f, c = 0.f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
      const float q = prob(i);
      if (q >= tau) s += q, c += 1.f;
    }
    *count = block_sum(c, sf);
    return block_sum(s, sf);
  };
  float count = 0.f;
  const float total = mass_above(0.f, &count);
  // Threshold tau in (0, 1]: the largest value keeping >= top_k entries and >= top_p of the mass.
  float lo = 0.f, hi = 1.f;
  const bool limit_k = p.top_k > 0 && p.top_k < V;
  const bool limit_p = p.top_p > 0.f && p.top_p < 1.f;
  if (limit_k || limit_p) {
    for (int it = 0; it < kBisect; ++it) {
      const float mid = 0.5f * (lo + hi);
      const float mass = mass_above(mid, &count);
      const bool keeps = (!limit_k || count >= float(p.top_k)) && (!limit_p || mass >= p.top_p * total);
      if (keeps) lo = mid;
      else hi = mid;
    }
  }
  const float tau = lo;
  const float kept = mass_above(tau, &count);
  const float u = uniform01(p.seed, p.step) * kept;
  // each thread owns a contiguous span; scan span sums, then the owning thread walks its span
  const int span = (V + blockDim.x - 1) / blockDim.x;
  const int begin = threadIdx.x * span, end = min(V, begin + span);
  float s = 0.f;
  for (int i = begin; i < end; ++i) {
    const float q = prob(i);
    if (q >= tau) s += q;
  }
  chunk_sum[threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float acc = 0.f;
    int owner = blockDim.x - 1;
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
  if (threadIdx.x == si[0]) {
    float acc = sf[0];
    int pick = best.i;  // rounding left nothing above u: keep the argmax
    for (int i = begin; i < end; ++i) {
      const float q = prob(i);
      if (q < tau) continue;
      pick = i;
      acc += q;
      if (acc > u) break;
    }
    out[r] = pick;
  }
}

}  // namespace

void sample(const float* logits, int R, int V, const SampleParams* params, int32_t* out, cudaStream_t stream) {
  if (R == 0) return;
  sample_kernel<<<R, kThreads, 0, stream>>>(logits, V, params, out);
  DC_LAUNCHED();
}

}  // namespace dcuda
