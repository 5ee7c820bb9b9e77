// Token sampling on the GPU (see sampling.cu). Legend: R rows, V vocabulary.
#pragma once
#include <cuda_runtime.h>
#include <cstdint>

namespace dcuda {

struct SampleParams {
  float temperature;  // <= 0: greedy
  int32_t top_k;      // <= 0 or >= V: no limit; 1: greedy
  float top_p;        // <= 0 or >= 1: no limit
  int32_t pad;
  uint64_t seed;
  uint64_t step;  // the sequence's output index: one draw per (seed, step)
};

// out[r] = a token drawn from logits row r [R, V] fp32 under params[r] (device pointers).
void sample(const float* logits, int R, int V, const SampleParams* params, int32_t* out, cudaStream_t stream);

}  // namespace dcuda
