// Routed experts of a one-token step as GEMVs (moe_gemv.h): a warp per output row of one routed slot, its expert's
// weight row streamed with 8 16-byte loads per lane in flight (gemv_core.cuh, as the dense GEMVs that reach
// 3.5-4.7 TB/s on the H200), instead of the grouped GEMM's tiles, which at one token run a 128-row tile per CTA for
// a single useful column.
#include <cstdlib>
#include "check.h"
#include "gemv_core.cuh"
#include "moe_gemv.h"
#include "pdl.h"

namespace dcuda {
namespace {

using gemv::gemv_dot;
using gemv::warp_sum;

constexpr int kWarps = 8;

__device__ __forceinline__ float silu_mul(float g, float u) { return __fdividef(g, 1.f + __expf(-g)) * u; }

// act[slot_row[s], n] = silu(x_t . Wg_e[n]) * (x_t . Wu_e[n]) as bf16, for slot s (token t = s / k, expert
// e = topk_ids[s]) and NR consecutive outputs n < I per warp; W's gate/up rows interleaved by 8 (gate row n at
// 16 (n / 8) + n % 8, up row n 8 rows further). The routing comes from the kernel just before: wait first; trigger
// only after the wait, so the down GEMV (launched once every CTA here has triggered) may read the routing before
// its own wait.
template <int NR>
__global__ void __launch_bounds__(kWarps * 32) moe_gemv_gate_up_kernel(const bf16* __restrict__ X, int H,
                                                                       const bf16* __restrict__ W, int I, int k,
                                                                       const int* __restrict__ topk_ids,
                                                                       const int* __restrict__ slot_row,
                                                                       bf16* __restrict__ act) {
  pdl_wait();
  pdl_trigger();
  const int s = blockIdx.y;
  const int n0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * NR;
  const int lane = threadIdx.x & 31;
  if (n0 >= I) return;
  const bf16* We = W + size_t(topk_ids[s]) * 2 * I * H;
  const uint4* w[2 * NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    const int n = min(n0 + r, I - 1);
    const int g_row = 16 * (n / 8) + n % 8;
    w[2 * r] = reinterpret_cast<const uint4*>(We + size_t(g_row) * H);
    w[2 * r + 1] = reinterpret_cast<const uint4*>(We + size_t(g_row + 8) * H);
  }
  float acc[2 * NR][1];
  gemv_dot<1, 2 * NR>(w, reinterpret_cast<const uint4*>(X + size_t(s / k) * H), H / 8, lane, acc);
  const size_t out = size_t(slot_row[s]) * I;
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    const float g = warp_sum(acc[2 * r][0]), u = warp_sum(acc[2 * r + 1][0]);
    if (lane == 0 && n0 + r < I) act[out + n0 + r] = __float2bfloat16_rn(silu_mul(g, u));
  }
}

// y[slot_row[s], h] = act[slot_row[s]] . Wd_e[h] as bf16 for NR consecutive rows h per warp (the grouped GEMM's
// output rows, so the combine is the same). The routing is two kernels back (gate|up waited before it triggered):
// the expert's weight rows are requested before this kernel waits for gate|up's activations.
template <int NR>
__global__ void __launch_bounds__(kWarps * 32) moe_gemv_down_kernel(const bf16* __restrict__ act, int I,
                                                                    const bf16* __restrict__ W, int H,
                                                                    const int* __restrict__ topk_ids,
                                                                    const int* __restrict__ slot_row,
                                                                    bf16* __restrict__ y) {
  pdl_trigger();
  const int s = blockIdx.y;
  const int h0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * NR;
  const int lane = threadIdx.x & 31;
  if (h0 >= H) return pdl_wait();
  const bf16* We = W + size_t(topk_ids[s]) * H * I;
  const uint4* w[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) w[r] = reinterpret_cast<const uint4*>(We + size_t(min(h0 + r, H - 1)) * I);
  const int row = slot_row[s];
  float acc[NR][1];
  gemv_dot<1, NR>(w, reinterpret_cast<const uint4*>(act + size_t(row) * I), I / 8, lane, acc);  // waits after its first loads
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    const float v = warp_sum(acc[r][0]);
    if (lane == 0 && h0 + r < H) y[size_t(row) * H + h0 + r] = __float2bfloat16_rn(v);
  }
}

// Output rows per warp (DISPATCH_CUDA_MOE_GEMV_ROWS: 1 or 2, default 1), read once.
int rows_per_warp() {
  static const int r = [] {
    const char* v = std::getenv("DISPATCH_CUDA_MOE_GEMV_ROWS");
    return v && v[0] == '2' ? 2 : 1;
  }();
  return r;
}

}  // namespace

bool moe_gemv_supported(int H, int I) { return H % 8 == 0 && I % 8 == 0; }

void moe_gemv_gate_up(const bf16* x, int M, int k, int H, const bf16* w_gate_up, int I, const int* topk_ids,
                      const int* slot_row, bf16* act, cudaStream_t stream) {
  DC_CHECK(moe_gemv_supported(H, I), "moe_gemv: H and I must be multiples of 8");
  const int nr = rows_per_warp();
  const dim3 grid((I + kWarps * nr - 1) / (kWarps * nr), M);
  if (nr == 2) launch_k(moe_gemv_gate_up_kernel<2>, grid, dim3(kWarps * 32), 0, stream, x, H, w_gate_up, I, k, topk_ids, slot_row, act);
  else launch_k(moe_gemv_gate_up_kernel<1>, grid, dim3(kWarps * 32), 0, stream, x, H, w_gate_up, I, k, topk_ids, slot_row, act);
}

void moe_gemv_down(const bf16* act, int M, int I, const bf16* w_down, int H, const int* topk_ids, const int* slot_row,
                   bf16* y, cudaStream_t stream) {
  DC_CHECK(moe_gemv_supported(H, I), "moe_gemv: H and I must be multiples of 8");
  const int nr = rows_per_warp();
  const dim3 grid((H + kWarps * nr - 1) / (kWarps * nr), M);
  if (nr == 2) launch_k(moe_gemv_down_kernel<2>, grid, dim3(kWarps * 32), 0, stream, act, I, w_down, H, topk_ids, slot_row, y);
  else launch_k(moe_gemv_down_kernel<1>, grid, dim3(kWarps * 32), 0, stream, act, I, w_down, H, topk_ids, slot_row, y);
}

}  // namespace dcuda
