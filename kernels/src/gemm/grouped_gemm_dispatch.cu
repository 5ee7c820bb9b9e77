// Path choice for the MoE grouped GEMM (see grouped_gemm.h).
#include "grouped_gemm.h"

namespace dispatch {

void moe_grouped_gemm_bf16(const void* X, const void* W, void* Y, const int* offsets, int M, int T, int E, int N,
                           int K, cudaStream_t stream) {
  if (T <= kSmallMMaxTokens) {
    // Each token picks an expert at most once, so no expert has more than T rows: one pass.
    sm90_bf16_grouped_gemm_masked(X, W, Y, ExpertRows{offsets, nullptr, 0}, E, N, K, T, M < E ? M : E, stream);
  } else {
    sm90_bf16_grouped_gemm_contiguous(X, W, Y, offsets, M, E, N, K, stream);
  }
}

}  // namespace dispatch
