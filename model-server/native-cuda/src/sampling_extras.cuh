// What the cluster sampler (sampling_cluster.cu) does beyond a draw, on the row's slices in shared memory:
//
//   top_logprobs_cluster  the raw distribution's best top_n ids (OpenAI's top_logprobs): a radix select over the
//                         cluster of the top_n largest keys (value, then the lower id first, as the host's
//                         scoreToken orders ties), 8 bits per pass, every rank's histogram summed through
//                         distributed shared memory; it stops at the first pass whose chosen bin holds exactly the
//                         ids still wanted (for real logits after 2-4 of the 7 passes).
//   apply_penalties       OpenAI's frequency and presence penalties on the slice: the row's (token, count) pairs of
//                         generated tokens, plus one more of the step's chained input token where the host could not
//                         count it yet (a step launched before the previous one's token came back).
#pragma once
#include <cooperative_groups.h>
#include <cstdint>
#include "sampling.h"

namespace dcuda {
namespace sampling_extras {

namespace cg = cooperative_groups;

// Ordered key of id `id` with logit v: larger v first, then the lower id; 56 bits (V < 2^24).
__device__ __forceinline__ uint64_t top_key(float v, int id) {
  uint32_t b = __float_as_uint(v);
  b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (uint64_t(b) << 24) | uint64_t(0xFFFFFFu - uint32_t(id));
}

struct TopSmem {
  int hist[2][256];  // double-buffered by pass, so one cluster barrier per pass suffices (as ClusterReduce)
  int bin, above, count;
  int n;             // this CTA's selected ids
  float v[kMaxTopLogprobs];
  int id[kMaxTopLogprobs];
};

// Writes the best top_n ids of the row (slices xs[0, n) at ids lo + i on each rank) and their log-probabilities
// v - log_z to top_ids / top_lp (row r's kMaxTopLogprobs entries; the first min(top_n, V) written, best first).
// Every thread of every rank calls it (cluster barriers inside).
template <int kCluster, int kThreads>
__device__ void top_logprobs_cluster(cg::cluster_group& cl, TopSmem& s, const float* xs, int n, int lo, int V,
                                     int top_n, float log_z, int32_t* top_ids, float* top_lp) {
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  int need = min(top_n, V);
  uint64_t prefix = 0, mask = 0;
  for (int pass = 0; pass < 7; ++pass) {
    const int shift = 48 - 8 * pass;
    int* h = s.hist[pass & 1];
    for (int b = tid; b < 256; b += kThreads) h[b] = 0;
    __syncthreads();
    for (int i = tid; i < n; i += kThreads) {
      const uint64_t k = top_key(xs[i], lo + i);
      if ((k & mask) != prefix) continue;
      const int digit = int((k >> shift) & 255u);
      const unsigned peers = __match_any_sync(__activemask(), digit);
      if (lane == __ffs(peers) - 1) atomicAdd(&h[digit], __popc(peers));
    }
    cl.sync();  // every rank's histogram is complete
    if (warp == 0) {
      // lane L holds bins 255 - 8L - j (j < 8), summed over the ranks: bins in descending order across the lanes
      int cnt[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int b = 255 - 8 * lane - j;
        int c = 0;
        for (int k = 0; k < kCluster; ++k) c += cl.map_shared_rank(h, k)[b];
        cnt[j] = c, sum += c;
      }
      int incl = sum;
      for (int o = 1; o < 32; o <<= 1) {
        const int up = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += up;
      }
      int acc = incl - sum;
      if (acc < need && need <= incl) {  // one lane: the bin holding the need-th best key
        for (int j = 0; j < 8; ++j) {
          if (acc + cnt[j] >= need) {
            s.bin = 255 - 8 * lane - j, s.above = acc, s.count = cnt[j];
            break;
          }
          acc += cnt[j];
        }
      }
    }
    __syncthreads();
    need -= s.above;
    prefix |= uint64_t(s.bin) << shift;
    mask |= uint64_t(255) << shift;
    if (s.count == need) break;  // the same on every rank: every key with this prefix is wanted
    __syncthreads();             // s.bin / s.above / s.count are rewritten by the next pass
  }
  // the selected ids: keys at or above the prefix (exactly min(top_n, V) over the cluster)
  if (tid == 0) s.n = 0;
  __syncthreads();
  for (int i = tid; i < n; i += kThreads) {
    if ((top_key(xs[i], lo + i) & mask) < prefix) continue;
    const int at = atomicAdd(&s.n, 1);
    if (at < kMaxTopLogprobs) s.v[at] = xs[i], s.id[at] = lo + i;
  }
  cl.sync();
  if (cl.block_rank() == 0 && tid == 0) {
    float v[kMaxTopLogprobs];
    int id[kMaxTopLogprobs];
    int m = 0;
    for (int k = 0; k < kCluster; ++k) {
      TopSmem* o = cl.map_shared_rank(&s, k);
      const int c = min(o->n, kMaxTopLogprobs);
      for (int j = 0; j < c && m < kMaxTopLogprobs; ++j) {
        // insertion by key: larger value first, the lower id on ties
        const float x = o->v[j];
        const int xi = o->id[j];
        int at = m++;
        while (at > 0 && (v[at - 1] < x || (v[at - 1] == x && id[at - 1] > xi))) v[at] = v[at - 1], id[at] = id[at - 1], --at;
        v[at] = x, id[at] = xi;
      }
    }
    for (int j = 0; j < m; ++j) top_ids[j] = id[j], top_lp[j] = v[j] - log_z;
  }
  cl.sync();  // no rank reuses or leaves its shared memory while rank 0 reads it
}

// Whether row p changes any logit through penalties.
__device__ __forceinline__ bool penalized(const SampleParams& p) {
  return (p.frequency_penalty != 0.f || p.presence_penalty != 0.f) && (p.pen_count > 0 || p.pen_input >= 0);
}

// xs[i] (id lo + i, i < n) -= frequency_penalty * count + presence_penalty for every generated id of the row; the
// CTA's threads all call it; xs is ready to read when it returns.
template <int kThreads>
__device__ void apply_penalties(float* xs, int n, int lo, const SampleParams& p, const SampleExtras& ex) {
  const int extra = p.pen_input >= 0 ? ex.token_ids[p.pen_input] : -1;
  bool found = false;
  for (int e = int(threadIdx.x); e < p.pen_count; e += kThreads) {
    const int2 tc = ex.penalties[p.pen_offset + e];
    int c = tc.y;
    if (tc.x == extra) c += 1, found = true;
    const int i = tc.x - lo;
    if (i >= 0 && i < n && c > 0) xs[i] = fmaf(-p.frequency_penalty, float(c), xs[i]) - p.presence_penalty;
  }
  found = __syncthreads_or(found);
  if (!found && threadIdx.x == 0 && extra - lo >= 0 && extra - lo < n)
    xs[extra - lo] = (xs[extra - lo] - p.frequency_penalty) - p.presence_penalty;
  __syncthreads();
}

}  // namespace sampling_extras
}  // namespace dcuda
