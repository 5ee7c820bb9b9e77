// Self-routing expert GEMVs for steps of a few tokens (see moe_gemv.h).
//
// Grid (row blocks, T * k slots) of 8-warp CTAs, sized to about three CTAs per SM so one wave covers the step: every
// CTA routes once (warp 0 runs the token's top-k, about a microsecond) and then each warp walks its rows of the slot's
// expert, a pass of gemv_core.cuh's loads at a time (gate|up: the gate and up rows of one output, 4 loads each in
// flight per lane; down: 4 rows of K = I, 2 loads each).
#include <algorithm>
#include "check.h"
#include "gemv_core.cuh"
#include "moe_gemv.h"
#include "pdl.h"
#include "route_topk.cuh"

namespace dcuda {
namespace {

using gemv::gemv_dot;
using gemv::warp_sum;

constexpr int kWarps = 8;
constexpr int kDownRows = 4;  // down rows per warp pass
constexpr int kMaxSlots = 16;  // E <= 512

__device__ __forceinline__ float silu_mul(float g, float u) { return __fdividef(g, 1.f + __expf(-g)) * u; }

// Warp 0 routes token t; every thread gets the expert of choice j (clamped into [0, E): a row of NaN logits has no
// choice, and the GEMVs must still read inside the weights). Lane j's id and weight go to *id / *w (lanes < k).
template <int S>
__device__ __forceinline__ int route_slot(const float* __restrict__ logits, const float* __restrict__ bias,
                                          const dispatch::RouterConfig& cfg, int t, int j, int* id, float* w) {
  __shared__ int s_expert;
  if (threadIdx.x < 32) {
    route::topk_token<S>(logits + size_t(t) * cfg.num_experts, bias, cfg, threadIdx.x, id, w);
    if (int(threadIdx.x) == j) s_expert = min(max(*id, 0), cfg.num_experts - 1);
  }
  __syncthreads();
  return s_expert;
}

// act[s, n] for the CTA's outputs n of slot s. Gate row n of the interleaved layout is 16 (n / 8) + n % 8, up row n
// eight rows further.
template <int S>
__global__ void __launch_bounds__(kWarps * 32) moe_gemv_gate_up_kernel(const float* __restrict__ logits,
                                                                       const float* __restrict__ bias,
                                                                       dispatch::RouterConfig cfg,
                                                                       const bf16* __restrict__ X, int H,
                                                                       const bf16* __restrict__ W, int I, int per_cta,
                                                                       int32_t* __restrict__ ids,
                                                                       float* __restrict__ weights,
                                                                       int32_t* __restrict__ slot_row,
                                                                       bf16* __restrict__ act) {
  pdl_wait();     // the logits come from the kernel just before
  pdl_trigger();  // only now: down (launched once every CTA has triggered) reads the logits before its own wait
  const int s = blockIdx.y, k = cfg.top_k, t = s / k, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int id = 0;
  float w = 0.f;
  const int e = route_slot<S>(logits, bias, cfg, t, s % k, &id, &w);
  if (blockIdx.x == 0 && threadIdx.x == s % k) ids[s] = id, weights[s] = w, slot_row[s] = s;
  const bf16* We = W + size_t(e) * 2 * I * H;
  const uint4* x = reinterpret_cast<const uint4*>(X + size_t(t) * H);
  const int end = min(I, int(blockIdx.x + 1) * per_cta);
  for (int n = int(blockIdx.x) * per_cta + warp; n < end; n += kWarps) {
    const int g_row = 16 * (n / 8) + n % 8;
    const uint4* rows[2] = {reinterpret_cast<const uint4*>(We + size_t(g_row) * H),
                            reinterpret_cast<const uint4*>(We + size_t(g_row + 8) * H)};
    float acc[2][1];
    gemv_dot<1, 2>(rows, x, H / 8, lane, acc);
    const float g = warp_sum(acc[0][0]), u = warp_sum(acc[1][0]);
    if (lane == 0) act[size_t(s) * I + n] = __float2bfloat16_rn(silu_mul(g, u));
  }
}

// y[s, h] for the CTA's rows h of slot s, kDownRows per warp pass.
template <int S>
__global__ void __launch_bounds__(kWarps * 32) moe_gemv_down_kernel(const float* __restrict__ logits,
                                                                    const float* __restrict__ bias,
                                                                    dispatch::RouterConfig cfg,
                                                                    const bf16* __restrict__ act, int I,
                                                                    const bf16* __restrict__ W, int H, int per_cta,
                                                                    bf16* __restrict__ y) {
  pdl_trigger();
  const int s = blockIdx.y, k = cfg.top_k, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int id = 0;
  float w = 0.f;
  // the logits are two kernels back and gate|up waited before it triggered: route before waiting
  const int e = route_slot<S>(logits, bias, cfg, s / k, s % k, &id, &w);
  const bf16* We = W + size_t(e) * H * I;
  const uint4* a = reinterpret_cast<const uint4*>(act + size_t(s) * I);
  const int end = min(H, int(blockIdx.x + 1) * per_cta);
  bool waited = false;
  for (int h0 = int(blockIdx.x) * per_cta + warp * kDownRows; h0 < end; h0 += kWarps * kDownRows) {
    const uint4* rows[kDownRows];
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) rows[r] = reinterpret_cast<const uint4*>(We + size_t(min(h0 + r, end - 1)) * I);
    float acc[kDownRows][1];
    gemv_dot<1, kDownRows>(rows, a, I / 8, lane, acc);  // waits for gate|up after its first weight loads
    waited = true;
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) {
      const float v = warp_sum(acc[r][0]);
      if (lane == 0 && h0 + r < end) y[size_t(s) * H + h0 + r] = __float2bfloat16_rn(v);
    }
  }
  if (!waited) pdl_wait();
}

int sms() {
  static const int n = [] {
    int dev = 0, v = 0;
    DC_CUDA(cudaGetDevice(&dev));
    DC_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v;
  }();
  return n;
}

// Rows per CTA (a multiple of `step`) so that the M slots' CTAs number about three per SM.
int rows_per_cta(int rows, int M, int step) {
  const int blocks = std::max(1, std::min((3 * sms() + M - 1) / M, (rows + step - 1) / step));
  return ((rows + blocks - 1) / blocks + step - 1) / step * step;
}

}  // namespace

bool moe_gemv_supported(int T, const dispatch::RouterConfig& cfg, int H, int I) {
  return T >= 1 && T * cfg.top_k <= kMoeGemvMaxSlots && H % 8 == 0 && I % 8 == 0 && cfg.num_experts >= 1 &&
         cfg.num_experts <= 32 * kMaxSlots && cfg.top_k >= 1 && cfg.top_k <= 32 && cfg.top_k <= cfg.num_experts &&
         cfg.num_groups >= 1 && cfg.num_groups <= 32 && cfg.num_experts % cfg.num_groups == 0 &&
         cfg.topk_groups >= 1 && cfg.topk_groups <= cfg.num_groups &&
         (cfg.num_groups == 1 || cfg.num_experts / cfg.num_groups >= 2);
}

void moe_gemv_gate_up(const float* logits, const float* bias, const dispatch::RouterConfig& cfg, int T,
                      const bf16* x, int H, const bf16* w_gate_up, int I, int32_t* ids, float* weights,
                      int32_t* slot_row, bf16* act, cudaStream_t stream) {
  DC_CHECK(moe_gemv_supported(T, cfg, H, I), "moe_gemv: step or shape outside the GEMVs' limits");
  const int M = T * cfg.top_k, per = rows_per_cta(I, M, kWarps);
  const dim3 grid((I + per - 1) / per, M);
  auto kernel = cfg.num_experts <= 128 ? moe_gemv_gate_up_kernel<4> : moe_gemv_gate_up_kernel<kMaxSlots>;
  launch_k(kernel, grid, dim3(kWarps * 32), 0, stream, logits, bias, cfg, x, H, w_gate_up, I, per, ids, weights,
           slot_row, act);
  DC_LAUNCHED();
}

void moe_gemv_down(const float* logits, const float* bias, const dispatch::RouterConfig& cfg, int T, const bf16* act,
                   int I, const bf16* w_down, int H, bf16* y, cudaStream_t stream) {
  DC_CHECK(moe_gemv_supported(T, cfg, H, I), "moe_gemv: step or shape outside the GEMVs' limits");
  const int M = T * cfg.top_k, per = rows_per_cta(H, M, kWarps * kDownRows);
  const dim3 grid((H + per - 1) / per, M);
  auto kernel = cfg.num_experts <= 128 ? moe_gemv_down_kernel<4> : moe_gemv_down_kernel<kMaxSlots>;
  launch_k(kernel, grid, dim3(kWarps * 32), 0, stream, logits, bias, cfg, act, I, w_down, H, per, y);
  DC_LAUNCHED();
}

}  // namespace dcuda
