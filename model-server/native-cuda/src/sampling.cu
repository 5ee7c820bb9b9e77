// Sampling on the GPU: only R token ids cross PCIe instead of R x V logits. This file's kernel takes
// one CTA per logits row; sampling_cluster.cu runs the same algorithm over a cluster of 8 CTAs per row
// (slices in shared memory) and takes every vocabulary it fits (sample() below). Greedy when temperature <= 0 or top_k == 1; otherwise softmax at the temperature,
// restricted to the top_k largest and to the smallest set whose mass reaches top_p, then one
// seeded draw. The restriction is a threshold on the probability found by bisection (a
// handful of passes over the row, which sits in L2), so no sort is needed; ties at the
// threshold are all kept. The draw is a counter-based hash of (seed, step): deterministic for
// a seed on any GPU, but not the CPU sampler's stream of draws.
#include <cfloat>
#include <cstdlib>
#include <string>
#include "check.h"
#include "sampling.h"
#include "sampling_cluster.h"
#include "sampling_draw.cuh"

namespace dcuda {
namespace {

constexpr int kThreads = 1024;

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

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* __restrict__ logits, int V,
                                                          const SampleParams* __restrict__ params,
                                                          int32_t* __restrict__ out, float* __restrict__ logprob) {
  __shared__ float sf[32];
  __shared__ int si[32];
  __shared__ float chunk_sum[kThreads];
  const int r = blockIdx.x;
  const float* row = logits + size_t(r) * V;
  const SampleParams p = params[r];
  auto banned = [&](int i) { return sample_banned(p, i); };

  // raw log-sum-exp (for the reported log-probability), then the argmax of the allowed ids
  float raw_max = -FLT_MAX;
  for (int i = threadIdx.x; i < V; i += blockDim.x) raw_max = fmaxf(raw_max, row[i]);
  {
    for (int o = 16; o > 0; o >>= 1) raw_max = fmaxf(raw_max, __shfl_xor_sync(0xffffffffu, raw_max, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sf[threadIdx.x >> 5] = raw_max;
    __syncthreads();
    raw_max = sf[0];
    for (int w = 1; w < int(blockDim.x >> 5); ++w) raw_max = fmaxf(raw_max, sf[w]);
  }
  float raw_sum = 0.f;
  for (int i = threadIdx.x; i < V; i += blockDim.x) raw_sum += expf(row[i] - raw_max);
  raw_sum = block_sum(raw_sum, sf);
  const float log_z = raw_max + logf(raw_sum);
  __syncthreads();

  // argmax (lowest index wins ties, as the CPU sampler)
  MaxIdx best{-FLT_MAX, 0x7fffffff};
  for (int i = threadIdx.x; i < V; i += blockDim.x)
    if (row[i] > best.v && !banned(i)) best = {row[i], i};
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
  // No allowed id has a logit above -FLT_MAX (NaN or -inf everywhere: the model failed numerically): id -1 and a
  // NaN log-probability, which the engine turns into an error for this sequence only. (best is the same in every
  // thread, so the whole CTA returns.)
  if (best.i >= V) {
    if (threadIdx.x == 0) out[r] = -1, logprob[r] = __int_as_float(0x7fc00000);
    return;
  }
  if (p.temperature <= 0.f || p.top_k == 1) {
    if (threadIdx.x == 0) out[r] = best.i, logprob[r] = row[best.i] - log_z;
    return;
  }
  const float inv_t = 1.f / p.temperature;
  // unnormalized, max = 1; banned ids have probability 0
  auto prob = [&](int i) { return banned(i) ? 0.f : expf((row[i] - best.v) * inv_t); };
  auto mass_above = [&](float tau, float* count) {
    float s = 0.f, c = 0.f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
      const float q = prob(i);
      if (q >= tau && q > 0.f) s += q, c += 1.f;
    }
    *count = block_sum(c, sf);
    return block_sum(s, sf);
  };
  float count = 0.f;
  const float total = mass_above(0.f, &count);
  const float tau = draw_threshold(mass_above, p, V, total);
  const float kept = mass_above(tau, &count);
  const float u = sample_uniform01(p.seed, p.step) * kept;
  const int pick = walk_to_draw(prob, V, tau, u, 0.f, chunk_sum, si, sf);
  if (pick == -1) return;
  const int id = pick == kNoPick ? best.i : pick;  // rounding left nothing above u: keep the argmax
  out[r] = id;
  logprob[r] = row[id] - log_z;
}

}  // namespace

// DISPATCH_CUDA_SAMPLER=single: one CTA per row (this file's kernel) even where the cluster sampler fits (A/B).
static bool single_cta_sampler() {
  static const bool v = [] {
    const char* e = std::getenv("DISPATCH_CUDA_SAMPLER");
    return e && std::string(e) == "single";
  }();
  return v;
}

bool sample_extras_supported(int V) { return !single_cta_sampler() && sample_cluster_fits(V); }

void sample(const float* logits, int R, int V, const SampleParams* params, int32_t* out, float* logprob,
            cudaStream_t stream, const SampleExtras& extras) {
  if (R == 0) return;
  if (!single_cta_sampler() && sample_cluster_fits(V))
    return sample_cluster(logits, R, V, params, out, logprob, stream, extras);
  DC_CHECK(!extras.any, "penalties and top log-probabilities are sampled by the cluster sampler, which does not run "
                        "here (a vocabulary of " + std::to_string(V) + " ids, or DISPATCH_CUDA_SAMPLER=single)");
  sample_kernel<<<R, kThreads, 0, stream>>>(logits, V, params, out, logprob);
  DC_LAUNCHED();
}

}  // namespace dcuda
