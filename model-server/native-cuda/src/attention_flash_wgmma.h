// Prefill attention on warpgroup MMAs (attention_flash_wgmma.cu): 128-row query tiles, the tiles of a FlashPlan
// with rows = 128 (attention_flash.cu dispatches here for FlashKernel::kWgmma).
#pragma once
#include <cuda_runtime.h>
#include <cstdint>
#include "ops.h"

namespace dcuda {

// tiles [num_tiles, 2] = (first row, rows <= 128); D % 16 == 0, D <= 128; keys per K/V tile: 64 or 128.
// ctas: 0 launches one CTA per (tile, head) item; n > 0 launches min(n, items) persistent CTAs that walk the items
// (FlashPlan::ctas).
void attention_flash_wgmma(const AttentionArgs& a, const int32_t* tiles, int num_tiles, int keys, int ctas,
                           cudaStream_t stream);

}  // namespace dcuda
