// Self-routing expert GEMVs for steps of a few tokens (see moe_gemv.h).
//
// One-dimensional grids of 8-warp CTAs, two per SM, warps striding over the step's outputs so every SM gets the same
// share: every CTA first routes the step (route_topk.cuh, about a microsecond per token), then streams (gate|up:
// the gate and up rows of an output in chunks of 8 16-byte loads per lane, double-buffered; down: 4 rows of K = I per
// pass through gemv_core.cuh).
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

// Warps route the step's tokens (warp w: tokens w, w + 8, ...) into s_e[s] = the expert of slot s, clamped into
// [0, E) (a row of NaN logits has no choice, and the GEMVs must still read inside the weights). CTA 0 (`write`) also
// stores each slot's id and weight and slot_row[s] = s (the combine's row of slot s).
template <int S>
__device__ __forceinline__ void route_step(const float* __restrict__ logits, const float* __restrict__ bias,
                                           const dispatch::RouterConfig& cfg, int T, int* s_e, bool write,
                                           int32_t* __restrict__ ids, float* __restrict__ weights,
                                           int32_t* __restrict__ slot_row) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, k = cfg.top_k;
  for (int t = warp; t < T; t += kWarps) {
    int id = 0;
    float w = 0.f;
    route::topk_token<S>(logits + size_t(t) * cfg.num_experts, bias, cfg, lane, &id, &w);
    if (lane < k) {
      const int s = t * k + lane;
      s_e[s] = min(max(id, 0), cfg.num_experts - 1);
      if (write) ids[s] = id, weights[s] = w, slot_row[s] = s;
    }
  }
  __syncthreads();
}

// act[s, n] = bf16(silu(x_t . Wg_e[n]) * (x_t . Wu_e[n])) over the step's M * I outputs, warps striding over them
// (so every SM gets the same share whatever the slot count). An output is 2 rows x ceil(H / 2048) chunks of 8
// 16-byte loads per lane, double-buffered: the next chunk's loads are in flight while a chunk is summed. Gate row n
// of the interleaved layout is 16 (n / 8) + n % 8, up row n eight rows further.
template <int S>
__global__ void __launch_bounds__(kWarps * 32, 2) moe_gemv_gate_up_kernel(const float* __restrict__ logits,
                                                                          const float* __restrict__ bias,
                                                                          dispatch::RouterConfig cfg, int T,
                                                                          const bf16* __restrict__ X, int H,
                                                                          const bf16* __restrict__ W, int I,
                                                                          int32_t* __restrict__ ids,
                                                                          float* __restrict__ weights,
                                                                          int32_t* __restrict__ slot_row,
                                                                          bf16* __restrict__ act) {
  __shared__ int s_e[kMoeGemvMaxSlots];
  pdl_wait();     // the logits come from the kernel just before
  pdl_trigger();  // only now: down (launched once every CTA has triggered) reads the logits before its own wait
  route_step<S>(logits, bias, cfg, T, s_e, blockIdx.x == 0, ids, weights, slot_row);
  const int lane = threadIdx.x & 31, k = cfg.top_k;
  const int kv = H / 8, cpr = (kv + 255) / 256, per_out = 2 * cpr;
  const int stride = int(gridDim.x) * kWarps, first = int(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int outputs = T * k * I;
  const int n_out = first < outputs ? (outputs - first + stride - 1) / stride : 0;
  const int chunks = n_out * per_out;
  // chunk q of this warp: output first + (q / per_out) * stride, row part (q % per_out) / cpr, K chunk q % cpr
  auto issue = [&](int q, uint4 (&b)[8]) {
    if (q >= chunks) return;
    const int o = first + (q / per_out) * stride, r = q % per_out, part = r / cpr, c = r % cpr;
    const int s = o / I, n = o - s * I;
    const size_t row = size_t(s_e[s]) * 2 * I + 16 * (n / 8) + n % 8 + 8 * part;
    const uint4* w = reinterpret_cast<const uint4*>(W + row * H);
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int v = c * 256 + lane + 32 * u;
      b[u] = v < kv ? __ldcs(w + v) : make_uint4(0, 0, 0, 0);
    }
  };
  float acc[2] = {0.f, 0.f};
  auto consume = [&](int q, const uint4 (&b)[8]) {
    const int o = first + (q / per_out) * stride, r = q % per_out, part = r / cpr, c = r % cpr;
    const int s = o / I;
    const uint4* x = reinterpret_cast<const uint4*>(X + size_t(s / k) * H);
    float sum = 0.f;
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int v = c * 256 + lane + 32 * u;
      if (v >= kv) break;
      float wf[8], xf[8];
      gemv::unpack8(b[u], wf);
      gemv::unpack8(__ldg(x + v), xf);
#pragma unroll
      for (int i = 0; i < 8; ++i) sum += wf[i] * xf[i];
    }
    acc[part] += sum;
    if (r == per_out - 1) {
      const float g = warp_sum(acc[0]), up = warp_sum(acc[1]);
      if (lane == 0) act[size_t(o)] = __float2bfloat16_rn(silu_mul(g, up));  // o = s * I + n
      acc[0] = acc[1] = 0.f;
    }
  };
  uint4 b0[8], b1[8];
  issue(0, b0);
  for (int q = 0; q < chunks; q += 2) {
    issue(q + 1, b1);
    consume(q, b0);
    if (q + 1 >= chunks) break;
    issue(q + 2, b0);
    consume(q + 1, b1);
  }
}

// y[s, h] = bf16(act[s] . Wd_e[h]) over the step's M * H rows, kDownRows per warp pass, warps striding over them.
template <int S>
__global__ void __launch_bounds__(kWarps * 32) moe_gemv_down_kernel(const float* __restrict__ logits,
                                                                    const float* __restrict__ bias,
                                                                    dispatch::RouterConfig cfg, int T,
                                                                    const bf16* __restrict__ act, int I,
                                                                    const bf16* __restrict__ W, int H,
                                                                    bf16* __restrict__ y) {
  __shared__ int s_e[kMoeGemvMaxSlots];
  pdl_trigger();
  // the logits are two kernels back and gate|up waited before it triggered: route before waiting
  route_step<S>(logits, bias, cfg, T, s_e, false, nullptr, nullptr, nullptr);
  const int lane = threadIdx.x & 31;
  const int stride = int(gridDim.x) * kWarps, groups = T * cfg.top_k * (H / kDownRows);
  bool waited = false;
  for (int gi = int(blockIdx.x) * kWarps + (threadIdx.x >> 5); gi < groups; gi += stride) {
    const int o = gi * kDownRows, s = o / H, h0 = o - s * H;  // H % kDownRows == 0: a group is in one slot
    const bf16* We = W + size_t(s_e[s]) * H * I;
    const uint4* rows[kDownRows];
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) rows[r] = reinterpret_cast<const uint4*>(We + size_t(h0 + r) * I);
    float acc[kDownRows][1];
    gemv_dot<1, kDownRows>(rows, reinterpret_cast<const uint4*>(act + size_t(s) * I), I / 8, lane, acc);  // waits for gate|up after its first weight loads
    waited = true;
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) {
      const float v = warp_sum(acc[r][0]);
      if (lane == 0) y[size_t(o) + r] = __float2bfloat16_rn(v);
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

// CTAs of the grid: `per_sm` per SM, never more than there are warp items (`items` / 8).
int grid_ctas(int per_sm, long items) {
  return int(std::max(1L, std::min(long(per_sm) * sms(), (items + kWarps - 1) / kWarps)));
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
  const dim3 grid(grid_ctas(2, long(T) * cfg.top_k * I));
  auto kernel = cfg.num_experts <= 128 ? moe_gemv_gate_up_kernel<4> : moe_gemv_gate_up_kernel<kMaxSlots>;
  launch_k(kernel, grid, dim3(kWarps * 32), 0, stream, logits, bias, cfg, T, x, H, w_gate_up, I, ids, weights,
           slot_row, act);
  DC_LAUNCHED();
}

void moe_gemv_down(const float* logits, const float* bias, const dispatch::RouterConfig& cfg, int T, const bf16* act,
                   int I, const bf16* w_down, int H, bf16* y, cudaStream_t stream) {
  DC_CHECK(moe_gemv_supported(T, cfg, H, I), "moe_gemv: step or shape outside the GEMVs' limits");
  const dim3 grid(grid_ctas(2, long(T) * cfg.top_k * (H / kDownRows)));
  auto kernel = cfg.num_experts <= 128 ? moe_gemv_down_kernel<4> : moe_gemv_down_kernel<kMaxSlots>;
  launch_k(kernel, grid, dim3(kWarps * 32), 0, stream, logits, bias, cfg, T, act, I, w_down, H, y);
  DC_LAUNCHED();
}

}  // namespace dcuda
