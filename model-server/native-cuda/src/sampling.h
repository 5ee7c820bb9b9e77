// Token sampling on the GPU (see sampling.cu). Legend: R rows, V vocabulary.
#pragma once
#include <cuda_runtime.h>
#include <cstdint>

namespace dcuda {

constexpr int kMaxBanned = 8;

struct SampleParams {
  float temperature;  // <= 0: greedy
  int32_t top_k;      // <= 0 or >= V: no limit; 1: greedy
  float top_p;        // <= 0 or >= 1: no limit
  int32_t num_banned;
  uint64_t seed;
  uint64_t step;                // the sequence's output index: one draw per (seed, step)
  int32_t banned[kMaxBanned];   // ids that may not be drawn now (EOS before min_tokens)
};

// out[r] = a token drawn from logits row r [R, V] fp32 under params[r]; logprob[r] = its
// log-probability under the raw (untempered, unmasked) distribution. Device pointers.
void sample(const float* logits, int R, int V, const SampleParams* params, int32_t* out, float* logprob,
            cudaStream_t stream);

}  // namespace dcuda
