// Routed experts of steps of very few tokens as GEMVs (moe_gemv.cu): per routed slot s of the step (M = T x k
// slots, token s / k, expert topk_ids[s]), a warp per output row streams that expert's weight row. Outputs go to
// the rows the grouped GEMMs write (slot_row[s]: the contiguous layout's row of the slot), so routing, permute and
// combine are unchanged. bf16 experts with gate/up rows interleaved by 8 (the fused-SiLU layout); H % 8 == 0 and
// I % 8 == 0. model.cu takes them for steps of at most DISPATCH_CUDA_MOE_GEMV_MAX_TOKENS tokens (docs/cuda-backend.md).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace dcuda {

using bf16 = __nv_bfloat16;

bool moe_gemv_supported(int H, int I);
// act[slot_row[s]] = silu(x[s / k] Wg_e^T) * (x[s / k] Wu_e^T), bf16 [., I]; x bf16 [T, H]; w_gate_up [E, 2I, H].
void moe_gemv_gate_up(const bf16* x, int M, int k, int H, const bf16* w_gate_up, int I, const int* topk_ids,
                      const int* slot_row, bf16* act, cudaStream_t stream);
// y[slot_row[s]] = act[slot_row[s]] Wd_e^T, bf16 [., H]; w_down [E, H, I].
void moe_gemv_down(const bf16* act, int M, int I, const bf16* w_down, int H, const int* topk_ids, const int* slot_row,
                   bf16* y, cudaStream_t stream);

}  // namespace dcuda
