// int8 weight-only rows to bf16 (dequant.cu): w[r, k] = bf16(q[r, k] * scale[r]), rows x K.
#pragma once
#include <cstddef>
#include <cstdint>
#include "ops.h"

namespace dcuda {
// Vectorized when K % 16 == 0 and q, w are 16-byte aligned (else ops.h's dequant_int8); same bits.
void dequant_int8_rows(const int8_t* q, const float* scale, size_t rows, int K, bf16* w, cudaStream_t stream);
}  // namespace dcuda
