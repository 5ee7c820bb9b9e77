// Bandwidth-oriented GEMV for decode (T <= 8 tokens): Y = X W^T (+ bias), or Y += when
// accumulate; X bf16 [T, K], W bf16 [N, K] row-major, bias fp32 [N] or null, Y fp32 [T, N].
// gemm() (gemm.cu) tries it first for T <= 8 unless gemv_fast_enabled() is false.
#pragma once
#include <cuda_runtime.h>
#include "ops.h"

namespace dcuda {

// Launches on s and returns true, or returns false (nothing launched) for a shape it does not
// take: T outside 1..8, N < 1, K % 8 != 0, X or W not 16-byte aligned, or T*K too large for
// shared memory. Launch errors throw CudaError (check.h).
bool gemv_fast(const bf16* X, int T, int K, const bf16* W, int N, const float* bias, float* Y, bool accumulate,
               cudaStream_t s);

// True unless DISPATCH_CUDA_GEMV_LEGACY=1 or DISPATCH_CUDA_UNFUSED=1 (then gemm() keeps the
// earlier GEMV kernels).
bool gemv_fast_enabled();

}  // namespace dcuda
