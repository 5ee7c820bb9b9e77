// Routed experts of steps of a few tokens (batch-1 decode) as GEMVs that route themselves: instead of the chain
//   route_small (top-k, align, permute) -> grouped GEMM gate|up (+SiLU) -> grouped GEMM down
// two kernels, each CTA of which computes the router's top-k from the logits (route_topk.cuh, the same ids and
// weights as route_small) and then streams its slot's expert rows, a warp per output row (gemv_core.cuh's loads):
//   moe_gemv_gate_up: act[s] = bf16(silu(x_t Wg_e^T) * (x_t Wu_e^T)) for slot s (token t = s / k, expert e its
//                     (s % k)-th choice); CTA 0 also writes ids[s], weights[s] and slot_row[s] = s for the
//                     combine. It waits for the logits (the kernel before) and only then triggers its dependents.
//   moe_gemv_down:    y[s] = bf16(act[s] Wd_e^T). The logits are two kernels back, so each CTA routes and requests
//                     its expert's rows before it waits for gate|up's activations.
// One kernel boundary (route_small's) and the permute leave the chain. Needs gate/up rows interleaved by 8 (the
// fused-SiLU layout), bf16 experts, H and I multiples of 8, T * k <= kMoeGemvMaxSlots.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include "moe/moe_ops.h"

namespace dcuda {

using bf16 = __nv_bfloat16;

constexpr int kMoeGemvMaxSlots = 64;

bool moe_gemv_supported(int T, const dispatch::RouterConfig& cfg, int H, int I);
// logits [T, E] fp32, bias [E] or null; x [T, H]; w_gate_up [E, 2I, H] interleaved by 8; act [T*k, I]
void moe_gemv_gate_up(const float* logits, const float* bias, const dispatch::RouterConfig& cfg, int T,
                      const bf16* x, int H, const bf16* w_gate_up, int I, int32_t* ids, float* weights,
                      int32_t* slot_row, bf16* act, cudaStream_t stream);
// act [T*k, I]; w_down [E, H, I]; y [T*k, H]
void moe_gemv_down(const float* logits, const float* bias, const dispatch::RouterConfig& cfg, int T, const bf16* act,
                   int I, const bf16* w_down, int H, bf16* y, cudaStream_t stream);

}  // namespace dcuda
