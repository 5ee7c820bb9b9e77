// Host launchers for the small-M grouped GEMM (bf16 and W8A16), see grouped_gemm_small_m.cuh.
#include <type_traits>
#include "grouped_gemm.h"
#include "grouped_gemm_small_m.cuh"
#include "grouped_gemm_small_m_stream.cuh"
#include "../common/check.h"
#include "../common/launch.h"

namespace dispatch {

int g_small_m_depth = 0;  // 0: default policy; 2 or 4 forces the pipeline depth (benchmarks)
bool g_use_pdl = true;  // the wgmma kernel only: on the small-M kernel it was measured to hurt
int g_small_m_rb = 0;
// 2 = pair: the legacy schedule with two 16-row blocks per warp item (activation fragments and
// dequantized weights shared, twice the bytes in flight per warp; falls back to legacy when N / 16
// is odd). On the H200 (18:25 UTC) slower than legacy for bf16 on 58 of 60 rows, faster for int8
// on 22 of 60 (the large experts at T <= 8).
// 1 = legacy: on the H200 (2026-11-29 17:47, kernels/scripts/device_decode.sh) it beat the stream
// schedule on 57 of 60 decode rows (>= 85% of HBM on 22/60 vs 12/60).
// 3 = auto (default): legacy, and pair where it measured faster (launch_small_m).
// (4 = async, a cp.async shared-memory ring per warp, lost to legacy on the H200 at 19:55 UTC and was
// deleted; docs/kernels.md has the figures, git history the code.)
int g_small_m_impl = 3;
bool g_small_m_pdl = false;
// Legacy kernel: 0 = launched without PDL (default; the isolated benchmark of 15:13 UTC measured no gain
// and a loss from uneven CTA spread), 1 = PDL, honoring routing_ready_before_wait, 2 = PDL, always waiting
// first (A/B of the early routing read). Unmeasured in a layer chain when written (2026-11-29 20:30 UTC).
int g_small_m_pdl_mode = 0;
// Pair schedule: L2 prefetch right after the scan of the first bytes of each CTA's weight rows, sized
// so one launch prefetches at most this many MiB (whole rows when N * K * max_active fits; 0 = never).
// Unmeasured when written (2026-11-29 18:05 UTC).
int g_small_m_prefetch_mb = 40;

namespace {

// The legacy kernel, launched with Programmatic Dependent Launch when `pdl` (see the .cuh for the rule its
// griddepcontrol calls keep); without it, the same <<<>>> launch as before the PDL mode existed.
template <typename... KArgs, typename... Args>
void launch_legacy(void (*kernel)(KArgs...), dim3 grid, dim3 block, bool pdl, cudaStream_t stream, Args... args) {
  if (!pdl) {
    kernel<<<grid, block, 0, stream>>>(args...);
    return;
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  DK_CUDA(cudaLaunchKernelEx(&cfg, kernel, args...));
}

// Waves of resident CTAs that a grid of `ctas` CTAs of `kernel` (kSmallWarps warps, static shared memory) takes.
template <typename Kernel>
int small_m_waves(Kernel kernel, long long ctas) {
  int per_sm = 0;
  DK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kSmallWarps * 32, 0));
  const long long resident = (long long)current_device_sms() * (per_sm > 0 ? per_sm : 1);
  return int((ctas + resident - 1) / resident);
}

// Stream schedule (grouped_gemm_small_m_stream.cuh). Host work per launch: none beyond the launch
// itself; the SM count, occupancy and shared-memory opt-in are read once per instantiation.
template <bool kInt8, int NT, int kDepth>
void launch_stream(const __nv_bfloat16* x, const uint8_t* w, const float* scales, __nv_bfloat16* y, ExpertRows rows,
                   int E, int N, int K, bool fuse_silu, cudaStream_t stream) {
  auto* kernel = grouped_gemm_small_m_stream_kernel<kInt8, NT, kDepth>;
  constexpr int kSmem = StreamCfg<NT>::kSmemBytes;
  static const int ctas = [kernel] {
    int dev = 0, sms = 0, per_sm = 0;
    DK_CUDA(cudaGetDevice(&dev));
    DK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    DK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    DK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kStreamWarps * 32, kSmem));
    return sms * (per_sm < 1 ? 1 : per_sm > 2 ? 2 : per_sm);
  }();
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(ctas);
  cfg.blockDim = dim3(kStreamWarps * 32);
  cfg.dynamicSmemBytes = kSmem;
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = g_small_m_pdl ? 1 : 0;
  DK_CUDA(cudaLaunchKernelEx(&cfg, kernel, x, w, scales, y, rows, E, N, K, int(fuse_silu)));
}

template <bool kInt8>
void launch_small_m(const void* X, const void* W, const float* scales, void* Y, ExpertRows rows, int E,
                    int N, int K, int max_rows, int max_active, bool fuse_silu, bool routing_ready,
                    cudaStream_t stream) {
  DK_CHECK(N % kSmallRows == 0, "N must be a multiple of 16");
  DK_CHECK(K % (kInt8 ? 128 : 64) == 0, kInt8 ? "K must be a multiple of 128" : "K must be a multiple of 64");
  DK_CHECK((rows.offsets != nullptr) != (rows.counts != nullptr), "give offsets or counts, not both");
  max_active = max_active <= 0 ? E : (max_active < E ? max_active : E);
  if (max_active == 0 || max_rows <= 0) return;
  const int nblk = N / kSmallRows;
  const dim3 block(kSmallWarps * 32);
  auto* x = static_cast<const __nv_bfloat16*>(X);
  auto* w = static_cast<const uint8_t*>(W);
  auto* y = static_cast<__nv_bfloat16*>(Y);
  // Tile width (tokens per pass) from the hint only: a wider tile costs registers, not syncs;
  // an expert with more rows than the tile takes several passes.
  const int nt = max_rows <= 8 ? 1 : max_rows <= 16 ? 2 : max_rows <= 32 ? 4 : 8;
  if (g_small_m_impl == 0) {
    DK_CHECK(E <= kStreamMaxExperts, "the stream schedule takes at most 512 experts");
    switch (nt) {
      case 1: launch_stream<kInt8, 1, 4>(x, w, scales, y, rows, E, N, K, fuse_silu, stream); break;
      case 2: launch_stream<kInt8, 2, kInt8 ? 2 : 4>(x, w, scales, y, rows, E, N, K, fuse_silu, stream); break;
      case 4: launch_stream<kInt8, 4, 2>(x, w, scales, y, rows, E, N, K, fuse_silu, stream); break;
      default: launch_stream<kInt8, 8, 2>(x, w, scales, y, rows, E, N, K, fuse_silu, stream); break;
    }
    DK_LAUNCHED();
    return;
  }
  const int depth = g_small_m_depth > 0 ? g_small_m_depth : 2;  // depth 4 measured slower (registers)
  // Row blocks per CTA. Measured on the H200 (docs/kernels.md), bf16: when the grid is 1-3 waves
  // of resident CTAs (decode at T = 1), taking that many row blocks per CTA turns it into one wave
  // whose warps stream on across row blocks (up to +9 points of bandwidth on the small shapes);
  // with more waves one row block per CTA was faster. int8 keeps the rule it was measured with
  // (waves, capped by the slots); the one-row-block variant is unmeasured for int8.
  // 3 (auto, the default): legacy, except int8 at <= 8 rows per expert on large experts (N * K >=
  // 8 Mi weights: Mixtral, DeepSeek-V3), where the pair schedule was faster on the H200 (18:25 UTC
  // run, bench/kernels/results/h200-2026-11-29-decode2-*: e.g. DeepSeek-V3 gate_up T = 1 69.5 vs
  // 88.6 us, Mixtral gate_up T = 8 253 vs 279 us) and slower on the small shapes and at T = 64.
  const bool auto_pair = g_small_m_impl == 3 && kInt8 && max_rows <= 8 && size_t(N) * size_t(K) >= (size_t(8) << 20);
  const bool pair = (g_small_m_impl == 2 || auto_pair) && nblk % 2 == 0;  // two row blocks per warp item
  const size_t row_bytes = size_t(K) * (kInt8 ? 1 : 2), launch_bytes = row_bytes * N * size_t(max_active);
  const size_t pf_budget = g_small_m_prefetch_mb > 0 ? size_t(g_small_m_prefetch_mb) << 20 : 0;
  const int prefetch = !pair ? 0 : launch_bytes <= pf_budget ? int(row_bytes)
                                 : int(row_bytes * pf_budget / launch_bytes / 128 * 128);  // bytes per row, lines
  auto go = [&](auto kernel) {
    const int slots = pair ? (nt <= 2 ? small_m_slots_rb<1, 2>() : nt == 4 ? small_m_slots_rb<4, 2>() : small_m_slots_rb<8, 2>())
                           : (nt <= 2 ? small_m_slots<1>() : nt == 4 ? small_m_slots<4>() : small_m_slots<8>());
    const int waves = small_m_waves(kernel, (long long)nblk * max_active);
    // pair takes bf16's measured rule for both dtypes (finer CTAs against the tail wave when many
    // grid rows exit at once, as under zipf routing at T = 8); unmeasured for int8.
    int rb = g_small_m_rb > 0 ? g_small_m_rb : ((kInt8 && !pair) || waves <= 3 ? waves : 1);
    if (pair) rb = rb < 2 ? 2 : (rb + 1) / 2 * 2;  // a multiple of the item's two row blocks
    rb = rb < 1 ? 1 : rb > slots ? slots : rb;
    const dim3 grid((nblk + rb - 1) / rb, max_active);
    if constexpr (std::is_same_v<decltype(kernel), decltype(&grouped_gemm_small_m_kernel<kInt8, 1, 2>)>)
      launch_legacy(kernel, grid, block, g_small_m_pdl_mode != 0, stream, x, w, scales, y, rows, E, N, K,
                    int(fuse_silu), rb);
    else
      kernel<<<grid, block, 0, stream>>>(x, w, scales, y, rows, E, N, K, int(fuse_silu), rb, prefetch);
  };
  if (pair) {
    switch (nt * 10 + depth) {
      case 12: go(grouped_gemm_small_m_pair_kernel<kInt8, 1, 2, 2>); break;
      case 14: go(grouped_gemm_small_m_pair_kernel<kInt8, 1, 4, 2>); break;
      case 22: go(grouped_gemm_small_m_pair_kernel<kInt8, 2, 2, 2>); break;
      case 24: go(grouped_gemm_small_m_pair_kernel<kInt8, 2, 4, 2>); break;
      case 42: go(grouped_gemm_small_m_pair_kernel<kInt8, 4, 2, 2>); break;
      case 44: go(grouped_gemm_small_m_pair_kernel<kInt8, 4, 4, 2>); break;
      default: go(grouped_gemm_small_m_pair_kernel<kInt8, 8, 2, 2>); break;
    }
    DK_LAUNCHED();
    return;
  }
  // PDL mode 1 with the routing written at least two kernels back: the variant that reads the routing and
  // issues its first weight loads before griddepcontrol.wait (default depth only; depth 4 waits first).
  if (g_small_m_pdl_mode == 1 && routing_ready && depth == 2) {
    switch (nt) {
      case 1: go(grouped_gemm_small_m_kernel<kInt8, 1, 2, true>); break;
      case 2: go(grouped_gemm_small_m_kernel<kInt8, 2, 2, true>); break;
      case 4: go(grouped_gemm_small_m_kernel<kInt8, 4, 2, true>); break;
      default: go(grouped_gemm_small_m_kernel<kInt8, 8, 2, true>); break;
    }
    DK_LAUNCHED();
    return;
  }
  switch (nt * 10 + depth) {
    case 12: go(grouped_gemm_small_m_kernel<kInt8, 1, 2>); break;
    case 14: go(grouped_gemm_small_m_kernel<kInt8, 1, 4>); break;
    case 22: go(grouped_gemm_small_m_kernel<kInt8, 2, 2>); break;
    case 24: go(grouped_gemm_small_m_kernel<kInt8, 2, 4>); break;
    case 42: go(grouped_gemm_small_m_kernel<kInt8, 4, 2>); break;
    case 44: go(grouped_gemm_small_m_kernel<kInt8, 4, 4>); break;
    case 82: go(grouped_gemm_small_m_kernel<kInt8, 8, 2>); break;
    default: go(grouped_gemm_small_m_kernel<kInt8, 8, 4>); break;
  }
  DK_LAUNCHED();
}

}  // namespace

void sm90_bf16_grouped_gemm_masked(const void* X, const void* W, void* Y, ExpertRows rows, int E, int N,
                                   int K, int max_rows, int max_active, cudaStream_t stream, bool fuse_silu,
                                   bool routing_ready_before_wait) {
  launch_small_m<false>(X, W, nullptr, Y, rows, E, N, K, max_rows, max_active, fuse_silu, routing_ready_before_wait,
                        stream);
}

void sm90_w8a16_grouped_gemm_masked(const void* X, const int8_t* W, const float* scales, void* Y,
                                    ExpertRows rows, int E, int N, int K, int max_rows, int max_active,
                                    cudaStream_t stream, bool fuse_silu, bool routing_ready_before_wait) {
  DK_CHECK(scales != nullptr, "int8 weights need scales");
  launch_small_m<true>(X, W, scales, Y, rows, E, N, K, max_rows, max_active, fuse_silu, routing_ready_before_wait,
                       stream);
}

void moe_gate_up_self_routed(const void* X, const void* W, void* Y, const SelfRoute& route, int E, int N, int K,
                             cudaStream_t stream, bool fuse_silu) {
  DK_CHECK(moe_gate_up_self_routed_supported(E, N, K, route.cfg),
           "moe_gate_up_self_routed: N % 16, K % 64, E <= 512, top_k <= 32 and a valid router config");
  auto* kernel = E <= 128 ? grouped_gemm_small_m_routed_kernel<4> : grouped_gemm_small_m_routed_kernel<16>;
  // row blocks per CTA: the legacy launcher's rule at one token (1-3 waves of resident CTAs become one wave)
  const int nblk = N / kSmallRows, k = route.cfg.top_k;
  const int waves = small_m_waves(kernel, (long long)nblk * k);
  int rb = g_small_m_rb > 0 ? g_small_m_rb : waves <= 3 ? waves : 1;
  rb = rb < 1 ? 1 : rb > small_m_slots<1>() ? small_m_slots<1>() : rb;
  // without PDL, as the legacy kernel: launched early, its CTAs land on whatever room the kernels before it leave
  // and spread unevenly (with PDL the batch-1 step measured 3.19 ms against 2.88: docs/kernels.md, session 13)
  launch_legacy(kernel, dim3((nblk + rb - 1) / rb, k), dim3(kSmallWarps * 32), false, stream,
                static_cast<const __nv_bfloat16*>(X), static_cast<const uint8_t*>(W), static_cast<__nv_bfloat16*>(Y),
                route, E, N, K, int(fuse_silu), rb);
  DK_LAUNCHED();
}

}  // namespace dispatch
