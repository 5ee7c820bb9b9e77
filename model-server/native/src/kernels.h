// fp32 CPU kernels for the model server. Device-agnostic C++: no Node here.
// Legend: T rows (tokens), K input features, N output features, D head dim, B block size.
#pragma once
#include <cstdint>

namespace dispatch_cpu {

// out[T, N] = x[T, K] . w[N, K]^T (+ bias[N]); bias may be null.
void linear(const float* x, const float* w, float* out, int T, int K, int N, const float* bias);

// Causal attention of one sequence's queries over a paged KV cache.
// q/out: rows [qStart, qStart + qLen) of [*, Hq*D]; k/v cache: [blocks, B, Hkv, D];
// window > 0 limits keys to the last `window` positions; scores has >= startPos + qLen floats.
void attention_seq(const float* q, float* out, const float* kCache, const float* vCache, const int32_t* blockTable,
                   int qStart, int qLen, int startPos, int B, int Hq, int Hkv, int D, float scale, int window,
                   float* scores);

// Whether the AVX2+FMA paths are in use (for reporting).
bool has_avx2();

}  // namespace dispatch_cpu
