// The split-K path of decode attention (attention_decode.cu): the per-stream workspace of split
// partials and the 4-warp kernel's launch; the merge by the last CTA ends the kernel
// (attention_decode_kernel.cuh).
#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>
#include <vector>
#include "attention_decode_kernel.cuh"
#include "check.h"
#include "pdl.h"

namespace dcuda {
namespace decode_attn {
namespace {

// Split partials of one stream: (m, l) and O for up to `rows` (token, KV head, split) triples of
// `group_dim` = G * D floats each, and one arrival counter per (token, KV head) of a split step.
struct Workspace {
  float* o = nullptr;
  float2* ml = nullptr;
  int* counters = nullptr;
  int rows = 0, counter_cap = 0, group_dim = 0, group = 0;
  int target_ctas = 0;  // CTAs that fill the device (ctas_per_sm() per SM)
};

std::mutex g_mu;
std::map<std::pair<int, cudaStream_t>, Workspace> g_workspaces;
std::map<int, int> g_target_ctas;  // per device: ctas_per_sm() CTAs per SM (queried once, not per stream)
// Buffers a bigger head shape replaced. Never freed: a captured graph may still point at them.
std::vector<void*> g_retired;

// The stream's workspace, grown (outside a capture only) to hold G x D partials. Split steps need
// fewer than 2 * target_ctas rows: S = round(target / (T * Hkv)) > 1 only when
// T * Hkv <= 2/3 target_ctas, and then T * Hkv * S <= target_ctas + T * Hkv / 2.
Workspace& workspace_for(cudaStream_t s, int G, int D, bool need_partials) {
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(g_mu);
  Workspace& w = g_workspaces[{dev, s}];
  if (w.target_ctas == 0) {
    int& target = g_target_ctas[dev];
    if (target == 0) {
      int sms = 0;
      DC_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
      target = ctas_per_sm() * (sms > 0 ? sms : 1);
    }
    w.target_ctas = target;
  }
  if (!need_partials || (w.group_dim >= G * D && w.group >= G)) return w;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  DC_CUDA(cudaStreamIsCapturing(s, &status));
  DC_CHECK(status == cudaStreamCaptureStatusNone,
           "decode attention: the split workspace for this head shape must be allocated, but the stream is "
           "capturing a CUDA graph; run one step of this shape eagerly before capturing");
  if (w.o) g_retired.insert(g_retired.end(), {w.o, w.ml, w.counters});
  const int rows = 2 * w.target_ctas;
  const int group_dim = std::max(G * D, w.group_dim), group = std::max(G, w.group);
  float* o = nullptr;
  float2* ml = nullptr;
  int* counters = nullptr;
  DC_CUDA(cudaMalloc(&o, size_t(rows) * group_dim * sizeof(float)));
  DC_CUDA(cudaMalloc(&ml, size_t(rows) * group * sizeof(float2)));
  DC_CUDA(cudaMalloc(&counters, size_t(w.target_ctas) * sizeof(int)));
  DC_CUDA(cudaMemsetAsync(counters, 0, size_t(w.target_ctas) * sizeof(int), s));
  w.o = o, w.ml = ml, w.counters = counters;
  w.rows = rows, w.counter_cap = w.target_ctas, w.group_dim = group_dim, w.group = group;
  return w;
}

template <int NB, bool kFused>
void launch(const AttentionArgs& a, const QkvPostArgs& p, int G, int nsplit, const Workspace& w, cudaStream_t s) {
  launch_k(sm90_bf16_attention_decode_paged<NB, kWarps, false, kFused>, dim3(nsplit, a.Hkv, a.T), dim3(kWarps * 32),
           smem_bytes<kWarps, false, kFused>(G, a.D), s, a, G, w.o, w.ml, w.counters, p);
}

}  // namespace

int target_ctas(cudaStream_t s, int G, int D) { return workspace_for(s, G, D, false).target_ctas; }

// DISPATCH_CUDA_ATTN_CTAS_PER_SM (1-8, default 2): the split-K path splits a step's keys until about this many
// 4-warp CTAs per SM run (read once per process).
int ctas_per_sm() {
  static const int v = [] {
    const char* e = std::getenv("DISPATCH_CUDA_ATTN_CTAS_PER_SM");
    const int x = e && *e ? std::atoi(e) : 2;
    return x < 1 ? 1 : x > 8 ? 8 : x;
  }();
  return v;
}

void launch_splitk(const AttentionArgs& a, const QkvPostArgs& p, bool fused, cudaStream_t s) {
  const int G = a.Hq / a.Hkv, pairs = a.T * a.Hkv;
  const int target = target_ctas(s, G, a.D);
  // about target CTAs: S = round(target / (T * Hkv)), so 256 pairs on 264 slots run unsplit
  const int nsplit = std::min(kMaxSplits, std::max(1, (target + pairs / 2) / pairs));
  const Workspace& w = workspace_for(s, G, a.D, nsplit > 1);
  if (nsplit > 1) {
    DC_CHECK(size_t(pairs) * nsplit <= size_t(w.rows) && pairs <= w.counter_cap, "decode attention: workspace too small");
  }
  with_nb(a.D, [&](auto nb) {
    constexpr int NB = decltype(nb)::value;
    if (fused) launch<NB, true>(a, p, G, nsplit, w, s);
    else launch<NB, false>(a, p, G, nsplit, w, s);
  });
}

}  // namespace decode_attn
}  // namespace dcuda
