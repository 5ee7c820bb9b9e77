// The cluster path of decode attention (attention_decode.cu): the cluster size of a step and the
// 8-warp kernel's cluster launch; the merge through distributed shared memory is
// attention_decode_cluster.cuh.
#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include "attention_decode_kernel.cuh"
#include "check.h"
#include "pdl.h"

namespace dcuda {
namespace decode_attn {
namespace {

// The cluster kernel's launch for nsplit CTAs per (token, KV head) (no PDL attribute yet).
template <int NB, bool kFused>
struct ClusterLaunch {
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attrs[2]{};
  ClusterLaunch(const AttentionArgs& a, int G, int nsplit, cudaStream_t s) {
    cfg.gridDim = dim3(nsplit, a.Hkv, a.T);
    cfg.blockDim = dim3(kClusterWarps * 32);
    cfg.dynamicSmemBytes = smem_bytes<kClusterWarps, true, kFused>(G, a.D);
    cfg.stream = s;
    attrs[0].id = cudaLaunchAttributeClusterDimension;
    attrs[0].val.clusterDim.x = unsigned(nsplit), attrs[0].val.clusterDim.y = 1, attrs[0].val.clusterDim.z = 1;
    cfg.attrs = attrs;
    cfg.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;  // cfg points into attrs
  static constexpr auto kernel = sm90_bf16_attention_decode_paged<NB, kClusterWarps, true, kFused>;
};

// Clusters of this launch the device runs at once (a cluster needs nsplit SMs of one GPC free
// together, so fewer than SMs / nsplit where a GPC's SMs do not divide evenly), asked once per
// (device, kernel, cluster size, shared memory); 0 when it cannot run one.
template <int NB, bool kFused>
int cluster_capacity(const ClusterLaunch<NB, kFused>& l, int nsplit) {
  int dev = 0;
  DC_CUDA(cudaGetDevice(&dev));
  static std::mutex mu;
  static std::map<std::tuple<int, int, size_t>, int> known;  // per instantiation (kFused: its own)
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(dev, nsplit, l.cfg.dynamicSmemBytes);
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, ClusterLaunch<NB, kFused>::kernel, &l.cfg) != cudaSuccess) {
    cudaGetLastError();  // not fatal and not remembered: the split-K path runs this time
    return 0;
  }
  return known[key] = clusters;
}

// S = round(SMs / (T * Hkv)) (one 8-warp CTA per SM, as many warps as the split-K kernel's
// 2 x 4 by default), at most 8, lowered until all T * Hkv clusters run at once (a second wave would double
// the latency); 0 (split-K path) below 2.
template <int NB, bool kFused>
int splits_for(const AttentionArgs& a, cudaStream_t s) {
  const int G = a.Hq / a.Hkv, pairs = a.T * a.Hkv;
  const int sms = target_ctas(s, G, a.D) / ctas_per_sm();
  for (int nsplit = std::min(kMaxCluster, (sms + pairs / 2) / pairs); nsplit > 1; --nsplit) {
    if (cluster_capacity<NB, kFused>(ClusterLaunch<NB, kFused>(a, G, nsplit, s), nsplit) >= pairs) return nsplit;
  }
  return 0;
}

// With PDL as launch_k (pdl.h).
template <int NB, bool kFused>
void launch_clusters(const AttentionArgs& a, const QkvPostArgs& p, int G, int nsplit, cudaStream_t s) {
  ClusterLaunch<NB, kFused> l(a, G, nsplit, s);
  l.attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  l.attrs[1].val.programmaticStreamSerializationAllowed = 1;
  l.cfg.numAttrs = pdl_enabled() && s != nullptr ? 2 : 1;  // the step's own stream only
  DC_CUDA(cudaLaunchKernelEx(&l.cfg, ClusterLaunch<NB, kFused>::kernel, a, G, static_cast<float*>(nullptr),
                             static_cast<float2*>(nullptr), static_cast<int*>(nullptr), p));
}

}  // namespace

int cluster_splits(const AttentionArgs& a, bool fused, cudaStream_t s) {
  return with_nb(a.D, [&](auto nb) {
    constexpr int NB = decltype(nb)::value;
    return fused ? splits_for<NB, true>(a, s) : splits_for<NB, false>(a, s);
  });
}

void launch_cluster(const AttentionArgs& a, const QkvPostArgs& p, bool fused, int nsplit, cudaStream_t s) {
  const int G = a.Hq / a.Hkv;
  with_nb(a.D, [&](auto nb) {
    constexpr int NB = decltype(nb)::value;
    if (fused) launch_clusters<NB, true>(a, p, G, nsplit, s);
    else launch_clusters<NB, false>(a, p, G, nsplit, s);
  });
}

}  // namespace decode_attn
}  // namespace dcuda
