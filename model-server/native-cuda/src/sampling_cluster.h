// The GPU sampler over thread-block clusters (sampling_cluster.cu): each logits row spread over 8 CTAs that keep
// their slices in shared memory. sampling.cu's sample() takes it where the slice fits (vocabularies up to ~400K)
// unless DISPATCH_CUDA_SAMPLER=single; same algorithm, same draw, sums in a fixed order.
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include "sampling.h"

namespace dcuda {

constexpr size_t kSampleClusterMaxSmem = 200 * 1024;

int sample_cluster_slice(int V);
bool sample_cluster_fits(int V);
void sample_cluster(const float* logits, int R, int V, const SampleParams* params, int32_t* out, float* logprob,
                    cudaStream_t stream, const SampleExtras& extras);

}  // namespace dcuda
