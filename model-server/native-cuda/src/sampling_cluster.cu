// The GPU sampler with each logits row spread over a thread-block cluster (sampling.cu picks it): the row's
// V values are cut into kCluster slices, each CTA keeps its slice in shared memory, and every pass of the
// algorithm (sampling.cu's, step for step: raw log-sum-exp, argmax of the allowed ids, then for a draw the
// mass above a bisected threshold and the walk to the drawn id) runs over shared memory, its partial results
// combined across the cluster through distributed shared memory in rank order. One CTA per row read the row
// from L2 in every pass: on the H200 a greedy batch-1 draw over Qwen3's 151,936 ids took ~89 us, and a top-p
// draw makes 27 such passes.
// Rows may also ask for penalties and for the raw distribution's top log-probabilities (sampling_extras.cuh): both
// run on the slices after the raw log-sum-exp, the top ids first (they report the raw row).
#include <cooperative_groups.h>
#include <cfloat>
#include "check.h"
#include "sampling_cluster.h"
#include "sampling_draw.cuh"
#include "sampling_extras.cuh"

namespace dcuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kCluster = 8;
constexpr int kThreads = 512;

// Cross-CTA combination: each CTA's thread 0 leaves up to 2 values in `slot` (double-buffered by `phase`, so one
// cluster barrier per reduction suffices: a CTA can only reach the buffer's next use after every CTA has passed
// the barrier of the reduction in between, i.e. finished reading this one); every thread then reads all ranks'
// values in rank order.
struct ClusterReduce {
  float (*slot)[2];  // [2 buffers][2 values], in this CTA's shared memory
  int phase = 0;

  template <typename F>
  __device__ void run(cg::cluster_group& cl, float a, float b, F&& combine) {
    if (threadIdx.x == 0) slot[phase][0] = a, slot[phase][1] = b;
    cl.sync();
    for (int rank = 0; rank < kCluster; ++rank) {
      const float* other = cl.map_shared_rank(&slot[phase][0], rank);
      combine(rank, other[0], other[1]);
    }
    phase ^= 1;
  }
};

// Sum / max over the CTA; every thread gets the result. smem: 32 floats.
__device__ float block_reduce(float v, float* smem, bool is_max) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  float r = smem[0];
  for (int w = 1; w < int(blockDim.x >> 5); ++w) r = is_max ? fmaxf(r, smem[w]) : r + smem[w];
  return r;
}

__device__ int block_min_int(int v, int* smem) {
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  int r = smem[0];
  for (int w = 1; w < int(blockDim.x >> 5); ++w) r = min(r, smem[w]);
  return r;
}

__global__ void __launch_bounds__(kThreads) sample_cluster_kernel(const float* __restrict__ logits, int V, int slice,
                                                                  const SampleParams* __restrict__ params,
                                                                  int32_t* __restrict__ out,
                                                                  float* __restrict__ logprob, SampleExtras ex) {
  extern __shared__ float xs[];  // this CTA's slice of the row
  __shared__ float sf[32];
  __shared__ int si[32];
  __shared__ float slots[2][2];
  __shared__ float chunk_sum[kThreads];
  __shared__ sampling_extras::TopSmem top;
  cg::cluster_group cl = cg::this_cluster();
  ClusterReduce red{slots};
  const int rank = int(cl.block_rank());
  const int r = blockIdx.x / kCluster;
  const int lo = rank * slice, n = max(0, min(V, lo + slice) - lo);
  const float* row = logits + size_t(r) * V + lo;
  const SampleParams p = params[r];
  auto banned = [&](int i) { return sample_banned(p, i); };  // i: id in the vocabulary

  // one read of the slice: kept in shared memory, its raw max and its argmax of the allowed ids (lowest id on ties)
  float raw_max = -FLT_MAX, best_v = -FLT_MAX;
  int best_i = 0x7fffffff;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float v = row[i];
    xs[i] = v;
    raw_max = fmaxf(raw_max, v);
    if (v > best_v && !banned(lo + i)) best_v = v, best_i = lo + i;
  }
  raw_max = block_reduce(raw_max, sf, true);
  const float local_best = block_reduce(best_v, sf, true);
  const int local_idx = block_min_int(best_v == local_best ? best_i : 0x7fffffff, si);
  // across the cluster: the raw max and the best value, then the lowest id holding it
  float g_max = -FLT_MAX, g_best = -FLT_MAX;
  red.run(cl, raw_max, local_best, [&](int, float a, float b) { g_max = fmaxf(g_max, a), g_best = fmaxf(g_best, b); });
  int g_idx = 0x7fffffff;
  red.run(cl, __int_as_float(local_best == g_best ? local_idx : 0x7fffffff), 0.f,
          [&](int, float a, float) { g_idx = min(g_idx, __float_as_int(a)); });
  raw_max = g_max;
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += kThreads) s += expf(xs[i] - raw_max);
  s = block_reduce(s, sf, false);
  float raw_sum = 0.f;
  red.run(cl, s, 0.f, [&](int, float a, float) { raw_sum += a; });
  const float log_z = raw_max + logf(raw_sum);
  // top log-probabilities of the raw row (before the penalties change the slice)
  if (p.top_n > 0)
    sampling_extras::top_logprobs_cluster<kCluster, kThreads>(cl, top, xs, n, lo, V, p.top_n, log_z,
                                                              ex.top_ids + size_t(r) * kMaxTopLogprobs,
                                                              ex.top_logprobs + size_t(r) * kMaxTopLogprobs);
  // penalties: the slice changes, so the best allowed id is found again (unpenalized rows keep the first pass's)
  if (sampling_extras::penalized(p)) {
    sampling_extras::apply_penalties<kThreads>(xs, n, lo, p, ex);
    best_v = -FLT_MAX, best_i = 0x7fffffff;
    for (int i = threadIdx.x; i < n; i += kThreads)
      if (xs[i] > best_v && !banned(lo + i)) best_v = xs[i], best_i = lo + i;
    const float pen_best = block_reduce(best_v, sf, true);
    const int pen_idx = block_min_int(best_v == pen_best ? best_i : 0x7fffffff, si);
    g_best = -FLT_MAX;
    red.run(cl, pen_best, 0.f, [&](int, float a, float) { g_best = fmaxf(g_best, a); });
    g_idx = 0x7fffffff;
    red.run(cl, __int_as_float(pen_best == g_best ? pen_idx : 0x7fffffff), 0.f,
            [&](int, float a, float) { g_idx = min(g_idx, __float_as_int(a)); });
  }

  // No allowed id has a logit above -FLT_MAX (NaN or -inf everywhere): id -1 and a NaN log-probability, as sampling.cu.
  const bool greedy = p.temperature <= 0.f || p.top_k == 1;
  if (g_idx >= V || greedy) {
    if (rank == 0 && threadIdx.x == 0) {
      if (g_idx >= V) out[r] = -1, logprob[r] = __int_as_float(0x7fc00000);
      else out[r] = g_idx, logprob[r] = logits[size_t(r) * V + g_idx] - log_z;
    }
    cl.sync();  // no CTA leaves while another may still read its shared memory
    return;
  }
  const float best = g_best;
  const float inv_t = 1.f / p.temperature;
  auto prob = [&](int i) { return banned(lo + i) ? 0.f : expf((xs[i] - best) * inv_t); };  // i: index in the slice
  float rank_mass[kCluster];  // the last mass_above's per-rank masses, in rank order
  auto mass_above = [&](float tau, float* count) {
    float sm = 0.f, c = 0.f;
    for (int i = threadIdx.x; i < n; i += kThreads) {
      const float q = prob(i);
      if (q >= tau && q > 0.f) sm += q, c += 1.f;
    }
    sm = block_reduce(sm, sf, false);
    c = block_reduce(c, sf, false);
    float gs = 0.f, gc = 0.f;
    red.run(cl, sm, c, [&](int k, float a, float b) { gs += a, gc += b, rank_mass[k] = a; });
    *count = gc;
    return gs;
  };
  float count = 0.f;
  const float total = mass_above(0.f, &count);
  const float tau = draw_threshold(mass_above, p, V, total);
  const float kept = mass_above(tau, &count);
  const float u = sample_uniform01(p.seed, p.step) * kept;
  // the CTA whose slice holds the draw: the ranks' kept masses in rank order
  float before = 0.f;
  int owner = -1;
  for (int k = 0; k < kCluster && owner < 0; ++k) {
    if (before + rank_mass[k] > u) owner = k;
    else before += rank_mass[k];
  }
  if (owner < 0) {  // rounding left nothing above u: the argmax, as sampling.cu
    if (rank == 0 && threadIdx.x == 0) out[r] = g_idx, logprob[r] = logits[size_t(r) * V + g_idx] - log_z;
    cl.sync();
    return;
  }
  if (rank == owner) {
    const int pick = walk_to_draw(prob, n, tau, u, before, chunk_sum, si, sf);
    if (pick != -1) {
      const int id = pick == kNoPick ? g_idx : lo + pick;  // rounding left nothing above u: keep the argmax
      out[r] = id;
      logprob[r] = logits[size_t(r) * V + id] - log_z;
    }
  }
  cl.sync();
}

}  // namespace

int sample_cluster_slice(int V) { return ((V + kCluster - 1) / kCluster + 3) / 4 * 4; }

bool sample_cluster_fits(int V) { return size_t(sample_cluster_slice(V)) * 4 <= kSampleClusterMaxSmem; }

void sample_cluster(const float* logits, int R, int V, const SampleParams* params, int32_t* out, float* logprob,
                    cudaStream_t stream, const SampleExtras& extras) {
  const int slice = sample_cluster_slice(V);
  const size_t smem = size_t(slice) * 4;
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  static int attr_set[64] = {};  // MaxDynamicSharedMemorySize is per device (docs/findings.md)
  if (dev < 64 && !attr_set[dev]) {
    DC_CUDA(cudaFuncSetAttribute(sample_cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 int(kSampleClusterMaxSmem)));
    attr_set[dev] = 1;
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(R * kCluster);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = kCluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  DC_CUDA(cudaLaunchKernelEx(&cfg, sample_cluster_kernel, logits, V, slice, params, out, logprob, extras));
}

}  // namespace dcuda
